"""CUDA's placement rule as data: what CUDA accepts and rejects when tensors on the CPU meet
tensors on the GPU, op by op, with the error text CUDA prints. Only the confirm child imports
this module (it imports torch).

Two parts:
- `decide(func, args, kwargs)`, `decide_call(func, args, kwargs)`: the rule the stand-in applies,
  to an aten op at dispatch, and to the few torch functions that compare devices before they
  dispatch anything (scaled_dot_product_attention, the RNNs and their cells).
- `TABLE`: one entry per case (a name, a callable that builds the case on a given device, CUDA's
  verdict and message, where the verdict comes from). The same callable runs on the stand-in and,
  where a GPU exists, on CUDA (`python -m devlint.confirm.placement_check`, and a test marked `cuda`).

Where the verdicts and messages come from. None of this was run on a GPU: it is read from the
torch sources and from the installed torch (2.13), and a GPU run is what confirms it.
- "codegen": an op with a CUDA kernel and `device_check: ExactSame` (the default) in
  `native_functions.yaml` gets a generated wrapper that compares each tensor argument, in schema
  order, with the first defined one, with no 0-dim exemption (torchgen's `gen_device_check`, and
  `check_and_update_common_device` in the installed `ATen/core/op_registration/adaption.h`). The
  `wrapper_CUDA_...` names were computed with the torchgen shipped with torch from its packaged
  yaml (a test recomputes them). The message template is the one in the installed libtorch;
  older torch printed `... found at least two devices, cuda:0 and cpu! (when checking argument
  for argument mat1 in method wrapper_CUDA_addmm)`.
- "TensorIterator": elementwise ops (`device_check: NoCheck`). `compute_types` takes the first
  non-CPU device as the common one and, when the op allows CPU scalars (binary ops, lerp), lets
  one 0-dim CPU input through; a second one is "Trying to pass too many CPU scalars to non-CPU
  kernel!". `build_ternary_op` (addcdiv) allows none; addcmul's CUDA kernel takes a 0-dim CPU
  `tensor2` and refuses one as `self` or `tensor1` with messages of its own (measured on real CUDA).
- Checks of their own, quoted from the torch sources (each string is in the installed libtorch):
  reading with an index checks the indices' device (`check_indices_on_cpu_or_selfdevice` in the
  `index` meta function) but putting does not (`_index_put_impl_`: `make_info` moves the indices
  to the indexed tensor's device); `masked_fill__cuda`; `where` (moves 0-dim CPU operands to the
  device); convolution (`check_input_same_type_as_parameters`); RNNs (`check_attributes` in
  RNN.cpp, whose message public reports of CUDA runs quote); scaled_dot_product_attention
  (`validate_sdpa_input`, the same check on every device: the stand-in prints it verbatim).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_flatten

STAND_IN = "meta"
ACCEPTS, REJECTS = "accepts", "rejects"

SAME_DEVICE = "Expected all tensors to be on the same device, but found at least two devices, {device} and cpu!"
TOO_MANY_SCALARS = "Trying to pass too many CPU scalars to non-CPU kernel!"
# addcmul's CUDA kernel (PointwiseOpsKernel.cu) on a 0-dim CPU `self` or `tensor1`
ADDCMUL_SCALAR = {
    "self": "CPU Scalar support for self argument is not supported when calling addcmul on CUDA tensors.",
    "tensor1": "CPU Scalar support for tensor1 argument is not supported when calling addcmul on CUDA tensors. "
               "However, CPU Scalar support for tensor2 is supported, please swap your tensor1 and tensor2 terms.",
}
CODEGEN = ("Expected all tensors to be on the same device, but got {arg} is on {bad}, different from other "
           "tensors on {common} (when checking argument in method {method})")
INDICES = "indices should be either on cpu or on the same device as the indexed tensor ({self})"
MASK = "expected self and mask to be on the same device, but got mask on {mask} and self on {self}"
CONV = "Input type ({input}) and weight type ({weight}) should be the same"
CONV_ONEDNN = " or input should be a MKLDNN tensor and weight is a dense tensor"
RNN = "Input and {name} tensors are not at the same device, found input tensor at {input} and {name} tensor at {other}"
SDPA = ("Expected query, key, and value to have the same device type, but got query.device: {q} "
        "key.device: {k} and value.device: {v} instead.")

# aten ops whose CUDA kernel runs the generated same-device check, with the wrapper's name.
CODEGEN_METHODS = {
    "mm": "wrapper_CUDA_mm", "addmm": "wrapper_CUDA_addmm", "bmm": "wrapper_CUDA_bmm",
    "baddbmm": "wrapper_CUDA_baddbmm", "dot": "wrapper_CUDA__dot", "vdot": "wrapper_CUDA__vdot",
    "addmv": "wrapper_CUDA_addmv", "addmv_": "wrapper_CUDA_addmv_", "index_select": "wrapper_CUDA__index_select",
    "gather": "wrapper_CUDA_gather",
    "scatter.src": "wrapper_CUDA_scatter_src", "scatter.value": "wrapper_CUDA_scatter_value",
    "scatter_add": "wrapper_CUDA_scatter_add", "scatter_reduce.two": "wrapper_CUDA_scatter_reduce_two",
    "index_add": "wrapper_CUDA_index_add", "index_copy": "wrapper_CUDA_index_copy", "take": "wrapper_CUDA__take",
    "_embedding_bag": "wrapper_CUDA___embedding_bag",
    "_embedding_bag_forward_only": "wrapper_CUDA___embedding_bag_forward_only",
    "isin.Tensor_Tensor": "wrapper_CUDA_isin_Tensor_Tensor", "isin.Tensor_Scalar": "wrapper_CUDA_isin_Tensor_Scalar",
    "isin.Scalar_Tensor": "wrapper_CUDA_isin_Scalar_Tensor",
    "native_layer_norm": "wrapper_CUDA__native_layer_norm", "native_batch_norm": "wrapper_CUDA__native_batch_norm",
    "_native_batch_norm_legit": "wrapper_CUDA___native_batch_norm_legit",
    "_native_batch_norm_legit.no_stats": "wrapper_CUDA_no_stats__native_batch_norm_legit",
    "_batch_norm_with_update": "wrapper_CUDA___batch_norm_with_update",
    "cudnn_batch_norm": "wrapper_CUDA__cudnn_batch_norm", "native_group_norm": "wrapper_CUDA__native_group_norm",
    "cat": "wrapper_CUDA_cat", "nll_loss_forward": "wrapper_CUDA_nll_loss_forward",
    "nll_loss2d_forward": "wrapper_CUDA__nll_loss2d_forward",
    "masked_scatter_": "wrapper_CUDA__masked_scatter_", "masked_select": "wrapper_CUDA__masked_select",
    "_thnn_fused_lstm_cell": "wrapper_CUDA___thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell": "wrapper_CUDA___thnn_fused_gru_cell",
    "_scaled_dot_product_efficient_attention": "wrapper_CUDA___scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention": "wrapper_CUDA___scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention": "wrapper_CUDA___scaled_dot_product_cudnn_attention",
    "searchsorted.Tensor": "wrapper_CUDA_Tensor_searchsorted", "bucketize.Tensor": "wrapper_CUDA_Tensor_bucketize",
    "clamp.Tensor": "wrapper_CUDA_clamp_Tensor", "_log_softmax": "wrapper_CUDA__log_softmax",
    "_softmax": "wrapper_CUDA__softmax", "cudnn_convolution": "wrapper_CUDA__cudnn_convolution",
    "histc": "wrapper_CUDA__histc", "bincount": "wrapper_CUDA__bincount", "_cdist_forward": "wrapper_CUDA___cdist_forward",
}
# Composite-explicit ops the stand-in sees whole, where CUDA checks inside the op they call.
AS_OP = {"masked_scatter": "masked_scatter_", "embedding": "index_select", "mv": "addmv_", "stack": "cat"}
COPIES = {"copy_", "_to_copy", "lift_fresh", "lift_fresh_copy", "_copy_from", "_copy_from_and_resize", "to"}
INDEXING = {"index", "_unsafe_index", "index_put", "index_put_", "_index_put_impl_", "_unsafe_index_put"}
MASKED_FILL = {"masked_fill", "masked_fill_"}
CONVOLUTIONS = {"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                "conv_transpose2d", "conv_transpose3d", "convolution_overrideable"}
# TensorIterator ops outside the pointwise tag that allow one CPU scalar (binary-op builders, lerp)
CPU_SCALAR_OPS = {"lerp", "lerp_", "mse_loss", "smooth_l1_loss", "huber_loss"}
# pointwise ops built with build_ternary_op, which allows no CPU scalar at all
NO_CPU_SCALAR_OPS = {"addcmul", "addcmul_", "addcdiv", "addcdiv_"}


@dataclass(frozen=True)
class Decision:
    verdict: str  # ACCEPTS or REJECTS
    message: str
    runs_on_cpu: bool = False  # CUDA would compute this one on the CPU (a put into a CPU tensor)


def _is_cpu(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "cpu"


def _is_device(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type != "cpu"


def shown(device: torch.device) -> str:
    """A device as CUDA's message would print it: the stand-in plays cuda:0."""
    return "cuda:0" if device.type == STAND_IN else str(device)


