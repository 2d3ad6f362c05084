"""What an expression holds, as far as the syntax tells: questions shared by the rules that
follow tensors (DEV003, DEV004, DEV007, DEV008)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import libcst as cst

from devlint.core import syntax
from devlint.semantic import bindings
from devlint.torchinfo import names

PARAMETER_CLASSES = frozenset(
    {"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer", "torch.nn.parameter.Buffer"}
)
# The view attributes followed to the tensor (`mH`, `real`, `imag` are not: following them would
# widen DEV004's findings).
VIEWS_FOLLOWED = names.TENSOR_VIEW_ATTRIBUTES - {"mH", "real", "imag"}


def is_dtype_only_move(call: cst.Call, facts) -> bool:
    """`.to(torch.float16)` / `.to(dtype=...)` converts but does not move."""
    if not call.args or any(a.star for a in call.args):
        return False
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value not in ("dtype", "non_blocking", "copy", "memory_format"):
                return False
        elif not _is_dtype(arg.value, facts):
            return False
    return True


def _names_cuda_type(expr: cst.BaseExpression, facts) -> bool:
    """`torch.cuda.FloatTensor` (or its string): a legacy CUDA tensor type; or a module-level name
    bound to one where CUDA is there (`Tensor = torch.cuda.FloatTensor if cuda else
    torch.FloatTensor`): a copy onto the GPU wherever there is one."""
    if isinstance(expr, cst.Name) and expr.value in facts.cuda_type_aliases:
        return True
    return names.is_legacy_cuda_type(facts.resolve(expr) or syntax.string_value(expr) or "")


# What a tensor is, not where its data lives: reading one of these meets no other tensor.
_WHAT_IT_IS = frozenset({"shape", "dtype", "ndim", "size", "dim", "numel"})


def reads_only_what_it_is(path: Sequence[cst.CSTNode]) -> bool:
    """The read path[-1] asks only what the tensor is: its `.shape`, `.dtype`, `.ndim`, `.size()`,
    `.dim()`, `.numel()`; its `.device` or `.is_cuda` in a comparison or a test; whether it `is
    None`; or its type (`isinstance(t, torch.Tensor)`). Such a read meets no other tensor (a
    `.device` passed on does place what it makes)."""
    read, parent = path[-1], path[-2] if len(path) > 1 else None
    if isinstance(parent, cst.Arg) and parent.value is read and len(path) > 2:
        call = path[-3]
        return (isinstance(call, cst.Call) and syntax.dotted_name(call.func) == "isinstance"
                and call.args[0] is parent)
    if isinstance(parent, cst.Attribute) and parent.value is read:
        if parent.attr.value in _WHAT_IT_IS:
            return True
        if parent.attr.value in ("device", "is_cuda") and len(path) > 2:
            holder = path[-3]
            return isinstance(holder, (cst.Comparison, cst.ComparisonTarget, cst.If, cst.UnaryOperation))
        return False
    return isinstance(parent, cst.Comparison) and parent.left is read and all(
        isinstance(c.operator, (cst.Is, cst.IsNot)) for c in parent.comparisons)


def through_casts(path: Sequence[cst.CSTNode], index: int, read: cst.CSTNode, facts):
    """`typing.cast(T, v)` returns `v` itself: where the read `read` (whose parent is
    `path[index]`) is the value of such a call, the call is the read. Returns the read and the
    index of its parent."""
    while index >= 1 and isinstance(path[index], cst.Arg) and path[index].value is read:
        call = path[index - 1]
        if not (isinstance(call, cst.Call) and len(call.args) == 2 and call.args[1] is path[index]
                and call.args[1].keyword is None and facts.resolve(call.func) == "typing.cast"):
            break
        read, index = call, index - 2
    return read, index


def is_move(call: cst.Call, facts) -> bool:
    """A method call that moves its receiver: `.to(d)` (not `.to(dtype)`), `.cuda()`,
    `.type_as(t)`, `.type(torch.cuda.FloatTensor)`, and `.type(t.type())`, whose type string
    names t's device (`torch.cuda.FloatTensor` for a CUDA t) like `.type_as(t)`.
    `.type(torch.float)` only casts."""
    if not isinstance(call.func, cst.Attribute) or facts.resolve(call.func) is not None:
        return False
    method = call.func.attr.value
    if method == "to":
        return not is_dtype_only_move(call, facts)
    if method == "type":
        args = syntax.positional(call)
        given = args[0].value if len(args) == 1 and len(call.args) == 1 else None
        if given is not None and _names_cuda_type(given, facts):
            return True  # `.type(torch.cuda.FloatTensor)`: a copy onto the current GPU
        return (
            isinstance(given, cst.Call) and isinstance(given.func, cst.Attribute) and given.func.attr.value == "type"
            and not given.args and facts.resolve(given.func) is None
        )
    return method in names.MOVES


# Functions (and the forward of loss classes) that take some arguments on the host whatever device
# the others are on: (qualified name, {position: keyword}) of those arguments. CTC targets and
# lengths may stay on the CPU (cuDNN wants them there); `pack_padded_sequence` wants its lengths
# there; sizes (`F.pad`'s widths, `F.interpolate`'s size) are read as Python numbers.
HOST_ARGUMENTS = {
    "torch.nn.functional.ctc_loss": {1: "targets", 2: "input_lengths", 3: "target_lengths"},
    "torch.nn.CTCLoss": {1: "targets", 2: "input_lengths", 3: "target_lengths"},
    "torch.nn.utils.rnn.pack_padded_sequence": {1: "lengths"},
    # sizes, read as Python numbers (a one-element tensor given there is converted, not met)
    "torch.nn.functional.pad": {1: "pad"},
    "torch.nn.functional.interpolate": {1: "size", 2: "scale_factor"},
    "torch.nn.functional.upsample": {1: "size", 2: "scale_factor"},
    "torch.nn.functional.adaptive_avg_pool1d": {1: "output_size"},
    "torch.nn.functional.adaptive_avg_pool2d": {1: "output_size"},
    "torch.nn.functional.adaptive_avg_pool3d": {1: "output_size"},
    "torch.nn.functional.adaptive_max_pool1d": {1: "output_size"},
    "torch.nn.functional.adaptive_max_pool2d": {1: "output_size"},
    "torch.nn.functional.adaptive_max_pool3d": {1: "output_size"},
    "torch.reshape": {1: "shape"},
    "torch.onnx.operators.reshape_from_tensor_shape": {1: "shape"},
    "torch.roll": {1: "shifts", 2: "dims"},
    "torch.tile": {1: "dims"},
    "torch.flip": {1: "dims"},
    # a tensor of split points must be on the CPU, whatever device the split tensor is on
    "torch.tensor_split": {1: "indices_or_sections"},
}


def is_host_argument(callee: Optional[str], call: cst.Call, arg: cst.Arg) -> bool:
    """Whether `arg` is one that `callee` (a qualified name from HOST_ARGUMENTS: a function, or
    a loss class whose instance is called) takes on the host (see HOST_ARGUMENTS)."""
    slots = HOST_ARGUMENTS.get(callee or "")
    if slots is None or arg.star:
        return False
    if arg.keyword is not None:
        return arg.keyword.value in slots.values()
    positional = syntax.positional(call)
    return arg in positional and positional.index(arg) in slots


# The Python types torch takes as dtypes: `x.to(bool)` is `x.to(torch.bool)`.
_PYTHON_DTYPES = frozenset({"bool", "int", "float", "complex"})


def _is_dtype(expr: cst.BaseExpression, facts) -> bool:
    """`torch.float16`, a Python type torch takes for one (`x.to(bool)`), or a name or attribute
    that says it holds a dtype (`x.to(y.dtype)`, `x.to(self.compute_dtype)`)."""
    if facts.resolve(expr) in names.DTYPE_NAMES:
        return True
    if isinstance(expr, cst.Name) and facts.resolve(expr) is None and (
            expr.value in _PYTHON_DTYPES or expr.value in _names_bound_only_to_dtypes(facts)):
        return True
    return isinstance(expr, (cst.Name, cst.Attribute)) and "dtype" in (syntax.last_name(expr) or "").lower()


def _names_bound_only_to_dtypes(facts) -> frozenset[str]:
    """The names every binding of which in the file, in any scope, is a plain assignment of a
    torch dtype (`T_FLOAT = torch.float64`): wherever such a name is read, it holds a dtype."""
    found = facts.memo.get("values.dtype-names")
    if found is None:
        bound: dict[str, bool] = {}  # name -> whether every binding seen is a dtype
        for node in syntax.walk(facts.module):
            if isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)):
                bound[node.name.value] = False
                continue
            if isinstance(node, cst.ImportAlias) and node.asname is None:
                bound[syntax.dotted_name(node.name).split(".")[0]] = False
                continue
            if isinstance(node, (cst.Assign, cst.AnnAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                is_dtype = node.value is not None and facts.resolve(node.value) in names.DTYPE_NAMES
            elif isinstance(node, (cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.AsName)):
                targets, is_dtype = [node.name if isinstance(node, cst.AsName) else node.target], False
            else:
                continue
            for target in targets:
                for leaf in syntax.unpacked_targets(target):  # a part of a tuple target is not followed
                    if isinstance(leaf, cst.Name):
                        bound[leaf.value] = bound.get(leaf.value, True) and is_dtype and leaf is target
        found = facts.memo["values.dtype-names"] = frozenset(name for name, only in bound.items() if only)
    return found


# Methods whose result lives on the host whatever the tensor was on: a CPU tensor, a NumPy array,
# a Python list or number. Anything computed only from such results lives there too.
HOST_METHODS = frozenset({"cpu", "numpy", "tolist", "item"})
# torch functions whose tensor is made on the CPU whatever their input: a shape as a tensor
HOST_FUNCTIONS = frozenset({"torch.onnx.operators.shape_as_tensor", "torch._shape_as_tensor"})


def is_host_call(call: cst.BaseExpression, facts) -> bool:
    """`x.cpu()`, `x.numpy()`, `x.tolist()`, `x.item()`, `x.to("cpu")`, `x.type(torch.LongTensor)`:
    a value on the host."""
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute) or facts.resolve(call.func) is not None:
        return False
    method = call.func.attr.value
    return method in HOST_METHODS or (method == "to" and to_cpu(facts, call)) or is_cpu_type_cast(call, facts)


def is_cpu_type_cast(call: cst.Call, facts) -> bool:
    """`x.type(torch.FloatTensor)` (or its string): a legacy CPU tensor type, which copies `x`
    onto the CPU whatever its device; also through a module-level name bound only to one
    (`float_type = torch.DoubleTensor`, then `x.type(float_type)`)."""
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "type" or len(call.args) != 1:
        return False
    given = call.args[0].value
    if call.args[0].keyword is None and isinstance(given, cst.Name) and given.value in facts.cpu_type_aliases:
        return True
    name = facts.resolve(given) or syntax.string_value(given) or ""
    return call.args[0].keyword is None and name in names.LEGACY_CONSTRUCTORS and name != "torch.Tensor"


CONTAINER_BUILTINS = frozenset({"list", "tuple", "set", "dict"})
COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


# --- what an expression holds --------------------------------------------------------------
TENSOR = "tensor"  # a tensor
CONTAINER = "container"  # a list, tuple, set or dict holding one
NON_TENSOR = "non-tensor"  # a number, a shape, a dtype: no tensor comes out
PARAMETERS = "parameters"  # a place: where the function's tensor parameters live
HOST = "host"  # a place: the host, whatever the value came from (`.cpu()`, `.numpy()`, `.tolist()`, `.item()`)
MODULE_SELF = "module-self"  # `self` in a module's `forward`: its submodules compute where their inputs are


@dataclass(frozen=True)
class Value:
    """What an expression holds (`kind`: TENSOR, CONTAINER, NON_TENSOR or None, not known) and
    where it lives (`place`: PARAMETERS; HOST, the result of `.cpu()`, `.numpy()`, `.tolist()`,
    `.item()` and what is computed only from such values and Python scalars; or None, not known:
    a CPU tensor made here, or anything this model does not follow)."""

    kind: Optional[str] = None
    place: Optional[str] = None


UNKNOWN = Value()


@dataclass
class Placement:
    """How a value got onto an accelerator."""

    device: Optional[cst.BaseExpression]  # what it was moved with; None for `.cuda()` or torch.load
    exact: bool = True  # the expression names the device itself (`.to(device)`), not an index (`.cuda(rank)`)
    at: Optional[cst.CSTNode] = field(default=None, compare=False)  # the call that placed it (the evidence)


class ValueModel:
    """The evaluator for the expressions of one scope.

    - `of(expr)`: what it holds and whether it lives with the function's tensor parameters.
      `names` gives the value a local name holds; `returns`, where given, what a call of a
      same-file function or method returns (or None: not such a call). DEV003 asks `place`,
      DEV004 `kind`.
    - `placement_of(expr)` / `device_less_factory(expr)`: whether it is on an accelerator, or
      a CPU tensor made without `device=`, by what the scope did to its names (`placed`,
      `factories`). DEV007 and DEV008 ask these.
    """

    def __init__(self, facts, names: Callable[[str], Value] = lambda name: UNKNOWN,
                 returns: Optional[Callable[[cst.Call], Optional[Value]]] = None,
                 placed: Optional[dict[str, Placement]] = None, factories: Optional[dict[str, cst.Call]] = None,
                 module_output: Optional[Callable[[cst.Call], Optional[Placement]]] = None,
                 in_order: bool = False) -> None:
        self.facts = facts
        # `names` gives what a name holds where the code reads it, bound in the order the code
        # runs, `self.NAME` included (DEV004): then `t.to(x.device)` lives with the parameters.
        # Not for flow-insensitive derived names (DEV003), where a name rebound to a moved copy
        # of itself would count as moved at its earlier reads too.
        self.in_order = in_order
        self.names = names
        self.returns = returns
        self.placed = placed if placed is not None else {}
        self.factories = factories if factories is not None else {}
        # where a module's output lives (`model(x)`, `self.net(x)`); by default, where the
        # module is when this scope placed it (not kept as a bound method: a reference cycle)
        self._module_output = module_output

    # --- on an accelerator, or made on the CPU ------------------------------------------------
    def device_less_factory(self, expr: cst.BaseExpression) -> Optional[cst.Call]:
        """The factory call when expr is one (with host-only methods on it), made without device=."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and self.facts.resolve(expr.func) is None:
            if expr.func.attr.value not in names.SHAPE_METHODS:
                return None
            expr = expr.func.value
        if isinstance(expr, cst.Name):
            return self.factories.get(expr.value)
        return expr if is_device_less_factory(expr, self.facts) else None

    def placement_of(self, expr: cst.BaseExpression) -> Optional[Placement]:
        """Where expr lives when this scope put it on an accelerator, else None (CPU or unknown).
        A comprehension of moved tensors (`{k: v.to(device) for k, v in batch.items()}`) holds
        them where they were moved."""
        if isinstance(expr, cst.DictComp):
            return self.placement_of(expr.value)
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return self.placement_of(expr.elt)
        while True:
            if isinstance(expr, cst.Subscript):
                expr = expr.value
                continue
            if not isinstance(expr, cst.Call):
                break
            func = expr.func
            method = func.attr.value if isinstance(func, cst.Attribute) else None
            if is_host_call(expr, self.facts):
                return None  # on the host, whatever it came from
            if method == "cuda":
                index = _device_given(expr)
                return Placement(index.value if index is not None else None, exact=False, at=expr)
            if method == "to" and not is_dtype_only_move(expr, self.facts):
                device = _device_given(expr)
                return Placement(device.value if device is not None else None, at=expr)
            if method == "forward" or isinstance(func, cst.Name):  # calling a module
                return self.module_output(expr)
            if method not in names.PLACEMENT_KEEPING_METHODS:
                return self.module_output(expr)  # `self.net(x)`: a module an attribute holds, or not known
            expr = func.value
        if isinstance(expr, cst.Name):
            return self.placed.get(expr.value)
        return None

    def module_output(self, call: cst.Call) -> Optional[Placement]:
        if self._module_output is not None:
            return self._module_output(call)
        func = call.func
        if isinstance(func, cst.Attribute):
            func = func.value if func.attr.value == "forward" else None
        return self.placed.get(func.value) if isinstance(func, cst.Name) else None

    # --- what it holds, and with the parameters or not -------------------------------------

    def of(self, expr: cst.BaseExpression) -> Value:
        step = _EXPRESSIONS.get(type(expr))
        return step(self, expr) if step is not None else UNKNOWN

    def _name(self, expr: cst.Name) -> Value:
        return self.names(expr.value)

    def _attribute(self, expr: cst.Attribute) -> Value:
        attr = expr.attr.value
        if self.in_order and isinstance(expr.value, cst.Name):  # `self.K`, where the scope set it: what it set
            known = self.names(f"{expr.value.value}.{attr}")
            if known != UNKNOWN:
                return known
        if attr in names.NON_TENSOR_ATTRIBUTES:
            return Value(NON_TENSOR)
        receiver = self.of(expr.value)
        if attr in VIEWS_FOLLOWED:
            return receiver
        return Value(None, receiver.place)  # `x.real`, `x.grad`: somewhere near x, not known to be a tensor

    def _subscript(self, expr: cst.Subscript) -> Value:
        return self.of(expr.value)

    def _binary(self, expr: cst.BinaryOperation) -> Value:
        left, right = self.of(expr.left), self.of(expr.right)
        return self._on_host(_either(left, right), (expr.left, left), (expr.right, right))

    def _on_host(self, value: Value, *operands: tuple[cst.BaseExpression, Value]) -> Value:
        """`value` placed on the host when every operand (an expression and what it holds,
        computed once by the caller: a chain `a + b + ...` must not be walked again at each
        level) is a host value or a Python scalar."""
        if value.place is not None:
            return value
        if operands and any(v.place == HOST for _, v in operands) and all(
            v.place == HOST or is_python_scalar(o, self.facts) for o, v in operands
        ):
            return Value(value.kind, HOST)
        return value

    def _comparison(self, expr: cst.Comparison) -> Value:
        """`x == 1` is a bool tensor where x is (its kind is not followed)."""
        exprs = [expr.left, *(t.comparator for t in expr.comparisons)]
        operands = [(e, self.of(e)) for e in exprs]
        value = Value(None, PARAMETERS if any(v.place == PARAMETERS for _, v in operands) else None)
        return self._on_host(value, *operands)

    def _unary(self, expr: cst.UnaryOperation) -> Value:
        return self.of(expr.expression)

    def _conditional(self, expr: cst.IfExp) -> Value:
        body, orelse = self.of(expr.body), self.of(expr.orelse)
        return self._on_host(_either(body, orelse), (expr.body, body), (expr.orelse, orelse))

    def _display(self, expr) -> Value:
        """A list, tuple, set or dict literal: a container when it holds a tensor."""
        held = self._held(expr)
        return Value(CONTAINER if held.kind is not None else None)

    def _held(self, expr: cst.BaseExpression) -> Value:
        """What a container literal holds (an argument like `torch.cat([x, y])`); places are
        followed into lists and tuples only."""
        if isinstance(expr, (cst.List, cst.Tuple)):
            return _either(*(self.of(e.value) for e in expr.elements))
        if isinstance(expr, cst.Set):
            return Value(_either(*(self.of(e.value) for e in expr.elements)).kind)
        if isinstance(expr, cst.Dict):
            return Value(_either(*(self.of(e.value) for e in expr.elements if isinstance(e, cst.DictElement))).kind)
        return self.of(expr)

    def _comprehension(self, expr) -> Value:
        """A list, set or dict comprehension (or a generator given to `list(...)`): a container
        when its element holds a tensor. The names its `for` clauses bind are not followed."""
        bound = {n.value for clause in _for_clauses(expr) for n in syntax.walk(clause.target) if isinstance(n, cst.Name)}
        inner = ValueModel(self.facts, lambda name: UNKNOWN if name in bound else self.names(name), self.returns)
        element = expr.value if isinstance(expr, cst.DictComp) else expr.elt
        return Value(CONTAINER if _tensor_kind(inner.of(element)) is not None else None)

    def _call(self, expr: cst.Call) -> Value:
        func = expr.func
        if isinstance(func, cst.Name) and func.value in CONTAINER_BUILTINS and func.value not in self.facts.aliases:
            args = syntax.positional(expr)
            if len(expr.args) == 1 and len(args) == 1 and isinstance(args[0].value, COMPREHENSIONS):
                return self._comprehension(args[0].value)  # `list(torch.zeros(n) for n in sizes)`
        qualified = self.facts.resolve(func)
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if is_host_call(expr, self.facts):
            kind = NON_TENSOR if method in names.NON_TENSOR_METHODS else _tensor_kind(self.of(func.value))
            return Value(kind, HOST)  # `x.cpu()`, `x.numpy()`: on the host whatever x is
        if qualified in HOST_FUNCTIONS:
            return Value(TENSOR, HOST)  # `shape_as_tensor(x)`: the shape of x, on the CPU
        if method in names.NON_TENSOR_METHODS and qualified is None:
            return Value(NON_TENSOR)
        returned = self.returns(expr) if self.returns is not None else None
        if self.in_order and method in ("to", "type_as") and qualified is None and self._to_parameters(expr):
            # `t.to(x.device)`, `t.to(x)`, `t.type_as(x)`: moved to where the function's tensor parameters live
            return Value(_tensor_kind(self.of(func.value)), PARAMETERS)
        if method is not None and qualified is None:  # a method of a value: where the value is
            receiver = self.of(func.value)
            if receiver.kind == MODULE_SELF:  # `self.encoder(x)` in `forward`: where x is
                held = [self._held(a.value) for a in expr.args if a.keyword is None]
                if any(v.place == PARAMETERS for v in held):
                    return Value(TENSOR, PARAMETERS)
                return Value(returned.kind if returned is not None else None)
            return Value(returned.kind if returned is not None else _tensor_kind(receiver), receiver.place)
        if qualified is None or not qualified.startswith("torch."):
            return Value(returned.kind if returned is not None else None)
        return self._torch_call(expr, qualified, method)

    def _to_parameters(self, call: cst.Call) -> bool:
        """`.to(x.device)`, `.to(device=x.device)`, `.to(x)` or `.type_as(x)` (a dtype too:
        both take x's) for an x that lives with the function's tensor parameters."""
        if not is_move(call, self.facts):
            return False
        given = _device_given(call)
        if given is None:
            return False
        target = given.value
        if isinstance(target, cst.Attribute) and target.attr.value == "device":
            target = target.value
        return self.of(target).place == PARAMETERS

    def _torch_call(self, call: cst.Call, qualified: str, method: Optional[str]) -> Value:
        """A new tensor lives where `device=` says (`device=x.device`); another torch function's
        result lives where its tensor arguments do."""
        device = syntax.keyword(call, "device")
        placed_by_device = device is not None and any(
            isinstance(n, cst.Name) and self.names(n.value).place == PARAMETERS for n in syntax.walk(device.value)
        )
        if qualified in names.TENSOR_SOURCES:  # `torch.arange(n)` ignores where n lives
            return Value(TENSOR, PARAMETERS if placed_by_device else None)
        arguments = [(a, self._held(a.value)) for a in call.args]
        with_parameters = placed_by_device or any(v.place == PARAMETERS for _, v in arguments)
        place = PARAMETERS if with_parameters else None
        tensors = [v for a, v in arguments if a.keyword is None and _tensor_kind(v) is not None]
        if place is None and device is None and tensors and all(v.place == HOST for v in tensors):
            place = HOST  # `torch.cat([a.cpu(), b.cpu()])`: computed only from host values
        if qualified in PARAMETER_CLASSES or method in names.NON_TENSOR_METHODS or qualified.startswith("torch.nn.") \
                or qualified.startswith(_PROGRAM_MAKERS):
            return Value(None, place)  # `torch.jit.trace(m, torch.rand(...))` makes a module, not a tensor
        last = qualified.rsplit(".", 1)[-1]
        if last[:1].isupper() and not last.endswith("Tensor"):
            # A torch class other than a tensor class (`torch.distributions.Normal(loc, scale)`):
            # an object built from the tensors, not a tensor.
            return Value(None, place)
        holds_tensor = any(_tensor_kind(v) is not None for a, v in arguments if a.keyword is None)
        return Value(TENSOR if holds_tensor else None, place)


