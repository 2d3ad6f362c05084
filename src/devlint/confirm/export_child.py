"""The child process of `devlint export`: imports one user file, builds each nn.Module class on
the CPU, finds an input its forward takes there, and exports it for a CUDA device with
`torch.export.export(..., strict=False)`: on the GPU when there is one, otherwise on a fake
`cuda:0` (the module built on the CPU, then moved inside `FakeTensorMode`), and on the meta
device where fake CUDA cannot run an operation (indexing: "PyTorch is not linked with support
for cuda devices").

Protocol: argv[1] is the job (JSON), argv[2] the result file: one JSON line with the classes it
will try, then one line per class as it is decided, so that a crash loses only the class it was
on. Standard output belongs to the user's code.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakTensorKeyDictionary

from devlint.confirm.inputs import (
    constructible, import_user_file, input_guesses, make_inputs, module_classes, user_frame_row,
)

# The torch versions `devlint export` is tested on. torch.export and FakeTensorMode are beta and
# private APIs: on other versions every class is `not-run`, with the reason.
TESTED = ((2, 11), (2, 13))
NOT_LINKED = "is not linked with support for cuda devices"
# How a device mismatch reads: "Expected all tensors to be on the same device" (torch 2.13), the
# older fake-tensor wording "Unhandled FakeTensor Device Propagation ... found two different
# devices" (torch 2.11), and operators' own checks ("meshgrid expects all tensors to have the
# same device")
MISMATCH = ("same device", "two devices", "different devices", "Device Propagation", "device mismatch")
# torch functions that make a new tensor on the default device (the CPU) without `device=`
FACTORIES = frozenset({
    "arange", "range", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
    "linspace", "logspace", "eye", "tensor", "as_tensor", "from_numpy", "empty_strided", "tril_indices",
    "triu_indices", "Tensor", "FloatTensor", "LongTensor",
})


def torch_version_problem() -> Optional[str]:
    version = tuple(int(part) for part in re.findall(r"\d+", torch.__version__)[:2])
    low, high = TESTED
    if not low <= version <= high:
        return (f"torch {torch.__version__}: devlint export is tested on torch "
                f"{low[0]}.{low[1]} to {high[0]}.{high[1]} (torch.export and FakeTensorMode change between versions)")
    return None


def _user_row(user_file: str) -> Optional[int]:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == user_file:
            return frame.f_lineno
        frame = frame.f_back
    return None


class FactoryRecorder(TorchFunctionMode):
    """Records where the user's file makes a CPU tensor of one dimension or more (a 0-dim CPU
    tensor is a scalar, which CUDA kernels accept beside device tensors), and which of those
    meet a tensor on another device (as an index they do not: CUDA takes CPU indices)."""

    def __init__(self, user_file: str) -> None:
        super().__init__()
        self.user_file = user_file
        self.made: list[tuple[int, str]] = []  # (row, factory), in order
        self.met: set[tuple[int, str]] = set()
        self._origin = WeakTensorKeyDictionary()  # CPU tensor -> (row, factory)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        operands = args[:1] if name in ("__getitem__", "index_select") else (
            args[:1] + args[2:] if name == "__setitem__" else (args, kwargs or {}))
        tensors = [t for t in tree_flatten(operands)[0] if isinstance(t, torch.Tensor)]
        if any(t.device.type != "cpu" for t in tensors):
            self.met.update(self._origin[t] for t in tensors if t.device.type == "cpu" and t in self._origin)
        result = func(*args, **(kwargs or {}))
        if name in FACTORIES and isinstance(result, torch.Tensor) and result.device.type == "cpu" and result.dim() > 0:
            row = _user_row(self.user_file)
            if row is not None:
                self._origin[result] = (row, f"torch.{name}")
                if (row, f"torch.{name}") not in self.made:
                    self.made.append((row, f"torch.{name}"))
        return result

    def culprits(self) -> list[tuple[int, str]]:
        """The factories whose tensors met another device's; all of them when none was seen to."""
        return [made for made in self.made if made in self.met] or self.made


def _location(row: int, message: str, role: str = "made") -> dict:
    """A line the run points at; `role`: made (a CPU tensor is made or kept there), meets (the
    devices meet there), raised (the build raised there)."""
    return {"row": row, "message": message, "role": role}


def _assignment_row(cls: type, attribute: str) -> Optional[int]:
    """The line of the class's `self.ATTRIBUTE = ...` (in the class or a base of the same file)."""
    for klass in cls.__mro__:
        try:
            lines, start = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue
        for offset, line in enumerate(lines):
            if re.search(rf"\bself\.{re.escape(attribute)}\s*=(?!=)", line):
                return start + offset
    return None


