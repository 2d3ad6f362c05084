"""Write `bench/torch-messages.tsv`: the device errors the installed torch can raise, and the
`devlint explain` kind each is recognised as; and the list of kinds in `docs/explain.md`.

The messages come from torch itself: the printable strings of its shared libraries (a
`TORCH_CHECK` message is stored as the pieces `c10::str` joins, so a row is often a piece of a
message) and the messages of torch's Python sources (`raise`, `warnings.warn`, `torch._check`;
an f-string's fields written `{}`). Of those, a row is a message on a device topic (TOPICS: two
devices meeting, no accelerator, device indices and strings, checkpoints' devices, pinned memory,
generators, DataParallel, meta and fake tensors, tensors that must be on the CPU or on an
accelerator). What users paste that these hold only in pieces or not at all (PASTED) is added with the torch
that wrote it. `tests/test_torch_messages.py` pins the file to the installed torch and to the kinds
`devlint explain` gives, and asks that every row be recognised.

Usage: python bench/torch_messages.py [--check]
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / "bench" / "torch-messages.tsv"
DOCS = REPO / "docs" / "explain.md"
DOCS_START, DOCS_END = "<!-- kinds: from bench/torch_messages.py -->", "<!-- end of kinds -->"
sys.path.insert(0, str(REPO / "src"))

from devlint.frontends.error_kinds import KINDS, kinds_of  # noqa: E402

# A string names a device when it holds one of these words.
DEVICE_WORD = re.compile(r"\b(devices?|cuda|CUDA|GPUs?|mps|MPS|xpu|XPU|accelerators?|map_location|pin_memory|pinned"
                         r"|ordinal|device_ids|cpu|CPU|meta|FakeTensor)\b")
# The device topics; a message on none of them (a CPU feature test, a profiler option) is not a
# device error a model's code causes.
TOPICS = (
    ("two-devices", r"same (device|GPU)|(?<!to a )different devices?(?! mesh)|two (different )?devices|device mismatch"
                    r"|device type of \w+ \(|mixed? (of )?device|to be (a |on )?(CPU|CUDA|cpu|cuda)\b"
                    r"|got (a )?CUDA tensor|must (all )?be on (the same|one)|is on device|(found|got|output) tensor on device"
                    r"|(be|supports|are) (a )?CUDA tensors?|on non-CUDA|quantize a CUDA tensor"
                    r"|different device types|on (GPU|CPU)\b.*(but|found)|CPU (parameters|tensors?|scalars)"),
    ("no-accelerator", r"compiled with (CUDA|MPS|XPU)|No (CUDA GPUs|XPU)|without ATen_\w+|not linked with support"
                       r"|(CUDA|MPS|XPU|accelerator)( device)? is not available|no accelerator|when none is available"
                       r"|NVIDIA driver|MPS backend|CUDA library has not been loaded|_cuda_\w+|requires (CUDA|XPU)"
                       r"|without (CUDA|MPS|XPU)|without torch_xla"),
    ("device-index", r"ordinal|device index|device_count\(\)|device string|[Ii]nvalid device\b(?!:)"),
    ("checkpoint", r"deserialize object on|map_location"),
    ("pinned-memory", r"[Pp]inned memory (requires|allocator)|can be pinned|pinning memory|'pin_memory' argument is set"
                      r"|pin_memory=True requires"),
    ("generator", r"for generator but found|generator device but found"),
    ("data-parallel", r"device_ids|DataParallel"),
    ("meta-tensor", r"copy out of meta tensor|to_empty|(from|on) meta device"),
    ("fake-tensor", r"FakeTensor.*(wrong|two|different) devices?|[Dd]evice (mismatch|[Pp]ropagation)|Mixed-device"),
    ("numpy", r"numpy"),
)
# Strings with a device word that are not messages: operator schemas, option help, TorchScript
# source kept in the library.
NOT_A_MESSAGE = re.compile(r"\) -> |^\(\w+, default|^[\w.]+\(|^return |Optional\[|^\w+ : |deprecated")
# Sources whose messages are about torch's own tools, not a model's tensors.
TOOLS = ("torch/autograd/profiler", "torch/profiler/", "torch/utils/benchmark/")
LIBRARIES = ("libc10.so", "libtorch_cpu.so", "libtorch_python.so", "libc10_cuda.so", "libtorch_cuda.so")
PRINTABLE = re.compile(rb"[\x20-\x7e]{12,}")
RAISERS = {"warn", "_check", "_check_with", "_check_value", "_check_type", "_check_index", "_check_is_size",
           "unimplemented"}  # Dynamo's graph breaks: `unimplemented(gb_type=..., explanation=...)`
# What users paste that the strings above hold only in pieces, or not at all: wordings of
# earlier releases, and messages of builds other than this machine's (CUDA, MPS), each as a
# public report quotes it.
PASTED = (
    ("torch 1.x", "RuntimeError: Expected object of device type cuda but got device type cpu for argument #1 'self' in call to _th_addmm"),
    ("torch 1.0", "RuntimeError: Expected object of backend CUDA but got backend CPU for argument #2 'mat2'"),
    ("torch 1.x", "RuntimeError: arguments are located on different GPUs"),
    ("torch 1.x", "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"),
    ("torch 1.x", "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same or input should be a MKLDNN tensor and weight is a dense tensor"),
    ("torch 1.x", "RuntimeError: Input and hidden tensors are not at the same device, found input tensor at cuda:0 and hidden tensor at cpu"),
    ("torch 1.x", "RuntimeError: Input and parameter tensors are not at the same device, found input tensor at cpu and parameter tensor at cuda:0"),
    ("torch 1.x", "RuntimeError: Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU (while checking arguments for addmm)"),
    ("torch 1.x", "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! (when checking argument for argument mat1 in method wrapper_addmm)"),
    ("torch 1.x", "RuntimeError: indices should be either on cpu or on the same device as the indexed tensor (cpu)"),
    ("torch 1.x", "RuntimeError: CUDA error: invalid device ordinal"),
    ("torch 1.x", "AssertionError: The NVIDIA driver on your system is too old"),
    ("torch 1.x", "TypeError: Broadcast function not implemented for CPU tensors"),
    ("torch 1.x", "ValueError: SyncBatchNorm expected input tensor to be on GPU"),
    ("torch 2.x", "RuntimeError: 'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor"),
    ("torch 2.x", "NotImplementedError: Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving module from meta to a different device."),
    ("torch 2.x", "torch._dynamo.exc.TorchRuntimeError: Failed running call_function torchvision.deform_conv2d(*(FakeTensor(..., device='cuda:0', size=(1, 64, 56, 56)),), **{}): Unhandled FakeTensor Device Propagation for torchvision.deform_conv2d.default, found two different devices cuda:0, cpu"),
    ("torch 2.x", "NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend. This could be because the operator doesn't exist for this backend, or was omitted during the selective/custom build process (if using custom build)."),
    ("torch 2.x", "TypeError: Module.load_state_dict() got an unexpected keyword argument 'map_location'"),
    ("torch 2.x", 'RuntimeError: Error(s) in loading state_dict for ResNet: Missing key(s) in state_dict: "conv1.weight". Unexpected key(s) in state_dict: "module.conv1.weight".'),
    ("torch 2.6", "_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have two options, do those steps only if you trust the source of the checkpoint."),
    ("torch 2.x, MPS build", "NotImplementedError: The operator 'aten::_linalg_solve_ex.result' is not currently implemented for the MPS device. As a temporary fix, you can set the environment variable `PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a fallback for this op."),
)


def _torch_root() -> Path:
    import torch
    return Path(torch.__file__).parent


def library_strings(root: Path) -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        path = root / "lib" / name
        if not path.exists():
            continue
        for match in PRINTABLE.finditer(path.read_bytes()):
            text = " ".join(match.group().decode().split())
            if len(text.split()) >= 3 and DEVICE_WORD.search(text):
                found.setdefault(text, name)
    return found


def _text(node) -> str | None:
    """A message as the source writes it: a string, an f-string with `{}` for each field, or a
    concatenation of them; `"..." % x` is its format string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _text(node.left)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return (left or "{}") + (right or "{}") if left or right else None
    if isinstance(node, ast.Lambda):  # torch._check(cond, lambda: "...")
        return _text(node.body)
    return None


