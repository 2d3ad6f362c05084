"""`devlint explain`: from a pasted error or traceback to the line to change.

Names the kind of device error, says what usually causes it, and when the traceback names
files that exist here, lints them and lists first the findings on the failing lines, then
those in the functions the frames sit in, then the rest of those files.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from devlint.runner import FileReport, check_file


@dataclass(frozen=True)
class ErrorKind:
    id: str
    title: str
    patterns: tuple[str, ...]
    causes: tuple[str, ...]
    rules: tuple[str, ...]  # most likely first

    def matches(self, text: str) -> bool:
        return any(re.search(p, text) for p in self.patterns)


KINDS = (
    ErrorKind(
        "cuda-checkpoint-on-cpu-host",
        "a checkpoint saved on a GPU, loaded where there is none",
        (r"Attempting to deserialize object on (a )?CUDA device",),
        ("`torch.load(path)` without `map_location` puts every tensor back on the GPU it was saved from;"
         " on a CPU-only machine (or one with fewer GPUs) that fails. Load with `map_location=\"cpu\"`"
         " (or the device you want) and let `load_state_dict` copy the weights onto the model's device.",),
        ("DEV002",),
    ),
    ErrorKind(
        "map-location-on-load-state-dict",
        "`map_location` given to `load_state_dict`",
        (r"unexpected keyword argument 'map_location'",),
        ("`map_location` belongs to `torch.load`: `model.load_state_dict(torch.load(p), map_location=d)`"
         " should be `model.load_state_dict(torch.load(p, map_location=d))`.",),
        ("DEV006", "DEV002"),
    ),
    ErrorKind(
        "cuda-not-available",
        "CUDA asked for on a machine without it",
        (r"Torch not compiled with CUDA enabled", r"Found no NVIDIA driver", r"No CUDA GPUs are available",
         r"CUDA driver initialization failed", r"module 'torch\._C' has no attribute '_cuda_\w+'"),
        ("A hardcoded `.cuda()` call runs on every machine, GPU or not: use `.to(device)` with a device"
         " chosen once (`torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")`, or"
         " `torch.accelerator.current_accelerator()` from torch 2.6, which also finds MPS and XPU).",
         "A `\"cuda\"` device string (`torch.device(\"cuda\")`, `device=\"cuda\"`, a `--device` default)"
         " does the same: take the device from the data, a parameter, or `torch.cuda.is_available()`.",
         "A `torch.cuda` call that needs a GPU (`synchronize`, `set_device`, `get_device_name`, ...;"
         " `set_device` fails with `module 'torch._C' has no attribute '_cuda_setDevice'`) outside a"
         " `torch.cuda.is_available()` test."),
        ("DEV001", "DEV005", "DEV011"),
    ),
    ErrorKind(
        "invalid-device-ordinal",
        "a GPU index that this machine does not have",
        (r"invalid device ordinal",),
        ("A hardcoded `\"cuda:1\"`, an integer device (`.to(1)`, `device=1`, `map_location=1`) or"
         " `torch.cuda.set_device(rank)` names a GPU that exists on the machine the code was written on."
         " Take the index from the launcher (`LOCAL_RANK`) and check it against `torch.cuda.device_count()`.",
         "A checkpoint saved from `cuda:1` and loaded without `map_location` asks for that GPU again."),
        ("DEV005", "DEV011", "DEV002"),
    ),
    ErrorKind(
        "input-weight-type-mismatch",
        "an input on one device, the layer's weights on another",
        (r"Input type \(.*\) and weight type \(.*\) should be the same",),
        ("The model was moved to the GPU and the input was made on the CPU (often a dummy input for"
         " `torch.onnx.export` or `torch.jit.trace`): create it with `device=` or move it.",
         "Or the other way: weights kept as plain attributes stayed on the CPU when the model moved."),
        ("DEV007", "DEV004", "DEV003"),
    ),
    ErrorKind(
        "device-mismatch",
        "tensors on two devices in one operation",
        (r"Expected all tensors to be on the same device", r"to be on the same device",
         r"Tensor on device \S+ is not on the expected device", r"Expected object of device type"),
        ("A tensor made inside `forward` or a helper without `device=` (`torch.zeros`, `torch.arange`...)"
         " stays on the CPU while the model's tensors are on the GPU.",
         "A tensor stored on a module as a plain attribute instead of `register_buffer` is left behind by"
         " `model.to(device)`.",
         "An input, a batch from a loader or a tokenizer's output is passed to a model moved to the GPU"
         " without being moved itself (often the labels: `criterion(model(x.to(device)), y)`).",
         "`x.to(device)` as a statement: tensors do not move in place, the moved copy is thrown away.",
         "Submodules kept in a plain `list`/`dict` instead of `nn.ModuleList`/`nn.ModuleDict` are not"
         " moved by `model.to(device)`.",
         "A `self.device` captured in `__init__` still names the old device after `model.to(other)`."),
        ("DEV003", "DEV004", "DEV007", "DEV010", "DEV009", "DEV012", "DEV001", "DEV005"),
    ),
    ErrorKind(
        "rnn-hidden-state-device",
        "an RNN's input and hidden state on two devices",
        (r"Input and hidden tensors are not at the same device",),
        ("The initial hidden state is made without `device=` (`torch.zeros(layers, batch, hidden)`):"
         " make it where the input is (`device=x.device`).",
         "Or the input itself was never moved to the model's device, or the hidden state is made with a"
         " `self.device` captured in `__init__`."),
        ("DEV003", "DEV007", "DEV012"),
    ),
    ErrorKind(
        "data-parallel-parameters-not-on-device",
        "`DataParallel` over a module whose weights are not on the first GPU",
        (r"module must have its parameters and buffers on device \S+ \(device_ids\[0\]\)",),
        ("The model must be on `device_ids[0]` before `nn.DataParallel(model)`: move it first.",
         "Submodules kept in a plain `list`/`dict` and tensors kept as plain attributes are not moved by"
         " `model.to(device)`, so part of the model stays on the CPU."),
        ("DEV009", "DEV004", "DEV001"),
    ),
    ErrorKind(
        "fake-tensor-device-propagation",
        "two devices met while tracing or compiling (torch.export, torch.compile, Torch-TensorRT)",
        (r"Unhandled FakeTensor Device Propagation for \S+, found two different devices",),
        ("A CPU constant inside the model: a tensor made in `forward` without `device=`, or a table kept"
         " as a plain attribute instead of a buffer; the tracer meets it beside the GPU input.",
         "Or an operator whose fake kernel propagates devices wrongly (seen with"
         " `torchvision.deform_conv2d`): a newer torch / Torch-TensorRT fixes some; exporting with"
         " `torch.export.export(..., strict=False)` first and compiling the exported program avoids others."),
        ("DEV003", "DEV004"),
    ),
    ErrorKind(
        "generator-device",
        "a random generator on one device, the tensor asked for on another",
        (r"Expected a '\w+' device type for generator but found '\w+'",),
        ("`torch.rand(..., generator=g, device=...)` needs `g` on that device: a `torch.Generator()`"
         " made without `device=` is a CPU generator. Make the generator on the tensor's device, or"
         " draw on the CPU and move the result.",),
        ("DEV003", "DEV005"),
    ),
    ErrorKind(
        "numpy-on-device-tensor",
        "`.numpy()` on a tensor on an accelerator",
        (r"can't convert \S+ device type tensor to numpy", r"\.numpy\(\) is not supported for tensor subclasses"),
        ("`.numpy()` works only on CPU tensors: call `.cpu()` first (`out.detach().cpu().numpy()`).",),
        ("DEV008",),
    ),
    ErrorKind(
        "state-dict-module-prefix",
        "a checkpoint saved from `DataParallel` / `DistributedDataParallel`, loaded into a bare model",
        (r"(Missing|Unexpected) key\(s\) in state_dict:.*\"module\.",),
        ("The wrapper saves its model under `module.`: save `model.module.state_dict()`, or strip the"
         " prefix when loading (`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd,"
         " \"module.\")`).",
         "Missing keys without that prefix can also mean submodules kept in a plain `list`/`dict`, which"
         " `state_dict()` never saved."),
        ("DEV009",),
    ),
    ErrorKind(
        "autocast-without-cuda",
        "autocast asked for CUDA on a machine without it (a warning: autocast is turned off)",
        (r"User provided device_type of '\w+', but CUDA is not available",
         r"CUDA is not available or torch_xla is imported\. Disabling autocast"),
        ("`torch.autocast(\"cuda\")` / `torch.cuda.amp.autocast()` on a CPU-only machine silently runs"
         " in full precision: pass the device type of the data (`torch.autocast(x.device.type)`).",),
        (),
    ),
    ErrorKind(
        "pin-memory-without-accelerator",
        "`pin_memory=True` on a machine without an accelerator (a warning: memory is not pinned)",
        (r"'pin_memory' argument is set as true but no accelerator is found",),
        ("Pinned memory only helps copies to a GPU: pass `pin_memory=torch.cuda.is_available()`.",),
        (),
    ),
    ErrorKind(
        "weights-only-load",
        "`torch.load` refused to unpickle an object (torch 2.6 and later load weights only by default)",
        (r"Weights only load failed",),
        ("From torch 2.6, `torch.load` defaults to `weights_only=True` and rejects pickled objects"
         " other than tensors and plain containers. For a checkpoint you trust, pass"
         " `weights_only=False`, or allow its classes with `torch.serialization.add_safe_globals([...])`;"
         " keep `map_location` on the same call.",),
        ("DEV002",),
    ),
)
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?', re.M)
PLACES = ("on the failing line", "in the failing function", "elsewhere in the file")


@dataclass
class Explanation:
    kinds: list[ErrorKind]
    frames: list[tuple[Path, int]]  # innermost first, files that exist here
    findings: list[tuple[FileReport, object, str]]  # (report, finding, place), the line to change first


def explain(text: str, settings, cwd: Path) -> Explanation:
    kinds = [k for k in KINDS if k.matches(text)]
    frames: list[tuple[Path, int]] = []
    for match in FRAME.finditer(text):
        path = Path(match["file"])
        path = path if path.is_absolute() else cwd / path
        if path.suffix == ".py" and path.is_file() and "site-packages" not in path.parts:
            frames.append((path, int(match["line"])))
    frames.reverse()  # tracebacks print the innermost frame last
    wanted = [code for kind in kinds for code in kind.rules]
    ranked = []
    for path in dict.fromkeys(p for p, _ in frames):
        report = check_file(path, settings, _display(path, cwd))
        lines = [line for p, line in frames if p == path]
        spans = _function_spans(path, lines)
        for finding in report.findings:
            if wanted and finding.code not in wanted:
                continue
            place = 0 if finding.row in lines else 1 if any(a <= finding.row <= b for a, b in spans) else 2
            # order: place, then how close to the innermost frame, then the likeliest rule
            distance = min((abs(finding.row - line), i) for i, line in enumerate(lines))
            rule = wanted.index(finding.code) if finding.code in wanted else len(wanted)
            ranked.append(((place, distance[1], rule, distance[0], finding.row), report, finding, PLACES[place]))
    ranked.sort(key=lambda item: item[0])
    return Explanation(kinds, frames, [(report, finding, place) for _, report, finding, place in ranked])


def _function_spans(path: Path, lines: list[int]) -> list[tuple[int, int]]:
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return []
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            end = node.end_lineno or node.lineno
            if any(start <= line <= end for line in lines):
                spans.append((start, end))
    return spans


def _display(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def read_input(argument: Optional[str], stdin) -> str:
    """An argument that names a file is read; `-` or nothing reads standard input; else it is the text."""
    if argument in (None, "-"):
        return stdin.read()
    try:
        if len(argument) < 1024 and "\n" not in argument and Path(argument).is_file():
            return Path(argument).read_text(encoding="utf-8", errors="replace")
    except OSError:  # not a path the system takes (a name too long, say): it is the text
        pass
    return argument
