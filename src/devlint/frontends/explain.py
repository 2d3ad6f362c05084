"""`devlint explain`: from a pasted error or traceback to the line to change.

Names the kind of device error and what usually causes it. A traceback's frames are matched to
files here, by the longest tail of their path that exists (a traceback pasted from another
machine names its own absolute paths); those files are linted and the findings that can cause
this kind of error are listed: first those on the failing line, then those on the lines that
made the values it uses, then the same for each calling frame, then the rest of those files.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from devlint.workspace.runner import FileReport, check_file


@dataclass(frozen=True)
class ErrorKind:
    id: str
    title: str
    patterns: tuple[str, ...]
    causes: tuple[str, ...]
    # The rules whose findings can cause this error on the machine that raises it (each rule's doc
    # names the errors it prevents), most likely first; findings of other rules are not causes.
    rules: tuple[str, ...]
    # Where no rule finds the cause: what to look for instead.
    look_for: str = ""
    # The kind this one is a case of: where both match, only this one is named.
    refines: str = ""

    def matches(self, text: str) -> bool:
        return any(re.search(p, text) for p in self.patterns)


# The patterns are written against what torch says: `bench/torch_messages.py` lists the device
# messages of the installed torch (and older wordings users paste) with the kinds they match, and
# `tests/test_torch_messages.py` asks that each is recognised, as one kind.
KINDS = (
    ErrorKind(
        "cuda-checkpoint-on-cpu-host",
        "a checkpoint saved on a GPU, loaded where there is none",
        (r"deserialize object on (a )?\S+ device but torch\.\S+\.is_available\(\) is False",
         r"device module is not registered\. If you are running on a CPU-only machine"),
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
        ("DEV006",),
    ),
    ErrorKind(
        "map-location-value",
        "a `map_location` this loader does not take",
        (r"map_location should be either", r"(callable|dict) map_location", r"map_location not supported"),
        ("`torch.load` takes a device string, a `torch.device`, a dict from saved to wanted device or a"
         " function; `torch.jit.load` and safetensors files take a device string or a `torch.device` only.",),
        (),
        "the `map_location=` of the failing call, and where its value comes from",
    ),
    ErrorKind(
        "cuda-not-available",
        "CUDA asked for on a machine without it",
        (r"Torch not compiled with CUDA enabled", r"Found no NVIDIA driver", r"No CUDA GPUs are available",
         r"CUDA driver initialization failed", r"module 'torch\._C' has no attribute '_cuda_\w+'",
         r"requires CUDA support", r"Tried to instantiate dummy base class", r"(compiled|built) without CUDA",
         r"not compiled with CUDA", r"without ATen_cuda library", r"CUDA library has not been loaded",
         r"(?<!memory )(?<!memory)requires CUDA\b", r"NVIDIA driver on your system is too old",
         r"Profiler was requested to be enabled with CUDA", r"CUDA is not available, disabling",
         r"^CUDA is not available$"),
        ("A hardcoded `.cuda()` call runs on every machine, GPU or not: use `.to(device)` with a device"
         " chosen once (`torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")`, or"
         " `torch.accelerator.current_accelerator()` from torch 2.6, which also finds MPS and XPU).",
         "A `\"cuda\"` device string (`torch.device(\"cuda\")`, `device=\"cuda\"`, a `--device` default)"
         " does the same: take the device from the data, a parameter, or `torch.cuda.is_available()`.",
         "A `torch.cuda` call that needs a GPU (`synchronize`, `set_device`, `get_device_name`, ...;"
         " `set_device` fails with `module 'torch._C' has no attribute '_cuda_setDevice'`) outside a"
         " `torch.cuda.is_available()` test.",
         "A `self.device` recorded in `__init__` on a GPU machine still names CUDA in a module pickled whole"
         " and loaded here."),
        ("DEV001", "DEV005", "DEV011", "DEV012"),
    ),
    ErrorKind(
        "accelerator-not-available",
        "MPS, XPU or another accelerator asked for on a machine without it",
        (r"without ATen_(xpu|mps) library", r"MPS backend was selected", r"\bMPS is not available",
         r"No XPU are available", r"(compiled|built) without (XPU|MPS)", r"not compiled with (XPU|MPS)",
         r"without MPS backend", r"no accelerator (support is found|device is detected)",
         r"accelerator device when none is available", r"requires XPU\b", r"for XPU without XPU data",
         r"needs a non-CPU accelerator device", r"without torch_xla library"),
        ("A device string naming `\"mps\"` or `\"xpu\"` (or code that assumes some accelerator, such as FSDP"
         " or an integer `device_id`) runs on a machine that has none: choose the device with"
         " `torch.accelerator.current_accelerator()` (torch 2.6 and later) and fall back to the CPU.",),
        (),
        "device strings that name `mps` or `xpu`, and `torch.mps` / `torch.xpu` calls outside an"
        " `is_available()` test",
    ),
    ErrorKind(
        "no-kernel-for-device",
        "an operator with no kernel for the device its tensors are on",
        (r"Could not run '\S+' with arguments from the '\w+' backend", r"not currently implemented for the MPS device"),
        ("An extension built for another device than torch: a CPU-only `torchvision` (or custom-op package)"
         " beside a CUDA torch fails on its first CUDA tensor (`torchvision::nms`); install builds that match.",
         "A device this torch was not built for (`device=\"mps\"` on Linux fails as `'aten::empty.memory_format'`"
         " from the 'MPS' backend).",
         "An operator MPS does not implement yet: `PYTORCH_ENABLE_MPS_FALLBACK=1` runs it on the CPU."),
        (),
        "the device the failing operator's tensors are on, and whether torch and its extensions are builds"
        " for it (`python -m torch.utils.collect_env`)",
    ),
    ErrorKind(
        "invalid-device-ordinal",
        "a GPU index that this machine does not have",
        (r"invalid device ordinal", r"deserialize object on \S+ device \S+ but torch\.\S+\.device_count\(\) is",
         r"devices are available but device index", r"Please use a device index less than",
         r"Invalid device id\b", r"on a different CUDA device index", r"expected 0 <= device index"),
        ("A hardcoded `\"cuda:1\"`, an integer device (`.to(1)`, `device=1`, `map_location=1`) or"
         " `torch.cuda.set_device(rank)` names a GPU that exists on the machine the code was written on."
         " Take the index from the launcher (`LOCAL_RANK`) and check it against `torch.cuda.device_count()`.",
         "A checkpoint saved from `cuda:1` and loaded without `map_location` asks for that GPU again."),
        ("DEV005", "DEV011", "DEV002"),
    ),
    ErrorKind(
        "invalid-device-string",
        "a device string or device type torch does not take",
        (r"Invalid device string", r"device type at start of device string", r"in device string '",
         r"Could not parse device index", r"cannot parse device type", r"Invalid device type\b",
         r"Invalid device, must be \S+ device", r"device_type string to not have a device index",
         r"does not have an explicit index"),
        ("A device written in a form torch does not parse (`\"gpu\"`, `\"cuda0\"`, `\"cuda:\"`), often read"
         " from a config file or a flag; or a device of one type given to another backend's call"
         " (`torch.cuda.set_device(\"cpu\")`).",
         "A device without an index where each process owns one GPU (FSDP's `device_id=torch.device(\"cuda\")`):"
         " pass `torch.device(\"cuda\", local_rank)`."),
        (),
        "where the device string is built or read, and print it before it is used",
    ),
    ErrorKind(
        "input-weight-type-mismatch",
        "an input on one device, the layer's weights on another",
        (r"Input type \(.*\) and (weight|bias) type \(.*\) should be the same",),
        ("The model was moved to the GPU and the input was made on the CPU (often a dummy input for"
         " `torch.onnx.export` or `torch.jit.trace`): create it with `device=` or move it.",
         "Or the other way: weights kept as plain attributes stayed on the CPU when the model moved, or a"
         " layer built inside `forward` (`nn.Linear(...)(x)`) made new CPU weights at the call."),
        ("DEV007", "DEV015", "DEV014", "DEV004", "DEV003", "DEV010", "DEV009", "DEV013", "DEV012"),
        refines="device-mismatch",
    ),
    ErrorKind(
        "rnn-hidden-state-device",
        "an RNN's input, hidden state or weights on two devices",
        (r"Input and (hidden|parameter) tensors are not at the same device", r"tensors are not at the same device, found"),
        ("The initial hidden state is made without `device=` (`torch.zeros(layers, batch, hidden)`):"
         " make it where the input is (`device=x.device`).",
         "Or the input itself was never moved to the model's device, or the hidden state is made with a"
         " `self.device` captured in `__init__`."),
        ("DEV003", "DEV007", "DEV012", "DEV010"),
        refines="device-mismatch",
    ),
    ErrorKind(
        "data-parallel-parameters-not-on-device",
        "`DataParallel` over a module whose weights are not on the first GPU",
        (r"module must have its parameters and buffers on device \S+ \(device_ids\[0\]\)",),
        ("The model must be on `device_ids[0]` before `nn.DataParallel(model)`: move it first.",
         "Submodules kept in a plain `list`/`dict` and tensors kept as plain attributes are not moved by"
         " `model.to(device)`, so part of the model stays on the CPU."),
        ("DEV015", "DEV009", "DEV004"),
        refines="device-mismatch",
    ),
    ErrorKind(
        "fake-tensor-device-propagation",
        "two devices met while exporting, tracing or compiling (torch.export, ONNX, torch.compile, Torch-TensorRT)",
        (r"Unhandled FakeTensor Device Propagation for \S+, found two different devices",
         r"FakeTensorDeviceMismatchError", r"Tensor device mismatch", r"FakeTensor is wrapped to wrong device",
         r"Device mismatch between fake input and example input", r"Mixed-device constants"),
        ("A CPU constant inside the model: a tensor made in `forward` without `device=`, or a table kept"
         " as a plain attribute instead of a buffer; the tracer meets it beside the GPU input."
         " `devlint export` exports each module for a GPU (a fake one where there is none) and names the"
         " line that made the CPU tensor as well as the line where the devices meet.",
         "Or an operator whose fake kernel propagates devices wrongly (seen with"
         " `torchvision.deform_conv2d`): a newer torch / Torch-TensorRT fixes some; exporting with"
         " `torch.export.export(..., strict=False)` first and compiling the exported program avoids others."),
        ("DEV003", "DEV004", "DEV007"),
        refines="device-mismatch",
    ),
    ErrorKind(
        "device-mismatch",
        "tensors on two devices in one operation",
        (r"Expected all tensors to be on the same device", r"(?<!not at the )same (devices?|GPU|type of device)\b",
         r"Tensor on device \S+ is not on the expected device", r"Expected object of (device type|backend)",
         r"(?<!to a )different devices?\b(?! mesh)", r"two (types of )?devices", r"located on different GPUs",
         r"device type of \w+ \(", r"^(Input \S+ )?is on device$|Input \S+ is on device", r"(found|got) tensor on device",
         r"storage of a tensor on device",
         r"to (be a |be )?CPU tensor, but got (a )?(CUDA )?tensor", r"is on (CPU|GPU), but expected it to be on",
         r"device index mismatch", r"to have the same device as"),
        ("A tensor made inside `forward` or a helper without `device=` (`torch.zeros`, `torch.arange`...)"
         " stays on the CPU while the model's tensors are on the GPU.",
         "A tensor stored on a module as a plain attribute instead of `register_buffer` is left behind by"
         " `model.to(device)`.",
         "An input, a batch from a loader or a tokenizer's output is passed to a model moved to the GPU"
         " without being moved itself (often the labels: `criterion(model(x.to(device)), y)`).",
         "`x.to(device)` as a statement: tensors do not move in place, the moved copy is thrown away.",
         "Submodules kept in a plain `list`/`dict` instead of `nn.ModuleList`/`nn.ModuleDict` are not"
         " moved by `model.to(device)`.",
         "A layer built inside `forward` (`nn.BatchNorm2d(c)(x)`) makes its weights on the CPU at every call.",
         "A module set on the model after `model.to(device)` (a new classifier head: `model.fc = nn.Linear(...)`)"
         " stays on the CPU.",
         "A module the script built beside the model (a loss given class weights, `nn.CrossEntropyLoss("
         "weight=torch.tensor(w))`, a head) and never moved: `model.to(device)` moves the model alone.",
         "A `self.device` captured in `__init__` still names the old device after `model.to(other)`.",
         "Inside `optimizer.step()`: the optimizer was built before `model.to(device)`, or its state was"
         " loaded from a checkpoint saved on another device; build it after moving the model.",
         "Raised while exporting or compiling, `devlint export` names the line that made the CPU tensor."),
        ("DEV003", "DEV004", "DEV007", "DEV015", "DEV014", "DEV010", "DEV009", "DEV013", "DEV012"),
    ),
    ErrorKind(
        "cpu-tensor-required",
        "a tensor torch reads on the CPU was moved to an accelerator",
        (r"must be a CPU tensor", r"1D CPU int64 tensor", r"to be on cpu, but", r"Expected scalars to be on CPU",
         r"[Oo]nly (dense )?CPU (tensors|memory) can be pinned", r"only implemented (on|for) CPU tensors",
         r"move your tensors to CPU", r"expects CPU tensor input", r"too many CPU scalars to non-CPU kernel",
         r"must be a scalar tensor and on CPU", r"was not a CPU tensor", r"quantize a CUDA tensor",
         r"over RPC\. Found tensor on device", r"RPC detected that a user-function output tensor on device"),
        ("`pack_padded_sequence(x, lengths)` needs `lengths` on the CPU (a list or a CPU int64 tensor): a"
         " batch moved whole with `.to(device)` moves the lengths too; pass `lengths.cpu()`.",
         "`DataLoader(..., pin_memory=True)` over a dataset that returns CUDA tensors: only CPU tensors can"
         " be pinned; keep the dataset on the CPU and move each batch in the loop.",
         "Other arguments torch reads on the host (`tensor_split` indices, `GradScaler` state,"
         " `Tensor.apply_`) must stay on the CPU too."),
        (),
        "`.to(device)` or `.cuda()` applied to a whole batch or dataset, including the lengths or indices"
        " torch reads on the CPU",
    ),
    ErrorKind(
        "accelerator-tensor-required",
        "an operation that runs only on an accelerator got a CPU tensor",
        (r"only supports CUDA tensors", r"must be (a )?CUDA tensors?\b", r"need to be on CUDA",
         r"not implemented for CPU tensors", r"requires them to be on GPU", r"expected input tensor to be on GPU",
         r"to be on GPUs, but input \S+ is on CPU", r"Only CUDA tensors are currently supported",
         r"on non-CUDA tensor type"),
        ("The model or its input was never moved to the GPU (a batch from a loader, an input made without"
         " `device=`); `nn.DataParallel`, `SyncBatchNorm` and FSDP need the model on the GPU first.",
         "Or part of the model stayed behind: submodules in a plain `list`/`dict`, tensors kept as plain"
         " attributes."),
        ("DEV007", "DEV015", "DEV009", "DEV004", "DEV003"),
    ),
    ErrorKind(
        "generator-device",
        "a random generator on one device, the tensor asked for on another",
        (r"device type for generator but found", r"generator device but found"),
        ("`torch.rand(..., generator=g, device=...)` needs `g` on that device: a `torch.Generator()`"
         " made without `device=` is a CPU generator. Make the generator on the tensor's device, or"
         " draw on the CPU and move the result.",),
        ("DEV003", "DEV005"),
    ),
    ErrorKind(
        "meta-tensor",
        "a model built on the meta device used as if it had weights",
        (r"Cannot copy out of meta tensor", r"to_empty\(\) instead of", r"materialized from meta device",
         r"module on meta device", r"should be materialized on CPU"),
        ("A model made on the `meta` device (`torch.device(\"meta\")`, `init_empty_weights()`,"
         " `low_cpu_mem_usage=True`, deferred initialisation) holds no data: `.to(device)` cannot copy it."
         " Use `model.to_empty(device=...)`, then load or initialise the weights.",),
        (),
        "where the model is built on the meta device, and the `.to()` that moves it",
    ),
    ErrorKind(
        "numpy-on-device-tensor",
        "`.numpy()` on a tensor on an accelerator",
        (r"can't convert \S+ device type tensor to numpy", r"device type tensor to numpy",
         r"\.numpy\(\) is not supported for tensor subclasses"),
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
        "autocast or `GradScaler` asked for CUDA on a machine without it (a warning: it is turned off)",
        (r"User provided device_type of '\w+', but CUDA is not available",
         r"CUDA is not available or torch_xla is imported\. Disabling autocast",
         r"GradScaler is enabled, but CUDA is not available"),
        ("`torch.autocast(\"cuda\")` / `torch.cuda.amp.autocast()` on a CPU-only machine silently runs"
         " in full precision: pass the device type of the data (`torch.autocast(x.device.type)`);"
         " `torch.cuda.amp.GradScaler()` likewise: use `torch.amp.GradScaler(device.type)`.",),
        (),
        "`autocast(\"cuda\")`, `torch.cuda.amp` and `GradScaler()` written for CUDA alone",
    ),
    ErrorKind(
        "pin-memory-without-accelerator",
        "`pin_memory=True` on a machine without an accelerator (a warning: memory is not pinned)",
        (r"'pin_memory' argument is set as true but no accelerator is found",
         r"pin_memory=True requires a CUDA or other accelerator", r"Pinned memory requires CUDA",
         r"pinning memory ?requires CUDA"),
        ("Pinned memory only helps copies to a GPU: pass `pin_memory=torch.cuda.is_available()`.",),
        (),
        "`pin_memory=True` in `DataLoader(...)` calls and tensor factories",
    ),
    ErrorKind(
        "weights-only-load",
        "`torch.load` refused to unpickle an object (torch 2.6 and later load weights only by default)",
        (r"Weights only load failed",),
        ("From torch 2.6, `torch.load` defaults to `weights_only=True` and rejects pickled objects"
         " other than tensors and plain containers. For a checkpoint you trust, pass"
         " `weights_only=False`, or allow its classes with `torch.serialization.add_safe_globals([...])`;"
         " keep `map_location` on the same call.",),
        (),
        "the `torch.load` call that reads the checkpoint",
    ),
)


def kinds_of(text: str) -> list[ErrorKind]:
    """The kinds of device error `text` shows, in KINDS order, less those a more specific one refines."""
    found = [k for k in KINDS if k.matches(text)]
    refined = {k.refines for k in found}
    return [k for k in found if k.id not in refined]


FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?', re.M)
# Installed packages and the standard library (`/usr/lib/python3.11/...`, `C:\Python311\Lib\...`):
# their frames are not looked for here.
LIBRARY_PART = re.compile(r"site-packages|dist-packages|python\d+(\.\d+)?", re.I)
FAILING, CALLING = ("the failing line", "a calling line")


@dataclass(frozen=True)
class Frame:
    filename: str  # as the traceback writes it
    row: int
    function: Optional[str]
    local: Optional[Path]  # the file here it was matched to
    shown: Optional[str]  # that file, as the output shows it
    library: bool  # in installed packages or the standard library: not looked for

    @property
    def status(self) -> str:
        return "library" if self.library else "matched" if self.local else "unmatched"


@dataclass
class Explanation:
    kinds: list[ErrorKind]
    frames: list[Frame]  # innermost first
    findings: list[tuple[FileReport, object, str]]  # (report, finding, place), the line to change first


def explain(text: str, settings, cwd: Path) -> Explanation:
    kinds = kinds_of(text)
    bases = list(dict.fromkeys([cwd, settings.root]))  # where a frame's path is looked for
    frames = [_frame(m["file"], int(m["line"]), m["func"], bases, cwd) for m in FRAME.finditer(text)]
    frames.reverse()  # tracebacks print the innermost frame last
    # The frames of the project, matched here or not: the first one is the failing frame.
    stack = [f for f in frames if not f.library]
    wanted = [code for kind in kinds for code in kind.rules]
    ranked = []
    for path in dict.fromkeys(f.local for f in stack if f.local):
        report = check_file(path, settings, _display(path, cwd))
        lines = _Lines(path, [(i, f.row) for i, f in enumerate(stack) if f.local == path])
        for finding in report.findings:
            if kinds and finding.code not in wanted:  # cannot cause this error
                continue
            rule = wanted.index(finding.code) if finding.code in wanted else len(wanted)
            rank, place = lines.place(finding.row)
            ranked.append(((rank, rule, lines.distance(finding.row), finding.row), report, finding, place))
    ranked.sort(key=lambda item: item[0])
    return Explanation(kinds, frames, [(report, finding, place) for _, report, finding, place in ranked])


def _frame(filename: str, row: int, function: Optional[str], bases: list[Path], cwd: Path) -> Frame:
    parts = [p for p in re.split(r"[\\/]+", filename) if p not in ("", ".")]
    if filename.startswith("<") or not filename.endswith(".py") or any(LIBRARY_PART.fullmatch(p) for p in parts):
        return Frame(filename, row, function, None, None, True)
    local = _find_here(filename, parts, bases)
    return Frame(filename, row, function, local, _display(local, cwd) if local else None, False)


def _find_here(filename: str, parts: list[str], bases: list[Path]) -> Optional[Path]:
    """The file a frame names: the path itself where it exists (a traceback of this machine), else
    the longest tail of it that exists under one of `bases` (a traceback from another machine)."""
    if Path(filename).is_absolute() and _is_file(Path(filename)):
        return Path(filename)
    if ".." in parts:
        parts = parts[len(parts) - parts[::-1].index(".."):]
    for start in range(len(parts)):
        for base in bases:
            candidate = base.joinpath(*parts[start:])
            if _is_file(candidate):
                return candidate
    return None


class _Lines:
    """Where a finding stands in one file, against the frames in it: on a frame's line, on a line
    that makes a value that line uses, in a frame's function, or elsewhere."""

    def __init__(self, path: Path, frames: list[tuple[int, int]]):  # (index in the stack, row)
        self.rows = [row for _, row in frames]
        self.near: dict[int, tuple[int, int]] = {}  # row -> (index in the stack, 0 on the line / 1 feeding it)
        self.functions: list[tuple[int, int, int]] = []  # (index in the stack, first row, last row)
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            tree = None
        for index, row in reversed(frames):  # the innermost frame last, so its claims stay
            statement, scope = _statement_at(tree, row) if tree else (None, None)
            own = set(_rows(statement)) if statement else {row}
            for line in _feeding_rows(tree, scope, statement) if statement else ():
                self.near[line] = (index, 1)
            for line in own:
                self.near[line] = (index, 0)
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([scope.lineno] + [d.lineno for d in scope.decorator_list])
                self.functions.append((index, start, scope.end_lineno or scope.lineno))

    def place(self, row: int) -> tuple[tuple[int, ...], str]:
        if row in self.near:
            index, feeds = self.near[row]
            line = FAILING if index == 0 else CALLING
            return (0, index, feeds), (f"makes a value {line} uses" if feeds else f"on {line}")
        inside = [index for index, start, end in self.functions if start <= row <= end]
        if inside:
            return (1, min(inside)), "in the failing function" if min(inside) == 0 else "in a calling function"
        return (2,), "elsewhere in the file"

    def distance(self, row: int) -> int:
        return min(abs(row - line) for line in self.rows)