def python_messages(root: Path) -> dict[str, str]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root.parent).as_posix()
        if where.startswith(("torch/testing/", "torch/_vendor/") + TOOLS) or "/test" in where:
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                call = node.exc
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in RAISERS:
                call = node
            else:
                continue
            for argument in call.args + [k.value for k in call.keywords if k.arg in ("gb_type", "explanation", "msg")]:
                text = _text(argument)
                if text:
                    text = " ".join(text.split())
                    if len(text.split()) >= 3 and DEVICE_WORD.search(text):
                        found.setdefault(text, where)
    return found


def topic(text: str) -> str | None:
    if NOT_A_MESSAGE.search(text):
        return None
    return next((name for name, pattern in TOPICS if re.search(pattern, text)), None)


def kinds(text: str) -> str:
    return ",".join(k.id for k in kinds_of(text)) or "-"


def rows(root: Path) -> tuple[list[tuple[str, str, str, str]], int]:
    """(topic, kinds, source, message) for each message on a device topic, and how many strings
    with a device word were read."""
    candidates = {**library_strings(root), **python_messages(root)}
    found = sorted((t, kinds(text), source, text) for text, source in candidates.items() if (t := topic(text)))
    older = [(topic(text) or "-", kinds(text), source, text) for source, text in PASTED]
    return found + older, len(candidates)


