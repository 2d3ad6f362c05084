"""DEV003's dataflow: where a device-less factory's value goes inside one function (moved,
used, stored, or dropped), which parameters hold tensors, and which names derive from them.

Everything is syntactic and local to one function: no types, no inter-procedural flow.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import libcst as cst

from devlint.analysis import values
from devlint.core import syntax
from devlint.torchinfo import names
from devlint.analysis.parameters import (
    a_number_here, assigned_names, cpu_test, declared_without_tensor, first_fit, is_derived, module_self,
    not_a_tensor_here, stable_parameters, tensor_parameters, used_tensor_params,
)
from devlint.semantic.bindings import scope_bindings
from devlint.semantic.facts import ClassInfo, FileFacts

MOVE, NON_TENSOR, NEUTRAL, USE, ASSIGNED = "move", "non-tensor", "neutral", "use", "assigned"
# Used as an index into a tensor: CUDA moves CPU indices to the indexed tensor's device.
INDEX = "index"


@dataclass
class Fate:
    """What happens to a value after the expression that made it."""

    kind: str
    met: list[cst.BaseExpression] = field(default_factory=list)  # other values it meets
    name: Optional[str] = None  # for ASSIGNED: the local name it is bound to
    at: Optional[cst.CSTNode] = None  # for ASSIGNED: the binding statement; for USE: where it is used
    ndim: Optional[int] = None  # for ASSIGNED: the name's number of dimensions, where known


def fate(
    path: Sequence[cst.CSTNode],
    facts: FileFacts,
    is_tensor: Callable[[cst.BaseExpression], bool],
    host_tables: frozenset = frozenset(),
    ndim: Optional[int] = -1,
    methods: Optional[dict] = None,
    factory_names: frozenset = frozenset(),
    reading: frozenset = frozenset(),
) -> Fate:
    """Follow the value made by path[-1] up through its parents until something decides its fate.

    `is_tensor` tells whether another operand is a tensor: arithmetic with plain numbers
    keeps the value where it is, arithmetic with a tensor is where the two devices meet.
    `host_tables` are local names bound to other device-less tensors: copying into one
    (`table[i] = t`) is not a use.

    `ndim`: path[-1]'s number of dimensions, None where unknown (by default: the factory's).
    `methods`: the enclosing class's methods by name (`self.m(v)` is followed into them).
    `factory_names`: local names bound only to tensor factories (a write into one copies).
    `reading`: the callees this walk is inside of (`_read_on_host_in`), not followed again.

    Each kind of parent has its step: it decides (returns a Fate) or moves the walk up.
    """
    def tensor_operand(expr: cst.BaseExpression) -> bool:
        # `if isinstance(gamma, float): ... * gamma`: a number there, whatever else it may be
        return is_tensor(expr) and not not_a_tensor_here(expr, path, facts)

    walk = _Walk(path, facts, tensor_operand, host_tables, len(path) - 1, methods=methods or {},
                 factory_names=factory_names, reading=reading)
    walk.ndim = factory_ndim(path[-1], facts) if ndim == -1 else ndim
    while walk.i > 0:
        parent = path[walk.i - 1]
        walk.kept = False
        decided = _STEPS.get(type(parent), _used)(walk, parent)
        if decided is not None:
            return decided
        if not walk.kept:
            walk.ndim = None
    return Fate(NEUTRAL, walk.met)


# Factories whose result is 1-dim whatever their arguments, and 2-dim.
_ONE_DIM_FACTORIES = frozenset({"torch.arange", "torch.range", "torch.randperm", "torch.linspace", "torch.logspace"})
_TWO_DIM_FACTORIES = frozenset({"torch.eye"})
# Factories whose size is their arguments (or `size=`), and where randint takes it.
_SIZED_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"})


def factory_ndim(node: cst.CSTNode, facts) -> Optional[int]:
    """The number of dimensions of the tensor a factory call makes, where its arguments tell:
    `torch.arange(n)` 1, `torch.zeros((1, 21))` 2, `torch.randint(lo, hi, (1,))` 1,
    `torch.tensor([[a, b], [c, d]])` of Python numbers 2; None otherwise."""
    if not isinstance(node, cst.Call):
        return None
    source = facts.is_tensor_source(node)
    if source in _ONE_DIM_FACTORIES:
        return 1
    if source in _TWO_DIM_FACTORIES:
        return 2
    if syntax.has_star_args(node):
        return None
    positional = [a.value for a in syntax.positional(node)]
    size = syntax.keyword(node, "size")
    if source in _SIZED_FACTORIES or source == "torch.full":
        sizes = [size.value] if size is not None else positional[:1] if source == "torch.full" else positional
    elif source == "torch.randint":
        sizes = [size.value] if size is not None else positional[-1:]
    elif source in ("torch.tensor", names.AS_TENSOR) or source in names.LEGACY_CONSTRUCTORS:
        if len(positional) != 1:
            return None  # `torch.LongTensor(2, 3)`: sizes
        return _literal_ndim(positional[0], facts)
    else:
        return None
    if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
        elements = sizes[0].elements
        return len(elements) if elements and all(isinstance(e, cst.Element) for e in elements) else None
    return len(sizes) if sizes and all(values.is_python_scalar(size, facts) for size in sizes) else None


def _literal_ndim(data: cst.BaseExpression, facts) -> Optional[int]:
    """The dimensions of the tensor made from nested list or tuple literals of Python numbers
    (`[len(t) for t in targets]` is one); None where an element is anything else."""
    if isinstance(data, cst.ListComp):
        return 1 if values.is_python_scalar(data.elt, facts) else None
    if not isinstance(data, (cst.List, cst.Tuple)):
        return None
    if not data.elements:
        return 1  # `torch.tensor([])`: shape (0,)
    if not all(isinstance(e, cst.Element) for e in data.elements):
        return None
    if all(values.is_python_scalar(e.value, facts) for e in data.elements):
        return 1
    inner = {_literal_ndim(e.value, facts) for e in data.elements}
    return None if len(inner) != 1 or None in inner else inner.pop() + 1


@dataclass
class _Walk:
    path: Sequence[cst.CSTNode]
    facts: FileFacts
    is_tensor: Callable[[cst.BaseExpression], bool]
    host_tables: frozenset
    i: int  # the value is now path[i]
    methods: dict = field(default_factory=dict)  # the enclosing class's methods by name
    factory_names: frozenset = frozenset()  # local names bound only to tensor factories
    reading: frozenset = frozenset()  # callees being read by `_read_on_host_in` around this walk
    met: list[cst.BaseExpression] = field(default_factory=list)
    siblings: list[cst.BaseExpression] = field(default_factory=list)  # values beside it in a list or tuple literal
    ndim: Optional[int] = None  # the value's number of dimensions now, where known
    kept: bool = False  # the last step kept its shape (an operator with numbers, a cast) or set ndim

    @property
    def cur(self) -> cst.CSTNode:
        return self.path[self.i]

    @property
    def grand(self) -> Optional[cst.CSTNode]:
        return self.path[self.i - 2] if self.i >= 2 else None

    def use(self, *others: cst.BaseExpression) -> Fate:
        return Fate(USE, self.met + list(others), at=self.path[self.i - 1])


def _device_of_a_tensor(walk: _Walk, expr: cst.BaseExpression) -> bool:
    """`x.device` of a tensor the walk knows may live elsewhere (derived from a parameter)."""
    return isinstance(expr, cst.Attribute) and expr.attr.value == "device" and walk.is_tensor(expr.value)


def _used(walk: _Walk, parent) -> Fate:
    return walk.use()


def _neutral(walk: _Walk, parent) -> Fate:
    return Fate(NEUTRAL, walk.met)


def _attribute(walk: _Walk, parent: cst.Attribute) -> Optional[Fate]:
    if parent.value is not walk.cur:
        return walk.use()
    attr = parent.attr.value
    grand = walk.grand
    if isinstance(grand, cst.Call) and grand.func is parent:
        return _method_call(walk, attr, grand)
    if attr in names.TENSOR_VIEW_ATTRIBUTES:
        walk.i -= 1
        return None
    return Fate(NON_TENSOR, walk.met)


def _given_type_strings(walk: _Walk, call: cst.Call) -> bool:
    """`v.type(dtype)` where `dtype` is a tensor's type string (`x.type()`, which names x's
    device, `torch.cuda.FloatTensor`): like `.type(x.type())`, a move onto x's device. Either a
    local name the function binds once, to such a string (`dtype = d.type() if ... else
    d.data.type()`), or a parameter never rebound that every call of the function in the file
    gives one (`self.decode(outputs, dtype=x.type())`)."""
    args = syntax.positional(call)
    if len(args) != 1 or len(call.args) != 1 or not isinstance(args[0].value, cst.Name):
        return False
    name = args[0].value.value
    function = syntax.enclosing_function(walk.path)
    if function is None:
        return False
    bound = scope_bindings(function, name)
    if name not in syntax.param_names(function.params):
        statement = bound[0][-3] if len(bound) == 1 and len(bound[0]) > 2 else None  # Assign > AssignTarget > Name
        return isinstance(statement, cst.Assign) and len(statement.targets) == 1 \
            and statement.targets[0].target is bound[0][-1] and _type_string(statement.value, walk.facts)
    sites = call_sites(function, walk.facts) if not bound else []
    if not sites:
        return False
    for _, path in sites:
        call_site = path[-1]
        given = next((a.value for a in call_site.args if _parameter_given(function, call_site, a) == name), None)
        if given is None or not _type_string(given, walk.facts):
            return False
    return True


def _type_string(expr: cst.BaseExpression, facts) -> bool:
    """A tensor's type string: `x.type()`, `x.data.type()`, or a conditional of two."""
    if isinstance(expr, cst.IfExp):
        return _type_string(expr.body, facts) and _type_string(expr.orelse, facts)
    return isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute) \
        and expr.func.attr.value == "type" and facts.resolve(expr.func) is None


# Tensor methods whose one tensor argument gives only its dtype, device or shape: the receiver
# is cast, moved or reshaped by it, and never combined with it.
_READS_ITS_FORM = frozenset({"type_as", "to", "expand_as", "view_as", "reshape_as"})


def _method_call(walk: _Walk, method: str, call: cst.Call) -> Optional[Fate]:
    if values.is_move(call, walk.facts) or method == "type" and _given_type_strings(walk, call):
        return Fate(MOVE, walk.met)
    if method == "cpu" or values.is_cpu_type_cast(call, walk.facts):
        return Fate(MOVE, walk.met)  # placed on the CPU on purpose, as `.to("cpu")` is: no `device=` to add
    if method in names.NON_TENSOR_METHODS:
        return Fate(NON_TENSOR, walk.met)
    if method in _WRITES:  # `buf.copy_(v)`: buf keeps its device and meets nothing
        walk.i -= 2
        return None
    if method in _FULL_REDUCTIONS and not call.args:  # `v.max()`: a 0-dim CPU scalar mixes with any device
        return Fate(NEUTRAL, walk.met)
    walk.kept = method in _SHAPE_KEEPING and not call.args
    tensors = [a.value for a in call.args if walk.is_tensor(a.value)]
    if method in names.MOVES or method in names.SHAPE_METHODS or not tensors:
        walk.i -= 2
        return None
    return walk.use(*tensors)


def _subscripted(walk: _Walk, parent: cst.Subscript) -> Optional[Fate]:
    if parent.value is not walk.cur:
        return walk.use()
    stored = isinstance(walk.grand, cst.AssignTarget) and walk.grand.target is parent
    if not stored and _in_tuple_target(walk.path[: walk.i]):  # `buf[i], _ = t.max(0)`: a write into buf
        return Fate(NEUTRAL, walk.met) if _plain_write(walk, parent) else walk.use()
    device_indices = [e for e in _index_expressions(parent) if walk.is_tensor(e) and not _integer_element(walk, e)]
    left = _indexed_ndim(parent, walk.ndim) if not stored and not device_indices else None
    if left == 0:  # `v[i]` of a 1-dim tensor, `v[i, j]` of a 2-dim one: a 0-dim CPU scalar mixes with any device
        return Fate(NEUTRAL, walk.met)
    if device_indices and not stored:  # reading a CPU tensor at device indices raises; `t[i] = v` does not
        return walk.use(*device_indices)
    walk.i -= 1
    walk.ndim, walk.kept = left, left is not None
    return None


def _integer_element(walk: _Walk, index: cst.BaseExpression) -> bool:
    """An index that is one entry of a device index matrix (`on[i][0]`, `on = x.nonzero()`):
    torch takes a 0-dim integer tensor index as an int, so it meets no device."""
    return values.integer_element(index, syntax.enclosing_function(walk.path), walk.facts)