# torch's namespaces whose functions make modules, programs or other objects from a module and
# example tensors (`torch.jit.trace`, `torch.export.export`, `torch.compile`), not tensors.
_PROGRAM_MAKERS = ("torch.jit.", "torch.export.", "torch.fx.", "torch.onnx.", "torch.ao.", "torch.quantization.",
                   "torch.compile", "torch.optim.", "torch.utils.data.")


def is_host_value(expr: cst.BaseExpression, facts, names: Callable[[str], Value] = lambda name: UNKNOWN) -> bool:
    """Whether expr lives on the host whatever it came from: `x.cpu()`, `x.numpy()`,
    `x.tolist()`, `x.item()`, and what is computed only from such values and Python scalars
    (`x.cpu() * 2`, `torch.cat([a.cpu(), b.cpu()])`). `names` gives the value a local name holds."""
    return ValueModel(facts, names).of(expr).place == HOST


def _device_given(call: cst.Call) -> Optional[cst.Arg]:
    """The device a move names (`.to(d)`, `.to(device=d)`, `.cuda(k)`): its `device=` or first
    positional argument."""
    return syntax.keyword(call, "device") or next(iter(syntax.positional(call)), None)


def to_cpu(facts, call: cst.Call) -> bool:
    """`.to("cpu")`, `.to(torch.device("cpu"))`."""
    device = _device_given(call)
    if device is None:
        return False
    value = device.value
    if syntax.string_value(value) == "cpu":
        return True
    if isinstance(value, cst.Call) and facts.resolve(value.func) == "torch.device":
        first = syntax.positional(value)[:1]
        return bool(first) and syntax.string_value(first[0].value) == "cpu"
    return False


