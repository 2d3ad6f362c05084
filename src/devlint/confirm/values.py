"""The value stand-in: accelerator tensors that hold real data.

The meta stand-in has no values, so data-dependent code (`.item()`, `int(t)`, `nonzero`,
`x[x > 0]`, `if (x > 0).any():`) stops it. Here an accelerator tensor is a `ValueTensor`: a
wrapper subclass that reports the stand-in device (`meta`) to the user's code and to the
recorders, and keeps its data in a CPU tensor on which every operation really runs. The
recorders above stay in charge of placement: they see `meta` on value tensors and `cpu` on
tensors left behind, exactly as on the meta stand-in. Imported by the child process only.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only

STAND_IN = "meta"
CPU = torch.device("cpu")
# What CUDA says to `.numpy()` on a device tensor.
NUMPY_ERROR = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
               "memory first.")


# Outputs that CUDA kernels leave on the host: (op, index of the output)
HOST_OUTPUTS = {"aten._pack_padded_sequence.default": (1,)}  # batch_sizes
DATA_PROPERTY = torch._C.TensorBase.__dict__["data"]
DATA_FACTORIES = {torch.tensor, torch.as_tensor, torch.asarray}


class ValueTensor(torch.Tensor):
    """A tensor on the stand-in device whose data lives in `self.cpu_data`."""

    @staticmethod
    def __new__(cls, cpu_data: torch.Tensor, requires_grad: Optional[bool] = None):
        return torch.Tensor._make_wrapper_subclass(
            cls, cpu_data.shape, strides=cpu_data.stride(), storage_offset=cpu_data.storage_offset(),
            dtype=cpu_data.dtype, layout=cpu_data.layout, device=STAND_IN,
            requires_grad=cpu_data.requires_grad if requires_grad is None else requires_grad,
        )

    def __init__(self, cpu_data: torch.Tensor, requires_grad: Optional[bool] = None) -> None:
        self.cpu_data = cpu_data

    def __repr__(self) -> str:
        return f"ValueTensor({self.cpu_data!r}, device='{STAND_IN}')"

    def __format__(self, spec: str) -> str:
        # torch formats 0-dim tensors by value, but only plain non-meta ones
        return self.cpu_data.__format__(spec) if self.dim() == 0 else object.__format__(repr(self), spec)

    # a traceable wrapper subclass: Module._apply swaps such parameters in place
    def __tensor_flatten__(self):
        return ["cpu_data"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return ValueTensor(inner["cpu_data"])

    @classmethod
    def __torch_dispatch__(cls, func, types_, args=(), kwargs=None):
        return run_on_values(func, args, kwargs or {})


def _is_stand_in(device) -> bool:
    return device is not None and torch.device(device).type == STAND_IN


def run_on_values(func, args, kwargs):
    """Run `func` on the CPU data of its value tensors; its tensor results are value tensors
    again, unless the operation asks for another device (`.cpu()`, `.to("cpu")`)."""
    wrappers = {}

    def unwrap(t):
        wrappers[id(t.cpu_data)] = t
        return t.cpu_data

    args, kwargs = tree_map_only(ValueTensor, unwrap, (args, kwargs))
    wrap = bool(wrappers)
    if "device" in kwargs and kwargs["device"] is not None:
        wrap = _is_stand_in(kwargs["device"])
        if wrap:
            kwargs = {**kwargs, "device": CPU}
    out = func(*args, **kwargs)
    if not wrap:
        return out
    if torch.Tag.inplace_view in func.tags and id(out) in wrappers:
        # `x.transpose_(0, 1)` changed the data's shape: the wrapper, which holds only metadata,
        # takes the same change
        with torch._C._DisableTorchDispatch():
            func(wrappers[id(out)], *args[1:], **kwargs)
    # an in-place or out= result is the very tensor the user holds
    wrapped = tree_map_only(torch.Tensor, lambda t: wrappers[id(t)] if id(t) in wrappers else ValueTensor(t), out)
    host = HOST_OUTPUTS.get(str(func), ())
    return tuple(out[i] if i in host else w for i, w in enumerate(wrapped)) if host else wrapped


class ValueMode(TorchDispatchMode):
    """Below the recorders: tensors asked for on the stand-in device (factories, moves, the
    healing of a mix) become value tensors, and every operation runs on the data."""

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        return run_on_values(func, args, kwargs or {})


class ValueFunctions(TorchFunctionMode):
    """What the dispatcher does not see: `.numpy()` on a device tensor, which CUDA refuses (the
    refusal is recorded as a confirmed mismatch and the run goes on with the data, so one run
    finds every mismatch); `.tolist()`, `param.data = ...`, and `torch.tensor(data, device=...)`,
    which copies its data below the dispatcher's modes."""

    def __init__(self, recorder) -> None:
        super().__init__()
        self.rec = recorder

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in DATA_FACTORIES and _is_stand_in(kwargs.get("device")):
            # these copy their data to the device below the dispatcher's modes: make them on the
            # CPU and wrap them, or the data would be lost
            result = func(*args, **{**kwargs, "device": CPU})
            return ValueTensor(result.detach(), requires_grad=result.requires_grad)
        if getattr(func, "__self__", None) is DATA_PROPERTY and func.__name__ == "__set__" and isinstance(args[0], ValueTensor):
            func(*args, **kwargs)  # `param.data = value`: the wrapper takes the new shape, and the data
            args[0].cpu_data = args[1].cpu_data if isinstance(args[1], ValueTensor) else args[1]
            return None
        if getattr(func, "__name__", "") == "tolist" and args and isinstance(args[0], ValueTensor):
            return args[0].cpu_data.tolist()  # CUDA copies to the host for it
        if getattr(func, "__name__", "") in ("numpy", "__array__") and args and isinstance(args[0], torch.Tensor):
            name = f"Tensor.{func.__name__}"
            row = self.rec.user_row()
            on_device = isinstance(args[0], ValueTensor)
            self.rec.event("numpy", row=row, device="cuda:0" if on_device else args[0].device.type)  # noqa: DEV005 (a label)
            if not on_device:
                return func(*args, **kwargs)
            self.rec.event("mix", verdict="confirmed", op=name, row=row, origin_rows=[], attrs=[],
                           message=f"TypeError: {NUMPY_ERROR} (in {name})")
            return func(args[0].cpu_data, *args[1:], **kwargs)
        return func(*args, **kwargs)


@contextmanager
def value_run(recorder):
    """While active, the stand-in device holds values."""
    with ValueMode(), ValueFunctions(recorder):
        yield