def _in_tuple_target(path: Sequence[cst.CSTNode]) -> bool:
    """path[-1] is an element of a tuple or list assignment target (`a[i], b = ...`)."""
    j = len(path) - 1
    while j > 0 and isinstance(path[j - 1], (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        j -= 1
    return j < len(path) - 1 and j > 0 and isinstance(path[j - 1], cst.AssignTarget) and path[j - 1].target is path[j]


def _indexed_ndim(subscript: cst.Subscript, ndim: Optional[int]) -> Optional[int]:
    """The dimensions left after `v[...]` of a value with `ndim` of them: each plain index
    (`i`, `2`, `n - 1`, not a call such as `v[torch.arange(n)]`) takes one, a slice none;
    None where another kind of index (`None`, `...`, a list) or `ndim` leaves it unknown."""
    if ndim is None or len(subscript.slice) > ndim:
        return None
    left = ndim
    for element in subscript.slice:
        if isinstance(element.slice, cst.Slice):
            continue
        value = element.slice.value
        if not isinstance(value, (cst.Name, cst.Integer, cst.UnaryOperation, cst.BinaryOperation)) or any(
            isinstance(n, cst.Call) for n in syntax.walk(value)
        ) or isinstance(value, cst.Name) and value.value in ("None", "Ellipsis"):
            return None
        left -= 1
    return left


def _index(walk: _Walk, parent) -> Fate:
    """Used as an index: not a use (the indexed tensor's device takes CPU indices)."""
    return Fate(INDEX, walk.met)


def _boolean(walk: _Walk, parent: cst.BooleanOperation) -> Fate:
    """`x or torch.ones(n)`: moved before use when the result is moved (or bound to a name that
    is); any other fate of the result is not this value's (it may never be chosen)."""
    outer = fate(walk.path[: walk.i], walk.facts, walk.is_tensor, walk.host_tables, methods=walk.methods,
                 factory_names=walk.factory_names)
    if outer.kind in (MOVE, ASSIGNED):
        return Fate(outer.kind, walk.met + outer.met, outer.name, outer.at)
    return Fate(NEUTRAL, walk.met)


def _tested(walk: _Walk, parent) -> Fate:
    """The test of an `if` or `while` reads the value on the host: no tensor meets it there."""
    return Fate(NON_TENSOR, walk.met) if parent.test is walk.cur else walk.use()


def _unary(walk: _Walk, parent: cst.UnaryOperation) -> None:
    walk.i -= 1
    walk.kept = True


def _conditional(walk: _Walk, parent: cst.IfExp) -> Optional[Fate]:
    if parent.test is walk.cur:
        return Fate(NEUTRAL, walk.met)
    walk.i -= 1
    return None


def _operator(walk: _Walk, parent) -> Optional[Fate]:
    """An arithmetic or comparison operand: it meets the other operands that are tensors."""
    cur = walk.cur
    comparison = walk.grand if isinstance(parent, cst.ComparisonTarget) else parent
    if isinstance(comparison, cst.BinaryOperation):
        others = [comparison.right if comparison.left is cur else comparison.left]
    else:
        others = [comparison.left, *(t.comparator for t in comparison.comparisons)]
        others = [o for o in others if o is not cur]
    tensors = [o for o in others if walk.is_tensor(o)]
    if tensors:
        return walk.use(*tensors)
    walk.i -= 2 if comparison is walk.grand else 1  # `t * 2`, `t < 0.5`: still where t is
    walk.kept = True
    return None


def _element(walk: _Walk, parent) -> Optional[Fate]:
    grand = walk.grand
    if not isinstance(grand, (cst.List, cst.Tuple, cst.Set)):
        return walk.use()
    walk.siblings.extend(e.value for e in grand.elements if e is not parent)
    walk.i -= 2
    walk.kept = walk.ndim is not None and _joined_by(walk) is not None  # `torch.stack([a, b])`: to it, each its dimensions
    return None


def _joined_by(walk: _Walk) -> Optional[str]:
    """The torch function of `_JOINED_NDIM` whose first argument is the list or tuple the walk is at."""
    arg, call = walk.path[walk.i - 1] if walk.i >= 1 else None, walk.grand
    if isinstance(arg, cst.Arg) and isinstance(call, cst.Call) and call.args and call.args[0] is arg \
            and isinstance(arg.value, (cst.List, cst.Tuple)) and not arg.keyword:
        qualified = walk.facts.resolve(call.func)
        return qualified if qualified in _JOINED_NDIM else None
    return None


# Conversions into a PIL image, a host value (what `pil_to_tensor` makes of it is a new CPU tensor).
_TO_HOST_IMAGE = frozenset({
    "torchvision.transforms.functional.to_pil_image", "torchvision.transforms.v2.functional.to_pil_image",
})


# The dimensions of what torch's joins make of pieces with n dimensions each.
_JOINED_NDIM = {
    "torch.cat": lambda n: n, "torch.concat": lambda n: n, "torch.concatenate": lambda n: n,
    "torch.stack": lambda n: n + 1, "torch.vstack": lambda n: max(n, 2), "torch.hstack": lambda n: max(n, 1),
}


def _argument(walk: _Walk, parent: cst.Arg) -> Optional[Fate]:
    call = walk.grand
    if not isinstance(call, cst.Call):
        return walk.use()
    others = [a.value for a in call.args if a is not parent and walk.is_tensor(a.value)]
    others += [s for s in walk.siblings if walk.is_tensor(s)]
    func = call.func
    if isinstance(func, cst.Name) and func.value in _HOST_READING_BUILTINS and walk.facts.resolve(func) is None:
        return Fate(NON_TENSOR, walk.met)  # `int(v)`, `range(v)`: read on the host
    if walk.ndim == 1 and isinstance(func, cst.Name) and func.value in _ITERATING_BUILTINS and walk.facts.resolve(func) is None:
        return Fate(NEUTRAL, walk.met)  # `enumerate(lengths)`: the items of a 1-dim tensor are 0-dim CPU scalars
    if _read_as_size(walk, call, parent):
        return Fate(NON_TENSOR, walk.met)
    if isinstance(func, cst.Attribute) and func.attr.value in ("format", "format_map") \
            and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return Fate(NON_TENSOR, walk.met)  # `"expected {}".format(v)`: formatted into text
    qualified = walk.facts.resolve(func)
    if (qualified or "").startswith("numpy.") or qualified in _TO_HOST_IMAGE:
        return Fate(NON_TENSOR, walk.met)  # `np.absolute(v)`, `to_pil_image(v)`: read on the host
    if values.is_host_argument(qualified or _loss_class_of(walk, func), call, parent):
        return Fate(NEUTRAL, walk.met)  # `F.ctc_loss(lp, targets, ...)`: taken on the host
    if qualified is not None and qualified.startswith("torch.") and syntax.keyword(call, "device") is not None:
        return Fate(MOVE, walk.met)  # `torch.sparse_coo_tensor(i, v, device=d)` copies its data onto d
    if qualified in _TORCH_FULL_REDUCTIONS and len(call.args) == 1 and not parent.star:
        return Fate(NEUTRAL, walk.met)  # `torch.prod(torch.tensor(z.size()))`: a 0-dim CPU scalar
    if qualified is not None and qualified.startswith("torch."):
        if others:
            return walk.use(*others)
        joined = _joined_by(walk) if walk.ndim is not None else None
        walk.i -= 2  # `torch.log(t)`: the result stays where t is
        walk.siblings = []
        walk.kept = qualified in _ELEMENTWISE_FUNCTIONS and len(syntax.positional(call)) == 1
        if joined is not None:
            walk.ndim, walk.kept = _JOINED_NDIM[joined](walk.ndim), True
        return None
    if isinstance(func, cst.Attribute) and func.attr.value == "register_buffer" and parent is not call.args[0] \
            and syntax.in_init(walk.path):
        return Fate(MOVE, walk.met)  # registered at construction: `model.to()` takes it along
    if isinstance(func, cst.Attribute) and func.attr.value == "new_tensor" and call.args[0] is parent \
            and not (isinstance(func.value, cst.Name) and func.value.value == "self"):
        return Fate(MOVE, walk.met)  # `signal.new_tensor(v)` copies v's data onto signal's device
    if isinstance(func, cst.Attribute) and func.attr.value in _READS_ITS_FORM and call.args[0] is parent \
            and len(call.args) == 1:
        return Fate(NEUTRAL, walk.met)  # `s.type_as(v)`, `s.to(v)`, `s.expand_as(v)`: v's dtype, device or shape only
    if isinstance(func, cst.Attribute) and func.attr.value in _WRITES and call.args[0] is parent:
        return Fate(NEUTRAL, walk.met)  # `t.copy_(v)` copies across devices
    if isinstance(func, cst.Attribute) and _is_default(func, call, parent):
        return _passed_through(walk)
    if any(_device_of_a_tensor(walk, a.value) for a in call.args if a is not parent):
        return Fate(MOVE, walk.met)  # `to_device_dtype(v, x.device, x.dtype)`: handed where x is, it puts v there
    callee = _same_class_method_of(walk.methods, func)
    defined = callee or _module_function(walk, func)
    if defined is not None and _moved_first_in(defined, call, parent, walk.facts, walk.reading):
        return Fate(MOVE, walk.met)  # `self.f(v)` or `f(v)` where f starts with `v = v.to(device)`
    if defined is not None and _read_on_host_in(defined, call, parent, walk):
        return Fate(NEUTRAL, walk.met)  # `f(x, torch.tensor([n]))` where f reads it only as `n_t[0]` or an index
    dispatched = _dispatched_to(walk, func, parent) if callee is None else []
    if dispatched and all(_read_on_host_in(method, call, parent, walk) for method in dispatched):
        return Fate(NEUTRAL, walk.met)  # `self.propagate(ei, x=x, p=v)` and `message(self, x_j, p)` reads p as an index
    if not others and (callee is not None or _helper_function(walk, func)):
        walk.i -= 2  # `mask = lengths_to_mask(v)`: the result is made from v alone, where v is
        walk.siblings = []
        return None
    if isinstance(func, cst.Attribute):  # an argument to a method of another value: it meets that value
        if not others and _another_cpu_factory(walk, func.value):
            if func.attr.value.endswith("_"):
                # `mask.scatter_(0, idx, True)` on `mask = torch.zeros(n)`: it meets only that CPU
                # tensor, and lives on in the receiver, whose later uses decide (as `outs.append(v)`)
                statement = walk.path[walk.i - 3] if walk.i >= 3 else None
                if isinstance(func.value, cst.Name) and isinstance(statement, cst.Expr) and statement.value is call:
                    return Fate(ASSIGNED, walk.met, func.value.value, statement)
                return walk.use(func.value)
            # `torch.zeros(n, n).masked_fill(mask, v)`: two CPU tensors; the result goes on
            walk.i -= 2
            walk.siblings = []
            return None
        return _added_to_list(walk, func, call) or walk.use(func.value)
    return walk.use()


def _another_cpu_factory(walk: _Walk, receiver: cst.BaseExpression) -> bool:
    """A receiver made by a factory without `device=` (through shape methods), or a local name
    bound only to such factories: meeting it is meeting the CPU, like the value itself."""
    if isinstance(receiver, cst.Name):
        function = syntax.enclosing_function(walk.path)
        return function is not None and receiver.value in values.cpu_factory_names(function, walk.facts)
    return values.ValueModel(walk.facts).device_less_factory(receiver) is not None


# Builtins that read their argument as Python numbers (`range(n)`, `int(t)`): a host end.
_HOST_READING_BUILTINS = names.NON_TENSOR_BUILTINS | {"range"}
# torch functions whose result has the shape of their one tensor argument (`torch.clamp(t, max=n)`).
_ELEMENTWISE_FUNCTIONS = frozenset(
    "torch." + name for name in "clamp clip abs round floor ceil trunc sign neg exp log sqrt".split()
)
# Builtins that iterate their argument in Python: a 1-dim tensor's items are 0-dim tensors.
_ITERATING_BUILTINS = frozenset({"enumerate", "zip", "iter", "reversed", "list", "tuple"})
# Tensor methods whose arguments are sizes, dimensions or counts, read as Python numbers.
_SIZE_METHODS = frozenset(
    "view reshape repeat expand unflatten narrow permute transpose flip roll movedim split chunk select"
    " new_zeros new_ones new_empty new_full size"
    " uniform_ normal_ random_ exponential_ geometric_ log_normal_ cauchy_".split()  # a fill's numbers
)


def _read_as_size(walk: _Walk, call: cst.Call, arg: cst.Arg) -> bool:
    """The value is read as a Python number, never as a tensor that meets others: an argument
    of a factory other than its data (`torch.randint(lo, hi, (n,))`, `torch.zeros(n)`), of a
    size method of a tensor (`x.view(n, -1)`), or an element of a shape tuple beside Python
    numbers (`F.interpolate(x, (w, x.shape[3]))`)."""
    source = walk.facts.is_tensor_source(call)
    if source is not None:
        data = source in _DATA_SOURCES and (arg.keyword is None and syntax.positional(call)[:1] == [arg]
                                            or arg.keyword is not None and arg.keyword.value == "data")
        return not data
    func = call.func
    if isinstance(func, cst.Attribute) and walk.facts.resolve(func) is None and func.attr.value in _SIZE_METHODS:
        return True
    return isinstance(walk.cur, (cst.Tuple, cst.List)) and any(
        values.is_python_scalar(s, walk.facts) for s in walk.siblings
    )


# Sources whose first argument is data (a tensor given there is copied, not read as a size).
_DATA_SOURCES = names.LEGACY_CONSTRUCTORS | {"torch.tensor", names.AS_TENSOR, names.FROM_NUMPY}

def _loss_class_of(walk: _Walk, func: cst.BaseExpression) -> Optional[str]:
    """The qualified class of `self.NAME` when the enclosing class binds NAME only to instances
    of one torch class (`self.ctc = nn.CTCLoss(blank=0)`)."""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return None
    made = set()
    for defs in walk.methods.values():
        for function in defs:
            for node in syntax.walk_expressions(function.body):
                if isinstance(node, cst.Assign) and any(
                    isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                    and t.target.value.value == "self" and t.target.attr.value == func.attr.value for t in node.targets
                ):
                    made.add(walk.facts.resolve(node.value.func) if isinstance(node.value, cst.Call) else None)
    return made.pop() if len(made) == 1 else None


def _dispatched_to(walk: _Walk, func: cst.BaseExpression, arg: cst.Arg) -> list[cst.FunctionDef]:
    """The class's own methods a keyword argument of an inherited method reaches by name: a
    message-passing base's `self.propagate(edge_index, x=x, norm=v)` hands `norm` to the
    class's `message(self, x_j, norm)`. Every method of the class but `__init__` and the
    caller that takes a parameter of that name; none where the class defines the method."""
    if arg.keyword is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                   and func.value.value == "self") or func.attr.value in walk.methods:
        return []
    caller = next((node for node in reversed(walk.path[: walk.i]) if isinstance(node, cst.FunctionDef)), None)
    return [
        method for name, defs in walk.methods.items() if name != "__init__" for method in defs
        if method is not caller and arg.keyword.value in {p.name.value for p in syntax.all_params(method.params)}
    ]


def _module_function(walk: _Walk, func: cst.BaseExpression) -> Optional[cst.FunctionDef]:
    """The function of this file a plain name calls (its one definition)."""
    if not isinstance(func, cst.Name) or walk.facts.resolve(func) is not None:
        return None
    defined = walk.facts.module_functions(func.value)
    return defined[0] if len(defined) == 1 else None


def _parameter_given(callee: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> Optional[str]:
    """The parameter of `callee` that `arg` of `call` fills: by keyword, or by position (after
    `self` in a method call); None for a starred argument or a callee that takes `*args` or
    `**kwargs`."""
    params = list(syntax.all_params(callee.params))
    if isinstance(call.func, cst.Attribute) and params and "staticmethod" not in syntax.decorator_names(callee):
        params = params[1:]  # `self.m(v)`: v is the parameter after `self`
    if arg.star or any(p.star in ("*", "**") for p in params if p.star):
        return None
    if arg.keyword is not None:
        return next((p.name.value for p in params if p.name.value == arg.keyword.value), None)
    position = syntax.positional(call).index(arg)
    return params[position].name.value if position < len(params) and not params[position].star else None


def _read_on_host_in(callee: cst.FunctionDef, call: cst.Call, arg: cst.Arg, walk: _Walk) -> bool:
    """Whether `callee` (a function of this file, or a method of the class) reads the parameter
    `arg` is given to only where a CPU value meets nothing: as an index (`value[indices]`), an
    element of a 1-dim value (`n[0]` then a slice bound), a size or another host end, through
    local names bound to such reads (and after `p = [p]`, through the list of itself). A parameter
    rebound otherwise, or captured, is not followed."""
    param = _parameter_given(callee, call, arg)
    if param is None:
        return False
    if callee in walk.reading:
        return False  # a recursive call: not followed again
    return _names_read_on_host(callee, param, walk)


def _names_read_on_host(callee: cst.FunctionDef, param: str, walk: _Walk) -> bool:
    callee_values = FunctionValues(callee, walk.facts, is_forward=False)
    pending, ndims, seen = [param], {param: walk.ndim}, set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        if len(seen) > 8:
            return False
        seen.add(name)
        for node, path in syntax.walk_with_paths(callee, []):
            if not (isinstance(node, cst.Name) and node.value == name and _is_variable(path)):
                continue
            statement = _storing_statement(path)
            if statement is not None:
                if name == param and not _wraps_itself(statement, name):
                    return False  # the parameter is rebound: another value
                continue  # `p = [p]`: still the value, in a list whose reads are followed
            found = fate(path, walk.facts, callee_values.is_tensor, ndim=ndims.get(name),
                         methods=walk.methods, reading=walk.reading | {callee})
            if found.kind in (INDEX, NON_TENSOR, NEUTRAL):
                continue
            if found.kind == ASSIGNED and found.name:
                ndims[found.name] = found.ndim
                pending.append(found.name)
                continue
            return False
    return True


def _wraps_itself(statement: cst.CSTNode, name: str) -> bool:
    """`name = [name]` or `name = (name,)`: the name rebound to a list or tuple of its own value."""
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Name) and statement.targets[0].target.value == name):
        return False
    value = statement.value
    return isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) == 1 \
        and isinstance(value.elements[0].value, cst.Name) and value.elements[0].value.value == name


