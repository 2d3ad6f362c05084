"""The child process of `devlint confirm`: imports one user file, builds its modules, moves them
to the target device and runs them, recording every device event. Only this module (and the
warm process that forks it, devlint.confirm.zygote) imports torch.

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

import ast
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

from devlint.torchinfo import names
from devlint.confirm import placement
from devlint.confirm.options import INPUT_DTYPES
from devlint.confirm.lines import CLOCK, LineTracer, Progress

PROGRESS = Progress(None)
TRACER: Optional[LineTracer] = None

STAND_IN = "meta"
CACHED_RUN = "with a first forward on the CPU, then a move"
SCENARIO_PHASES = {"build": "its constructor", "move": "its move to the device", "train": "a training-mode forward",
                   "eval": "an eval-mode forward", "cached": "a forward on the CPU, then a move"}
ACTIVE: list = []  # the Recorder of the FunctionRecorder now entered (torch.cuda calls bypass the modes)


def _torch_callables(qualified_names) -> set:
    """`torch.zeros` -> the function torch.zeros (names this torch version lacks are left out)."""
    attributes = (name.split(".", 1)[1] for name in qualified_names)
    return {getattr(torch, a) for a in attributes if hasattr(torch, a)}


# The static rules' vocabulary: the child watches the calls that DEV003 flags.
FACTORIES = _torch_callables(names.FACTORIES | {names.AS_TENSOR, names.FROM_NUMPY})
LEGACY = _torch_callables(names.LEGACY_CONSTRUCTORS)
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
        self.owner = ""  # the class being run, for progress reports
        self.lines: dict[str, dict[int, int]] = {}  # scenario -> row -> clock at first execution
        self.scenario = "move"
        self.attr_names = WeakTensorKeyDictionary()  # a left-behind tensor, or one derived from it -> attribute names

    def user_row(self) -> Optional[int]:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.user_file:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def event(self, kind: str, **data) -> None:
        self.events.append({"kind": kind, "scenario": self.scenario, "seq": CLOCK.tick(), **data})

    @property
    def scenario(self) -> str:
        return self._scenario

    @scenario.setter
    def scenario(self, value: str) -> None:
        # each scenario collects the user's lines it runs, and tells the parent where the run is
        self._scenario = value
        if TRACER is not None and self.user_file == TRACER.filename:
            TRACER.sink = self.lines.setdefault(value, {})
            if self.owner:
                PROGRESS.send(f"{self.owner}: {SCENARIO_PHASES.get(value, value)}")


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


def _request_via(name: str) -> str:
    """What a CUDA request did: moved a whole module (Module.to/.cuda on the stack), moved a
    tensor, or made one."""
    frame = sys._getframe(2)
    marker = os.sep + os.path.join("torch", "nn", "modules", "module.py")
    while frame is not None:
        if frame.f_code.co_filename.endswith(marker) and frame.f_code.co_name in ("to", "cuda", "_apply"):
            return "module"
        frame = frame.f_back
    return "tensor" if name in ("to", "cuda") else "factory"


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

    def __enter__(self):
        if not ACTIVE:
            UNSEEN_FACTORIES.watch()
        ACTIVE.append(self.rec)
        return super().__enter__()

    def __exit__(self, *exc_info):
        ACTIVE.pop()
        if not ACTIVE:
            UNSEEN_FACTORIES.unwatch()
        return super().__exit__(*exc_info)

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        rec = self.rec
        name = getattr(func, "__name__", "")
        if name == "type":  # `x.type(torch.LongTensor)` while the constructors are watched
            args = tuple(a.original if isinstance(a, _Watched) else a for a in args)
        served = rule_call_before(rec, name, args, kwargs)
        if served is not None:
            return served[0]
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
            rec.event("cuda-request", row=row, device=request, via=_request_via(name))
        if name in placement.CHECKED_CALLS:
            args, kwargs = _checked_call(rec, func, args, kwargs)
        result = func(*args, **kwargs)
        rule_call_after(rec, name, args, result)
        derived = name.endswith("_like") and args and isinstance(args[0], torch.Tensor) and args[0] in rec.origin
        if isinstance(result, torch.Tensor) and (func in FACTORIES or func in LEGACY) and not derived:
            row = row if row is not None else rec.user_row()
            if row is not None:
                _made(rec, result, row)
        else:
            _inherit(rec, (args, kwargs), result)
        return result


def _made(rec: Recorder, tensor: torch.Tensor, row: int) -> None:
    rec.event("factory", row=row, device=tensor.device.type)
    if tensor.device.type == "cpu":
        rec.origin[tensor] = row


def _inherit(rec: Recorder, inputs, result) -> None:
    """CPU tensors an op makes from a traced CPU tensor keep its origin and attribute names (a
    slice of a left-behind table, `.float()` of a cache, each grid of `torch.meshgrid`)."""
    made = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor) and t.device.type == "cpu"]
    if not made:
        return
    sources = [t for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.device.type == "cpu"]
    origin = next((rec.origin[t] for t in sources if t in rec.origin), None)
    attrs = set().union(*(rec.attr_names.get(t, ()) for t in sources))
    for tensor in made:
        if origin is not None and tensor not in rec.origin:
            rec.origin[tensor] = origin
        if attrs:
            rec.attr_names.setdefault(tensor, set()).update(attrs)


class _Watched:
    """A torch constructor that bypasses torch function modes (`torch.from_numpy`, the legacy
    `torch.LongTensor(...)` types): called through this, what it makes is traced like a factory's
    result. It stands in for the original where types are checked (`isinstance`, `x.type(...)`)."""

    def __init__(self, original) -> None:
        self.original = original

    def __call__(self, *args, **kwargs):
        result = self.original(*args, **kwargs)
        rec = ACTIVE[-1] if ACTIVE else None
        if rec is not None and isinstance(result, torch.Tensor):
            row = rec.user_row()
            if row is not None:
                _made(rec, result, row)
        return result

    def __instancecheck__(self, value) -> bool:
        return isinstance(value, self.original)

    def __subclasscheck__(self, cls) -> bool:
        return issubclass(cls, self.original)

    def __getattr__(self, name):
        return getattr(self.original, name)


class _UnseenFactories:
    """Installs the `_Watched` constructors on `torch` while a FunctionRecorder is active."""

    def __init__(self, names_) -> None:
        self.names = [n for n in names_ if hasattr(torch, n)]
        self.saved: dict = {}

    def watch(self) -> None:
        self.saved = {n: getattr(torch, n) for n in self.names}
        for n, original in self.saved.items():
            setattr(torch, n, _Watched(original))

    def unwatch(self) -> None:
        for n, original in self.saved.items():
            setattr(torch, n, original)
        self.saved = {}


# `torch.Tensor` itself stays: torch's own code subclasses and checks it everywhere
UNSEEN_FACTORIES = _UnseenFactories(["from_numpy"] + sorted(n.split(".", 1)[1] for n in names.LEGACY_CONSTRUCTORS
                                                            if n != "torch.Tensor"))


class DispatchRecorder(TorchDispatchMode):
    """CUDA's placement rule (devlint.confirm.placement), applied by devlint to every operation."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.rec = recorder

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        devices = {t.device.type for t in tensors}
        if "cpu" in devices and len(devices) > 1:
            decision = placement.decide(func, args, kwargs)
            args, kwargs = record_mix(self.rec, str(func), decision, tensors, args, kwargs)
            return func(*args, **kwargs)
        result = func(*args, **kwargs)
        if devices == {"cpu"} and any(t in self.rec.origin or t in self.rec.attr_names for t in tensors):
            # torch's Python code (a mask converted inside multi_head_attention_forward) runs
            # below the function recorder; its ops still carry the origin
            _inherit(self.rec, tensors, result)
        return result