# --- what made the values a line uses: a def-use walk back, with `ast` ------------------------------
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _statement_at(tree: ast.Module, row: int):
    """The innermost statement whose own lines (a compound statement's header) hold `row`, and the
    function around it (or the module)."""
    found, scope = None, tree
    nodes = [(tree, tree)]
    while nodes:
        node, in_scope = nodes.pop()
        for child in _blocks(node):
            if hasattr(child, "lineno") and not child.lineno <= row <= (child.end_lineno or child.lineno):
                continue
            if isinstance(child, ast.stmt) and row in _rows(child):
                found, scope = child, in_scope
            nodes.append((child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else in_scope))
    return found, scope


_BLOCKS = (ast.stmt, ast.excepthandler, *([ast.match_case] if hasattr(ast, "match_case") else []))  # 3.10+


def _blocks(node) -> list:
    """The statements in a node's bodies, and its `except` and `case` clauses."""
    return [c for c in ast.iter_child_nodes(node) if isinstance(c, _BLOCKS)]


def _header(statement: ast.stmt) -> list[ast.AST]:
    """What a statement evaluates itself: not the statements in its bodies."""
    return [c for c in ast.iter_child_nodes(statement) if not isinstance(c, _BLOCKS)]


def _rows(statement: ast.stmt) -> range:
    """A statement's own lines: all of a simple one, the header of a compound one."""
    if not _blocks(statement):
        return range(statement.lineno, (statement.end_lineno or statement.lineno) + 1)
    header = [c.end_lineno for c in _header(statement) if getattr(c, "end_lineno", None)]
    return range(statement.lineno, max([statement.lineno] + header) + 1)


