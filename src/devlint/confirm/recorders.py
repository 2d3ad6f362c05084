"""What the confirm child records while the user's code runs: where each tensor was made (a
torch function mode), every request for a CUDA device (served with the stand-in on a machine
without one), and CUDA's verdict on every operation that mixes devices (a torch dispatch mode
applying devlint's table, devlint.confirm.placement); with the hooks the rules' own calls need
(`.numpy()`, moves, `torch.cuda` calls that raise without CUDA)."""
from __future__ import annotations

import inspect
import os
import sys
from typing import Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

from devlint.confirm import placement
from devlint.confirm.lines import CLOCK, LineTracer, Progress
from devlint.torchinfo import names

PROGRESS = Progress(None)  # the parent's view of where the run is (set by the child's `work`)
TRACER: Optional[LineTracer] = None  # the user's lines run (set by the child's `start_tracing`)

STAND_IN = "meta"
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