def record_mix(rec: Recorder, op: str, decision, tensors: list, args, kwargs):
    """Record CUDA's verdict on a mix of CPU and device tensors, and heal the arguments (the CPU
    tensors move to the device) so that the run goes on to the next mismatch."""
    cpu = [t for t in tensors if t.device.type == "cpu"]
    other = next(t.device for t in tensors if t.device.type != "cpu")
    rec.event(
        "mix",
        verdict="confirmed" if decision.verdict == placement.REJECTS else "benign",
        op=op,
        row=rec.user_row(),
        origin_rows=sorted({rec.origin[t] for t in cpu if t in rec.origin}),
        attrs=sorted({a for t in cpu for a in rec.attr_names.get(t, ())}),
        message=decision.message or f"{op} mixes CPU and {placement.shown(other)} tensors, which CUDA accepts",
    )
    if rec.target != STAND_IN and decision.verdict == placement.ACCEPTS:
        return args, kwargs  # a real GPU does what it accepts itself
    heal = lambda t: t.to(other) if isinstance(t, torch.Tensor) and t.device.type == "cpu" else t
    if decision.runs_on_cpu:  # the result stays on the CPU: stand-in tensors become CPU zeros (in range as indices)
        heal = lambda t: torch.zeros(t.shape, dtype=t.dtype) if isinstance(t, torch.Tensor) and t.device.type != "cpu" else t
    return tree_map(heal, args), tree_map(heal, kwargs)