def _for_clauses(expr):
    clause = expr.for_in
    while clause is not None:
        yield clause
        clause = clause.inner_for_in


def _tensor_kind(value: Value) -> Optional[str]:
    return value.kind if value.kind in (TENSOR, CONTAINER) else None


def _either(*values: Value) -> Value:
    """One of several values (an operator's operands, a conditional's branches): a container
    where any may be one, a tensor where any is; where any lives with the parameters."""
    kinds = [v.kind for v in values]
    kind = CONTAINER if CONTAINER in kinds else (TENSOR if TENSOR in kinds else None)
    place = PARAMETERS if any(v.place == PARAMETERS for v in values) else None
    return Value(kind, place)


_EXPRESSIONS: dict[type, Callable[[ValueModel, cst.BaseExpression], Value]] = {
    cst.Name: ValueModel._name,
    cst.Attribute: ValueModel._attribute,
    cst.Subscript: ValueModel._subscript,
    cst.BinaryOperation: ValueModel._binary,
    cst.Comparison: ValueModel._comparison,
    cst.UnaryOperation: ValueModel._unary,
    cst.IfExp: ValueModel._conditional,
    cst.List: ValueModel._display,
    cst.Tuple: ValueModel._display,
    cst.Set: ValueModel._display,
    cst.Dict: ValueModel._display,
    cst.ListComp: ValueModel._comprehension,
    cst.SetComp: ValueModel._comprehension,
    cst.DictComp: ValueModel._comprehension,
    cst.Call: ValueModel._call,
}