def _helper_function(walk: _Walk, func: cst.BaseExpression) -> bool:
    """A plain function of this file or one imported (`from utils import lengths_to_mask`, or
    through an imported module: `dist.all_gather`): not a local name (which may hold a module), not
    a class (capitalized: it may build a module), not torch's."""
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and not func.attr.value[:1].isupper():
        qualified = walk.facts.resolve(func)  # `dist.all_gather` with `import mmengine.dist as dist`
        return qualified is not None and not qualified.startswith("torch.") and func.value.value in walk.facts.aliases
    if not isinstance(func, cst.Name) or func.value[:1].isupper():
        return False
    qualified = walk.facts.resolve(func)
    if qualified is not None:
        return not qualified.startswith("torch.") and func.value in walk.facts.aliases
    return bool(walk.facts.module_functions(func.value))


def _moved_first_in(callee: cst.FunctionDef, call: cst.Call, arg: cst.Arg, facts, reading: frozenset) -> bool:
    """Whether the callee moves the parameter that `arg` fills before anything else reads it:
    its first read past those that ask only what it is (`isinstance(p, Tensor)`, `p.shape`)
    moves it, and so does every later read unless that first move rebinds the name in the
    function's own body (`p = p.to(device)`). `reading`: the callees the walk is inside of; a
    recursive call (`f` reached again from `f`'s own body) is not followed again."""
    if callee in reading:
        return False
    params = [p for p in syntax.all_params(callee.params) if p.star not in ("*", "**")]
    if params and params[0].name.value in ("self", "cls"):
        params = params[1:]
    if arg.star:
        return False
    if arg.keyword is not None:
        name = arg.keyword.value
    else:
        position = syntax.positional(call).index(arg)
        if position >= len(params):
            return False
        name = params[position].name.value
    moved = False
    for node, path in syntax.walk_with_paths(callee.body, []):
        if not (isinstance(node, cst.Name) and node.value == name and _is_variable(path)):
            continue
        if _storing_statement(path) is not None or values.reads_only_what_it_is(path):
            continue
        if fate(path, facts, lambda e: False, reading=reading | {callee}).kind != MOVE:
            return False
        if _rebinds_at_top(callee, path, name):
            return True
        moved = True
    return moved


def _rebinds_at_top(callee: cst.FunctionDef, path, name: str) -> bool:
    """The read at path[-1] is in a statement of the function's own body that binds `name`."""
    line = next((n for n in path if isinstance(n, cst.SimpleStatementLine)), None)
    if line is None or line not in callee.body.body:
        return False
    return any(isinstance(s, (cst.Assign, cst.AnnAssign)) and name in {t.value for t in assigned_names(s)}
               for s in line.body)


_WRITES = frozenset({"copy_"})
# Methods that reduce a whole tensor to a 0-dim tensor when given no arguments.
_FULL_REDUCTIONS = frozenset("sum mean prod max min amax amin norm all any std var median".split())
# torch functions that reduce their one argument to a 0-dim tensor.
_TORCH_FULL_REDUCTIONS = frozenset("torch." + n for n in "sum mean prod max min amax amin norm all any numel std var median".split())
# Methods that keep a tensor's shape (given no arguments).
_SHAPE_KEEPING = frozenset("float double half long int short bool byte clone detach contiguous abs exp log sqrt neg".split())
# Methods that return their `default` argument when the key is missing: `d.get(key, torch.ones(n))`.
_DEFAULT_RETURNING = frozenset({"get", "pop"})


# Factories whose first argument (or `size=`) is the shape.
_SHAPED_FACTORIES = frozenset("torch." + n for n in "zeros ones empty full rand randn".split())


def _empty_shape(call: cst.Call, source: str) -> bool:
    """`torch.zeros(())`, `torch.empty([])`, `torch.full((), v)`: the shape is empty, the
    tensor 0-dim."""
    sizes = _size_arguments(call, source)
    return sizes is not None and len(sizes) == 1 and isinstance(sizes[0], (cst.List, cst.Tuple)) and not sizes[0].elements


def _size_arguments(call: cst.Call, source: str) -> Optional[list[cst.BaseExpression]]:
    """What a shaped factory is given as its size: `size=`, else its positional sizes (the
    first only for `torch.full`, whose second is the fill value); None for another source."""
    if source not in _SHAPED_FACTORIES:
        return None
    given = syntax.keyword(call, "size")
    positional = syntax.positional(call)
    return [given.value] if given is not None else [a.value for a in positional[:1 if source == "torch.full" else None]]


_ARITHMETIC = (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget, cst.AugAssign)


def _no_elements(call: cst.Call, source: str) -> bool:
    """`torch.empty(0)`, `torch.zeros(0, d)`, `torch.zeros((0, d))`, `torch.tensor([])`,
    `torch.Tensor()`: a tensor with a dimension of size 0 holds no element."""
    if source in names.LEGACY_CONSTRUCTORS and not call.args:
        return True
    if source in ("torch.tensor", names.AS_TENSOR):
        positional = syntax.positional(call)
        return bool(positional) and isinstance(positional[0].value, cst.List) and not positional[0].value.elements
    sizes = _size_arguments(call, source)
    if sizes is None:
        return False
    if len(sizes) == 1 and isinstance(sizes[0], (cst.List, cst.Tuple)):
        sizes = [e.value for e in sizes[0].elements]
    return any(isinstance(size, cst.Integer) and size.value == "0" for size in sizes)


def _is_default(func: cst.Attribute, call: cst.Call, arg: cst.Arg) -> bool:
    """`d.get(key, DEFAULT)` / `d.pop(key, DEFAULT)`: arg is the default."""
    if func.attr.value not in _DEFAULT_RETURNING:
        return False
    positional = syntax.positional(call)
    return arg.keyword is None and len(positional) == 2 and positional[1] is arg or (
        arg.keyword is not None and arg.keyword.value == "default"
    )


def _passed_through(walk: _Walk) -> Fate:
    """The value may be the result of the expression it is in (`d.get(key, v)`, `x or v`): it is
    moved before use when that result is moved or bound to a name that is; otherwise it is what
    the expression's own fate makes it, short of a use (it may never be chosen)."""
    j = walk.i - 2 if isinstance(walk.path[walk.i - 1], cst.Arg) else walk.i - 1
    outer = fate(walk.path[: j + 1], walk.facts, walk.is_tensor, walk.host_tables, methods=walk.methods,
                 factory_names=walk.factory_names)
    if outer.kind in (MOVE, ASSIGNED, NON_TENSOR, INDEX):
        return Fate(outer.kind, walk.met + outer.met, outer.name, outer.at)
    return Fate(USE, walk.met + outer.met, at=outer.at) if outer.kind == USE else Fate(NEUTRAL, walk.met)


def _added_to_list(walk: _Walk, func: cst.Attribute, call: cst.Call) -> Optional[Fate]:
    """`outs.append(v)` as a statement: the value lives on in the local list `outs`."""
    statement = walk.path[walk.i - 3] if walk.i >= 3 else None
    if (
        func.attr.value in _LIST_ADDS and isinstance(func.value, cst.Name)
        and isinstance(statement, cst.Expr) and statement.value is call
    ):
        return Fate(ASSIGNED, walk.met, func.value.value, statement)
    return None


_LIST_ADDS = frozenset({"append", "extend", "insert"})