def _checked_call(rec: Recorder, func, args, kwargs):
    """Composite functions that compare devices before dispatching anything (attention, RNNs):
    decide them here, as the dispatch recorder never sees a mixed op from them."""
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    devices = {t.device.type for t in tensors}
    if "cpu" in devices and len(devices) > 1:
        decision = placement.decide_call(func, args, kwargs)
        if decision is not None:
            return record_mix(rec, getattr(func, "__name__", str(func)), decision, tensors, args, kwargs)
    return args, kwargs


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


DTYPES = {name: getattr(torch, name) for name in INPUT_DTYPES}  # torch.long is torch.int64


def make_inputs(specs: list[dict], device: str) -> tuple:
    out = []
    for spec in specs:
        if "value" in spec or "error" in spec:
            out.append(given_input(spec, device))
            continue
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
    guesses = hook_guesses(user_module, cls)
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
    return guesses + holder_guesses(model, forward_params)


def hook_guesses(user_module, cls) -> list[tuple[str, list[dict]]]:
    """What `devlint_example_inputs(cls)` returns, as given: tensors keep their values and dtypes
    (each run moves them to its device), other values are passed as they are."""
    hook = getattr(user_module, "devlint_example_inputs", None)
    if not callable(hook):
        return []
    try:
        value = hook(cls)
    except Exception as exc:  # noqa: BLE001 - user code: the run reports it
        return [("devlint_example_inputs()", [{"error": f"devlint_example_inputs({cls.__name__}) raised {type(exc).__name__}: {exc}"}])]
    if value is None:
        return []
    values = value if isinstance(value, (tuple, list)) else (value,)
    return [("devlint_example_inputs()", [{"value": v} for v in values])]


def holder_guesses(model: torch.nn.Module, forward_params: list) -> list[tuple[str, list[dict]]]:
    """Inputs for modules no layer describes: a module with no parameters that holds tables
    (a positional encoding adds its table to an input of the table's width), and a forward
    that takes no input at all."""
    guesses = []
    if len(forward_params) == 1 and not any(True for _ in model.parameters()):
        widths = []
        for module in model.modules():
            for value in list(vars(module).values()) + list(module.buffers(recurse=False)):
                if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.is_floating_point():
                    if value.shape[-1] not in widths:
                        widths.append(value.shape[-1])
        for width in widths[:2]:
            guesses.append(("a table the module holds", [{"shape": [2, 4, width]}]))
            guesses.append(("a table the module holds", [{"shape": [2, width]}]))
    if not forward_params:
        guesses.append(("forward takes no input", []))
    return guesses


def given_input(spec: dict, device: str):
    if "error" in spec:
        raise RuntimeError(spec["error"])
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v
    return tree_map(move, spec["value"])


def describe_inputs(specs: list[dict]) -> list:
    """A run's inputs as JSON: shapes and dtypes, values other than tensors by their type."""
    def one(value):
        if isinstance(value, torch.Tensor):
            return {"shape": list(value.shape), "dtype": str(value.dtype).split(".")[-1]}
        return type(value).__name__
    return [tree_map(one, s["value"]) if "value" in s else s.get("error", s) for s in specs]


def left_behind(model: torch.nn.Module, target: str, rec: Recorder) -> list[dict]:
    """Plain tensor attributes that `model.to(target)` did not move."""
    found = []
    for module in model.modules():
        for name, value in vars(module).items():
            values = value if isinstance(value, (list, tuple)) else list(value.values()) if isinstance(value, dict) else [value]
            for tensor in values:
                if isinstance(tensor, torch.Tensor) and not isinstance(tensor, torch.nn.Parameter) and tensor.device.type == "cpu":
                    rec.attr_names.setdefault(tensor, set()).add(name)
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
    # the sizes the extra scenarios and the value stand-in are gated on, known once built
    outcome["params"] = sum(p.numel() for p in model.parameters())
    outcome["buffers"] = sum(b.numel() for b in model.buffers())
    rec.scenario = "move"
    with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec):
        model.to(target if target == STAND_IN else "cuda")  # noqa: DEV005 (--device cuda asks for it)
    for item in left_behind(model, target, rec):
        rec.event("left-behind", **item)
    hidden_modules(model, rec)
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
                runs.append({"mode": rec.scenario, "inputs": describe_inputs(specs), "source": source, "status": "ran"})
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
            cached = _cached_then_moved(cls, kwargs, specs, device, rec, outcome["params"])
            if cached is not None:
                outcome["cached"] = cached
            _built_for_device_then_moved_back(cls, kwargs, specs, rec)
        return outcome
    outcome.update(status="not-run", reason=f"no input fitted {cls.__name__}.forward (last: {last_error})")
    return outcome