# --- Python scalars ----------------------------------------------------------------------------
# Builtins whose result is a Python number whatever they are given (`int(t)` reads a 0-dim tensor).
_SCALAR_BUILTINS = frozenset({"len", "int", "float", "bool"})
# Builtins whose result is a Python number when their arguments are (`abs(t)` is a tensor).
_SCALAR_PRESERVING_BUILTINS = frozenset({"round", "abs", "min", "max"})
# Tensor methods and attributes that give a Python number.
_SCALAR_METHODS = frozenset({"item", "numel", "dim", "ndimension", "element_size"})
_SCALAR_ATTRIBUTES = frozenset({"ndim"})
_TORCH_CONSTANTS = frozenset({"torch.pi", "torch.e", "torch.inf", "torch.nan",
                             "numpy.pi", "numpy.e", "numpy.inf", "numpy.nan"})  # numpy's are Python floats
# Their attributes (`min`, `max`, `eps`, `tiny`, `bits`, ...) are Python numbers.
_TYPE_INFO = frozenset({"torch.finfo", "torch.iinfo", "numpy.finfo", "numpy.iinfo"})


def is_python_scalar(expr: cst.BaseExpression, facts, scalar_names: Callable[[], frozenset] = frozenset) -> bool:
    """Whether expr is known to be a Python number or bool (so `torch.tensor(expr)` is a 0-dim
    tensor): literals, arithmetic and comparisons over scalars, `math.*`, numpy's functions of
    scalars (`np.log(n)`), `torch.pi`-style
    constants, `len/int/float(...)`, `x.shape[i]`, `x.size(i)`, `x.item()`, `x.ndim`, and the
    local names in `scalar_names()` (asked only when a name is met)."""
    if syntax.is_number_literal(expr):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in scalar_names() or (facts.resolve(expr) or "").startswith("math.")
    if isinstance(expr, cst.UnaryOperation):
        return is_python_scalar(expr.expression, facts, scalar_names)
    if isinstance(expr, (cst.BinaryOperation, cst.BooleanOperation)):
        return is_python_scalar(expr.left, facts, scalar_names) and is_python_scalar(expr.right, facts, scalar_names)
    if isinstance(expr, cst.Comparison):
        operands = [expr.left, *(t.comparator for t in expr.comparisons)]
        return all(is_python_scalar(o, facts, scalar_names) for o in operands)
    if isinstance(expr, cst.IfExp):
        return is_python_scalar(expr.body, facts, scalar_names) and is_python_scalar(expr.orelse, facts, scalar_names)
    if isinstance(expr, cst.Attribute):
        qualified = facts.resolve(expr) or ""
        if isinstance(expr.value, cst.Call) and facts.resolve(expr.value.func) in _TYPE_INFO:
            return True  # `torch.finfo(dtype).min`
        return qualified.startswith("math.") or qualified in _TORCH_CONSTANTS or expr.attr.value in _SCALAR_ATTRIBUTES
    if isinstance(expr, cst.Subscript):  # `x.shape[0]`, `x.size()[-1]`
        return len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and _is_shape(expr.value)
    if isinstance(expr, cst.Call):
        return _is_scalar_call(expr, facts, scalar_names)
    return False