def _cpu_attributes(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """Plain tensor attributes (not parameters, not buffers) of one dimension or more that are on
    the CPU: `model.to()` leaves them there, and export keeps them as constants."""
    found = []
    for module in model.modules():
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) \
                    and value.device.type == "cpu" and value.dim() > 0:
                found.append((name, module))
    return found


def _stack_row(node, user_file: str) -> Optional[int]:
    rows = [int(m.group(1)) for m in re.finditer(rf'File "{re.escape(user_file)}", line (\d+)', node.meta.get("stack_trace") or "")]
    return rows[-1] if rows else None


def baked_cpu_tensors(program, user_file: str, cls: type) -> list[dict]:
    """What an exported program keeps on the CPU: factory nodes with `device=cpu` burned into
    their arguments, and constant tensors (plain attributes, tensor literals); 0-dim ones aside."""
    found = []
    for node in program.graph.nodes:
        device = node.kwargs.get("device") if node.op == "call_function" else None
        value = node.meta.get("val")
        if isinstance(device, torch.device) and device.type == "cpu" and isinstance(value, torch.Tensor) and value.dim() > 0:
            row = _stack_row(node, user_file)
            if row is not None:
                found.append(_location(row, f"`{node.target}` makes a CPU tensor: `device=cpu` is burned into the graph"))
    users = {node.name: node for node in program.graph.nodes}
    for spec in program.graph_signature.input_specs:
        if spec.kind.name != "CONSTANT_TENSOR":
            continue
        value = program.constants.get(spec.target)
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.dim() == 0:
            continue
        if spec.target.startswith("lifted_tensor"):
            placeholder = users.get(spec.arg.name)
            rows = [_stack_row(user, user_file) for user in (placeholder.users if placeholder is not None else ())]
            row = next((r for r in rows if r is not None), None)
            what = "a tensor literal: a constant of the graph, on the CPU"
        else:
            row = _assignment_row(cls, spec.target.rsplit(".", 1)[-1])
            what = f"`{spec.target}`, a plain tensor attribute: a constant of the graph, on the CPU"
        if row is not None:
            found.append(_location(row, what))
    return found


