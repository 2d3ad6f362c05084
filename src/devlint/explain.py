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
         r"CUDA driver initialization failed"),
        ("A hardcoded `.cuda()` call runs on every machine, GPU or not: use `.to(device)` with a device"
         " chosen once (`torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")`).",
         "A `\"cuda\"` device string (`torch.device(\"cuda\")`, `device=\"cuda\"`, a `--device` default)"
         " does the same: take the device from the data, a parameter, or `torch.cuda.is_available()`."),
        ("DEV001", "DEV005"),
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
         "An input made on the CPU is passed to a model moved to the GPU."),
        ("DEV003", "DEV004", "DEV007", "DEV001", "DEV005"),
    ),
    ErrorKind(
        "numpy-on-device-tensor",
        "`.numpy()` on a tensor on an accelerator",
        (r"can't convert \S+ device type tensor to numpy", r"\.numpy\(\) is not supported for tensor subclasses"),
        ("`.numpy()` works only on CPU tensors: call `.cpu()` first (`out.detach().cpu().numpy()`).",),
        ("DEV008",),
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
    if len(argument) < 1024 and "\n" not in argument and Path(argument).is_file():
        return Path(argument).read_text(encoding="utf-8", errors="replace")
    return argument