def _cached_then_moved(cls, kwargs, specs, device: str, rec: Recorder, size: int,
                       max_params: int = 20_000_000) -> Optional[dict]:
    """The bug a single placement hides: a cache filled by a first forward on the CPU, then the
    model moved. Real CPU compute, so only for models of modest size. Every cache left behind is
    reported (the recorder heals each mix, so one run meets them all); None when the scenario
    ran through, else why it stopped or was skipped."""
    probe = Recorder(rec.user_file, STAND_IN)
    rec.scenario = "cached"  # the lines of this scenario, the CPU forward's included
    if size > max_params:
        return {"status": "skipped", "reason": f"{size:,} parameters: a first forward on the CPU would cost real compute"}
    stage = "building it for the CPU"
    try:
        model = cls(**(kwargs or {}))
        stage = "its first forward on the CPU"
        # provenance of what the CPU forward makes, so that a slice of a cache still names it
        with FunctionRecorder(probe, params_on_stand_in=False), torch.no_grad():
            model(*make_inputs(specs, "cpu"))
        for tensor, row in probe.origin.items():
            rec.origin[tensor] = row
        stage = "the move"
        with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec):
            model.to(device)
        for item in left_behind(model, device, rec):
            rec.event("left-behind", **item)
        hidden_modules(model, rec)
        stage = "the forward after the move"
        with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec), torch.no_grad():
            model(*make_inputs(specs, device))
    except BaseException as exc:  # noqa: BLE001 - user code; the verdicts give the reason
        row = user_frame_row(exc, rec.user_file)
        first = str(exc).splitlines()[0] if str(exc) else ""
        where = f" at line {row}" if row else ""
        return {"status": "inconclusive" if data_dependent(exc) else "error", "row": row,
                "reason": f"the run {CACHED_RUN} stopped in {stage}{where}: {type(exc).__name__}: {first}"}
    return None


# --- what DEV007-DEV012 show at run time ---------------------------------------------------------
MOVES = ("to", "cuda", "cpu")
NN_MODULE_STATE = set(vars(torch.nn.Module()))  # _parameters, _modules, hook dicts, training ...


def _shown(device: torch.device) -> str:
    """A device as the user's code would see it: the stand-in is the GPU."""
    return "cuda:0" if device.type == STAND_IN else str(device)


def _direct_user_row(rec: Recorder) -> Optional[int]:
    """The user's line when the user's code made the call itself (not torch on its behalf)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return frame.f_lineno if frame is not None and frame.f_code.co_filename == rec.user_file else None


def _to_host(args, kwargs) -> bool:
    """Whether `Tensor.to(...)` asks for the CPU."""
    device = kwargs.get("device", args[1] if len(args) > 1 else None)
    if isinstance(device, torch.Tensor):
        return device.device.type == "cpu"
    if isinstance(device, torch.device):
        return device.type == "cpu"
    return isinstance(device, str) and device.split(":")[0] == "cpu"


def rule_call_before(rec: Recorder, name: str, args, kwargs) -> Optional[tuple]:
    """`.numpy()` in the user's code is recorded with the device of its tensor (on CUDA it raises
    TypeError). On the stand-in, the user's copy to the host (`.cpu()`, `.to("cpu")`, `.numpy()`)
    of a stand-in tensor gives zeros of its shape, since meta tensors hold no data (recorded, so
    that a line the zeros steered away from is not called unreached without a word); returns
    `(result,)` when it serves the call."""
    tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if tensor is None or name not in ("numpy", "cpu", "to"):
        return None
    row = _direct_user_row(rec)
    if row is None:
        return None
    if name == "numpy":
        _once(rec, "numpy", row=row, device=_shown(tensor.device))
    # a value tensor (the value stand-in) holds its data: its own copy to the host gives that data
    on_stand_in = rec.target == STAND_IN and tensor.device.type == STAND_IN and not hasattr(tensor, "cpu_data")
    if not on_stand_in or (name == "to" and not _to_host(args, kwargs)):
        return None
    _once(rec, "host-copy", row=row)
    host = torch.zeros(tensor.shape, dtype=tensor.dtype)
    if name == "numpy":
        return (host.numpy(),)
    result = host if name == "cpu" else host.to(*args[1:], **kwargs)
    rule_call_after(rec, name, args, result)
    return (result,)


def rule_call_after(rec: Recorder, name: str, args, result) -> None:
    """A tensor move made by the user's code: whether it returned a copy (the tensor itself stays)."""
    if name not in MOVES or not args or not isinstance(args[0], torch.Tensor) or not isinstance(result, torch.Tensor):
        return
    row = _direct_user_row(rec)
    if row is None:
        return
    tensor = args[0]
    copied = result is not tensor and result.device != tensor.device
    if copied and tensor.device.type == "cpu" and tensor not in rec.origin:
        rec.origin[tensor] = row  # what stays behind is traced to the dropped move
    if copied and result.device.type == "cpu" and result not in rec.origin:
        rec.origin[result] = row  # a tensor put on the CPU here (`.to(self.device)`)
    _once(rec, "tensor-move", row=row, method=name, copied=copied, stayed=_shown(tensor.device),
          to=_shown(result.device), origin_row=rec.origin.get(tensor))


