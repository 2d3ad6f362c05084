"""The child process of `devlint confirm`: imports one user file, builds its modules, moves them
to the target device and runs them, recording every device event. Only this module imports torch.

Protocol: the job arrives as JSON on standard input; the result leaves as JSON on the file
descriptor named in argv[1], never on stdout (which belongs to the user's code).

The stand-in device (no GPU): tensors that should live on the accelerator live on torch's
`meta` device, which allocates nothing. torch's own meta kernels are lenient about mixing
devices in places where CUDA is not, so they decide nothing: a dispatch-level recorder sees
every operation, applies CUDA's rule (devlint's table below) to the devices of its tensor
arguments, records the verdict with the user's line and where the odd tensor was made, and
lets the run go on so that one run finds every mismatch a forward pass reaches.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

from devlint import names  # imports nothing but Python

STAND_IN = "meta"


def _torch_callables(qualified_names) -> set:
    """`torch.zeros` -> the function torch.zeros (names this torch version lacks are left out)."""
    attributes = (name.split(".", 1)[1] for name in qualified_names)
    return {getattr(torch, a) for a in attributes if hasattr(torch, a)}


# The static rules' vocabulary: the child watches the calls that DEV003 flags.
FACTORIES = _torch_callables(names.FACTORIES | {names.AS_TENSOR, names.FROM_NUMPY})
LEGACY = _torch_callables(names.LEGACY_CONSTRUCTORS)
# Ops where CUDA accepts CPU tensors beside device tensors (indices, copies), besides one 0-dim
# CPU scalar in an elementwise op.
TOLERATED = {"aten.copy_.default", "aten._to_copy.default", "aten.index.Tensor", "aten.index_put_.default",
             "aten.index_put.default", "aten._index_put_impl_.default", "aten.lift_fresh.default",
             "aten.masked_fill.Tensor", "aten.masked_fill_.Tensor"}
DATA_DEPENDENT = ("cannot be called on meta tensors", "data-dependent", "meta tensors", "DynamicOutputShape",
                  "data-independent implementation does not exist", "meta device type tensor to numpy",
                  "Cannot copy out of meta tensor")


class Recorder:
    """Everything the run saw, keyed to the user's file."""

    def __init__(self, user_file: str, target: str) -> None:
        self.user_file = user_file
        self.target = target  # "meta" (stand-in) or "cuda"
        self.origin = WeakTensorKeyDictionary()  # tensor -> row where the user's code made it
        self.events: list[dict] = []
        self.scenario = "move"
        self.attr_names: dict[int, set[str]] = {}  # id of a left-behind tensor -> attribute names

    def user_row(self) -> Optional[int]:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.user_file:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def event(self, kind: str, **data) -> None:
        self.events.append({"kind": kind, "scenario": self.scenario, **data})


def _is_cuda_device(value) -> Optional[str]:
    if isinstance(value, torch.device):
        return str(value) if value.type == "cuda" else None
    if isinstance(value, str) and value.split(":")[0] == "cuda":
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return f"cuda:{value}"
    return None


def _from_torch_nn() -> bool:
    """Whether the factory call comes from torch.nn's own layers (their parameters)."""
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if os.sep + "torch" + os.sep + "nn" + os.sep in name:
            return True
        frame = frame.f_back
    return False