# numpy's elementwise functions and scalar types: of Python numbers, a numpy scalar (`np.arange`,
# `np.zeros` and their kin make arrays of any arguments, so they are not here).
_NUMPY_SCALAR_FUNCTIONS = frozenset("numpy." + name for name in (
    "log log2 log10 log1p exp exp2 expm1 sqrt cbrt square power sin cos tan arcsin arccos arctan arctan2"
    " sinh cosh tanh abs absolute fabs floor ceil round rint trunc sign maximum minimum fmax fmin hypot"
    " deg2rad rad2deg float16 float32 float64 int8 int16 int32 int64 uint8 bool_").split())


def _is_scalar_call(call: cst.Call, facts, scalar_names) -> bool:
    func = call.func
    if isinstance(func, cst.Name) and facts.resolve(func) is None:
        if func.value in _SCALAR_BUILTINS:
            return True
        return func.value in _SCALAR_PRESERVING_BUILTINS and bool(call.args) and all(
            a.star == "" and is_python_scalar(a.value, facts, scalar_names) for a in call.args if a.keyword is None
        )
    qualified = facts.resolve(func) or ""
    if qualified.startswith("math."):
        return True
    if qualified in _NUMPY_SCALAR_FUNCTIONS and call.args and all(
            a.keyword is None and a.star == "" and is_python_scalar(a.value, facts, scalar_names) for a in call.args):
        return True  # `np.log(n)`, `np.sqrt(2 * d)`: numpy's functions of numbers give a numpy scalar
    if isinstance(func, cst.Attribute) and facts.resolve(func) is None:
        method = func.attr.value
        return method in _SCALAR_METHODS or (method == "size" and len(syntax.positional(call)) == 1)
    return False