def _once(rec: Recorder, kind: str, **data) -> None:
    """One event per line, kind, scenario and outcome: forward passes repeat themselves."""
    seen = rec.__dict__.setdefault("rule_events_seen", set())
    key = (kind, rec.scenario, *sorted((k, str(v)) for k, v in data.items() if k != "origin_row"))
    if key not in seen:
        seen.add(key)
        rec.event(kind, **data)


def _container_items(value) -> list:
    """Items of a plain list, tuple or dict, and of those one level down."""
    if isinstance(value, torch.nn.Module) or not isinstance(value, (list, tuple, dict)):
        return []
    items = list(value.values()) if isinstance(value, dict) else list(value)
    nested = [i for item in items if isinstance(item, (list, tuple, dict)) and not isinstance(item, torch.nn.Module)
              for i in (item.values() if isinstance(item, dict) else item)]
    return items + nested


def hidden_modules(model: torch.nn.Module, rec: Recorder) -> None:
    try:
        _hidden_modules(model, rec)
    except Exception:  # noqa: BLE001 - user containers of any kind: the run goes on without this evidence
        pass


def _hidden_modules(model: torch.nn.Module, rec: Recorder, max_values: int = 50_000_000) -> None:
    """Modules and parameters in plain containers (DEV009): `model.to()` and `model.parameters()`
    do not see them. On the stand-in, torch.nn's layers were built straight on the stand-in, so the
    hidden ones are put back on the CPU, where the build would have left them. Mixes made inside a
    hidden module's forward name its attribute. Above `max_values` they stay on the stand-in
    (no real memory is spent) and are reported on the CPU all the same."""
    known = {id(t) for t in model.parameters()} | {id(t) for t in model.buffers()}
    budget = max_values
    for owner in model.modules():
        for name, value in list(vars(owner).items()):
            if name in NN_MODULE_STATE:
                continue
            items = _container_items(value)
            modules = [i for i in items if isinstance(i, torch.nn.Module)]
            loose = [i for i in items if isinstance(i, torch.nn.Parameter) and id(i) not in known]
            if not modules and not loose:
                continue
            for module in modules:
                tensors = list(module.parameters()) + list(module.buffers())
                size = sum(t.numel() for t in tensors)
                if (rec.target == STAND_IN and tensors and all(id(t) not in known for t in tensors)
                        and any(t.device.type == STAND_IN for t in tensors) and size <= budget):
                    budget -= size
                    module.to_empty(device="cpu")
                    with torch.no_grad():
                        for t in list(module.parameters()) + list(module.buffers()):
                            t.zero_()
            hidden = [t for m in modules for t in (*m.parameters(), *m.buffers()) if id(t) not in known] + loose
            if modules and not hidden and any(id(t) in known for m in modules for t in m.parameters()):
                continue  # references to registered submodules
            for tensor in hidden:
                rec.attr_names.setdefault(tensor, set()).add(name)
            for module in modules:
                _tag_mixes(module, name, rec)
            rec.event("hidden", attr=name, module=type(owner).__name__,
                      items=sorted({type(m).__name__ for m in modules} | ({"Parameter"} if loose else set())),
                      count=len(modules) + len(loose), tensors=len(hidden), numel=sum(t.numel() for t in hidden),
                      devices=sorted({"cpu" if rec.target == STAND_IN and t.device.type == STAND_IN else _shown(t.device)
                                      for t in hidden}))