def legacy_type(t: torch.Tensor) -> str:
    """`torch.cuda.FloatTensor`, as `Tensor.type()` prints it on CUDA."""
    name = torch.zeros((), dtype=t.dtype).type().split(".", 1)[1]
    return f"torch.{name}" if t.device.type == "cpu" else f"torch.cuda.{name}"


def op_names(func) -> tuple[str, str]:
    """aten.scatter.src -> ("scatter", "scatter.src"); aten.mm.default -> ("mm", "mm")."""
    schema = func._schema
    base = schema.name.split("::", 1)[-1]
    return base, f"{base}.{schema.overload_name}" if schema.overload_name else base


def _schema_tensors(func, args, kwargs) -> list[tuple[str, torch.Tensor]]:
    """Tensor arguments in schema order (lists flattened), each with its argument's name."""
    out = []
    for i, arg in enumerate(func._schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        for t in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(t, torch.Tensor):
                out.append((arg.name, t))
    return out


def codegen_check(named: list[tuple[str, torch.Tensor]], method: str) -> Optional[Decision]:
    """The generated wrapper's check: each tensor against the first one's device."""
    common = None
    for name, t in named:
        if common is None:
            common = t.device
        elif t.device != common:
            return Decision(REJECTS, CODEGEN.format(arg=name, bad=shown(t.device), common=shown(common), method=method))
    return None


def _iterator_check(tensors: list[torch.Tensor], cpu_scalars: int) -> Decision:
    """TensorIterator: `cpu_scalars` 0-dim CPU inputs are allowed beside device tensors."""
    device = next(t.device for t in tensors if _is_device(t))
    scalars = [t for t in tensors if _is_cpu(t) and t.dim() == 0]
    if any(_is_cpu(t) and t.dim() != 0 for t in tensors):
        return Decision(REJECTS, SAME_DEVICE.format(device=shown(device)))
    if len(scalars) > cpu_scalars:
        return Decision(REJECTS, TOO_MANY_SCALARS if cpu_scalars else SAME_DEVICE.format(device=shown(device)))
    some, read = ("a 0-dim CPU tensor", "it") if len(scalars) == 1 else (f"{len(scalars)} 0-dim CPU tensors", "them")
    return Decision(ACCEPTS, f"{some} beside {shown(device)} tensors in an elementwise op, which CUDA accepts "
                             f"(it moves {read} to the device as numbers)")


def _addcmul_check(named, tensors: list[torch.Tensor]) -> Decision:
    """addcmul's CUDA kernel takes one 0-dim CPU `tensor2` (it reads it as a number) and refuses
    one as `self` or `tensor1`, with messages of its own (measured on an H100, torch 2.11)."""
    scalars = [name for name, t in named if _is_cpu(t) and t.dim() == 0]
    if any(_is_cpu(t) and t.dim() != 0 for t in tensors) or len(scalars) != 1:
        return _iterator_check(tensors, cpu_scalars=0)
    if scalars == ["tensor2"]:
        device = next(t.device for t in tensors if _is_device(t))
        return Decision(ACCEPTS, f"a 0-dim CPU tensor2 beside {shown(device)} tensors in addcmul, which CUDA reads "
                                 "as a number")
    return Decision(REJECTS, ADDCMUL_SCALAR[scalars[0]])


def decide(func, args, kwargs) -> Decision:
    """CUDA's verdict for an aten op whose tensor arguments are on the CPU and on a device."""
    try:
        return _decide(func, args, kwargs)
    except Exception:  # noqa: BLE001 - an argument layout the table did not foresee: the general rule
        return Decision(REJECTS, SAME_DEVICE.format(device="cuda:0") + f" (in {func})")


def _decide(func, args, kwargs) -> Decision:
    base, full = op_names(func)
    named = _schema_tensors(func, args, kwargs)
    tensors = [t for _, t in named] or [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    device = next(t.device for t in tensors if _is_device(t))
    if base in COPIES:
        return Decision(ACCEPTS, f"{full} copies between the CPU and {shown(device)}, which CUDA does")
    if base in INDEXING:
        return _indexing(base, args)
    if base in MASKED_FILL:
        self, mask = args[0], args[1]
        if self.device != mask.device:
            return Decision(REJECTS, MASK.format(mask=shown(mask.device), self=shown(self.device)))
        value = args[2] if len(args) > 2 else None
        if _is_cpu(value) and value.dim() == 0:
            return Decision(ACCEPTS, f"a 0-dim CPU value in {full}, which CUDA reads as a number")
        return Decision(REJECTS, SAME_DEVICE.format(device=shown(device)))
    if base in ("fill", "fill_") and len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].dim() == 0:
        # fill_(self, value) reads a value from another device with value.item()
        return Decision(ACCEPTS, f"a 0-dim value from another device in {full}, which CUDA reads as a number",
                        runs_on_cpu=_is_cpu(args[0]))
    if base == "where":
        # where_self_out moves every 0-dim CPU operand to the output's device
        return _iterator_check(tensors, cpu_scalars=len(tensors))
    if base in CONVOLUTIONS:
        return _convolution(args)
    if full in AS_OP or base in AS_OP:
        target = AS_OP.get(full, AS_OP.get(base))
        if target == "index_select":  # embedding(weight, indices) is weight.index_select(0, indices)
            named = [("self", args[0]), ("index", args[1])]
        elif target == "addmv_":  # mv(self, vec) is addmv_(empty(..., vec.options()), self, vec)
            named = [("self", args[1]), ("mat", args[0]), ("vec", args[1])]
        return codegen_check(named, CODEGEN_METHODS[target]) or Decision(ACCEPTS, "")
    method = CODEGEN_METHODS.get(full) or CODEGEN_METHODS.get(base)
    if method is not None:
        return codegen_check(named, method) or Decision(ACCEPTS, f"{full}: every tensor on one device")
    if base in ("addcmul", "addcmul_"):
        return _addcmul_check(named, tensors)
    if base in NO_CPU_SCALAR_OPS:
        return _iterator_check(tensors, cpu_scalars=0)
    if torch.Tag.pointwise in getattr(func, "tags", ()) or base in CPU_SCALAR_OPS:
        return _iterator_check(tensors, cpu_scalars=1)
    # not in the table: CUDA's general rule, no exemption outside elementwise ops
    return Decision(REJECTS, SAME_DEVICE.format(device=shown(device)) + f" (in {func})")


def _indexing(base: str, args) -> Decision:
    """Reading (`index`) checks the indices' device in its meta function; putting (`index_put_`)
    does not: `make_info` moves the indices to the indexed tensor's device, and only a 0-dim
    value is moved before TensorIterator compares the value with the indexed tensor."""
    self, indices = args[0], [t for t in args[1] if isinstance(t, torch.Tensor)]
    values = args[2] if base not in ("index", "_unsafe_index") and len(args) > 2 else None
    if _is_cpu(self) and values is None and any(_is_device(t) for t in indices):
        return Decision(REJECTS, INDICES.format(self="cpu"))
    if isinstance(values, torch.Tensor) and values.device != self.device and values.dim() != 0:
        common = values.device if _is_cpu(self) else self.device
        return Decision(REJECTS, SAME_DEVICE.format(device=shown(common)))
    where = "CPU tensor" if _is_cpu(self) else f"{shown(self.device)} tensor"
    return Decision(ACCEPTS, f"{base} with indices or a 0-dim value from another device into a {where}, "
                             "which CUDA moves to the indexed tensor's device", runs_on_cpu=_is_cpu(self))


def _convolution(args) -> Decision:
    x, weight = args[0], args[1]
    bias = args[2] if len(args) > 2 and isinstance(args[2], torch.Tensor) else None
    if x.device == weight.device and (bias is None or bias.device == x.device):
        return Decision(ACCEPTS, "")
    other, kind = (weight, "weight") if x.device != weight.device else (bias, "bias")
    text = CONV.format(input=legacy_type(x), weight=legacy_type(other)).replace("weight type", f"{kind} type")
    # a CPU float input picks the oneDNN backend, whose check says more
    if x.device.type == "cpu" and x.dtype == torch.float32 and torch.backends.mkldnn.is_available():
        text += CONV_ONEDNN.replace("weight is", f"{kind} is")
    return Decision(REJECTS, text)


# --- composite functions that check devices before they dispatch ------------------------------
RNN_FUNCTIONS = {"lstm", "gru", "rnn_tanh", "rnn_relu"}
RNN_CELLS = {"lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"}
CHECKED_CALLS = RNN_FUNCTIONS | RNN_CELLS | {"scaled_dot_product_attention"}  # names the function recorder hands to decide_call


def decide_call(func, args, kwargs) -> Optional[Decision]:
    """CUDA's verdict for a torch function that checks devices itself, before any aten op."""
    name = getattr(func, "__name__", "")
    if name == "scaled_dot_product_attention":
        q, k, v = (args + tuple(kwargs.get(n) for n in ("query", "key", "value")[len(args):]))[:3]
        if all(isinstance(t, torch.Tensor) for t in (q, k, v)) and not (q.device == k.device == v.device):
            return Decision(REJECTS, SDPA.format(q=shown(q.device), k=shown(k.device), v=shown(v.device)))
        return None
    # lstm(input, hx, params, has_biases, ...); the packed form has params fourth
    if name in RNN_FUNCTIONS and len(args) >= 4 and isinstance(args[0], torch.Tensor) \
            and isinstance(args[2], (list, tuple)) and not isinstance(args[3], (list, tuple)):
        x = args[0]
        hidden = list(args[1]) if isinstance(args[1], (list, tuple)) else [args[1]]
        for label, group in (("hidden", hidden), ("parameter", list(args[2]))):
            for t in group:
                if isinstance(t, torch.Tensor) and t.device != x.device:
                    return Decision(REJECTS, RNN.format(name=label, input=shown(x.device), other=shown(t.device)))
    # lstm_cell(input, hx, w_ih, w_hh, ...): for a CUDA input the cell computes matmul(hx, w_hh.t())
    # (mm, hx first); off CUDA it takes linear(hx, w_hh, b_hh) instead, whose message differs
    if name in RNN_CELLS and len(args) >= 4 and _is_device(args[0]) and isinstance(args[3], torch.Tensor):
        hidden = list(args[1]) if isinstance(args[1], (list, tuple)) else [args[1]]
        for h in hidden:
            if isinstance(h, torch.Tensor) and h.device != args[3].device:
                return Decision(REJECTS, CODEGEN.format(arg="mat2", bad=shown(args[3].device), common=shown(h.device),
                                                        method="wrapper_CUDA_mm"))
    return None


# --- the table ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    name: str
    family: str
    build: Callable[[str], Any]  # runs the case with device tensors on the given device
    verdict: str  # CUDA's: ACCEPTS or REJECTS
    message: str  # CUDA's text for a rejection, "" for an acceptance
    source: str


def _d(device, *shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype, device=device)


def _c(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


def _long(device, n=2):
    return torch.zeros(n, dtype=torch.long, device=device)


def _cg(arg, method, bad="cpu", common="cuda:0"):
    return CODEGEN.format(arg=arg, bad=bad, common=common, method=method)


def _lstm(device, hx_on_cpu):
    lstm = torch.nn.LSTM(4, 4).to(device)
    h = (_c(1, 2, 4), _c(1, 2, 4)) if hx_on_cpu else (_d(device, 1, 2, 4), _d(device, 1, 2, 4))
    return lstm(_d(device, 3, 2, 4), h)


def _mha(device):
    mha = torch.nn.MultiheadAttention(4, 1).to(device)
    q = _d(device, 3, 2, 4)
    return mha(q, _c(3, 2, 4), _c(3, 2, 4))


SD = SAME_DEVICE.format(device="cuda:0")
TABLE: list[Entry] = [
    # elementwise
    Entry("add: 1-d CPU tensor", "elementwise", lambda d: _d(d, 4) + _c(4), REJECTS, SD, "TensorIterator"),
    Entry("add: 0-dim CPU tensor", "elementwise", lambda d: _d(d, 4) + _c(()), ACCEPTS, "", "TensorIterator"),
    Entry("mul: 0-dim CPU tensor first", "elementwise", lambda d: _c(()) * _d(d, 4), ACCEPTS, "", "TensorIterator"),
    Entry("add_: 1-d CPU tensor in place", "elementwise", lambda d: _d(d, 4).add_(_c(4)), REJECTS, SD, "TensorIterator"),
    Entry("maximum: 0-dim CPU tensor", "elementwise", lambda d: torch.maximum(_d(d, 4), _c(())), ACCEPTS, "", "TensorIterator"),
    Entry("lerp: 0-dim CPU weight", "elementwise", lambda d: torch.lerp(_d(d, 4), _d(d, 4), _c(())), ACCEPTS, "",
          "TensorIterator (lerp allows CPU scalars)"),
    Entry("lerp: 0-dim CPU end and weight", "elementwise", lambda d: torch.lerp(_d(d, 4), _c(()), _c(())), REJECTS,
          TOO_MANY_SCALARS, "TensorIterator: at most one CPU scalar"),
    Entry("addcmul: 1-d CPU tensor1", "elementwise", lambda d: torch.addcmul(_d(d, 4), _c(4), _d(d, 4)), REJECTS, SD,
          "TensorIterator"),
    Entry("addcmul: 0-dim CPU tensor1", "elementwise", lambda d: torch.addcmul(_d(d, 4), _c(()), _d(d, 4)), REJECTS,
          ADDCMUL_SCALAR["tensor1"], "addcmul's CUDA kernel refuses a CPU scalar tensor1"),
    Entry("addcmul: 0-dim CPU self", "elementwise", lambda d: torch.addcmul(_c(()), _d(d, 4), _d(d, 4)), REJECTS,
          ADDCMUL_SCALAR["self"], "addcmul's CUDA kernel refuses a CPU scalar self"),
    Entry("addcmul: 0-dim CPU tensor2", "elementwise", lambda d: torch.addcmul(_d(d, 4), _d(d, 4), _c(())), ACCEPTS, "",
          "addcmul's CUDA kernel reads a CPU scalar tensor2 as a number"),
    Entry("addcdiv: 0-dim CPU tensor2", "elementwise", lambda d: torch.addcdiv(_d(d, 4), _d(d, 4), _c(())), REJECTS, SD,
          "TensorIterator: build_ternary_op allows no CPU scalar"),
    Entry("clamp: 0-dim CPU min tensor", "elementwise", lambda d: torch.clamp(_d(d, 4), min=_c(())), REJECTS,
          _cg("min", "wrapper_CUDA_clamp_Tensor"), "codegen (clamp.Tensor has device_check ExactSame)"),
    Entry("fill_: 0-dim CPU value", "elementwise", lambda d: _d(d, 4).fill_(_c(())), ACCEPTS, "",
          "fill_ reads a value on another device with value.item()"),
    Entry("where: 0-dim CPU other", "where", lambda d: torch.where(_d(d, 4, dtype=torch.bool), _d(d, 4), _c(())),
          ACCEPTS, "", "where_self_out moves 0-dim CPU operands"),
    Entry("where: 0-dim CPU condition and other", "where",
          lambda d: torch.where(_c((), dtype=torch.bool), _d(d, 4), _c(())), ACCEPTS, "", "where_self_out"),
    Entry("where: 1-d CPU other", "where", lambda d: torch.where(_d(d, 4, dtype=torch.bool), _d(d, 4), _c(4)),
          REJECTS, SD, "TensorIterator"),
    Entry("where: 1-d CPU condition", "where", lambda d: torch.where(_c(4, dtype=torch.bool), _d(d, 4), _d(d, 4)),
          REJECTS, SD, "TensorIterator"),
    Entry("matmul of a 2-d tensor: 0-dim CPU scalar is not elementwise", "elementwise",
          lambda d: torch.mm(_d(d, 2, 2), _c(2, 2)), REJECTS, _cg("mat2", "wrapper_CUDA_mm"), "codegen"),
    # copies
    Entry("copy_: CPU source into a device tensor", "copy", lambda d: _d(d, 4).copy_(_c(4)), ACCEPTS, "", "copy_"),
    Entry("to: CPU tensor to the device", "copy", lambda d: _c(4).to(d), ACCEPTS, "", "_to_copy"),
    # indexing
    Entry("index: CPU indices into a device tensor", "index", lambda d: _d(d, 4)[_c(2, dtype=torch.long)], ACCEPTS,
          "", "AdvancedIndex moves indices to the indexed tensor's device"),
    Entry("index: CPU and device indices mixed into a device tensor", "index",
          lambda d: _d(d, 2, 4)[_c(2, dtype=torch.long), _long(d)], ACCEPTS, "", "AdvancedIndex"),
    Entry("index: CPU bool mask into a device tensor", "index", lambda d: _d(d, 4)[_c(4, dtype=torch.bool)],
          ACCEPTS, "", "AdvancedIndex"),
    Entry("index: device indices into a CPU tensor", "index", lambda d: _c(4)[_long(d)], REJECTS,
          INDICES.format(self="cpu"), "check_indices_on_cpu_or_selfdevice"),
    Entry("index: device bool mask into a CPU tensor", "index", lambda d: _c(4)[_d(d, 4, dtype=torch.bool)], REJECTS,
          INDICES.format(self="cpu"), "check_indices_on_cpu_or_selfdevice"),
    Entry("index_put_: CPU indices into a device tensor", "index",
          lambda d: _d(d, 4).index_put_((_c(2, dtype=torch.long),), _d(d, 2)), ACCEPTS, "", "_index_put_impl_"),
    Entry("index_put_: 1-d CPU values into a device tensor", "index",
          lambda d: _d(d, 4).index_put_((_long(d),), _c(2)), REJECTS, SD, "make_index_put_iterator (TensorIterator)"),
    Entry("index_put_: device indices into a CPU tensor", "index",
          lambda d: _c(4).index_put_((_long(d),), _c(2)), ACCEPTS, "",
          "_index_put_impl_ has no index-device check; make_info moves the indices to the CPU"),
    Entry("index_put_: 0-dim device value into a CPU tensor", "index",
          lambda d: _c(4).index_put_((_c(2, dtype=torch.long),), _d(d, ())), ACCEPTS, "",
          "_index_put_impl_ moves a 0-dim value to the indexed tensor's device"),
    Entry("index_put_: device values into a CPU tensor", "index",
          lambda d: _c(4).index_put_((_c(2, dtype=torch.long),), _d(d, 2)), REJECTS, SD,
          "the put runs on the value's device (TensorIterator)"),
    # masked ops
    Entry("masked_fill: CPU mask on a device tensor", "masked", lambda d: _d(d, 4).masked_fill(_c(4, dtype=torch.bool), 1.0),
          REJECTS, MASK.format(mask="cpu", self="cuda:0"), "masked_fill__cuda"),
    Entry("masked_fill: device mask on a CPU tensor", "masked", lambda d: _c(4).masked_fill(_d(d, 4, dtype=torch.bool), 1.0),
          REJECTS, MASK.format(mask="cuda:0", self="cpu"), "masked_fill__cuda"),
    Entry("masked_fill: 0-dim CPU value tensor", "masked",
          lambda d: _d(d, 4).masked_fill(_d(d, 4, dtype=torch.bool), _c(())), ACCEPTS, "", "masked_fill__cuda (value.item())"),
    Entry("masked_scatter: CPU mask", "masked",
          lambda d: _d(d, 4).masked_scatter(_c(4, dtype=torch.bool), _d(d, 4)), REJECTS,
          _cg("mask", "wrapper_CUDA__masked_scatter_"), "codegen"),
    Entry("masked_select: CPU mask", "masked", lambda d: torch.masked_select(_d(d, 4), _c(4, dtype=torch.bool)),
          REJECTS, _cg("mask", "wrapper_CUDA__masked_select"), "codegen"),
    # gather/scatter family
    Entry("index_select: CPU index", "gather", lambda d: _d(d, 4).index_select(0, _c(2, dtype=torch.long)), REJECTS,
          _cg("index", "wrapper_CUDA__index_select"), "codegen"),
    Entry("index_select: device index into a CPU tensor", "gather", lambda d: _c(4).index_select(0, _long(d)),
          REJECTS, _cg("index", "wrapper_CUDA__index_select", bad="cuda:0", common="cpu"), "codegen"),
    Entry("gather: CPU index", "gather", lambda d: torch.gather(_d(d, 4), 0, _c(2, dtype=torch.long)), REJECTS,
          _cg("index", "wrapper_CUDA_gather"), "codegen"),
    Entry("scatter: CPU index", "gather", lambda d: _d(d, 4).scatter(0, _c(2, dtype=torch.long), _d(d, 2)), REJECTS,
          _cg("index", "wrapper_CUDA_scatter_src"), "codegen"),
    Entry("index_add: CPU index", "gather", lambda d: _d(d, 4).index_add(0, _c(2, dtype=torch.long), _d(d, 2)),
          REJECTS, _cg("index", "wrapper_CUDA_index_add"), "codegen"),
    Entry("take: CPU index", "gather", lambda d: torch.take(_d(d, 4), _c(2, dtype=torch.long)), REJECTS,
          _cg("index", "wrapper_CUDA__take"), "codegen"),
    Entry("isin: CPU test elements", "gather", lambda d: torch.isin(_d(d, 4), _c(2)), REJECTS,
          _cg("test_elements", "wrapper_CUDA_isin_Tensor_Tensor"), "codegen"),
    # embeddings
    Entry("embedding: CPU ids into a device table", "embedding",
          lambda d: F.embedding(_c(2, 3, dtype=torch.long), _d(d, 10, 4)), REJECTS,
          _cg("index", "wrapper_CUDA__index_select"), "embedding is weight.index_select(0, ids); codegen"),
    Entry("embedding: 0-dim CPU id into a device table", "embedding",
          lambda d: F.embedding(_c((), dtype=torch.long), _d(d, 10, 4)), REJECTS,
          _cg("index", "wrapper_CUDA__index_select"), "codegen: no 0-dim exemption"),
    Entry("embedding_bag: CPU ids and offsets", "embedding",
          lambda d: F.embedding_bag(_c(4, dtype=torch.long), _d(d, 10, 4), _c(2, dtype=torch.long)), REJECTS,
          _cg("indices", "wrapper_CUDA___embedding_bag_forward_only"),
          "codegen (without grad, embedding_bag runs _embedding_bag_forward_only)"),
    # matmul family
    Entry("mm: CPU mat2", "matmul", lambda d: torch.mm(_d(d, 2, 3), _c(3, 2)), REJECTS, _cg("mat2", "wrapper_CUDA_mm"),
          "codegen"),
    Entry("addmm: CPU mat1", "matmul", lambda d: torch.addmm(_d(d, 2), _c(2, 3), _d(d, 3, 2)), REJECTS,
          _cg("mat1", "wrapper_CUDA_addmm"), "codegen"),
    Entry("linear: CPU input into a device Linear", "matmul", lambda d: torch.nn.Linear(3, 2).to(d)(_c(4, 3)), REJECTS,
          _cg("mat1", "wrapper_CUDA_addmm"), "linear is addmm(bias, input, weight.t()); codegen"),
    Entry("bmm: CPU mat2", "matmul", lambda d: torch.bmm(_d(d, 2, 2, 3), _c(2, 3, 2)), REJECTS,
          _cg("mat2", "wrapper_CUDA_bmm"), "codegen"),
    Entry("baddbmm: CPU batch1", "matmul", lambda d: torch.baddbmm(_d(d, 2, 2, 2), _c(2, 2, 3), _d(d, 2, 3, 2)),
          REJECTS, _cg("batch1", "wrapper_CUDA_baddbmm"), "codegen"),
    Entry("matmul: CPU right operand", "matmul", lambda d: torch.matmul(_d(d, 2, 3), _c(3, 2)), REJECTS,
          _cg("mat2", "wrapper_CUDA_mm"), "matmul of 2-d tensors is mm; codegen"),
    Entry("dot: CPU tensor", "matmul", lambda d: torch.dot(_d(d, 3), _c(3)), REJECTS, _cg("tensor", "wrapper_CUDA__dot"),
          "codegen"),
    Entry("mv: CPU vector", "matmul", lambda d: torch.mv(_d(d, 2, 3), _c(3)), REJECTS,
          _cg("mat", "wrapper_CUDA_addmv_", bad="cuda:0", common="cpu"),
          "mv is addmv_(empty(..., vec.options()), self, vec): the result is made beside vec; codegen"),
    # convolution
    Entry("conv2d: CPU input into device weights", "convolution",
          lambda d: F.conv2d(_c(2, 3, 8, 8), _d(d, 4, 3, 3, 3)), REJECTS,
          CONV.format(input="torch.FloatTensor", weight="torch.cuda.FloatTensor") + CONV_ONEDNN,
          "Convolution.cpp check_input_same_type_as_parameters (oneDNN form for a CPU float input)"),
    Entry("conv2d: device input into CPU weights", "convolution",
          lambda d: F.conv2d(_d(d, 2, 3, 8, 8), _c(4, 3, 3, 3)), REJECTS,
          CONV.format(input="torch.cuda.FloatTensor", weight="torch.FloatTensor"),
          "Convolution.cpp check_input_same_type_as_parameters"),
    # norms
    Entry("layer_norm: CPU weight", "norm", lambda d: F.layer_norm(_d(d, 2, 4), (4,), _c(4), _d(d, 4)), REJECTS,
          _cg("weight", "wrapper_CUDA__native_layer_norm"), "codegen"),
    Entry("batch_norm: CPU running stats", "norm",
          lambda d: F.batch_norm(_d(d, 2, 3), _c(3), _c(3), _d(d, 3), _d(d, 3), training=False), REJECTS,
          _cg("running_mean", "wrapper_CUDA__native_batch_norm"),
          "codegen; a 2-d input takes native_batch_norm (cuDNN's cudnn_batch_norm needs 3+ dims)"),
    Entry("group_norm: CPU weight", "norm", lambda d: F.group_norm(_d(d, 2, 4, 3), 2, _c(4), _d(d, 4)), REJECTS,
          _cg("weight", "wrapper_CUDA__native_group_norm"), "codegen"),
    # recurrent
    Entry("LSTM: CPU hidden state", "rnn", lambda d: _lstm(d, hx_on_cpu=True), REJECTS,
          RNN.format(name="hidden", input="cuda:0", other="cpu"), "RNN.cpp check_attributes"),
    Entry("GRU: CPU hidden state", "rnn", lambda d: torch.nn.GRU(4, 4).to(d)(_d(d, 3, 2, 4), _c(1, 2, 4)), REJECTS,
          RNN.format(name="hidden", input="cuda:0", other="cpu"), "RNN.cpp check_attributes"),
    Entry("LSTMCell: CPU hidden state", "rnn",
          lambda d: torch.nn.LSTMCell(4, 4).to(d)(_d(d, 2, 4), (_c(2, 4), _c(2, 4))), REJECTS,
          _cg("mat2", "wrapper_CUDA_mm", bad="cuda:0", common="cpu"),
          "RNN.cpp LSTMCell on CUDA: matmul(hx, w_hh.t()) is mm; codegen"),
    Entry("GRUCell: CPU hidden state", "rnn", lambda d: torch.nn.GRUCell(4, 4).to(d)(_d(d, 2, 4), _c(2, 4)), REJECTS,
          _cg("mat2", "wrapper_CUDA_mm", bad="cuda:0", common="cpu"), "as LSTMCell"),
    # attention
    Entry("scaled_dot_product_attention: CPU key", "attention",
          lambda d: F.scaled_dot_product_attention(_d(d, 1, 2, 3, 4), _c(1, 2, 3, 4), _d(d, 1, 2, 3, 4)), REJECTS,
          SDPA.format(q="cuda:0", k="cpu", v="cuda:0"), "validate_sdpa_input"),
    Entry("MultiheadAttention: CPU key and value", "attention", _mha, REJECTS, _cg("mat1", "wrapper_CUDA_addmm"),
          "multi_head_attention_forward projects key with linear (3-d input with bias: addmm); codegen"),
    # cat / stack
    Entry("cat: CPU tensor", "cat", lambda d: torch.cat([_d(d, 2), _c(2)]), REJECTS, _cg("tensors", "wrapper_CUDA_cat"),
          "codegen"),
    Entry("cat: 0-dim-like 1-element CPU tensor", "cat", lambda d: torch.cat([_d(d, 2), _c(1)]), REJECTS,
          _cg("tensors", "wrapper_CUDA_cat"), "codegen"),
    Entry("stack: CPU tensor", "cat", lambda d: torch.stack([_d(d, 2), _c(2)]), REJECTS,
          _cg("tensors", "wrapper_CUDA_cat"), "stack is cat of unsqueezed tensors; codegen"),
    # losses
    Entry("cross_entropy: CPU target", "loss",
          lambda d: F.cross_entropy(_d(d, 2, 5), _c(2, dtype=torch.long)), REJECTS,
          _cg("target", "wrapper_CUDA_nll_loss_forward"), "cross_entropy is nll_loss(log_softmax); codegen"),
    Entry("nll_loss: CPU target", "loss", lambda d: F.nll_loss(_d(d, 2, 5), _c(2, dtype=torch.long)), REJECTS,
          _cg("target", "wrapper_CUDA_nll_loss_forward"), "codegen"),
    Entry("mse_loss: CPU target", "loss", lambda d: F.mse_loss(_d(d, 4), _c(4)), REJECTS, SD, "TensorIterator"),
]


def stand_in_verdict(entry: Entry, recorders) -> tuple[str, str]:
    """Run one entry on the stand-in under the child's recorders: (verdict, message)."""
    rec = recorders.Recorder(__file__, STAND_IN)
    stopped = None
    try:
        with recorders.FunctionRecorder(rec, False), recorders.DispatchRecorder(rec):
            entry.build(STAND_IN)
    except Exception as exc:  # noqa: BLE001 - data-dependent ops (a bool mask) stop meta after the decision
        stopped = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    mixes = [e for e in rec.events if e["kind"] == "mix"]
    if stopped and not mixes:
        return "error", stopped
    hit = next((e for e in mixes if e["verdict"] == "confirmed"), None)
    return (REJECTS, hit["message"]) if hit else (ACCEPTS, "")


def cuda_verdict(entry: Entry) -> tuple[str, str]:
    """Run one entry on the real GPU: (verdict, first line of CUDA's message)."""
    try:
        entry.build("cuda")
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - CUDA's answer
        return REJECTS, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ACCEPTS, ""