def _is_shape(expr: cst.BaseExpression) -> bool:
    """`x.shape`, `x.size()`."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "shape"
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size" and not expr.args


_A_NUMBER = cst.Integer("0")  # stands for an int a binding is known to give


def unpacks_shape(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """`n, c, h, w = x.shape` (or `x.size()`, `x.shape[:2]`): each name is an int."""
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Slice):
        value = value.value
    return (isinstance(target, (cst.Tuple, cst.List)) and _is_shape(value)
            and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements))


def is_scalar_factory(call: cst.Call, facts, scalar_names: Callable[[], frozenset] = frozenset) -> bool:
    """`torch.tensor(2.0)`, `torch.tensor(len(x))`, `torch.tensor(x.shape[0] / 2)`, `torch.tensor(n)`
    with `n = x.shape[-1]`: a 0-dim CPU scalar (the same test as DEV003's, DEV007's and DEV010's)."""
    if facts.resolve(call.func) not in ("torch.tensor", "torch.as_tensor"):
        return False
    args = syntax.positional(call)
    return len(args) == 1 and is_python_scalar(args[0].value, facts, scalar_names)


def range_names(func: cst.FunctionDef) -> frozenset:
    """Names bound only as the target of `for i in range(...)` (or the index of `enumerate(...)`):
    Python ints."""
    looped, other = set(), set(syntax.param_names(func.params))
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, (cst.For, cst.CompFor)):
            counter = _loop_counter(node.target, node.iter)
            names_bound = {n.value for n in syntax.walk(node.target) if isinstance(n, cst.Name)}
            if counter is not None:
                looped.add(counter)
                names_bound.discard(counter)
            other |= names_bound
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            # the names a target binds (`a, (b, *c)`), not those it only reads (`t[i] = v`)
            other.update(n.value for t in targets for n in syntax.unpacked_targets(t) if isinstance(n, cst.Name))
    return frozenset(looped - other)