def _tag_mixes(module: torch.nn.Module, attr: str, rec: Recorder) -> None:
    """Mixes recorded while `module` runs its forward are charged to `attr` as well."""
    starts: list[int] = []

    def enter(_module, _inputs):
        starts.append(len(rec.events))

    def leave(_module, _inputs, _output):
        for event in rec.events[starts.pop() if starts else 0:]:
            if event["kind"] == "mix" and attr not in event["attrs"]:
                event["attrs"] = sorted([*event["attrs"], attr])

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)


def _device_parameters(cls) -> list[str]:
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if "device" in p.name.lower() and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _built_for_device_then_moved_back(cls, kwargs, specs, rec: Recorder, max_params: int = 20_000_000) -> None:
    """DEV012 the other way round: built for the GPU (`device="cuda"` for each constructor
    parameter named for a device), then moved back to the CPU, where an attribute that kept the
    GPU device makes its tensors away from the weights. Real CPU compute, so for modest models."""
    names = [n for n in _device_parameters(cls) if n not in (kwargs or {})]
    if not names:
        return
    probe = Recorder(rec.user_file, rec.target)
    probe.scenario = "moved-back"
    try:
        with FunctionRecorder(probe, params_on_stand_in=rec.target == STAND_IN), DispatchRecorder(probe):
            model = cls(**(kwargs or {}), **{n: "cuda" for n in names})  # noqa: DEV005 (the scenario asks for it)
        if sum(p.numel() for p in model.parameters()) > max_params:
            return
        if rec.target == STAND_IN:
            model.to_empty(device="cpu")  # meta tensors hold nothing to copy; where they go is what counts
        else:
            model.to("cpu")
        probe.events.append({"kind": "moved-back", "scenario": "moved-back", "params": names})
        with FunctionRecorder(probe, params_on_stand_in=False), DispatchRecorder(probe), torch.no_grad():
            model(*make_inputs(specs, "cpu"))
    except BaseException:  # noqa: BLE001 - a best-effort extra scenario
        pass
    rec.events.extend(e for e in probe.events if e["kind"] in ("moved-back", "factory", "tensor-move", "mix"))


def watch_cuda_api() -> None:
    """Record each call the user's code makes to a `torch.cuda` function that raises without CUDA
    (DEV011, the table pinned in devlint.torchinfo.cuda_api); the call then goes on as before (on the
    stand-in, play_the_gpu's answer). Classes (streams, events, legacy types) are left alone:
    they fail by themselves, and the failure is recorded with its line."""
    from devlint.torchinfo import cuda_api

    for qualified in cuda_api.RAISES_WITHOUT_CUDA:
        *path, attribute = qualified.split(".")[1:]
        owner = torch
        try:
            for part in path:
                owner = getattr(owner, part, None)
            function = getattr(owner, attribute, None)
        except Exception:  # noqa: BLE001 - a submodule that fails to load lazily: nothing to watch there
            continue
        if owner is None or not (inspect.isfunction(function) or inspect.isbuiltin(function)):
            continue
        setattr(owner, attribute, _watched(qualified, function))


def _watched(qualified: str, function):
    def call(*args, **kwargs):
        rec = ACTIVE[-1] if ACTIVE else None
        caller = sys._getframe(1)
        if rec is not None and caller.f_code.co_filename == rec.user_file:
            _once(rec, "cuda-api", row=caller.f_lineno, name=qualified)
        return function(*args, **kwargs)
    call.__wrapped__ = function
    return call


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
    synchronizes or asks for the current device still runs (placement is what is checked), and
    code that picks `"cuda" if torch.cuda.is_available() else "cpu"` takes the GPU's branch."""
    for name, value in (("is_available", True), ("synchronize", None), ("empty_cache", None), ("current_device", 0),
                        ("device_count", 1), ("set_device", None)):
        setattr(torch.cuda, name, lambda *args, _value=value, **kwargs: _value)