class FunctionRecorder(TorchFunctionMode):
    """Where tensors are made (provenance), and every request for a CUDA device.

    On the stand-in, a CUDA request is recorded (on a CPU-only host it would raise
    `Torch not compiled with CUDA enabled`) and served with the stand-in device, so the run
    goes on. Parameters that torch.nn layers allocate go straight to the stand-in: a model of a
    billion parameters costs no memory.
    """

    def __init__(self, recorder: Recorder, params_on_stand_in: bool) -> None:
        super().__init__()
        self.rec = recorder
        self.params_on_stand_in = params_on_stand_in

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        rec = self.rec
        name = getattr(func, "__name__", "")
        row = None
        request = None
        if name == "cuda" and args and isinstance(args[0], torch.Tensor):
            index = args[1] if len(args) > 1 else kwargs.get("device")
            request = (_is_cuda_device(index) if index is not None else None) or "cuda"
            if rec.target == STAND_IN:
                func, args, kwargs = torch.Tensor.to, (args[0], STAND_IN), {}
        elif name == "to" and args and isinstance(args[0], torch.Tensor):
            device = kwargs.get("device", args[1] if len(args) > 1 else None)
            request = None if device is None or isinstance(device, (torch.dtype, torch.Tensor)) else _is_cuda_device(device)
            if request and rec.target == STAND_IN:
                if "device" in kwargs:
                    kwargs["device"] = STAND_IN
                else:
                    args = (args[0], STAND_IN, *args[2:])
        elif func in FACTORIES or func in LEGACY:
            device = kwargs.get("device")
            request = _is_cuda_device(device) if device is not None else None
            if request and rec.target == STAND_IN:
                kwargs["device"] = STAND_IN
            elif device is None and self.params_on_stand_in and func in FACTORIES and _from_torch_nn():
                kwargs["device"] = STAND_IN
        if request is not None:
            row = rec.user_row()
            rec.event("cuda-request", row=row, device=request)
        result = func(*args, **kwargs)
        if isinstance(result, torch.Tensor) and (func in FACTORIES or func in LEGACY):
            row = row if row is not None else rec.user_row()
            if row is not None:
                rec.event("factory", row=row, device=result.device.type)
                if result.device.type == "cpu":
                    rec.origin[result] = row
        elif isinstance(result, torch.Tensor) and result.device.type == "cpu":
            for arg in tree_flatten((args, kwargs))[0]:  # host-only ops keep their input's origin
                if isinstance(arg, torch.Tensor) and arg in rec.origin:
                    rec.origin[result] = rec.origin[arg]
                    break
        return result