def _assigned(walk: _Walk, parent: cst.Assign) -> Fate:
    if parent.value is not walk.cur:
        return walk.use()
    targets = [t.target for t in parent.targets]
    if len(targets) == 1 and isinstance(targets[0], cst.Name):
        return Fate(ASSIGNED, walk.met, targets[0].value, parent, ndim=walk.ndim)
    unpacked = _unpacked_names(targets)
    if unpacked and isinstance(parent.value, (cst.Tuple, cst.List)):  # `a, b = torch.zeros(n), x`: only a
        element = walk.path[walk.i + 1]
        position = next((k for k, e in enumerate(parent.value.elements) if e is element), None)
        if position is not None and len(unpacked) == len(parent.value.elements):
            return Fate(ASSIGNED, walk.met, unpacked[position], parent)
    elif unpacked:  # `ys, xs = torch.meshgrid(...)`, `a, b = t.unbind(0)`: each part is a tensor
        return Fate(ASSIGNED, walk.met, unpacked[0], parent)
    if all(isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value in walk.host_tables for t in targets):
        return Fate(NEUTRAL, walk.met)  # copied into a local table (`rel[..., 0] = t`)
    if all(isinstance(t, cst.Subscript) and _into_tensor(walk, t.value) and _plain_write(walk, t) for t in targets):
        return Fate(NEUTRAL, walk.met)  # `x[:, 0] = v` copies v across devices: it meets nothing
    return walk.use(*(t.value for t in targets if isinstance(t, cst.Subscript)))


def _into_tensor(walk: _Walk, base: cst.BaseExpression) -> bool:
    """A write's target is known to be a tensor (not a dict or a list that stores the value)."""
    return walk.is_tensor(base) or (isinstance(base, cst.Name) and base.value in walk.host_tables | walk.factory_names) \
        or (isinstance(base, cst.Attribute) and syntax.dotted_name(base) in walk.factory_names)