def run(job: dict) -> dict:
    device = job.get("device", "auto")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "stand-in"
    target = STAND_IN if device == "stand-in" else "cuda"
    if target == STAND_IN:
        play_the_gpu()
    watch_cuda_api()
    if target == STAND_IN:
        problem = self_test()
        if problem:
            return {"fatal": f"torch {torch.__version__}: the stand-in device failed its self-test ({problem}); "
                             "run `devlint confirm --device cuda` on a GPU machine, or another torch version"}
    path = Path(job["file"]).resolve()
    user_file = str(path)
    import_lines = start_tracing(user_file)
    PROGRESS.send(f"importing {path.name}")
    try:
        user_module = import_user_file(path)
    except BaseException as exc:  # noqa: BLE001 - user code
        return {"fatal": f"cannot import {path.name}: {type(exc).__name__}: {exc}", "row": user_frame_row(exc, user_file),
                "import_lines": _pairs(import_lines)}
    classes = module_classes(user_module)
    wanted = job.get("classes") or {}
    if job.get("only"):
        classes = [c for c in classes if c.__name__ == job["only"]]
        if not classes:
            return {"fatal": f"no nn.Module class named {job['only']} in {path.name}"}
    results = []
    values = job.get("values", "auto") if target == STAND_IN else "never"
    for cls in classes:
        rec = Recorder(user_file, target)
        rec.owner = cls.__name__
        outcome, rec = run_with_values_policy(cls, wanted.get(cls.__name__, {}), job, user_module, rec, values)
        outcome["span"] = _span(cls)
        outcome["lines"] = {scenario: _pairs(rows) for scenario, rows in rec.lines.items()}
        results.append(outcome)
    built = []
    for item in job.get("constructions", []):
        rec = Recorder(user_file, target)
        built.append(run_construction(item, user_module, rec))
    stop_tracing()
    stand_in = STAND_IN_VALUES if values == "always" else "stand-in (meta)"
    return {"classes": results, "constructions": built, "device": stand_in if target == STAND_IN else f"cuda ({torch.cuda.get_device_name()})",
            "import_lines": _pairs(import_lines)}