def summary(table: list[tuple[str, str, str, str]]) -> str:
    recognised = sum(1 for row in table if row[1] != "-")
    used = {kind for row in table for kind in row[1].split(",") if kind != "-"}
    pasted = sum(1 for row in table if row[2].startswith("torch "))
    return (f"{len(table)} device messages ({pasted} of them pasted by users), {recognised} recognised,"
            f" as {len(used)} kinds")


def render(version: str, table: list[tuple[str, str, str, str]], read: int) -> str:
    head = [f"# torch {version}: {read} strings with a device word; {summary(table)}",
            "# generated by `python bench/torch_messages.py`; do not edit by hand",
            "topic\tkinds\tsource\tmessage"]
    return "\n".join(head + ["\t".join(row) for row in table]) + "\n"


def read_table(path: Path = TARGET) -> tuple[str, list[tuple[str, str, str, str]]]:
    """The torch version and the rows of a table `render` wrote."""
    lines = path.read_text().splitlines()
    version = lines[0].split()[2].rstrip(":")
    return version, [tuple(line.split("\t")) for line in lines[3:]]


def kinds_section(version: str, table: list[tuple[str, str, str, str]]) -> str:
    """The docs' list of kinds: what each means, the rules that find its cause (or where to look),
    and how many of the table's messages it recognises."""
    counts = {kind.id: 0 for kind in KINDS}
    for row in table:
        for kind in row[1].split(","):
            if kind in counts:
                counts[kind] += 1
    lines = [DOCS_START, "", "| kind | what happened | causes found by | messages |", "|---|---|---|---:|"]
    for kind in KINDS:
        found = ", ".join(f"[{code}](rules/{code}.md)" for code in kind.rules) or f"no rule; look for {kind.look_for}"
        lines.append(f"| `{kind.id}` | {kind.title} | {found} | {counts[kind.id]} |")
    return "\n".join(lines + ["", f"With torch {version}: {summary(table)}.", "", DOCS_END])


def docs_with(section: str, docs: str) -> str:
    start, end = docs.index(DOCS_START), docs.index(DOCS_END) + len(DOCS_END)
    return docs[:start] + section + docs[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from the installed torch's")
    args = parser.parse_args()
    import torch
    table, read = rows(_torch_root())
    text = render(torch.__version__, table, read)
    docs = docs_with(kinds_section(torch.__version__, table), DOCS.read_text())
    if args.check:
        same = TARGET.exists() and TARGET.read_text() == text and DOCS.read_text() == docs
        print(f"{TARGET.name}, {DOCS.name}: {'up to date' if same else 'differ from the installed torch'}")
        return 0 if same else 1
    TARGET.write_text(text)
    DOCS.write_text(docs)
    print(text.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
