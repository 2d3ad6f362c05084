"""DEV003's dataflow: where a device-less factory's value goes inside one function (moved,
used, stored, or dropped), which parameters hold tensors, and which names derive from them.

Everything is syntactic and local to one function: no types, no inter-procedural flow.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import libcst as cst

from devlint import names, syntax
from devlint.analysis import values
from devlint.analysis.parameters import assigned_names, first_used_param, is_derived, stable_parameters, tensor_parameters
from devlint.facts import FileFacts

MOVE, NON_TENSOR, NEUTRAL, USE, ASSIGNED = "move", "non-tensor", "neutral", "use", "assigned"
# Used as an index into a tensor: CUDA moves CPU indices to the indexed tensor's device.
INDEX = "index"


@dataclass
class Fate:
    """What happens to a value after the expression that made it."""

    kind: str
    met: list[cst.BaseExpression] = field(default_factory=list)  # other values it meets
    name: Optional[str] = None  # for ASSIGNED: the local name it is bound to
    at: Optional[cst.CSTNode] = None  # for ASSIGNED: the binding statement


def fate(
    path: Sequence[cst.CSTNode],
    facts: FileFacts,
    is_tensor: Callable[[cst.BaseExpression], bool],
    host_tables: frozenset = frozenset(),
) -> Fate:
    """Follow the value made by path[-1] up through its parents until something decides its fate.

    `is_tensor` tells whether another operand is a tensor: arithmetic with plain numbers
    keeps the value where it is, arithmetic with a tensor is where the two devices meet.
    `host_tables` are local names bound to other device-less tensors: copying into one
    (`table[i] = t`) is not a use.

    Each kind of parent has its step: it decides (returns a Fate) or moves the walk up.
    """
    walk = _Walk(path, facts, is_tensor, host_tables, len(path) - 1)
    while walk.i > 0:
        parent = path[walk.i - 1]
        decided = _STEPS.get(type(parent), _used)(walk, parent)
        if decided is not None:
            return decided
    return Fate(NEUTRAL, walk.met)


@dataclass
class _Walk:
    path: Sequence[cst.CSTNode]
    facts: FileFacts
    is_tensor: Callable[[cst.BaseExpression], bool]
    host_tables: frozenset
    i: int  # the value is now path[i]
    met: list[cst.BaseExpression] = field(default_factory=list)
    siblings: list[cst.BaseExpression] = field(default_factory=list)  # values beside it in a list or tuple literal

    @property
    def cur(self) -> cst.CSTNode:
        return self.path[self.i]

    @property
    def grand(self) -> Optional[cst.CSTNode]:
        return self.path[self.i - 2] if self.i >= 2 else None

    def use(self, *others: cst.BaseExpression) -> Fate:
        return Fate(USE, self.met + list(others))


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


def _method_call(walk: _Walk, method: str, call: cst.Call) -> Optional[Fate]:
    if method in names.MOVES and not (method == "to" and values.is_dtype_only_move(call, walk.facts)):
        return Fate(MOVE, walk.met)
    if method in names.NON_TENSOR_METHODS:
        return Fate(NON_TENSOR, walk.met)
    tensors = [a.value for a in call.args if walk.is_tensor(a.value)]
    if method in names.MOVES or method in names.SHAPE_METHODS or not tensors:
        walk.i -= 2
        return None
    return walk.use(*tensors)


def _subscripted(walk: _Walk, parent: cst.Subscript) -> Optional[Fate]:
    if parent.value is not walk.cur:
        return walk.use()
    device_indices = [e for e in _index_expressions(parent) if walk.is_tensor(e)]
    if device_indices:  # a CPU tensor indexed with device indices raises
        return walk.use(*device_indices)
    walk.i -= 1
    return None


def _index(walk: _Walk, parent) -> Fate:
    """Used as an index: not a use (the indexed tensor's device takes CPU indices)."""
    return Fate(INDEX, walk.met)


def _unary(walk: _Walk, parent: cst.UnaryOperation) -> None:
    walk.i -= 1


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
    return None


def _element(walk: _Walk, parent) -> Optional[Fate]:
    grand = walk.grand
    if not isinstance(grand, (cst.List, cst.Tuple, cst.Set)):
        return walk.use()
    walk.siblings.extend(e.value for e in grand.elements if e is not parent)
    walk.i -= 2
    return None


def _argument(walk: _Walk, parent: cst.Arg) -> Optional[Fate]:
    call = walk.grand
    if not isinstance(call, cst.Call):
        return walk.use()
    others = [a.value for a in call.args if a is not parent and walk.is_tensor(a.value)]
    others += [s for s in walk.siblings if walk.is_tensor(s)]
    func = call.func
    if isinstance(func, cst.Name) and func.value in names.NON_TENSOR_BUILTINS:
        return Fate(NON_TENSOR, walk.met)
    qualified = walk.facts.resolve(func)
    if qualified is not None and qualified.startswith("torch."):
        if others:
            return walk.use(*others)
        walk.i -= 2  # `torch.log(t)`: the result stays where t is
        walk.siblings = []
        return None
    if isinstance(func, cst.Attribute) and func.attr.value == "copy_" and call.args[0] is parent:
        return Fate(NEUTRAL, walk.met)  # `t.copy_(v)` copies across devices
    if isinstance(func, cst.Attribute):  # an argument to a method of another value
        return walk.use(*others, func.value)
    return walk.use()


def _assigned(walk: _Walk, parent: cst.Assign) -> Fate:
    if parent.value is not walk.cur:
        return walk.use()
    targets = [t.target for t in parent.targets]
    if len(targets) == 1 and isinstance(targets[0], cst.Name):
        return Fate(ASSIGNED, walk.met, targets[0].value, parent)
    if all(isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value in walk.host_tables for t in targets):
        return Fate(NEUTRAL, walk.met)  # copied into a local table (`rel[..., 0] = t`)
    return walk.use(*(t.value for t in targets if isinstance(t, cst.Subscript)))


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
    """`t[i] = v` writes v into t."""
    grand = walk.grand
    value = grand.value if isinstance(grand, cst.Assign) else None
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
    cst.BooleanOperation: _neutral,
    cst.Element: _element,
    cst.StarredElement: _element,
    cst.Arg: _argument,
    cst.Assign: _assigned,
    cst.AnnAssign: _annotated,
    cst.AugAssign: _augmented,
    cst.AssignTarget: _assignment_target,
    cst.Expr: _neutral,
    cst.For: _neutral,
    cst.CompFor: _neutral,
    cst.Del: _neutral,
}