def _loop_counter(target: cst.BaseExpression, iterable: cst.BaseExpression) -> Optional[str]:
    """`i` in `for i in range(n)` and `for i, item in enumerate(items)`."""
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name)):
        return None
    if iterable.func.value == "range" and isinstance(target, cst.Name):
        return target.value
    if iterable.func.value == "enumerate" and isinstance(target, (cst.Tuple, cst.List)) and target.elements \
            and isinstance(target.elements[0].value, cst.Name):
        return target.elements[0].value.value
    return None


# What `nonzero()` and `argwhere()` return: a 2-dim integer tensor (a row per element found),
# whatever the input's dimensions.
_INDEX_MATRICES = frozenset({"nonzero", "argwhere"})


_INTEGER_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)


def integer_element(expr: cst.BaseExpression, func: Optional[cst.FunctionDef], facts) -> bool:
    """`on[i][0]` with `on = x.nonzero()` (or `torch.argwhere(x)`) and `i` a Python int: a 0-dim
    integer tensor, one entry of an index matrix, also in integer arithmetic with Python ints
    (`on[i][1] + 1`). Used as an index, torch takes it as an int (`.item()`), wherever it lives:
    indexing a CPU tensor with it meets no device."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _INTEGER_OPERATORS):
        sides = [side for side in (expr.left, expr.right) if not isinstance(side, cst.Integer)]
        return bool(sides) and all(integer_element(side, func, facts) for side in sides)
    indices, base = [], expr
    while isinstance(base, cst.Subscript):
        for element in base.slice:
            if not isinstance(element.slice, cst.Index) or element.slice.star is not None:
                return False
            indices.append(element.slice.value)
        base = base.value
    if len(indices) != 2 or not isinstance(base, cst.Name) or func is None:
        return False
    memo = facts.memo.setdefault("values.integer-element", {})
    if id(func) not in memo:
        memo[id(func)] = (range_names(func), scalar_names(func, facts))
    ranges, scalars = memo[id(func)]
    return _index_matrix(base.value, func, facts) and all(
        isinstance(i, cst.Name) and i.value in ranges or is_python_scalar(i, facts, lambda: scalars) for i in indices)


def _index_matrix(name: str, func: cst.FunctionDef, facts) -> bool:
    """A local name bound only to `x.nonzero()`, `torch.nonzero(x)`, `x.argwhere()` or
    `torch.argwhere(x)` (not `as_tuple=True`)."""
    if name in syntax.param_names(func.params):
        return False
    bound = bindings.scope_values(func, name)

    def index_matrix(value) -> bool:
        if not isinstance(value, cst.Call) or syntax.keyword(value, "as_tuple") is not None:
            return False
        qualified = facts.resolve(value.func)
        if qualified is not None:
            return qualified in {f"torch.{m}" for m in _INDEX_MATRICES} and len(value.args) == 1
        return isinstance(value.func, cst.Attribute) and value.func.attr.value in _INDEX_MATRICES and not value.args

    return bound is not None and all(map(index_matrix, bound))


def scalar_names(func: cst.FunctionDef, facts, number_defaults: bool = False) -> frozenset:
    """The local names of func bound only to Python scalars (`n = x.shape[0]`, `n: int` as a
    parameter, `n, c, h, w = x.shape`): every binding is a plain assignment of a scalar expression
    or the unpacking of a shape; other parameters, loop targets and unpacked names are not.
    `number_defaults`: also unannotated parameters whose default is a number (a constructor's
    settings, `def __init__(self, dim=32)`)."""
    annotated = scalar_annotated(func)
    if number_defaults:
        annotated |= {p.name.value for p in syntax.all_params(func.params)
                      if p.annotation is None and p.default is not None and syntax.is_number_literal(p.default)}
    values_of: dict[str, list] = {name: [] for name in annotated}
    other = set(syntax.param_names(func.params)) - annotated
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    values_of.setdefault(target.target.value, []).append(node.value)
                elif unpacks_shape(target.target, node.value):  # `n, c, h, w = x.shape`: Python ints
                    for element in target.target.elements:
                        values_of.setdefault(element.value.value, []).append(_A_NUMBER)
                elif not isinstance(target.target, (cst.Attribute, cst.Subscript)):  # `self.n = ...` binds no local
                    other.update(n.value for n in syntax.walk(target.target) if isinstance(n, cst.Name))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)) and isinstance(node.target, cst.Name):
            values_of.setdefault(node.target.value, []).append(node.value)
        elif isinstance(node, (cst.For, cst.CompFor)):
            other.update(n.value for n in syntax.walk(node.target) if isinstance(n, cst.Name))
        elif isinstance(node, cst.AsName) and isinstance(node.name, cst.Name):
            other.add(node.name.value)

    def scalars_given(known: frozenset) -> frozenset:
        return frozenset(
            name for name, bound in values_of.items()
            if name not in other and all(v is not None and is_python_scalar(v, facts, lambda: known) for v in bound)
        )

    return scalars_given(scalars_given(frozenset()))  # the second pass takes names bound from other names


def scalar_attributes(methods, facts) -> frozenset:
    """The attributes `self.NAME` that the given methods of one class assign only Python
    scalars (by `scalar_names` of the method: literals, number-annotated parameters, the
    constructor's parameters with a number default, ...)."""
    bound: dict[str, bool] = {}
    for method in methods:
        scalars = None
        for node in syntax.walk_expressions(method.body):
            if not isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)) or node.value is None:
                continue
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            pairs = [(target, node.value) for target in targets]
            for target, value in list(pairs):
                # `self.lo, self.hi = 0, 2 ** bits - 1`: each part its own value
                if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(
                        value.elements) and not any(isinstance(e, cst.StarredElement) for e in target.elements + value.elements):
                    pairs.remove((target, value))
                    pairs += [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
            for target, value in pairs:
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                    if scalars is None:  # a constructor's number settings (`dim=32`) are numbers
                        scalars = scalar_names(method, facts, number_defaults=method.name.value == "__init__")
                    known = scalars
                    scalar = is_python_scalar(value, facts, lambda: known)
                    bound[target.attr.value] = bound.get(target.attr.value, True) and scalar
                elif not isinstance(target, cst.Name):  # `self.a, self.b = f()`: not followed
                    for n in syntax.walk(target):
                        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == "self":
                            bound[n.attr.value] = False
    return frozenset(name for name, scalar in bound.items() if scalar)


def scalar_annotated(func: cst.FunctionDef) -> set[str]:
    """Parameters annotated `int`, `float` or `bool`, or an optional or union of those
    (`Optional[float]`, `float | None`), without a default of another kind (a default of `None`
    is no tensor either)."""
    return {
        p.name.value for p in syntax.all_params(func.params)
        if p.annotation is not None and _scalar_annotation(p.annotation.annotation)
        and (p.default is None or syntax.is_number_literal(p.default) or syntax.dotted_name(p.default) == "None")
    }


def _scalar_annotation(node: cst.BaseExpression) -> bool:
    members = union_members(node)
    return all(m in ("int", "float", "bool", "None") for m in members) and any(m != "None" for m in members)


def union_members(annotation: cst.BaseExpression) -> list[Optional[str]]:
    """The members of an annotation read as a union, each by its dotted name, None where a member
    is no name (`list[int]`): `A | B`, `Union[A, B]`, `Optional[A]` as `A | None`, and any other
    annotation as a union of one."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return union_members(annotation.left) + union_members(annotation.right)
    kind = syntax.last_name(annotation.value) if isinstance(annotation, cst.Subscript) else None
    if kind in ("Optional", "Union"):
        members = [m for e in annotation.slice
                   for m in (union_members(e.slice.value) if isinstance(e.slice, cst.Index) else [None])]
        return members + ["None"] if kind == "Optional" else members
    return [syntax.dotted_name(annotation)]


# --- local names bound to a tensor's device ------------------------------------------------------
# Names that say they hold settings, a device or a dtype, not a tensor (`args.device`, `rank`).
NOT_TENSOR_WORDS = ("device", "dtype", "type", "rank", "gpu", "cuda", "cpu", "args", "cfg", "config", "opt", "hparams")


def may_be_tensor(expr: cst.BaseExpression, self_name: Optional[str]) -> bool:
    """`x`, `inputs[0]`, `self.weight`: not `self`, nor a name that says it holds a device, a dtype or
    settings (`device`, `rank`, `args`)."""
    if isinstance(expr, cst.Name) and expr.value == self_name:
        return False
    last = (syntax.last_name(expr) or "").lower()
    return last != "dev" and not any(word in last for word in NOT_TENSOR_WORDS)


def is_tensor_device(expr: cst.BaseExpression, self_name: Optional[str]) -> bool:
    """`x.device`, `self.weight.device`: the device a tensor lives on."""
    return isinstance(expr, cst.Attribute) and expr.attr.value == "device" and may_be_tensor(expr.value, self_name)


def is_device_less_factory(expr: cst.BaseExpression, facts) -> bool:
    """A tensor factory call given no `device=` (nor `**kwargs` that may hold one): a CPU tensor."""
    return isinstance(expr, cst.Call) and facts.is_tensor_source(expr) is not None \
        and syntax.keyword(expr, "device") is None and not syntax.has_double_star(expr)


def cpu_factory_names(func: cst.FunctionDef, facts) -> frozenset:
    """The local names of func bound only to tensor factories given no `device=` (`mask =
    torch.zeros(n)`, not `torch.zeros(n, device=x.device)`): CPU tensors wherever the module is.
    Worked out once per function of the file."""
    known = facts.memo.setdefault("values.cpu-factory-names", {})
    if func not in known:
        known[func] = names_bound_only_to(func, lambda value: is_device_less_factory(value, facts))
    return known[func]


def tensor_device_names(func: cst.FunctionDef, self_name: Optional[str]) -> frozenset:
    """The local names of func bound only to a tensor's device (`device = img.device`, `device, dtype =
    x.device, x.dtype`)."""
    return names_bound_only_to(func, lambda value: is_tensor_device(value, self_name))


def names_bound_only_to(func: cst.FunctionDef, kind: Callable[[cst.BaseExpression], bool]) -> frozenset:
    """The local names of func whose every binding is an assignment of a value of that `kind`
    (`name = v`, `a, b = v, w`, `name: T = v`); parameters, loop targets, `+=` and other
    bindings are not."""
    values_of: dict[str, list] = {}
    other = set(syntax.param_names(func.params))
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                pairs = _target_values(target.target, node.value)
                for name, value in pairs:
                    values_of.setdefault(name, []).append(value)
                if not pairs or len(pairs) != sum(1 for n in syntax.walk(target.target) if isinstance(n, cst.Name)):
                    other.update(n.value for n in syntax.walk(target.target) if isinstance(n, cst.Name))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)) and isinstance(node.target, cst.Name):
            values_of.setdefault(node.target.value, []).append(None if isinstance(node, cst.AugAssign) else node.value)
        elif isinstance(node, (cst.For, cst.CompFor)):
            other.update(n.value for n in syntax.walk(node.target) if isinstance(n, cst.Name))
        elif isinstance(node, cst.AsName) and isinstance(node.name, cst.Name):
            other.add(node.name.value)
    return frozenset(
        name for name, bound in values_of.items()
        if name not in other and all(v is not None and kind(v) for v in bound)
    )


def _target_values(target: cst.BaseExpression, value: cst.BaseExpression) -> list:
    """(name, value) for `name = value` and for each name of `a, b = x, y` (same length)."""
    if isinstance(target, cst.Name):
        return [(target.value, value)]
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
            and len(target.elements) == len(value.elements):
        pairs = []
        for t, v in zip(target.elements, value.elements):
            if isinstance(t, cst.StarredElement) or isinstance(v, cst.StarredElement):
                return []
            pairs.extend(_target_values(t.value, v.value))
        return pairs
    return []