def _plain_write(walk: _Walk, target: cst.Subscript) -> bool:
    """`buf[i] = v`, `buf[:, a:b] = v`: integer and slice subscripts, a copy that works across
    devices (an index by a tensor is `index_put_`, which does not)."""
    for element in target.slice:
        parts = [element.slice.value] if isinstance(element.slice, cst.Index) else [
            p for p in (element.slice.lower, element.slice.upper, element.slice.step) if p is not None
        ]
        for part in parts:
            if isinstance(part, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                return False  # a key: not a tensor's
            if walk.is_tensor(part) and not _integer_element(walk, part) or (
                    isinstance(part, cst.Name) and part.value in walk.host_tables):
                return False
            if isinstance(part, cst.Call) and walk.facts.is_tensor_source(part) is not None:
                return False
    return True


def _unpacked_names(targets: Sequence[cst.BaseExpression]) -> list[str]:
    """The names of a single tuple or list target made only of names (`a, *rest = ...`)."""
    if len(targets) != 1 or not isinstance(targets[0], (cst.Tuple, cst.List)):
        return []
    elements = [e.value for e in targets[0].elements]
    return [e.value for e in elements] if all(isinstance(e, cst.Name) for e in elements) else []


def _comprehension(walk: _Walk, parent) -> None:
    """The element of a list comprehension: the list holds values like it."""
    walk.i -= 1


def _annotated(walk: _Walk, parent: cst.AnnAssign) -> Fate:
    if parent.value is not walk.cur:
        return walk.use()
    if isinstance(parent.target, cst.Name):
        return Fate(ASSIGNED, walk.met, parent.target.value, parent)
    return walk.use(*([parent.target.value] if isinstance(parent.target, cst.Subscript) else []))


def _augmented(walk: _Walk, parent: cst.AugAssign) -> Fate:
    other = parent.target if parent.value is walk.cur else parent.value
    return walk.use(other) if walk.is_tensor(other) else Fate(NEUTRAL, walk.met)


def _assignment_target(walk: _Walk, parent: cst.AssignTarget) -> Fate:
    """`t[i] = v` writes v into t: with integer and slice subscripts t keeps its device and meets
    nothing (a CPU buffer written with device values is still a CPU value)."""
    grand = walk.grand
    value = grand.value if isinstance(grand, cst.Assign) else None
    target = walk.path[walk.i]
    if isinstance(target, cst.Subscript) and _plain_write(walk, target):
        return Fate(NEUTRAL, walk.met)
    return walk.use(value) if value is not None and walk.is_tensor(value) else Fate(NEUTRAL, walk.met)


_STEPS: dict[type, Callable[[_Walk, cst.CSTNode], Optional[Fate]]] = {
    cst.Attribute: _attribute,
    cst.Subscript: _subscripted,
    cst.SubscriptElement: _index,
    cst.Index: _index,
    cst.Slice: _index,
    cst.UnaryOperation: _unary,
    cst.IfExp: _conditional,
    cst.BinaryOperation: _operator,
    cst.Comparison: _operator,
    cst.ComparisonTarget: _operator,
    cst.BooleanOperation: _boolean,
    cst.Element: _element,
    cst.StarredElement: _element,
    cst.Arg: _argument,
    cst.Assign: _assigned,
    cst.AnnAssign: _annotated,
    cst.AugAssign: _augmented,
    cst.AssignTarget: _assignment_target,
    cst.Expr: _neutral,
    cst.If: _tested,
    cst.While: _tested,
    cst.For: _neutral,
    cst.CompFor: _neutral,
    cst.Del: _neutral,
    cst.ListComp: _comprehension,
}


def _index_expressions(subscript: cst.Subscript) -> list[cst.BaseExpression]:
    out = []
    for element in subscript.slice:
        if isinstance(element.slice, cst.Index):
            value = element.slice.value
            if not (syntax.is_number_literal(value) or isinstance(value, cst.Ellipsis) or syntax.dotted_name(value) == "None"):
                out.append(value)
    return out


_FLOW_DEPTH = 4  # bindings followed back from a use, each through the value it was given


def derived_names(func: cst.FunctionDef, params: Sequence[str], facts: FileFacts, extra: set = frozenset(),
                  apart: frozenset = frozenset()) -> set[str]:
    """Tensor parameters and the local names computed from them (flow-insensitive); `extra`
    seeds it further (`module_self`); names in `apart` are known not to be."""
    assigns = [n for n in syntax.walk_expressions(func.body) if isinstance(n, (cst.Assign, cst.AnnAssign, cst.For, cst.CompFor))]
    seeds = stable_parameters(func, params, facts)
    # A comprehension's variable lives in the comprehension: where the function binds the same
    # name too (`for x in range(n):` beside `[... for x in ids]`), that name is the function's.
    scope_bound = {t.value for node in assigns if not isinstance(node, cst.CompFor)
                   for targets, _ in (_loop_names(node) if isinstance(node, cst.For) else [(assigned_names(node), None)])
                   for t in targets}

    def grow(seeds: set[str]) -> set[str]:
        derived = set(seeds) | set(extra)
        for _ in range(2):  # a second pass catches names assigned in loops before their sources
            for node in assigns:
                bound = _loop_names(node) if isinstance(node, (cst.For, cst.CompFor)) else [(assigned_names(node), node.value)]
                for targets, value in bound:
                    if value is not None and is_derived(value, derived, facts):
                        derived.update(t.value for t in targets
                                       if (t.value not in params or t.value in seeds) and t.value not in apart
                                       and not (isinstance(node, cst.CompFor) and t.value in scope_bound))
        return derived

    # `t = t.to(device=steps.device)` with `steps` a local made apart from the parameters (apart
    # from `t` itself too: it may be mixed with `steps` after the move): from there on `t` lives
    # where `steps` does, not where the parameter did
    locals_ = {n.value for node in assigns if isinstance(node, cst.Assign) for t in node.targets
               for n in syntax.unpacked_targets(t.target) if isinstance(n, cst.Name)} - set(params)
    moved_away = set()
    for node in assigns:
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            for target in assigned_names(node):
                other = _moved_onto(node.value, target.value)
                if target.value in seeds and other in locals_ and other not in grow(seeds - {target.value}):
                    moved_away.add(target.value)
    return grow(seeds - moved_away)


def _moved_onto(value: cst.BaseExpression, name: str) -> Optional[str]:
    """`o` where value is `name.to(o.device)`, `name.to(device=o.device)` or `name.type_as(o)`
    (not `name.to(d)`: `d` may be a device chosen apart from any tensor)."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and isinstance(value.func.value, cst.Name) and value.func.value.value == name
            and value.func.attr.value in ("to", "type_as")):
        return None
    given = syntax.keyword(value, "device") or next(iter(syntax.positional(value)), None)
    if given is None:
        return None
    target = given.value
    if isinstance(target, cst.Attribute) and target.attr.value == "device":
        target = target.value
    elif value.func.attr.value != "type_as":
        return None
    return target.value if isinstance(target, cst.Name) else None


def _same_class_method_of(methods: dict, func: cst.BaseExpression) -> Optional[cst.FunctionDef]:
    """The method `self.m` (or `cls.m`) names when m is defined in the class (not a submodule)."""
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
        defined = methods.get(func.attr.value)
        return defined[-1] if defined else None
    return None


def _returns_apart_from_arguments(method: Optional[cst.FunctionDef]) -> bool:
    """Whether every `return` of the method gives a value that reads none of its parameters
    but the object itself, nor a name the method binds (`return self.p / self.k ** 2`)."""
    if method is None:
        return False
    params = list(syntax.param_names(method.params))
    bound = set(params[1:])
    returns = []
    for node in syntax.walk(method.body):
        if isinstance(node, (cst.Yield, cst.Lambda, cst.FunctionDef)):
            return False
        if isinstance(node, cst.Return):
            returns.append(node.value)
        elif isinstance(node, cst.Assign):
            bound.update(n.value for t in node.targets for n in syntax.walk(t.target) if isinstance(n, cst.Name))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            bound.update(n.value for n in syntax.walk(node.target) if isinstance(n, cst.Name))
        elif isinstance(node, cst.AsName):
            bound.update(n.value for n in syntax.walk(node.name) if isinstance(n, cst.Name))
    return bool(returns) and all(
        value is not None and not any(isinstance(n, cst.Name) and n.value in bound for n in syntax.walk(value))
        for value in returns
    )


def _loop_names(loop: cst.For | cst.CompFor) -> list[tuple[list[cst.Name], cst.BaseExpression]]:
    """A loop's target names, each with what it iterates: `for t in x`, `for i, t in
    enumerate(x)` and `for a, b in zip(x, y)` take their items from x (and y), nested too
    (`for i, (a, b) in enumerate(zip(x, y))`)."""
    return _items_of(loop.target, loop.iter)


def _items_of(target: cst.BaseExpression, items: cst.BaseExpression) -> list[tuple[list[cst.Name], cst.BaseExpression]]:
    if isinstance(target, cst.Name):
        return [([target], items)]
    call = items if isinstance(items, cst.Call) and isinstance(items.func, cst.Name) else None
    if call is None or not isinstance(target, (cst.Tuple, cst.List)):
        return []
    parts = [e.value for e in target.elements]
    args = [a.value for a in syntax.positional(call)]
    if call.func.value == "enumerate" and len(parts) == 2 and args:
        return _items_of(parts[1], args[0])
    if call.func.value == "zip" and len(parts) == len(args):
        return [bound for part, arg in zip(parts, args) for bound in _items_of(part, arg)]
    return []


class FunctionValues:
    """The dataflow facts of one function, computed on first use."""

    def __init__(self, node: cst.FunctionDef, facts, is_forward: bool) -> None:
        self.node, self.facts, self.is_forward = node, facts, is_forward
        self.host_tables: frozenset = frozenset()  # local names bound to device-less factories
        self.methods: dict = {}  # the enclosing class's methods by name
        self.klass: Optional[ClassInfo] = None  # that class, where this is one of its methods
        self._scalar_attributes: Optional[frozenset] = None
        self._params: Optional[list[str]] = None
        self._derived: Optional[set[str]] = None
        self._scalar_names: Optional[frozenset] = None
        self._assigned: Optional[frozenset] = None
        self._factory_names: Optional[frozenset] = None
        self._bound_values: Optional[dict] = None
        self._moved: Optional[frozenset] = None
        self._host_names: Optional[frozenset] = None
        self._source_names: Optional[dict[str, str]] = None
        self._flow: Optional[_Flow] = None
        self._used_params: Optional[list[tuple[str, bool]]] = None
        self._views: dict[tuple, "FunctionValues"] = {}  # by the parameters read as no tensors

    @property
    def params(self) -> list[str]:
        if self._params is None:
            # in `forward` every parameter may be an input, but one annotated as a Python number
            # (`layer_index: int = None`) holds no tensor
            scalars = values.scalar_annotated(self.node) if self.is_forward else set()
            self._params = [p for p in tensor_parameters(self.node, self.facts, every_parameter=self.is_forward)
                            if p not in scalars]
        return self._params

    @property
    def derived(self) -> set[str]:
        if self._derived is None:
            seeds = set()
            declared = list(syntax.all_params(self.node.params))
            if self.is_forward and declared:  # `self.head(x)`: on the module's device, where x is
                seeds.add(module_self(declared[0].name.value))
            self._derived = derived_names(self.node, self.params, self.facts, seeds, apart=self._made_apart())
        return self._derived

    def _made_apart(self) -> frozenset:
        """Local names bound only to what a method of the class returns without reading its
        arguments (`gamma = self._gamma(x)` with `return self.p / self.k ** 2`): not made from them."""
        return frozenset(
            name for name, bound in self.bound_values().items()
            if all(isinstance(v, cst.Call) and _returns_apart_from_arguments(_same_class_method_of(self.methods, v.func))
                   for v in bound)
        )

    def bound_values(self) -> dict[str, list]:
        """Each local name bound by a plain assignment (`name = ...`, `name: T = ...`), with the
        values bound to it, in the order of the text."""
        if self._bound_values is None:
            self._bound_values = {}
            for node in syntax.walk_expressions(self.node.body):
                if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                    for name in assigned_names(node):
                        self._bound_values.setdefault(name.value, []).append(node.value)
        return self._bound_values

    def factory_names(self) -> frozenset:
        """Local names bound only to new tensors: factories (`f = torch.zeros(n, device=d)`), and
        tensors made in the image of another (`t = torch.zeros_like(s)`, `s.new_zeros(n)`,
        `s.clone()`), moved or reshaped on the spot (`torch.zeros(n).type_as(c)`), or arithmetic
        on the name itself (`c = c + pad(x)`: still a tensor). A write into one copies."""
        if self._factory_names is None:
            def made_new(value: cst.BaseExpression) -> bool:
                value = self._made_by(value)
                return isinstance(value, cst.Call) and (self.facts.is_tensor_source(value) is not None or self._made_like(value))

            def on_itself(name: str, value: cst.BaseExpression) -> bool:
                return isinstance(value, cst.BinaryOperation) and any(
                    isinstance(o, cst.Name) and o.value == name for o in (value.left, value.right))

            self._factory_names = frozenset(
                name for name, bound in {**self.bound_values(), **self._bound_attributes()}.items()
                if any(map(made_new, bound)) and all(made_new(v) or on_itself(name, v) for v in bound)
            )
        return self._factory_names

    def _bound_attributes(self) -> dict[str, list]:
        """Each `self.NAME` (as `"self.NAME"`) the function binds by a plain assignment, with the
        values bound to it here: a write into one this function made (`self.pe = torch.zeros(n,
        d)`, then `self.pe[:, 0::2] = torch.sin(pos)`) copies, as into a local table."""
        me = syntax.self_name(self.node)
        bound: dict[str, list] = {}
        if me is None:
            return bound
        for node in syntax.walk_expressions(self.node.body):
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                target = node.targets[0].target
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == me:
                    bound.setdefault(f"{me}.{target.attr.value}", []).append(node.value)
        return bound

    def _made_by(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """The call under the tensor methods that keep a new tensor one (`.type_as(c)`, `.to(d)`,
        `.float()`, `.view(...)`): `torch.zeros(n)` of `torch.zeros(n).type_as(c)`."""
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call) \
                and self.facts.resolve(value.func) is None \
                and value.func.attr.value in names.SHAPE_METHODS | names.MOVES | {"to", "type", "cpu"}:
            value = value.func.value
        return value

    def _made_like(self, call: cst.Call) -> bool:
        qualified = self.facts.resolve(call.func) or ""
        if qualified.startswith("torch.") and qualified.endswith("_like"):
            return True
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
        return qualified == "" and (method in names.NEW_TENSOR_METHODS or method == "clone")

    def assigned_names(self) -> frozenset:
        """The names and attributes the function assigns (`_assigned_dotted_names`)."""
        if self._assigned is None:
            self._assigned = _assigned_dotted_names(self.node)
        return self._assigned

    def scalar_names(self) -> frozenset:
        if self._scalar_names is None:
            self._scalar_names = values.scalar_names(self.node, self.facts)
        return self._scalar_names

    def host_names(self) -> frozenset:
        """Local names bound only to host values (`arr = x.cpu().numpy()`, `torch.from_numpy(...)`)."""
        if self._host_names is None:
            self._host_names = frozenset(
                name for name, bound in self.bound_values().items()
                if all(values.is_host_value(v, self.facts)
                       or isinstance(v, cst.Call) and self.facts.resolve(v.func) == names.FROM_NUMPY for v in bound)
            )
        return self._host_names

    def is_host_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor (or array) on the host: a host value, or a local name bound only to one."""
        if isinstance(expr, cst.Name):
            return expr.value in self.host_names()
        return values.is_host_value(expr, self.facts)

    def first_used_param(self, path=None) -> Optional[str]:
        if self._used_params is None:  # one walk of the function, for all its reports
            self._used_params = used_tensor_params(self.node, self.params, self.facts)
        return first_fit(self._used_params, path)

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor computed from a tensor parameter: one that may live on another device (a
        name counts as the value its binding that reaches expr gave it: see `_tensor_here`)."""
        return self._tensor_here(expr)

    def meets_derived(self, met) -> bool:
        return any(self._tensor_here(expr) for expr in met)

    def _tensor_here(self, expr: cst.BaseExpression, apart: frozenset = frozenset(), depth: int = 0) -> bool:
        """Derived from a tensor parameter (less the names `apart`), where a name whose binding
        that reaches expr is a host value or a value not derived from one (`curr =
        curr.cpu().float()`, `emb = math.log(n) / d` on the lines before, or `c = c / n` after
        `c = x.sum()` with `x` such a value) counts as that value."""
        derived = self.derived - apart
        if not is_derived(expr, derived, self.facts):
            return False
        apart_here = {n.value for n in syntax.walk(expr) if isinstance(n, cst.Name) and n.value in derived
                     and (self._underived_binding_reaches(n, depth) or self._no_tensor_where_read(n))}
        return not apart_here or is_derived(expr, derived - apart_here, self.facts)

    def _host_on_every_arm(self, value: cst.BaseExpression) -> bool:
        """`H if H.device.type == "cpu" else H.cpu()`: each arm a host value, or the tested
        parameter itself in the arm where the test says it is on the CPU."""
        if not isinstance(value, cst.IfExp):
            return False
        on_cpu = cpu_test(value.test, self.params)

        def host(arm: cst.BaseExpression, cpu_side: bool) -> bool:
            return values.is_host_value(arm, self.facts) or (
                cpu_side and isinstance(arm, cst.Name) and arm.value in self.params)
        return on_cpu is not None and host(value.body, on_cpu) and host(value.orelse, not on_cpu)

    def _no_tensor_where_read(self, use: cst.Name) -> bool:
        """A parameter read where the function's own test says it holds no tensor (in the arm of
        `isinstance(X, PackedSequence)` for `X: torch.Tensor | PackedSequence`)."""
        if use.value not in self.params:
            return False
        if self._flow is None:
            self._flow = _Flow(self.node)
        return not_a_tensor_here(use, [self.node, *reversed(self._flow.ancestors(use)), use], self.facts)

    def _underived_binding_reaches(self, use: cst.Name, depth: int = 0) -> bool:
        """The last binding of `use`'s name before it is `name = <host value, or one not derived
        from a tensor parameter>`, in a block that holds the use (it always runs before it), with
        no later binding in a loop around the use."""
        if self._flow is None:
            self._flow = _Flow(self.node)
        flow = self._flow
        at = flow.order.get(id(use))
        bindings = flow.bindings.get(use.value, [])
        before = [b for b in bindings if b[0] < at] if at is not None else []
        if not before:
            return False
        enclosing = {id(n): n for n in flow.ancestors(use)}
        before = [b for b in before if id(b[1]) not in enclosing]  # `x = f(x)` reads the x bound before it
        # `x = x.clone()` (a method that keeps x where it is, on x alone) leaves the place the
        # binding before it gave, wherever it runs
        before = [b for b in before if not _keeps_its_place(use.value, b[2])]
        if not before:
            return False
        index, statement, value = before[-1]
        # the bound value is judged where it is bound: its names by the bindings reaching it,
        # each earlier in the text than the last (a few steps deep)
        if value is None or not (values.is_host_value(value, self.facts) or self._host_on_every_arm(value)
                                 or not (self._tensor_here(value, depth=depth + 1) if depth < _FLOW_DEPTH
                                         else is_derived(value, self.derived, self.facts))):
            return False
        if id(flow.parents.get(id(statement))) not in enclosing:
            return False  # bound in a branch the use may not follow
        loops = [id(n) for n in enclosing.values() if isinstance(n, (cst.For, cst.While))]
        return not any(i > at and any(id(a) in loops for a in flow.ancestors(s)) for i, s, _ in bindings)

    def verdict(self, call: cst.Call, source: str, path) -> "Verdict":
        """Whether to flag if this runs at forward time, and otherwise, with the use that decides."""
        apart = [p for p in self.params if not_a_tensor_here(cst.Name(p), path, self.facts)]
        if apart:
            # where a test says a parameter is no tensor (`else` of `if torch.is_tensor(p):`), no
            # value made from it is on a device: what the other arm bound to it is not bound here
            return self._without_params(apart).verdict(call, source, path)
        found = self._verdict(call, source, path)
        if not _no_elements(call, source):
            return found
        # `torch.empty(0)` in arithmetic broadcasts to an empty result on any device: code that
        # reads it so fills the slot first (`dvxdy[i][j]` of `[[torch.empty(0)] * n] * n`), while a
        # join (`torch.cat([acc, x])`, the accumulator idiom) does meet it, and is still flagged
        def deciding(use: Optional[Fate]) -> Optional[Fate]:
            return None if use is not None and isinstance(use.at, _ARITHMETIC) else use

        return Verdict(deciding(found.forward_use), deciding(found.meeting), moved=found.moved)

    def _without_params(self, apart: list[str]) -> "FunctionValues":
        """The same function's values with the parameters `apart` read as no tensors (one view
        for each such set, shared by the factories of that arm)."""
        key = tuple(apart)
        other = self._views.get(key)
        if other is None:
            other = self._views[key] = FunctionValues(self.node, self.facts, self.is_forward)
            other.methods, other.klass, other.host_tables = self.methods, self.klass, self.host_tables
            other._params = [p for p in self.params if p not in apart]
        return other

    def _verdict(self, call: cst.Call, source: str, path) -> "Verdict":
        parent = path[-2] if path[-1] is call else path[-1]
        if _empty_shape(call, source) and not isinstance(parent, (cst.Attribute, cst.Subscript)):
            # `torch.empty([])`: a 0-dim CPU scalar mixes with tensors on any device (not
            # `torch.ones(()).expand(n)`, `[None]`: a method or an index may give it dimensions)
            return Verdict()
        if source in (names.AS_TENSOR, "torch.tensor", "torch.Tensor"):
            data = syntax.positional(call)
            if data and a_number_here(data[0].value, path, self.facts):
                return Verdict()  # `torch.tensor(v)` under `isinstance(v, float)`: a 0-dim scalar
            if data and not_a_tensor_here(data[0].value, path, self.facts):
                data = []  # `torch.tensor(t) if not isinstance(t, Tensor) else t`: here t is no tensor
            if data and is_derived(data[0].value, self.derived, self.facts):
                return Verdict()  # tensor data keeps its device (`torch.Tensor(t)` is an alias of t)
            if data and self._reads_parameter_unbound(data[0].value, call):
                return Verdict()  # `t = torch.as_tensor(t)`: t is still the tensor parameter here
            if data and source == names.AS_TENSOR and self._may_be_a_tensor_parameter(data[0].value, call):
                return Verdict()  # `v = torch.as_tensor(v)`: of a tensor, `as_tensor` keeps it where it is
            if data and self._tensor_data(data[0].value, path):
                return Verdict()  # `torch.tensor(-s / 2)` with `s = self.s.to(x)`: copied where s is
            if data and not isinstance(data[0].value, (cst.List, cst.Tuple, *values.COMPREHENSIONS)) and is_derived(
                data[0].value, self.derived | self._self_call_results(), self.facts
            ):
                return Verdict()  # `torch.tensor(self.loss(x, y) * a)`: a tensor where x is, copied there
            if len(data) == 1 and self._scalar_expression(data[0].value):
                return Verdict()  # a 0-dim CPU scalar may mix with tensors on any device
            if len(data) == 1 and self._reads_parameter_unbound(data[0].value, call, values.scalar_annotated(self.node)):
                return Verdict()  # `value = torch.tensor(value)` with `value: float`: still the number here
            if len(data) == 1 and self._comparison_not_of_arrays(data[0].value):
                return Verdict()  # `torch.as_tensor(x > 0)`: a bool (0-dim) or a tensor kept where it is
        if source == names.FROM_NUMPY:
            data = syntax.positional(call)
            if len(data) == 1 and self._scalar_expression(data[0].value):
                return Verdict()  # `torch.from_numpy(np.pi)`: no array, so no tensor with dimensions
        found = fate(path, self.facts, self.is_tensor, self.host_tables, methods=self.methods,
                     factory_names=self.factory_names())
        if found.kind == USE and self._returned_harmlessly(found, call):
            return Verdict()
        if found.kind == USE and isinstance(found.at, cst.Param):
            return Verdict()  # a parameter's default: where it meets anything is the parameter's reads, not followed
        if found.kind == USE and not found.met and _stored_then_moved(path, found.at, self.facts, rebound=True):
            return Verdict()  # `self.m = <value>`, then `self.m = self.m.to(x)` before any other read
        if found.kind == USE and _stored_where_moved_at_every_read(path, found.at, found.met, self.facts):
            return Verdict()  # `self.m = <value>`, and every later read of `self.m` moves it
        if found.kind == USE:
            return Verdict(found, found if self.meets_derived(found.met) else None)
        if found.kind != ASSIGNED:
            return Verdict()
        return self._follow(found.name, path, found.ndim)

    def evidence(self, use: Fate) -> tuple[cst.CSTNode, str]:
        """(node, clause) for the use that decides a finding: where the value meets a tensor
        derived from a parameter (and which), or where it is first used."""
        derived = next((e for e in use.met if self.is_tensor(e)), None)
        if derived is not None:
            return derived, f"it meets `{_code(derived)}` ({self.origin(derived)})"
        other = next(iter(use.met), None)
        if other is not None:
            return other, f"it meets `{_code(other)}`"
        where = use.at
        if isinstance(where, cst.Return):
            return where, "it is returned"
        if isinstance(where, (cst.Assign, cst.AnnAssign, cst.AssignTarget, cst.AugAssign)):
            return where, "it is stored"
        if isinstance(where, cst.Arg) or where is None:
            return where, "it is passed on"
        return where, "it is used"

    def roots(self, expr: cst.BaseExpression) -> set[str]:
        """The derived names in expr, and the tensor parameters they come from."""
        found = set()
        for name, param in self._traced(expr):
            found.add(name)
            if param is not None:
                found.add(param)
        return found

    def parameter_roots(self, expr: cst.BaseExpression) -> Optional[set[str]]:
        """The tensor parameters a derived expression comes from; None where one of its derived
        names comes from none of them (a loop variable over something else, say)."""
        traced = list(self._traced(expr))
        if any(param is None for _, param in traced):
            return None
        return {param for _, param in traced}

    def _traced(self, expr: cst.BaseExpression):
        """(name, the parameter it comes from or None) for each derived name in expr."""
        for node in syntax.walk(expr):
            if isinstance(node, cst.Name) and node.value in self.derived:
                name, seen = node.value, set()
                while name not in self.params and name in self._sources and name not in seen:
                    seen.add(name)
                    name = self._sources[name]
                yield node.value, name if name in self.params else None

    def origin(self, expr: cst.BaseExpression) -> str:
        """Which parameter a derived expression comes from, in words."""
        for name, param in self._traced(expr):
            if param is not None:
                if name == param:
                    return "`forward` input" if self.is_forward else f"parameter `{param}`"
                return f"derived from parameter `{param}`"
        return "derived from a tensor parameter"

    @property
    def _sources(self) -> dict[str, str]:
        if self._source_names is None:
            self._source_names = {}
            for node in syntax.walk_expressions(self.node.body):
                if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                    first = next((n.value for n in syntax.walk(node.value) if isinstance(n, cst.Name) and n.value in self.derived), None)
                    for target in assigned_names(node):
                        if first is not None and first != target.value:
                            self._source_names.setdefault(target.value, first)
        return self._source_names

    def _follow(self, name: str, path, ndim: Optional[int] = None, alone: bool = False) -> "Verdict":
        """Follow a local name from the statement that binds it to its later uses (`alone`:
        that name only, not the others the statement binds).

        Flow-light: code in a branch exclusive with the binding's (the other arm of its `if`)
        neither uses the value nor ends it."""
        binding = next(n for n in reversed(path) if isinstance(n, (cst.Assign, cst.AnnAssign, cst.Expr)))
        tracked = {name} if alone else set(_bound_names(binding)) or {name}
        ndims = {name: ndim}  # the tracked names' numbers of dimensions, where known
        arms = _branch_arms(path)
        conditions = _conditions_held(path, self.assigned_names)
        arm_local = self._arm_local_names(path)
        started = False
        first_use = first_meet = None
        moved = False  # moved before any use
        move_assigns = set()
        rebinds: dict = {}  # statement -> tracked names it binds to the value
        kept = set()  # statements that bind a name to itself, unchanged in one arm
        for node, node_path in syntax.walk_with_paths(self.node, []):
            if node is binding:
                started = True
                continue
            if not started or not isinstance(node, cst.Name) or node.value not in tracked or binding in node_path:
                continue
            if not _is_variable(node_path):  # `data.face`, `f(face=...)`: another name
                continue
            if arms and _in_other_arm(node_path, arms):
                continue
            if conditions and _conditions_held(node_path, self.assigned_names) & {(t, not held) for t, held in conditions}:
                continue  # bound where a test fails, read only where it holds (or the reverse)
            assign = _storing_statement(node_path)
            if assign is not None:
                if assign in move_assigns and assign in kept:
                    break  # `t = t.cuda() if c else t`: moved in one arm, as `if c: t = t.cuda()` is
                if node.value in rebinds.get(assign, ()):
                    continue
                if assign in move_assigns:  # `t = t.to(...)`: moved before any later use
                    break
                tracked.discard(node.value)
                if not tracked:
                    break
                continue
            found = fate(node_path, self.facts, self.is_tensor, self.host_tables, ndims.get(node.value),
                         self.methods, self.factory_names())
            if found.kind == USE and self._returned_harmlessly(found, node):
                found = Fate(MOVE, found.met)
            if found.kind == USE and found.met and all(self._of_itself(e, tracked) for e in found.met):
                continue  # `m.masked_fill(m != 0, v)`: the value meets only itself, where it was made
            if found.kind == USE and _stored_where_moved_at_every_read(
                    node_path, found.at, [e for e in found.met if self._tensor_here(e, arm_local)], self.facts):
                continue  # `self.grid = torch.cat((xx, yy))`, every later read of `self.grid` moves it
            if found.kind == MOVE:
                moved = moved or first_use is None
                statement = next((n for n in reversed(node_path) if isinstance(n, (cst.Assign, cst.AnnAssign))), None)
                if statement is not None:
                    move_assigns.add(statement)
            elif found.kind == USE:
                first_use = first_use or found
                if first_meet is None and any(self._tensor_here(e, arm_local) for e in found.met):
                    first_meet = found
            elif found.kind == ASSIGNED and found.name:
                if found.name == node.value:
                    kept.add(found.at)
                bound = set(_bound_names(found.at)) or {found.name}
                tracked |= bound
                ndims.update(dict.fromkeys(bound, found.ndim if len(bound) == 1 else None))
                rebinds[found.at] = bound
        return Verdict(first_use, first_meet, moved)

    def _of_itself(self, expr: cst.BaseExpression, tracked: set) -> bool:
        """`expr` is computed from the followed value alone: it reads only the names bound to
        the value (`tracked`) and names bound only to expressions of those (`top = v.max()`)."""
        own = set(tracked)
        for name, bound in self.bound_values().items():
            if name not in own and name not in self.params and all(_made_of(v, tracked) for v in bound):
                own.add(name)
        return _made_of(expr, own)

    def _tensor_data(self, data: cst.BaseExpression, path) -> bool:
        """`data` computes on a tensor whose place is not the CPU by default: a local name bound
        only to a move (`s = self.s.to(x)`), or a buffer of the class (`self.table`)."""
        for node, node_path in syntax.walk_with_paths(data, []):
            if isinstance(node, cst.Name) and _is_variable(node_path) and node.value in self._moved_names():
                return True
            if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
                klass = next((n for n in path if isinstance(n, cst.ClassDef)), None)
                if klass is not None and node.attr.value in self.facts.buffers(klass):
                    return True
        return False

    def _moved_names(self) -> frozenset:
        """Local names bound only to moved tensors (`s = t.to(x)`, `a, s = u, t.cuda()`)."""
        if self._moved is None:
            bound: dict[str, bool] = {}
            for node in syntax.walk_expressions(self.node.body):
                if isinstance(node, cst.Assign) and len(node.targets) == 1:
                    target, value = node.targets[0].target, node.value
                    pairs = [(target, value)]
                    if isinstance(target, (cst.Tuple, cst.List)):
                        same = isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements)
                        pairs = [(t.value, v.value if same else None)
                                 for t, v in zip(target.elements, value.elements if same else target.elements)]
                    for name, bound_value in pairs:
                        if isinstance(name, cst.Name):
                            is_moved = isinstance(bound_value, cst.Call) and values.is_move(bound_value, self.facts)
                            bound[name.value] = bound.get(name.value, True) and is_moved
            self._moved = frozenset(name for name, is_moved in bound.items() if is_moved)
        return self._moved

    def _reads_parameter_unbound(self, data: cst.BaseExpression, call: cst.Call, params=None) -> bool:
        """`data` names a tensor parameter (or one of `params`) that nothing has rebound before
        `call` runs (in `t = torch.as_tensor(t)` the binding comes after the read)."""
        if not isinstance(data, cst.Name) or data.value not in (self.params if params is None else params):
            return False
        for node, path in syntax.walk_with_paths(self.node.body, []):
            if node is call:
                return True
            if isinstance(node, cst.Name) and node.value == data.value and _is_variable(path):
                statement = _storing_statement(path)
                if statement is not None and call not in set(syntax.walk(statement)):
                    return False
        return False

    def _may_be_a_tensor_parameter(self, data: cst.BaseExpression, call: cst.Call) -> bool:
        """`data` names a parameter, not rebound before `call`, that may hold a tensor: its
        annotation, if any, names a tensor (the test that it is none is asked before)."""
        declared = syntax.param_names(self.node.params)
        if self.klass is not None and "staticmethod" not in syntax.decorator_names(self.node):
            declared = declared[1:]  # `self` or `cls`
        return isinstance(data, cst.Name) and data.value in declared \
            and not declared_without_tensor(data.value, self.node, self.facts) \
            and self._reads_parameter_unbound(data, call, declared)

    def _comparison_not_of_arrays(self, expr: cst.BaseExpression) -> bool:
        """`a > 0`, `f(c) < y`: a comparison gives a Python bool or a tensor where its operands
        are (no list compares element by element); only a NumPy operand makes a host array. So
        a comparison none of whose operands is known to be one."""
        if not isinstance(expr, cst.Comparison):
            return False
        operands = [expr.left, *(t.comparator for t in expr.comparisons)]
        return not any(
            values.is_host_value(o, self.facts) or self.is_host_tensor(o)
            or any((self.facts.resolve(n) or "").startswith("numpy.") for n in syntax.walk(o)
                   if isinstance(n, (cst.Name, cst.Attribute)))
            for o in operands)

    def _scalar_expression(self, expr: cst.BaseExpression) -> bool:
        """A Python scalar: as `values.is_python_scalar` says, or arithmetic or a conditional
        expression over such values and the class's scalar attributes (`2 * self.sparsity - 1`)."""
        if values.is_python_scalar(expr, self.facts, self.scalar_names) or self._scalar_attribute(expr):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return self._scalar_expression(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return self._scalar_expression(expr.left) and self._scalar_expression(expr.right)
        if isinstance(expr, cst.IfExp):  # `t if t is not None else self.t`
            return self._scalar_expression(expr.body) and self._scalar_expression(expr.orelse)
        return False

    def _scalar_attribute(self, expr: cst.BaseExpression) -> bool:
        """`self.NAME` where the class (with its same-file bases) assigns NAME only Python
        scalars (numbers, parameters annotated `int`/`float`/`bool`)."""
        if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"):
            return False
        if self._scalar_attributes is None:
            if self.klass is None:
                self._scalar_attributes = values.scalar_attributes(
                    [f for defs in self.methods.values() for f in defs], self.facts)
            else:  # one answer per class of the file, shared by its methods' views
                known = self.facts.memo.setdefault("dev003.scalar-attributes", {})
                if id(self.klass) not in known:
                    known[id(self.klass)] = values.scalar_attributes(
                        [f for klass in self.facts.lineage(self.klass) for defs in klass.methods.values() for f in defs],
                        self.facts)
                self._scalar_attributes = known[id(self.klass)]
        return expr.attr.value in self._scalar_attributes

    def _self_call_results(self) -> set:
        """Local names bound to what `self.f(t)` returns for a tensor t derived from a parameter
        (a method or a submodule of the same object: its result is a tensor where t is), to
        what torch computes from such results, and to the parts of a result unpacked into
        several names (`out, (h, c) = self.lstm(x)`, `a, b = x.chunk(2)`). Asked only of the
        data of `torch.tensor(...)`, where a tensor keeps its device."""
        found: set = set()
        assigns = [n for n in syntax.walk_expressions(self.node.body) if isinstance(n, cst.Assign) and n.value is not None]
        for _ in range(3):
            known = self.derived | found
            for node in assigns:
                calls = [c for c in syntax.walk(node.value) if isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute)
                         and isinstance(c.func.value, cst.Name) and c.func.value.value == "self"]
                if is_derived(node.value, known, self.facts) or any(
                        is_derived(a.value, known, self.facts) or isinstance(a.value, cst.Name) and a.value.value in known
                        for c in calls for a in syntax.positional(c)):
                    found.update(n.value for t in node.targets for n in syntax.unpacked_targets(t.target)
                                 if isinstance(n, cst.Name))
        return found

    def _arm_local_names(self, path) -> set:
        """Names that the innermost arm of an `if` holding the binding at path binds only to
        values not derived from a parameter: after the `if`, when this value comes from that
        arm, so do they (`else: a = torch.ones(n); b = torch.zeros(n)` ... `b + a`), whatever
        the other arm binds them to."""
        k = next((k for k in range(len(path) - 2, -1, -1) if isinstance(path[k], cst.If)), None)
        if k is None:
            return set()
        bound: dict[str, bool] = {}
        for node in syntax.walk_expressions(path[k + 1]):
            if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                for target in assigned_names(node):
                    plain = not is_derived(node.value, self.derived, self.facts)
                    bound[target.value] = bound.get(target.value, True) and plain
        return {name for name, plain in bound.items() if plain}

    def meets_nothing_unmoved(self, path, position: Optional[int] = None) -> bool:
        """Whether the value path[-1] makes (a call's result) meets no tensor before it is moved:
        moved first, or only iterated, indexed with or read on the host; with a `position`, the
        element at that position of the tuple the call returns, which the call site must unpack
        (`a, b = self.f(x)`) and then move before any use, or use only as an index or on the host
        (`a, idx = self.f(x)` then `y[idx]`)."""
        found = fate(path, self.facts, self.is_tensor, self.host_tables, methods=self.methods,
                     factory_names=self.factory_names())
        if position is not None:
            if found.kind != ASSIGNED or not isinstance(found.at, cst.Assign) or len(found.at.targets) != 1:
                return False
            target = found.at.targets[0].target
            if isinstance(target, cst.Name):  # `masks = self.f(x)`, then `masks[0]`, `masks[1]`
                return self._items_meet_nothing(target.value, position, found.at)
            parts = list(target.elements) if isinstance(target, (cst.Tuple, cst.List)) else []
            if len(parts) <= position or any(isinstance(e, cst.StarredElement) for e in parts):
                return False
            if isinstance(parts[position].value, cst.Attribute):  # `self.a, self.b = self.f(x)`
                return _stored_where_moved_at_every_read(path, found.at, (), self.facts, part=parts[position].value)
            if not isinstance(parts[position].value, cst.Name):
                return False
            verdict = self._follow(parts[position].value.value, path, alone=True)
            return verdict.forward_use is None
        if found.kind in (MOVE, NEUTRAL, NON_TENSOR):
            return True  # moved, or only iterated, indexed with or read on the host: it meets nothing
        if found.kind == USE and not found.met and _stored_then_moved(path, found.at, self.facts):
            return True
        if found.kind == USE and _stored_where_moved_at_every_read(path, found.at, found.met, self.facts):
            return True
        if found.kind != ASSIGNED or not found.name:
            return False
        verdict = self._follow(found.name, path, found.ndim)
        return verdict.forward_use is None  # moved before use, or never used where it meets anything

    def _items_meet_nothing(self, name: str, position: int, binding: cst.Assign) -> bool:
        """`name`, bound once in this function by `binding` to a returned tuple, is read only as
        `name[k]` with integer literals k, and each read of `name[position]` moves the item or
        meets nothing (`self.register_buffer("m0", masks[0])` in `__init__`, `masks[0].to(x.device)`)."""
        reads = 0
        for node, node_path in syntax.walk_with_paths(self.node, []):
            if not (isinstance(node, cst.Name) and node.value == name and _is_variable(node_path)):
                continue
            if binding in node_path or syntax.in_exclusive_arms(self.node, binding, node):
                continue  # the binding itself, or the other arm of its `if` (`else: masks = None`)
            if _storing_statement(node_path) is not None:
                return False  # bound again: another value under the name
            parent = node_path[-2]
            index = parent.slice[0].slice if isinstance(parent, cst.Subscript) and parent.value is node \
                and len(parent.slice) == 1 and isinstance(parent.slice[0].slice, cst.Index) else None
            if index is None or not isinstance(index.value, cst.Integer):
                return False
            if int(index.value.value) != position:
                continue
            if fate(node_path[:-1], self.facts, self.is_tensor, self.host_tables, methods=self.methods).kind \
                    not in (MOVE, NEUTRAL, NON_TENSOR):
                return False
            reads += 1
        return reads > 0

    def _returned_harmlessly(self, use: Fate, value: cst.CSTNode) -> bool:
        """`return v` (or `return a, v`) of a function whose result (or that element of it)
        meets no tensor unmoved at every call site the file has (`self.kernel(n).repeat(c,
        1).to(y)`; `a, v = self.f(x)` then `v.to(y)`; `for size in self.sizes(n):`): the
        caller decides where a returned value goes. A method is called through `self`, `cls`
        or its class in its class and the same file's subclasses; a nested function in the
        function that defines it; a module-level function in the file's functions. A
        function the file also names other than in a call (a callback), or calls from module
        level, is not followed. `value` is the node the use was found from."""
        if not isinstance(use.at, cst.Return) or use.met:
            return False
        returned = use.at.value
        position = None
        if isinstance(returned, cst.Tuple):
            position = next((k for k, e in enumerate(returned.elements)
                             if not isinstance(e, cst.StarredElement) and any(n is value for n in syntax.walk(e.value))), None)
            if position is None:
                return False
        # one answer per function of the file, shared by every view of it: the calls of a
        # recursive function (or of functions that return each other's values) lead back here
        known = self.facts.memo.setdefault("dev003.harmless-returns", {})
        key = (id(self.node), position)
        if key not in known:
            known[key] = False  # while it is decided: a value that comes back round is not followed
            sites = call_sites(self.node, self.facts)
            known[key] = bool(sites) and all(
                values_of(function, self.facts).meets_nothing_unmoved(path, position) for function, path in sites
            )
        return known[key]


def _stored_then_moved(path, store, facts, rebound: bool = False) -> bool:
    """`store` is `self.NAME = <the value>` and the statement after it (in its block, or after
    the `if` whose arm it ends) first reads `self.NAME` to move it (`self.w = self.w.to(x)`,
    `m = self.w.to(x.device)`): like a local moved on the next statement, it meets nothing.
    `rebound`: only where that statement stores the moved value back (`self.w = self.w.to(x)`),
    so that other methods read it moved too."""
    if not isinstance(store, cst.Assign) or len(store.targets) != 1:
        return False
    target = store.targets[0].target
    if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"):
        return False
    k = next((k for k in range(len(path) - 1, -1, -1) if path[k] is store), None)
    following = _statement_after(path, k - 1) if k else None
    if following is None:
        return False
    if rebound and not (isinstance(following, cst.SimpleStatementLine) and isinstance(following.body[0], cst.Assign)
                        and len(following.body[0].targets) == 1
                        and following.body[0].targets[0].target.deep_equals(target)):
        return False
    for node, node_path in syntax.walk_with_paths(following, []):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self" \
                and node.attr.value == target.attr.value:
            parent, call = (node_path[-2], node_path[-3]) if len(node_path) > 2 else (None, None)
            return isinstance(parent, cst.Attribute) and parent.value is node and isinstance(call, cst.Call) \
                and call.func is parent and values.is_move(call, facts)
    return False


def _stored_where_moved_at_every_read(path, store, met, facts, part: Optional[cst.BaseExpression] = None) -> bool:
    """`store` puts the value in `self.NAME` (`self.NAME = v`, an item `self.NAME[key] = v`, or
    `part`, one element of `self.a, self.b = f(x)`) in a method, and every read of `self.NAME` in
    the methods of the class, of its same-file bases and subclasses after construction (not in
    `__init__`) moves it where it is read
    (`self.NAME.to(x.device)`; for an item store `self.NAME[key].to(x)`), comes after a statement
    of its function that moves it back (`self.NAME = self.NAME.to(x.device)`, also in an `if` that
    tests it), or reads only what it is (`.device`, `.shape`, `.dtype`, `is None`, `key in
    self.NAME`). As DEV004 spares a table moved at every read, the attribute lives where it is
    moved, and the stored value meets nothing there."""
    if not isinstance(store, cst.Assign) or len(store.targets) != 1:
        return False
    target = part if part is not None else _stored_part(path, store, met)
    item = isinstance(target, cst.Subscript)
    if item:
        target = target.value
    k = next((k for k in range(len(path) - 1, -1, -1) if path[k] is store), None)
    method = syntax.enclosing_function(path[:(k or 0) + 1])
    definer = facts.definers.get(method) if method is not None else None
    if not isinstance(definer, ClassInfo) or not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                                                  and target.value.value == syntax.self_name(method)):
        return False
    name = target.attr.value
    # the class, its same-file bases (a base's `forward` reads what a subclass's method stores)
    # and its same-file subclasses
    classes = {id(c): c for c in (*facts.lineage(definer), *facts.with_subclasses(definer))}.values()
    reads = 0
    for function in (f for c in classes for f in syntax.block_statements(c.node.body)):
        me = syntax.self_name(function) if isinstance(function, cst.FunctionDef) else None
        if me is None or function.name.value == "__init__":
            continue
        for node, node_path in syntax.walk_with_paths(function, []):
            if not (isinstance(node, cst.Attribute) and node.attr.value == name
                    and isinstance(node.value, cst.Name) and node.value.value == me):
                continue
            if _written(node, node_path):
                continue
            if not (_read_moved(node, node_path, item, facts) or _moved_back_before(node_path, name, me, facts)):
                return False
            reads += 1
    return reads > 0


def _stored_part(path, store: cst.Assign, met) -> Optional[cst.BaseExpression]:
    """Where `store` puts the value path[-1] makes: its target (`self.a = v`, meeting nothing),
    the item it sets (`self.d[key] = v`, meeting only `self.d`), or the element of a tuple target
    that takes it (`self.a, self.b = v, w`)."""
    target = store.targets[0].target
    if isinstance(target, cst.Subscript):
        return target if all(m is target.value for m in met) else None
    if met:
        return None
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(store.value, (cst.Tuple, cst.List)) \
            and len(target.elements) == len(store.value.elements):
        held = {id(n) for n in path}
        position = next((k for k, e in enumerate(store.value.elements) if id(e) in held), None)
        return None if position is None else target.elements[position].value
    return target


def _written(node: cst.Attribute, node_path) -> bool:
    """`self.NAME = v`, `self.NAME[key] = v` or `self.NAME, other = v`: a write, not a read."""
    i = len(node_path) - 2
    if isinstance(node_path[i], cst.Subscript) and node_path[i].value is node:
        i -= 1
    while i > 0 and isinstance(node_path[i], (cst.Element, cst.Tuple, cst.List)):
        i -= 1
    return isinstance(node_path[i], cst.AssignTarget)


def _read_moved(node: cst.Attribute, node_path, item: bool, facts) -> bool:
    """The read `self.NAME` at node_path[-1] moves it there, reads only what it is, or tests
    whether a key is in it."""
    read, i = node, len(node_path) - 2
    if item and isinstance(node_path[i], cst.Subscript) and node_path[i].value is read:
        read, i = node_path[i], i - 1  # `self.NAME[key]`: the item the store put there
    read, i = values.through_casts(node_path, i, read, facts)
    if values.reads_only_what_it_is([*node_path[:i + 1], read]):
        return True
    parent = node_path[i]
    if isinstance(parent, cst.Attribute) and parent.value is read:
        call = node_path[i - 1]
        if not (isinstance(call, cst.Call) and call.func is parent):
            return False
        # `self.NAME = self.NAME.to(dtype=x.dtype)`: cast where it is, and stored back, it meets nothing
        stored_back = i >= 2 and isinstance(node_path[i - 2], cst.Assign) and node_path[i - 2].value is call \
            and len(node_path[i - 2].targets) == 1 and node_path[i - 2].targets[0].target.deep_equals(read)
        return values.is_move(call, facts) or (stored_back and values.is_dtype_only_move(call, facts))
    return isinstance(parent, cst.ComparisonTarget) and parent.comparator is read \
        and isinstance(parent.operator, (cst.In, cst.NotIn))  # `key in self.NAME`


def _moved_back_before(node_path, name: str, me: str, facts) -> bool:
    """A statement before the read, in a block of its function that holds it, stores the
    attribute moved (`self.NAME = self.NAME.to(x.device)`), itself or in an `if` that tests the
    attribute (`if self.NAME.device != d: self.NAME = self.NAME.to(d)`)."""
    for earlier in syntax.earlier_statements(node_path):
        tests_it = isinstance(earlier, cst.If) and earlier.orelse is None and any(
            isinstance(n, cst.Attribute) and n.attr.value == name and isinstance(n.value, cst.Name)
            and n.value.value == me for n in syntax.walk(earlier.test))
        candidates = [earlier] + (list(syntax.block_statements(earlier.body)) if tests_it else [])
        if any(_moves_back(small, name, me, facts) for c in candidates for small in syntax.small_statements(c)):
            return True
    return False


def _moves_back(small: cst.CSTNode, name: str, me: str, facts) -> bool:
    """`self.NAME = self.NAME.to(x)`."""
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)):
        return False
    target, call = small.targets[0].target, small.value
    same = lambda e: isinstance(e, cst.Attribute) and e.attr.value == name and isinstance(e.value, cst.Name) \
        and e.value.value == me  # noqa: E731
    return same(target) and isinstance(call.func, cst.Attribute) and same(call.func.value) and values.is_move(call, facts)


def _statement_after(path, k: int) -> Optional[cst.CSTNode]:
    """The statement that runs after the statement path[k]: the next one in its block, or,
    where it ends an arm of an `if`, the one after that `if` (None at the end of a loop or a
    function, or where the block is another kind)."""
    while k >= 1:
        block = path[k - 1]
        if not isinstance(block, cst.IndentedBlock):
            return None
        index = next((i for i, s in enumerate(block.body) if s is path[k]), None)
        if index is None:
            return None
        if index + 1 < len(block.body):
            return block.body[index + 1]
        top = syntax.if_chain_top(path, k - 1)
        if top is None:
            return None
        k = top  # the whole `if` statement: the statement after it
    return None


def _names_read(scope: cst.CSTNode, facts) -> frozenset:
    """The names a scope (a function, or the module's own code) mentions, once per file."""
    known = facts.memo.setdefault("dev003.scope-names", {})
    if id(scope) not in known:
        known[id(scope)] = frozenset(
            node.value for node, _ in syntax.walk_with_paths(scope, []) if isinstance(node, cst.Name))
    return known[id(scope)]


def _inside(function: cst.FunctionDef, definer, facts) -> bool:
    """Whether `function` is defined inside `definer` (any function of the file when
    `definer` is None, the module)."""
    if definer is None:
        return True
    seen = facts.definers.get(function)
    while isinstance(seen, cst.FunctionDef):
        if seen is definer:
            return True
        seen = facts.definers.get(seen)
    return False


def values_of(function: cst.FunctionDef, facts) -> "FunctionValues":
    """The dataflow facts of any function of the file (a method knows its class's methods). Not
    kept in `facts.memo`: a view holds the facts, and a cycle would outlive the file."""
    found = FunctionValues(function, facts, is_forward=False)
    definer = facts.definers.get(function)
    if isinstance(definer, ClassInfo):
        found.methods = definer.methods
    return found


def call_sites(function: cst.FunctionDef, facts) -> Optional[list[tuple[cst.FunctionDef, list]]]:
    """Where the file calls `function`: (the calling function, the path to the call from it).
    None where it is also named other than as the callee of a call, or called from module
    level (those uses are not followed)."""
    name = function.name.value
    definer = facts.definers.get(function, ...)
    if definer is ...:
        return None
    if isinstance(definer, ClassInfo):
        receivers = {"self", "cls", definer.name}
        callers = [f for info in facts.with_subclasses(definer) for defs in info.methods.values() for f in defs]
        return [
            (caller, path) for caller in callers for node, path in syntax.walk_with_paths(caller, [])
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == name
            and isinstance(node.func.value, cst.Name) and node.func.value.value in receivers
        ]
    # the code that can see the name: the defining function and the functions inside it, or
    # the whole file (module-level code first: a call or a name there is not followed)
    scopes = [definer] if definer is not None else [facts.module]
    scopes += [f for f in facts.definers if f is not function and _inside(f, definer, facts)]
    sites = []
    for scope in scopes:
        if name not in _names_read(scope, facts):
            continue
        for node, path in syntax.walk_with_paths(scope, []):
            if not isinstance(node, cst.Name) or node.value != name or node is function.name:
                continue
            parent = path[-2] if len(path) > 1 else None
            if isinstance(parent, cst.Attribute) and parent.attr is node or isinstance(parent, cst.Arg) and parent.keyword is node:
                continue  # `x.name`, `f(name=...)`: another name
            if isinstance(parent, cst.FunctionDef) and parent.name is node:
                continue  # a method of the same name
            if scope is facts.module or not (isinstance(parent, cst.Call) and parent.func is node):
                return None  # passed on, rebound, imported or called at module level: callers not seen
            if any(isinstance(n, cst.Lambda) for n in path):
                return None
            sites.append((scope, path[:-1]))
    return sites


def _keeps_its_place(name: str, value: Optional[cst.BaseExpression]) -> bool:
    """`name.clone()`, `name.contiguous().float()`: methods of the name itself, taking no
    argument, whose result stays where it is."""
    calls = 0
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and not value.args \
            and value.func.attr.value in names.SHAPE_METHODS:
        value, calls = value.func.value, calls + 1
    return calls > 0 and isinstance(value, cst.Name) and value.value == name


def _paired(assign: cst.Assign) -> dict[int, cst.BaseExpression]:
    """For `a, b = x, y` (one target tuple of names, a value tuple as long, no starred item), each
    target name's id with its value."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, (cst.Tuple, cst.List)) \
            or not isinstance(assign.value, (cst.Tuple, cst.List)):
        return {}
    names, items = assign.targets[0].target.elements, assign.value.elements
    if len(names) != len(items) or any(isinstance(e, cst.StarredElement) for e in (*names, *items)):
        return {}
    return {id(n.value): v.value for n, v in zip(names, items) if isinstance(n.value, cst.Name)}


class _Flow:
    """A function body's nodes in evaluation order with their parents, and each local name's
    bindings: (position, the statement line, the value bound; None when not one value)."""

    def __init__(self, func: cst.FunctionDef) -> None:
        self.order: dict[int, int] = {}
        self.parents: dict[int, cst.CSTNode] = {}
        self.bindings: dict[str, list] = {}
        for index, (node, parent) in enumerate(syntax.walk_with_parents(func.body)):
            self.order[id(node)] = index
            if parent is not None:
                self.parents[id(node)] = parent
            if isinstance(node, cst.Assign):
                single = len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                pairs = _paired(node)  # `gc, total = torch.empty(n), torch.empty(n)`: each its own value
                for target in node.targets:
                    for name in syntax.unpacked_targets(target.target):
                        if isinstance(name, cst.Name):
                            value = node.value if single else pairs.get(id(name))
                            self.bindings.setdefault(name.value, []).append((index, parent, value))
            elif isinstance(node, (cst.For, cst.CompFor, cst.AsName, cst.AnnAssign)):
                target = node.name if isinstance(node, cst.AsName) else node.target
                value = node.value if isinstance(node, cst.AnnAssign) else None
                for name in syntax.unpacked_targets(target):
                    if isinstance(name, cst.Name):
                        self.bindings.setdefault(name.value, []).append((index, node, value))

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        out, current = [], self.parents.get(id(node))
        while current is not None:
            out.append(current)
            current = self.parents.get(id(current))
        return out


@dataclass
class Verdict:
    """The use that makes a factory a finding at forward time (any use before a move), and
    the one that makes it one elsewhere (a meeting with a tensor derived from a parameter)."""

    forward_use: Optional[Fate] = None
    meeting: Optional[Fate] = None
    moved: bool = False  # moved before any use


def _made_of(expr: cst.BaseExpression, names_: set) -> bool:
    """Every variable `expr` reads is one of `names_` (attribute names, called functions such as
    `float(...)`, and numbers aside)."""
    read = [n for n, path in syntax.walk_with_paths(expr, []) if isinstance(n, cst.Name) and _is_variable(path)
            and not (len(path) > 1 and isinstance(path[-2], cst.Call) and path[-2].func is n)]
    return bool(read) and all(n.value in names_ for n in read)


def _code(node: cst.CSTNode, limit: int = 40) -> str:
    text = " ".join(cst.Module([]).code_for_node(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bound_names(statement: cst.CSTNode) -> list[str]:
    """The local names an assignment binds to its whole value: one name, or the names of a
    tuple target unpacking one value (not a tuple literal, whose parts go to one name each)."""
    if isinstance(statement, cst.Assign):
        targets = [t.target for t in statement.targets]
        if len(targets) == 1 and isinstance(targets[0], cst.Name):
            return [targets[0].value]
        return [] if isinstance(statement.value, (cst.Tuple, cst.List)) else _unpacked_names(targets)
    if isinstance(statement, cst.AnnAssign) and isinstance(statement.target, cst.Name):
        return [statement.target.value]
    return []


def _branch_arms(path: Sequence[cst.CSTNode]) -> dict:
    """For each `if` around a node: the arm (body or else) the node is in."""
    return {id(node): path[k + 1] for k, node in enumerate(path[:-1]) if isinstance(node, cst.If)}


def _conditions_held(path: Sequence[cst.CSTNode], assigned: Callable[[], frozenset]) -> set:
    """The tests the node at path[-1] runs under, as (the test's code, whether it holds there),
    for each `if` or conditional expression around it whose test is a name or an attribute
    (`flag`, `not self.legacy`, a part of `flag and n > 1` in its body) that the function never
    assigns (`assigned()`): a value bound where `flag` is false is not the one read where it is
    true."""
    held = set()
    for k, node in enumerate(path[:-1]):
        if isinstance(node, (cst.If, cst.IfExp)) and path[k + 1] in (node.body, node.orelse):
            held.update(_tests_known(node.test, path[k + 1] is node.body))
    return {(test, holds) for test, holds in held if test not in assigned()} if held else held


def _tests_known(test: cst.BaseExpression, holds: bool) -> list:
    """(name or attribute, whether it is true) for what `test` being `holds` tells."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, holds = test.expression, not holds
    if isinstance(test, cst.BooleanOperation):
        # `a and b` true: both are; `a or b` false: neither is
        if holds == isinstance(test.operator, cst.And):
            return _tests_known(test.left, holds) + _tests_known(test.right, holds)
        return []
    dotted = syntax.dotted_name(test)
    return [(dotted, holds)] if dotted is not None else []


def _assigned_dotted_names(function: cst.FunctionDef) -> frozenset:
    """The names and attributes (`x`, `self.legacy`) the function assigns or binds as loop targets."""
    found = set()
    for node in syntax.walk(function.body):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)):
            targets = [node.target]
        for target in targets:
            for part in syntax.walk(target):
                dotted = syntax.dotted_name(part) if isinstance(part, (cst.Name, cst.Attribute)) else None
                if dotted is not None:
                    found.add(dotted)
    return frozenset(found)


def _in_other_arm(path: Sequence[cst.CSTNode], arms: dict) -> bool:
    """Whether a node lies in an arm of an `if` that excludes the arm in `arms`."""
    return any(
        isinstance(node, cst.If) and arms.get(id(node), path[k + 1]) is not path[k + 1]
        for k, node in enumerate(path[:-1])
    )


def _is_variable(path: Sequence[cst.CSTNode]) -> bool:
    """The name at path[-1] names a variable: not an attribute (`data.face`), a keyword
    (`f(face=v)`) or a parameter's name."""
    name, parent = path[-1], path[-2] if len(path) > 1 else None
    if isinstance(parent, cst.Attribute):
        return parent.value is name
    if isinstance(parent, cst.Arg):
        return parent.value is name
    return not isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName))


def _storing_statement(path: Sequence[cst.CSTNode]) -> Optional[cst.CSTNode]:
    """The statement that stores into the name path[-1] (`a = ...`, `a, b = ...`, `for a in
    ...`, `del a`), or None when the name is read."""
    j = len(path) - 1
    while j > 1 and isinstance(path[j - 1], (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        j -= 1
    parent, target = path[j - 1], path[j]
    if isinstance(parent, cst.AssignTarget):
        return path[j - 2] if parent.target is target else None
    if isinstance(parent, (cst.AnnAssign, cst.For, cst.CompFor)):
        return parent if parent.target is target else None
    return parent if isinstance(parent, cst.Del) else None