def export_for(kind: str, model: torch.nn.Module, inputs: tuple, user_file: str):
    """Export for `kind` (cuda, fake, meta): (program or None, the exception or None, the CPU
    factories a forward on that device made, as (row, name))."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    # fake CUDA: the module is copied on the CPU (building or copying it inside the mode fails),
    # then moved, exported and run inside the mode
    mode = FakeTensorMode(allow_non_fake_inputs=True) if kind == "fake" else contextlib.nullcontext()
    device = {"cuda": "cuda", "fake": "cuda:0", "meta": "meta"}[kind]  # noqa: DEV005 (export targets CUDA)
    copied = copy.deepcopy(model).requires_grad_(False)
    with mode:
        placed = copied.to(device)
        args = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs)
    try:
        with mode:
            return torch.export.export(placed, args, strict=False), None, []
    except Exception as exc:  # noqa: BLE001 - user code, and torch's tracer
        error = exc
    # where the CPU tensors were made: run the forward on that device, recording factories
    recorder = FactoryRecorder(user_file)
    try:
        with torch.no_grad(), mode, recorder:
            placed(*args)
    except Exception:  # noqa: BLE001 - it fails where the export did
        pass
    return None, error, recorder.culprits()


def first_input(model: torch.nn.Module, user_module, cls, guesses=None) -> tuple[Optional[tuple], str]:
    """The first input (configured, or guessed) the model's forward takes on the CPU, and where
    it came from."""
    last = "no input to try"
    model.eval()
    for source, specs in guesses or input_guesses(model, user_module, cls):
        try:
            inputs = make_inputs(specs, "cpu")
            with torch.no_grad():
                model(*inputs)
            return inputs, source
        except Exception as exc:  # noqa: BLE001 - user code
            last = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None, last


def export_class(cls: type, job: dict, user_module, user_file: str) -> dict:
    record: dict[str, Any] = {"class": cls.__name__, "locations": []}
    spec = (job.get("classes") or {}).get(cls.__name__) or {}
    kwargs = spec.get("init_kwargs")
    if kwargs is None:
        hook = getattr(user_module, "devlint_init_kwargs", None)
        kwargs = hook(cls) if callable(hook) else None
    if kwargs is None and not constructible(cls):
        return record | {"status": "not-run", "message": f"cannot build {cls.__name__}: its constructor needs arguments; "
                         f"add [tool.devlint.confirm.classes.{cls.__name__}] init-kwargs = {{...}}"}
    try:
        model = cls(**(kwargs or {}))
    except Exception as exc:  # noqa: BLE001 - user code
        row = user_frame_row(exc, user_file)
        return record | {"status": "not-run", "message": f"constructing {cls.__name__}() raised {type(exc).__name__}: {exc}",
                         "locations": [_location(row, "raised here", "raised")] if row else []}
    guesses = [("configuration", spec["inputs"])] if spec.get("inputs") else None
    inputs, source = first_input(model, user_module, cls, guesses)
    if inputs is None:
        return record | {"status": "not-run", "message": f"no input fitted {cls.__name__}.forward on the CPU ({source}); "
                         f"add [tool.devlint.confirm.classes.{cls.__name__}] input-shapes = [[...]]"}
    kind = "cuda" if torch.cuda.is_available() else "fake"
    program, error, made = export_for(kind, model, inputs, user_file)
    if error is not None and NOT_LINKED in str(error):
        kind = "meta"  # fake CUDA cannot run this operation on a CPU-only torch: the meta stand-in can
        program, error, made = export_for(kind, model, inputs, user_file)
    record["device"] = {"cuda": f"cuda ({torch.cuda.get_device_name()})" if kind == "cuda" else "",
                        "fake": "fake cuda:0", "meta": "meta stand-in"}[kind]
    record["inputs"] = source
    if error is None:
        baked = baked_cpu_tensors(program, user_file, cls)
        if baked:
            return record | {"status": "fails", "locations": baked,
                             "message": f"exports, but keeps {len(baked)} CPU tensor(s) in the graph: on a GPU they meet CUDA tensors"}
        return record | {"status": "ready", "message": "exports for a CUDA device; no CPU tensor is kept in the graph"}
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if any(marker in str(error) for marker in MISMATCH) or "FakeTensorDeviceMismatch" in type(error).__name__:
        locations = [_location(row, f"`{name}()` makes a CPU tensor") for row, name in made]
        for attribute, owner in _cpu_attributes(model):
            row = _assignment_row(type(owner), attribute)
            if row is not None and all(loc["row"] != row for loc in locations):
                locations.append(_location(row, f"`self.{attribute}`, a plain tensor attribute, stays on the CPU"))
        meets = user_frame_row(error, user_file)
        if meets is not None:
            locations.append(_location(meets, "devices meet here", "meets"))
        return record | {"status": "fails", "message": f"{type(error).__name__}: {text}", "locations": locations}
    # not a device error: does the model export at all (on the CPU, with real tensors)?
    try:
        torch.export.export(copy.deepcopy(model), inputs, strict=False)
    except Exception as exc:  # noqa: BLE001 - torch's tracer
        row = user_frame_row(exc, user_file)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return record | {"status": "fails", "message": f"torch.export fails on any device: {type(exc).__name__}: {first}",
                         "locations": [_location(row, "export stops here", "raised")] if row else []}
    return record | {"status": "not-run", "message": f"exports on the CPU, but the {record['device']} run stopped: "
                     f"{type(error).__name__}: {text}"}


def run(job: dict, out) -> None:
    path = Path(job["file"]).resolve()
    user_file = str(path)
    problem = torch_version_problem()
    try:
        user_module = None if problem else import_user_file(path)
    except BaseException as exc:  # noqa: BLE001 - user code
        problem = f"cannot import {path.name}: {type(exc).__name__}: {exc}"
    if problem:
        out.write(json.dumps({"fatal": problem}) + "\n")
        return
    classes = [c for c in module_classes(user_module) if not job.get("only") or c.__name__ == job["only"]]
    out.write(json.dumps({"classes": [c.__name__ for c in classes]}) + "\n")
    out.flush()
    for cls in classes:
        try:
            record = export_class(cls, job, user_module, user_file)
        except Exception as exc:  # noqa: BLE001 - a bug here must not cost the other classes
            record = {"class": cls.__name__, "status": "not-run", "locations": [],
                      "message": f"the export check failed: {type(exc).__name__}: {exc}"}
        out.write(json.dumps(record) + "\n")
        out.flush()


def main() -> None:
    job = json.loads(sys.argv[1])
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        run(job, out)


if __name__ == "__main__":
    main()