def _feeding_rows(tree: ast.Module, scope, statement: ast.stmt) -> set[int]:
    """The lines that made the values `statement` uses: earlier assignments in its function to the
    names it reads (and, for `self.NAME`, assignments to it in any method of the class), then to
    the names those read, and so on."""
    classes = {id(f): c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
               for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    writers: dict[int, dict[str, list[ast.stmt]]] = {}  # per scope: name -> the statements that write it
    rows: set[int] = set()
    seen = set()
    work = [(scope, name, statement.lineno) for name in _reads(_header(statement))]
    while work:
        scope, name, before = work.pop()
        if (id(scope), name, before) in seen:
            continue
        seen.add((id(scope), name, before))
        places = [(scope, before)]
        this = _self_name(scope)
        if this and name.startswith(this + ".") and id(scope) in classes:  # an attribute of the module
            places += [(method, None) for method in classes[id(scope)].body
                       if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method is not scope]
        for where, limit in places:
            if id(where) not in writers:
                writers[id(where)] = {}
                for made in _statements(where):
                    for written in _writes(made):
                        writers[id(where)].setdefault(written, []).append(made)
            target = name if where is scope else name.replace(this, _self_name(where) or this, 1)
            for made in writers[id(where)].get(target, ()):
                if limit is None or made.lineno < limit:
                    rows.update(_rows(made))
                    work += [(where, read, made.lineno) for read in _reads(_header(made))]
    return rows


def _self_name(scope) -> Optional[str]:
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.args.args:
        return scope.args.args[0].arg
    return None


def _statements(scope):
    """The statements of a function (or the module), not those of the functions and classes in it."""
    nodes = list(scope.body)
    while nodes:
        node = nodes.pop()
        yield node
        if not isinstance(node, _SCOPES):
            nodes += _blocks(node)


def _dotted(node) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _reads(nodes) -> set[str]:
    """The names and `name.attribute`s read."""
    return {name for node in nodes for n in ast.walk(node)
            if isinstance(getattr(n, "ctx", None), ast.Load) and (name := _dotted(n))}


def _writes(statement: ast.stmt) -> set[str]:
    """The names (and `name.attribute`s) a statement assigns or changes: `x = ...`, `x[i] = ...`,
    `x += ...`, `for x in ...`, `with ... as x`, and `x.method(...)` as a statement of its own."""
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [statement.target]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in statement.items if item.optional_vars]
    elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) \
            and isinstance(statement.value.func, ast.Attribute):
        targets = [statement.value.func.value]
    else:
        return set()
    names = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets += target.elts
        elif isinstance(target, (ast.Starred, ast.Subscript)):
            targets.append(target.value)
        elif (name := _dotted(target)) is not None:
            names.add(name)
    return names


def _display(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


class InputError(Exception):
    pass


# An argument with no white space that holds a path separator or ends in a file extension.
LOOKS_LIKE_A_PATH = re.compile(r"\S*[/\\]\S*|\S*\.[A-Za-z0-9]{1,5}")


def read_input(argument: Optional[str], stdin) -> str:
    """`-` or nothing reads standard input; an argument that names a file, or looks like a path,
    is read (InputError when it cannot be); anything else is the text itself."""
    if argument in (None, "-"):
        return stdin.read()
    if LOOKS_LIKE_A_PATH.fullmatch(argument) or ("\n" not in argument and _is_file(Path(argument))):
        try:
            return Path(argument).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(f"cannot read {argument}: {exc.strerror or exc}") from None
    return argument


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # not a name the system takes (too long, a NUL)
        return False