class DispatchRecorder(TorchDispatchMode):
    """CUDA's placement rule, applied by devlint to every operation."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.rec = recorder

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        devices = {t.device.type for t in tensors}
        if "cpu" in devices and len(devices) > 1:
            cpu = [t for t in tensors if t.device.type == "cpu"]
            name = str(func)
            pointwise = torch.Tag.pointwise in getattr(func, "tags", ())
            tolerated = name in TOLERATED or (pointwise and len(cpu) == 1 and cpu[0].dim() == 0)
            origins = sorted({self.rec.origin[t] for t in cpu if t in self.rec.origin})
            target = "cuda:0"
            self.rec.event(
                "mix",
                verdict="benign" if tolerated else "confirmed",
                op=name,
                row=self.rec.user_row(),
                origin_rows=origins,
                attrs=sorted({a for t in cpu for a in self.rec.attr_names.get(id(t), ())}),
                message=(
                    f"{name} mixes a 0-dim CPU tensor with {target} tensors, which CUDA accepts"
                    if tolerated else
                    f"Expected all tensors to be on the same device, but found at least two devices, {target} and cpu! "
                    f"(in {name})"
                ),
            )
            other = next(t.device for t in tensors if t.device.type != "cpu")
            heal = lambda t: t.to(other) if isinstance(t, torch.Tensor) and t.device.type == "cpu" else t
            args, kwargs = tree_map(heal, args), tree_map(heal, kwargs)
        return func(*args, **kwargs)


# --- building modules and inputs -----------------------------------------------------------------
def import_user_file(path: Path) -> types.ModuleType:
    """Import `path` as part of its package (walking up `__init__.py` files), so relative imports work."""
    parts = [path.stem]
    root = path.parent
    while (root / "__init__.py").exists():
        parts.insert(0, root.name)
        root = root.parent
    sys.path.insert(0, str(root))
    if parts[-1] == "__init__":
        parts.pop()
    return importlib.import_module(".".join(parts))


def module_classes(module: types.ModuleType) -> list[type]:
    return [
        obj for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, torch.nn.Module) and obj.__module__ == module.__name__
    ]


def constructible(cls: type) -> bool:
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
          "int64": torch.int64, "long": torch.int64, "int32": torch.int32, "bool": torch.bool}


def make_inputs(specs: list[dict], device: str) -> tuple:
    out = []
    for spec in specs:
        dtype = DTYPES.get(spec.get("dtype", "float32"), torch.float32)
        if dtype.is_floating_point:
            out.append(torch.zeros(spec["shape"], dtype=dtype, device=device))
        else:
            out.append(torch.zeros(spec["shape"], dtype=dtype, device=device))
    return tuple(out)


def make_kwargs(values: dict, device: str) -> dict:
    """Keyword inputs: `{"shape": [...], "dtype": ...}` becomes a tensor, anything else is passed as is."""
    return {
        name: make_inputs([value], device)[0] if isinstance(value, dict) and "shape" in value else value
        for name, value in values.items()
    }


def input_guesses(model: torch.nn.Module, user_module, cls) -> list[tuple[str, list[dict]]]:
    """Candidate inputs, best first: user hook, Lightning/transformers attributes, the first layer."""
    guesses = []
    hook = getattr(user_module, "devlint_example_inputs", None)
    if callable(hook):
        value = hook(cls)
        if value is not None:
            tensors = value if isinstance(value, (tuple, list)) else (value,)
            guesses.append(("devlint_example_inputs()", [{"shape": list(t.shape), "dtype": str(t.dtype).split(".")[-1]} for t in tensors]))
    for attr in ("example_input_array", "dummy_inputs"):
        value = getattr(model, attr, None)
        if isinstance(value, torch.Tensor):
            guesses.append((attr, [{"shape": list(value.shape), "dtype": str(value.dtype).split(".")[-1]}]))
        elif isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
            guesses.append((attr, [{"shape": list(v.shape), "dtype": str(v.dtype).split(".")[-1]} for v in value]))
    try:
        forward_params = [
            p for p in list(inspect.signature(model.forward).parameters.values())
            if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        forward_params = []
    if len(forward_params) > 1:
        return guesses  # several required inputs: do not guess
    for layer in model.modules():
        if layer is model or list(layer.children()):
            continue
        if isinstance(layer, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)):
            spatial = {torch.nn.Conv1d: 1, torch.nn.Conv2d: 2, torch.nn.Conv3d: 3}[type(layer)]
            for size in (32, 28, 64, 224, 16):
                guesses.append((f"first layer {type(layer).__name__}", [{"shape": [2, layer.in_channels] + [size] * spatial}]))
        elif isinstance(layer, torch.nn.Linear):
            guesses.append(("first layer Linear", [{"shape": [2, layer.in_features]}]))
            guesses.append(("first layer Linear", [{"shape": [2, 8, layer.in_features]}]))
        elif isinstance(layer, torch.nn.Embedding):
            guesses.append(("first layer Embedding", [{"shape": [2, 8], "dtype": "int64"}]))
        elif isinstance(layer, torch.nn.RNNBase):
            shape = [2, 8, layer.input_size] if layer.batch_first else [8, 2, layer.input_size]
            guesses.append((f"first layer {type(layer).__name__}", [{"shape": shape}]))
        elif isinstance(layer, (torch.nn.LayerNorm,)):
            guesses.append(("first layer LayerNorm", [{"shape": [2, 8, *layer.normalized_shape]}]))
        else:
            continue
        break
    return guesses


def left_behind(model: torch.nn.Module, target: str, rec: Recorder) -> list[dict]:
    """Plain tensor attributes that `model.to(target)` did not move."""
    found = []
    for module in model.modules():
        for name, value in vars(module).items():
            values = value if isinstance(value, (list, tuple)) else list(value.values()) if isinstance(value, dict) else [value]
            for tensor in values:
                if isinstance(tensor, torch.Tensor) and not isinstance(tensor, torch.nn.Parameter) and tensor.device.type == "cpu":
                    rec.attr_names.setdefault(id(tensor), set()).add(name)
                    found.append({"attr": name, "module": type(module).__name__, "origin_row": rec.origin.get(tensor)})
    return found


def data_dependent(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in DATA_DEPENDENT)


def user_frame_row(exc: BaseException, user_file: str) -> Optional[int]:
    rows = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == user_file]
    return rows[-1] if rows else None


def run_class(cls, spec: dict, job: dict, user_module, rec: Recorder) -> dict:
    user_file = rec.user_file
    target = rec.target
    outcome: dict[str, Any] = {"class": cls.__name__, "status": "ran", "runs": []}
    kwargs = spec.get("init_kwargs")
    if kwargs is None:
        hook = getattr(user_module, "devlint_init_kwargs", None)
        kwargs = hook(cls) if callable(hook) else None
    if kwargs is None and not constructible(cls):
        outcome.update(status="not-run", reason=f"cannot build {cls.__name__}: its constructor needs arguments; "
                       f'add [tool.devlint.confirm.classes.{cls.__name__}] init-kwargs = {{...}}')
        return outcome
    rec.scenario = "build"
    try:
        with FunctionRecorder(rec, params_on_stand_in=target == STAND_IN), DispatchRecorder(rec):
            model = cls(**(kwargs or {}))
    except BaseException as exc:  # noqa: BLE001 - user code
        outcome.update(status="not-run", reason=f"constructing {cls.__name__}() raised {type(exc).__name__}: {exc}",
                       row=user_frame_row(exc, user_file))
        return outcome
    rec.scenario = "move"
    with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec):
        model.to(target if target == STAND_IN else "cuda")  # noqa: DEV005 (--device cuda asks for it)
    for item in left_behind(model, target, rec):
        rec.event("left-behind", **item)
    specs = spec.get("inputs")
    guesses = [("configuration", specs)] if specs else input_guesses(model, user_module, cls)
    if not guesses:
        outcome.update(status="not-run", reason=f"no inputs for {cls.__name__}.forward: add "
                       f"[tool.devlint.confirm.classes.{cls.__name__}] input-shapes = [[...]], or a "
                       f"devlint_example_inputs(cls) function to {Path(user_file).name}")
        return outcome
    modes = {"train": [True], "eval": [False], "both": [True, False]}[job.get("mode", "both")]
    device = STAND_IN if target == STAND_IN else "cuda"  # noqa: DEV005
    last_error = None
    for source, specs in guesses:
        runs = []
        try:
            for training in modes:
                model.train(training)
                rec.scenario = "train" if training else "eval"
                inputs = make_inputs(specs, device)
                extra = make_kwargs(spec.get("forward_kwargs") or {}, device)
                with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec), torch.no_grad():
                    model(*inputs, **extra)
                runs.append({"mode": rec.scenario, "inputs": specs, "source": source, "status": "ran"})
        except BaseException as exc:  # noqa: BLE001 - user code
            row = user_frame_row(exc, user_file)
            if data_dependent(exc):
                runs.append({"mode": rec.scenario, "status": "inconclusive", "row": row,
                             "reason": f"data-dependent code stopped the stand-in run at line {row}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
            elif "CUDA" in str(exc) or "cuda" in str(exc):
                rec.event("cuda-failure", row=row, message=f"{type(exc).__name__}: {exc}")
                runs.append({"mode": rec.scenario, "status": "ran", "source": source})
            elif not runs and (source, specs) != guesses[-1]:
                last_error = f"{type(exc).__name__}: {exc}"
                continue  # the guess did not fit the model: try the next one
            else:
                runs.append({"mode": rec.scenario, "status": "error", "row": row,
                             "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
        outcome["runs"] = runs
        if all(r["status"] == "ran" for r in runs):
            _cached_then_moved(cls, kwargs, specs, device, rec)
        return outcome
    outcome.update(status="not-run", reason=f"no input fitted {cls.__name__}.forward (last: {last_error})")
    return outcome


def _cached_then_moved(cls, kwargs, specs, device: str, rec: Recorder, max_params: int = 20_000_000) -> None:
    """The bug a single placement hides: a cache filled by a first forward on the CPU, then the
    model moved. Real CPU compute, so only for models of modest size."""
    probe = Recorder(rec.user_file, STAND_IN)
    try:
        with FunctionRecorder(probe, params_on_stand_in=True):
            size = sum(p.numel() for p in cls(**(kwargs or {})).parameters())
        if size > max_params:
            return
        model = cls(**(kwargs or {}))
        with torch.no_grad():
            model(*make_inputs(specs, "cpu"))
        rec.scenario = "cached"
        with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec):
            model.to(device)
        for item in left_behind(model, device, rec):
            rec.event("left-behind", **item)
        with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec), torch.no_grad():
            model(*make_inputs(specs, device))
    except BaseException:  # noqa: BLE001 - a best-effort extra scenario
        pass


def self_test() -> Optional[str]:
    """Refuse a torch whose stand-in does not behave: one mismatch must be seen, one scalar tolerated."""
    rec = Recorder(__file__, STAND_IN)
    try:
        with FunctionRecorder(rec, False), DispatchRecorder(rec):
            x = torch.ones(4, device=STAND_IN)
            _ = x + torch.ones(4)
            _ = x * torch.tensor(2.0)
            _ = x[0]
    except BaseException as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    verdicts = [e["verdict"] for e in rec.events if e["kind"] == "mix"]
    if verdicts[:2] != ["confirmed", "benign"]:
        return f"expected one confirmed and one benign device mix, saw {verdicts}"
    return None


def play_the_gpu() -> None:
    """On the stand-in, torch.cuda's housekeeping calls act as on a GPU host, so a module that
    synchronizes or asks for the current device still runs (placement is what is checked)."""
    for name, value in (("synchronize", None), ("empty_cache", None), ("current_device", 0),
                        ("device_count", 1), ("set_device", None)):
        setattr(torch.cuda, name, lambda *args, _value=value, **kwargs: _value)


def run(job: dict) -> dict:
    device = job.get("device", "auto")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "stand-in"
    target = STAND_IN if device == "stand-in" else "cuda"
    if target == STAND_IN:
        play_the_gpu()
        problem = self_test()
        if problem:
            return {"fatal": f"torch {torch.__version__}: the stand-in device failed its self-test ({problem}); "
                             "run `devlint confirm --device cuda` on a GPU machine, or another torch version"}
    path = Path(job["file"]).resolve()
    user_file = str(path)
    try:
        user_module = import_user_file(path)
    except BaseException as exc:  # noqa: BLE001 - user code
        return {"fatal": f"cannot import {path.name}: {type(exc).__name__}: {exc}", "row": user_frame_row(exc, user_file)}
    classes = module_classes(user_module)
    wanted = job.get("classes") or {}
    if job.get("only"):
        classes = [c for c in classes if c.__name__ == job["only"]]
        if not classes:
            return {"fatal": f"no nn.Module class named {job['only']} in {path.name}"}
    results = []
    values = job.get("values", "auto") if target == STAND_IN else "never"
    for cls in classes:
        outcome = run_with_values_policy(cls, wanted.get(cls.__name__, {}), job, user_module, Recorder(user_file, target), values)
        outcome["span"] = _span(cls)
        results.append(outcome)
    stand_in = STAND_IN_VALUES if values == "always" else "stand-in (meta)"
    return {"classes": results, "device": stand_in if target == STAND_IN else f"cuda ({torch.cuda.get_device_name()})"}


# --- the value stand-in ------------------------------------------------------------------------
STAND_IN_VALUES = "stand-in (meta, values)"
# `--values auto` re-runs a class with values only below this size: a value run computes for
# real on the CPU and holds every parameter (4 bytes each in float32) twice over.
VALUES_MAX_PARAMS = 50_000_000


def run_with_values_policy(cls, spec: dict, job: dict, user_module, rec: Recorder, values: str) -> dict:
    """`values`: never (meta only), always (values only), auto (meta, and values again for a class
    whose meta run stopped, mostly on code that needs data; the value run's events replace the
    meta run's)."""
    if values == "always":
        return _run_holding_values(cls, spec, job, user_module, rec)
    outcome = run_class(cls, spec, job, user_module, rec)
    outcome["events"] = rec.events
    stopped = any(r["status"] in ("inconclusive", "error") for r in outcome["runs"])
    if values == "auto" and stopped:
        size = parameter_count(cls, spec, user_module)
        if size is not None and size <= VALUES_MAX_PARAMS:
            again = _run_holding_values(cls, spec, job, user_module, Recorder(rec.user_file, rec.target))
            if again["status"] == "ran":
                return again
    return outcome


def _run_holding_values(cls, spec: dict, job: dict, user_module, rec: Recorder) -> dict:
    from devlint.confirm.values import value_run

    with value_run(rec):
        outcome = run_class(cls, spec, job, user_module, rec)
    outcome["events"] = rec.events
    outcome["device"] = STAND_IN_VALUES
    return outcome


def parameter_count(cls, spec: dict, user_module) -> Optional[int]:
    """Parameters and buffers of the class as built with no data (on the stand-in)."""
    try:
        kwargs = spec.get("init_kwargs")
        if kwargs is None:
            hook = getattr(user_module, "devlint_init_kwargs", None)
            kwargs = hook(cls) if callable(hook) else None
        probe = Recorder(inspect.getfile(cls), STAND_IN)
        with FunctionRecorder(probe, params_on_stand_in=True), DispatchRecorder(probe):
            model = cls(**(kwargs or {}))
        return sum(t.numel() for t in (*model.parameters(), *model.buffers()))
    except BaseException:  # noqa: BLE001 - user code; the meta run has reported it
        return None


def _span(cls) -> list[int]:
    try:
        lines, start = inspect.getsourcelines(cls)
        return [start, start + len(lines) - 1]
    except (OSError, TypeError):
        return [0, 0]


def main() -> None:
    channel = int(sys.argv[1])
    job = json.load(sys.stdin)
    try:
        result = run(job)
    except BaseException as exc:  # noqa: BLE001
        result = {"fatal": f"{type(exc).__name__}: {exc}"}
    with os.fdopen(channel, "w") as out:
        json.dump(result, out)


if __name__ == "__main__":
    main()