# --- a module a script builds (DEV014, DEV015) ---------------------------------------------------
def run_construction(item: dict, user_module, rec: Recorder) -> dict:
    """Build the module a finding points at as its line builds it (the expression alone, with the
    file's module-level names), then call it on inputs on the device, as the script's code does:
    CPU weights meet them. A construction that needs names of the code around it is not run."""
    row, text = item["row"], item["source"]
    done: dict[str, Any] = {"row": row, "finding_row": item["finding_row"]}
    try:
        tree = ast.parse(text.strip(), mode="eval")
        ast.increment_lineno(tree, row - 1)  # the line the module's tensors are made on is the user's
        code = compile(tree, rec.user_file, "eval")
    except SyntaxError as exc:
        return {**done, "status": "not-run", "reason": f"cannot read the construction at line {row}: {exc}"}
    rec.scenario = "construction"
    try:
        with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec):
            module = eval(code, dict(vars(user_module)))  # noqa: S307 - the user's own expression, as their script runs it
    except NameError as exc:
        return {**done, "status": "not-run", "reason": f"the module built at line {row} needs {exc.name!r}, a name of "
                "the code around it; confirm builds a construction made only of the file's module-level names"}
    except BaseException as exc:  # noqa: BLE001 - user code
        return {**done, "status": "not-run", "reason": f"building the module at line {row} raised {type(exc).__name__}: {exc}"}
    if not isinstance(module, torch.nn.Module):
        return {**done, "status": "not-run", "reason": f"line {row} does not build an nn.Module ({type(module).__name__})"}
    tensors = [*module.named_parameters(), *module.named_buffers()]
    done["on_cpu"] = [name for name, t in tensors if t.device.type == "cpu"]
    if not done["on_cpu"]:
        where = sorted({t.device.type for _, t in tensors}) or ["nowhere: it holds no tensor"]
        return {**done, "status": "not-reproduced", "reason": f"the module built at line {row} holds its tensors on {', '.join(where)}"}
    device = STAND_IN if rec.target == STAND_IN else "cuda"  # noqa: DEV005 (--device cuda asks for it)
    for source, specs in construction_inputs(module, user_module):
        before = len(rec.events)
        try:
            inputs = make_inputs(specs, device)
            with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec), torch.no_grad():
                module(*inputs)
        except BaseException as exc:  # noqa: BLE001 - user code
            if "device" not in str(exc):
                continue  # the guess did not fit the module
            return {**done, "status": "confirmed", "inputs": describe_inputs(specs), "source": source,
                    "message": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
        mixes = [e for e in rec.events[before:] if e["kind"] == "mix"]
        if mixes:
            hit = next((e for e in mixes if e["verdict"] == "confirmed"), mixes[0])
            return {**done, "status": hit["verdict"], "inputs": describe_inputs(specs), "source": source,
                    "message": hit["message"]}
        return {**done, "status": "not-reproduced", "inputs": describe_inputs(specs), "source": source,
                "reason": "called on inputs on the device, it mixed nothing"}
    return {**done, "status": "inconclusive", "reason": f"no input fitted the module built at line {row}"}


def construction_inputs(module: torch.nn.Module, user_module) -> list[tuple[str, list[dict]]]:
    """Inputs for a module a script builds: a weighted loss takes scores and targets of its
    number of classes; any other module, what confirm guesses for a module class."""
    if isinstance(module, torch.nn.modules.loss._Loss):
        weight = getattr(module, "weight", None)
        weight = weight if isinstance(weight, torch.Tensor) else getattr(module, "pos_weight", None)
        classes = weight.numel() if isinstance(weight, torch.Tensor) else 2
        return [("scores and class targets", [{"shape": [2, classes]}, {"shape": [2], "dtype": "int64"}]),
                ("scores and targets", [{"shape": [2, classes]}, {"shape": [2, classes]}])]
    return input_guesses(torch.nn.Sequential(module), user_module, type(module))


def start_tracing(user_file: str) -> dict[int, int]:
    """Record the user's lines from here on; returns the sink of the import's own lines."""
    global TRACER
    TRACER = LineTracer(user_file)
    TRACER.start()
    return TRACER.sink


def stop_tracing() -> None:
    if TRACER is not None:
        TRACER.stop()


def _pairs(rows: dict[int, int]) -> list[list[int]]:
    return sorted([row, seq] for row, seq in rows.items())


# --- the value stand-in ------------------------------------------------------------------------
STAND_IN_VALUES = "stand-in (meta, values)"
# `--values auto` re-runs a class with values only below this size: a value run computes for
# real on the CPU and holds every parameter (4 bytes each in float32) twice over.
VALUES_MAX_PARAMS = 50_000_000


def run_with_values_policy(cls, spec: dict, job: dict, user_module, rec: Recorder, values: str) -> tuple[dict, Recorder]:
    """`values`: never (meta only), always (values only), auto (meta, and values again for a class
    whose meta run stopped, mostly on code that needs data; the value run's events and lines
    replace the meta run's). Returns the outcome and the recorder of the run that counts."""
    if values == "always":
        return _run_holding_values(cls, spec, job, user_module, rec), rec
    outcome = run_class(cls, spec, job, user_module, rec)
    outcome["events"] = rec.events
    stopped = any(r["status"] in ("inconclusive", "error") for r in outcome["runs"])
    # the data-less run served the user's copies to the host with zeros: its branches may not be the real ones
    zeros = any(e["kind"] == "host-copy" for e in rec.events)
    if values == "auto" and (stopped or zeros):
        if "params" in outcome and outcome["params"] + outcome["buffers"] <= VALUES_MAX_PARAMS:
            again_rec = Recorder(rec.user_file, rec.target)
            again_rec.owner = rec.owner
            again = _run_holding_values(cls, spec, job, user_module, again_rec)
            if again["status"] == "ran":
                return again, again_rec
    return outcome, rec


def _run_holding_values(cls, spec: dict, job: dict, user_module, rec: Recorder) -> dict:
    from devlint.confirm.values import value_run

    with value_run(rec):
        outcome = run_class(cls, spec, job, user_module, rec)
    outcome["events"] = rec.events
    outcome["device"] = STAND_IN_VALUES
    return outcome


def _span(cls) -> list[int]:
    try:
        lines, start = inspect.getsourcelines(cls)
        return [start, start + len(lines) - 1]
    except (OSError, TypeError):
        return [0, 0]


def main() -> None:
    os._exit(work(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None))


def work(channel: int, progress: Optional[int]) -> int:
    """Read the job on stdin, run it, write the result on `channel`; the exit status (0). The
    caller exits with it at once (`os._exit`): in a fresh interpreter (`main`) or a fork of a
    warm one (devlint.confirm.zygote)."""
    global PROGRESS
    PROGRESS = Progress(progress)
    PROGRESS.send("ready")  # torch is imported: the user's time starts with the import of the file
    job = json.load(sys.stdin)
    try:
        result = run(job)
    except BaseException as exc:  # noqa: BLE001
        result = {"fatal": f"{type(exc).__name__}: {exc}"}
    stop_tracing()
    PROGRESS.send("done")  # what follows (the result, the interpreter's exit) is not the file's time
    with os.fdopen(channel, "w") as out:
        json.dump(result, out)
    # the caller skips the interpreter's teardown (seconds with torch loaded): flush the user's output
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return 0


if __name__ == "__main__":
    main()