def _index_expressions(subscript: cst.Subscript) -> list[cst.BaseExpression]:
    out = []
    for element in subscript.slice:
        if isinstance(element.slice, cst.Index):
            value = element.slice.value
            if not (syntax.is_number_literal(value) or isinstance(value, cst.Ellipsis) or syntax.dotted_name(value) == "None"):
                out.append(value)
    return out


def derived_names(func: cst.FunctionDef, params: Sequence[str], facts: FileFacts) -> set[str]:
    """Tensor parameters and the local names computed from them (flow-insensitive)."""
    assigns = [n for n in syntax.walk_expressions(func.body) if isinstance(n, (cst.Assign, cst.AnnAssign))]
    seeds = stable_parameters(func, params, facts)
    derived = set(seeds)
    for _ in range(2):  # a second pass catches names assigned in loops before their sources
        for node in assigns:
            if node.value is not None and is_derived(node.value, derived, facts):
                derived.update(t.value for t in assigned_names(node) if t.value not in params or t.value in seeds)
    return derived


class FunctionValues:
    """The dataflow facts of one function, computed on first use."""

    def __init__(self, node: cst.FunctionDef, facts, is_forward: bool) -> None:
        self.node, self.facts, self.is_forward = node, facts, is_forward
        self.host_tables: frozenset = frozenset()  # local names bound to device-less factories
        self._params: Optional[list[str]] = None
        self._derived: Optional[set[str]] = None
        self._scalar_names: Optional[frozenset] = None

    @property
    def params(self) -> list[str]:
        if self._params is None:
            self._params = tensor_parameters(self.node, self.facts, every_parameter=self.is_forward)
        return self._params

    @property
    def derived(self) -> set[str]:
        if self._derived is None:
            self._derived = derived_names(self.node, self.params, self.facts)
        return self._derived

    def scalar_names(self) -> frozenset:
        if self._scalar_names is None:
            self._scalar_names = values.scalar_names(self.node, self.facts)
        return self._scalar_names

    def first_used_param(self) -> Optional[str]:
        return first_used_param(self.node, self.params, self.facts)

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor computed from a tensor parameter: one that may live on another device."""
        return is_derived(expr, self.derived, self.facts)

    def meets_derived(self, met) -> bool:
        return any(self.is_tensor(expr) for expr in met)

    def verdict(self, call: cst.Call, source: str, path) -> tuple[bool, bool]:
        """(flag if this runs at forward time, flag otherwise)."""
        if source in (names.AS_TENSOR, "torch.tensor"):
            data = syntax.positional(call)
            if data and is_derived(data[0].value, self.derived, self.facts):
                return False, False  # tensor data keeps its device
            if len(data) == 1 and values.is_python_scalar(data[0].value, self.facts, self.scalar_names):
                return False, False  # a 0-dim CPU scalar may mix with tensors on any device
        found = fate(path, self.facts, self.is_tensor, self.host_tables)
        if found.kind == USE:
            return True, self.meets_derived(found.met)
        if found.kind != ASSIGNED:
            return False, False
        return self._follow(found.name, path)

    def _follow(self, name: str, path) -> tuple[bool, bool]:
        """Follow a local name from the statement that binds it to its later uses."""
        binding = next(n for n in reversed(path) if isinstance(n, (cst.Assign, cst.AnnAssign)))
        tracked = {name}
        started = False
        used_before_move = meets = False
        move_assigns = set()
        rebinds: dict = {}  # statement -> tracked name it binds to the value
        for node, node_path in syntax.walk_with_paths(self.node, []):
            if node is binding:
                started = True
                continue
            if not started or binding in node_path or not isinstance(node, cst.Name) or node.value not in tracked:
                continue
            parent = node_path[-2]
            if _is_store(node, parent):
                assign = node_path[-3] if isinstance(parent, cst.AssignTarget) else parent
                if rebinds.get(assign) == node.value:
                    continue
                if assign in move_assigns:  # `t = t.to(...)`: moved before any later use
                    break
                tracked.discard(node.value)
                if not tracked:
                    break
                continue
            found = fate(node_path, self.facts, self.is_tensor, self.host_tables)
            if found.kind == MOVE:
                statement = next((n for n in reversed(node_path) if isinstance(n, (cst.Assign, cst.AnnAssign))), None)
                if statement is not None:
                    move_assigns.add(statement)
            elif found.kind == USE:
                used_before_move = True
                meets = meets or self.meets_derived(found.met)
            elif found.kind == ASSIGNED and found.name:
                tracked.add(found.name)
                rebinds[found.at] = found.name
        return used_before_move, meets


def _is_store(node: cst.Name, parent: cst.CSTNode) -> bool:
    if isinstance(parent, cst.AssignTarget):
        return parent.target is node
    if isinstance(parent, cst.AnnAssign):
        return parent.target is node
    if isinstance(parent, (cst.For, cst.CompFor)):
        return parent.target is node
    return isinstance(parent, cst.Del)
