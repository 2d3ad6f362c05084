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
    at: Optional[cst.CSTNode] = None  # for ASSIGNED: the binding statement; for USE: where it is used


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
        return Fate(USE, self.met + list(others), at=self.path[self.i - 1])


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
    if method in _WRITES:  # `buf.copy_(v)`: buf keeps its device and meets nothing
        walk.i -= 2
        return None
    tensors = [a.value for a in call.args if walk.is_tensor(a.value)]
    if method in names.MOVES or method in names.SHAPE_METHODS or not tensors:
        walk.i -= 2
        return None
    return walk.use(*tensors)


def _subscripted(walk: _Walk, parent: cst.Subscript) -> Optional[Fate]:
    if parent.value is not walk.cur:
        return walk.use()
    stored = isinstance(walk.grand, cst.AssignTarget) and walk.grand.target is parent
    device_indices = [e for e in _index_expressions(parent) if walk.is_tensor(e)]
    if device_indices and not stored:  # reading a CPU tensor at device indices raises; `t[i] = v` does not
        return walk.use(*device_indices)
    walk.i -= 1
    return None


def _index(walk: _Walk, parent) -> Fate:
    """Used as an index: not a use (the indexed tensor's device takes CPU indices)."""
    return Fate(INDEX, walk.met)


def _boolean(walk: _Walk, parent: cst.BooleanOperation) -> Fate:
    """`x or torch.ones(n)`: moved before use when the result is moved (or bound to a name that
    is); any other fate of the result is not this value's (it may never be chosen)."""
    outer = fate(walk.path[: walk.i], walk.facts, walk.is_tensor, walk.host_tables)
    if outer.kind in (MOVE, ASSIGNED):
        return Fate(outer.kind, walk.met + outer.met, outer.name, outer.at)
    return Fate(NEUTRAL, walk.met)


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
    if isinstance(func, cst.Attribute) and func.attr.value in _WRITES and call.args[0] is parent:
        return Fate(NEUTRAL, walk.met)  # `t.copy_(v)` copies across devices
    if isinstance(func, cst.Attribute) and _is_default(func, call, parent):
        return _passed_through(walk)
    if isinstance(func, cst.Attribute):  # an argument to a method of another value: it meets that value
        return _added_to_list(walk, func, call) or walk.use(func.value)
    return walk.use()


_WRITES = frozenset({"copy_"})
# Methods that return their `default` argument when the key is missing: `d.get(key, torch.ones(n))`.
_DEFAULT_RETURNING = frozenset({"get", "pop"})


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
    outer = fate(walk.path[: j + 1], walk.facts, walk.is_tensor, walk.host_tables)
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
        return Fate(ASSIGNED, walk.met, targets[0].value, parent)
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
    return walk.is_tensor(base) or (isinstance(base, cst.Name) and base.value in walk.host_tables)


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
            if walk.is_tensor(part) or (isinstance(part, cst.Name) and part.value in walk.host_tables):
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


def derived_names(func: cst.FunctionDef, params: Sequence[str], facts: FileFacts) -> set[str]:
    """Tensor parameters and the local names computed from them (flow-insensitive)."""
    assigns = [n for n in syntax.walk_expressions(func.body) if isinstance(n, (cst.Assign, cst.AnnAssign, cst.For, cst.CompFor))]
    seeds = stable_parameters(func, params, facts)
    derived = set(seeds)
    for _ in range(2):  # a second pass catches names assigned in loops before their sources
        for node in assigns:
            bound = _loop_names(node) if isinstance(node, (cst.For, cst.CompFor)) else [(assigned_names(node), node.value)]
            for targets, value in bound:
                if value is not None and is_derived(value, derived, facts):
                    derived.update(t.value for t in targets if t.value not in params or t.value in seeds)
    return derived


def _loop_names(loop: cst.For | cst.CompFor) -> list[tuple[list[cst.Name], cst.BaseExpression]]:
    """A loop's target names, each with what it iterates: `for t in x`, `for i, t in
    enumerate(x)` and `for a, b in zip(x, y)` take their items from x (and y)."""
    target, items = loop.target, loop.iter
    if isinstance(target, cst.Name):
        return [([target], items)]
    call = items if isinstance(items, cst.Call) and isinstance(items.func, cst.Name) else None
    if call is None or not isinstance(target, cst.Tuple):
        return []
    parts = [e.value for e in target.elements]
    args = [a.value for a in syntax.positional(call)]
    if call.func.value == "enumerate" and len(parts) == 2 and args:
        return [([parts[1]], args[0])] if isinstance(parts[1], cst.Name) else []
    if call.func.value == "zip" and len(parts) == len(args):
        return [([part], arg) for part, arg in zip(parts, args) if isinstance(part, cst.Name)]
    return []


class FunctionValues:
    """The dataflow facts of one function, computed on first use."""

    def __init__(self, node: cst.FunctionDef, facts, is_forward: bool) -> None:
        self.node, self.facts, self.is_forward = node, facts, is_forward
        self.host_tables: frozenset = frozenset()  # local names bound to device-less factories
        self._params: Optional[list[str]] = None
        self._derived: Optional[set[str]] = None
        self._scalar_names: Optional[frozenset] = None
        self._occurrences: Optional[list] = None
        self._host_names: Optional[frozenset] = None
        self._source_names: Optional[dict[str, str]] = None

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

    def name_occurrences(self) -> list:
        """(name, path) for every name in the function, in evaluation order."""
        if self._occurrences is None:
            self._occurrences = [
                (node.value, path) for node, path in syntax.walk_with_paths(self.node, []) if isinstance(node, cst.Name)
            ]
        return self._occurrences

    def host_names(self) -> frozenset:
        """Local names bound only to host values (`arr = x.cpu().numpy()`, `torch.from_numpy(...)`)."""
        if self._host_names is None:
            bindings: dict[str, list] = {}
            for node in syntax.walk_expressions(self.node.body):
                if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                    for name in assigned_names(node):
                        bindings.setdefault(name.value, []).append(node.value)
            self._host_names = frozenset(
                name for name, bound in bindings.items()
                if all(values.is_host_value(v, self.facts)
                       or isinstance(v, cst.Call) and self.facts.resolve(v.func) == names.FROM_NUMPY for v in bound)
            )
        return self._host_names

    def is_host_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor (or array) on the host: a host value, or a local name bound only to one."""
        if isinstance(expr, cst.Name):
            return expr.value in self.host_names()
        return values.is_host_value(expr, self.facts)

    def first_used_param(self) -> Optional[str]:
        return first_used_param(self.node, self.params, self.facts)

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor computed from a tensor parameter: one that may live on another device."""
        return is_derived(expr, self.derived, self.facts)

    def meets_derived(self, met) -> bool:
        return any(self.is_tensor(expr) for expr in met)

    def verdict(self, call: cst.Call, source: str, path) -> "Verdict":
        """Whether to flag if this runs at forward time, and otherwise, with the use that decides."""
        if source in (names.AS_TENSOR, "torch.tensor", "torch.Tensor"):
            data = syntax.positional(call)
            if data and is_derived(data[0].value, self.derived, self.facts):
                return Verdict()  # tensor data keeps its device (`torch.Tensor(t)` is an alias of t)
            if len(data) == 1 and values.is_python_scalar(data[0].value, self.facts, self.scalar_names):
                return Verdict()  # a 0-dim CPU scalar may mix with tensors on any device
        found = fate(path, self.facts, self.is_tensor, self.host_tables)
        if found.kind == USE:
            return Verdict(found, found if self.meets_derived(found.met) else None)
        if found.kind != ASSIGNED:
            return Verdict()
        return self._follow(found.name, path)

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

    def origin(self, expr: cst.BaseExpression) -> str:
        """Which parameter a derived expression comes from, in words."""
        for node in syntax.walk(expr):
            if isinstance(node, cst.Name) and node.value in self.derived:
                name, seen = node.value, set()
                while name not in self.params and name in self._sources and name not in seen:
                    seen.add(name)
                    name = self._sources[name]
                if name in self.params:
                    if node.value == name:
                        return "`forward` input" if self.is_forward else f"parameter `{name}`"
                    return f"derived from parameter `{name}`"
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

    def _follow(self, name: str, path) -> "Verdict":
        """Follow a local name from the statement that binds it to its later uses.

        Flow-light: code in a branch exclusive with the binding's (the other arm of its `if`)
        neither uses the value nor ends it."""
        binding = next(n for n in reversed(path) if isinstance(n, (cst.Assign, cst.AnnAssign, cst.Expr)))
        tracked = set(_bound_names(binding)) or {name}
        arms = _branch_arms(path)
        started = False
        first_use = first_meet = None
        move_assigns = set()
        rebinds: dict = {}  # statement -> tracked names it binds to the value
        for node, node_path in syntax.walk_with_paths(self.node, []):
            if node is binding:
                started = True
                continue
            if not started or not isinstance(node, cst.Name) or node.value not in tracked or binding in node_path:
                continue
            if arms and _in_other_arm(node_path, arms):
                continue
            assign = _storing_statement(node_path)
            if assign is not None:
                if node.value in rebinds.get(assign, ()):
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
                first_use = first_use or found
                if first_meet is None and self.meets_derived(found.met):
                    first_meet = found
            elif found.kind == ASSIGNED and found.name:
                bound = set(_bound_names(found.at)) or {found.name}
                tracked |= bound
                rebinds[found.at] = bound
        return Verdict(first_use, first_meet)


@dataclass
class Verdict:
    """The use that makes a factory a finding at forward time (any use before a move), and
    the one that makes it one elsewhere (a meeting with a tensor derived from a parameter)."""

    forward_use: Optional[Fate] = None
    meeting: Optional[Fate] = None


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


def _in_other_arm(path: Sequence[cst.CSTNode], arms: dict) -> bool:
    """Whether a node lies in an arm of an `if` that excludes the arm in `arms`."""
    return any(
        isinstance(node, cst.If) and arms.get(id(node), path[k + 1]) is not path[k + 1]
        for k, node in enumerate(path[:-1])
    )


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


# --- host ends: where a value's uses need it on the host ------------------------------------
# Methods that end on the host: on a device tensor `.numpy()` raises, and the others turn a
# host computation into a device round trip.
_HOST_END_METHODS = frozenset({"numpy", "tolist", "item"})


def host_end(function: "FunctionValues", path: Sequence[cst.CSTNode]) -> Optional[cst.CSTNode]:
    """Where the value made by path[-1] reaches a host end, with no `.cpu()` between: `.numpy()`,
    `.tolist()`, `.item()`, the test of an `if`/`while`, what a `for` or `range(...)` iterates,
    an index into a CPU tensor; followed through the local names it is bound to (their reads
    after the binding). None when it reaches none."""
    occurrences = function.name_occurrences()
    pending, carriers = [path], set()
    while pending:
        found = _climb_to_host_end(function, pending.pop())
        if isinstance(found, tuple):  # bound to local names: follow their later reads
            statement, bound = found
            new = [n for n in bound if n not in carriers]
            carriers.update(new)
            inside = [k for k, (_, p) in enumerate(occurrences) if statement in p]
            start = max(inside) + 1 if inside else len(occurrences)
            pending.extend(
                p for name, p in occurrences[start:] if name in new and _storing_statement(p) is None
            )
        elif found is not None:
            return found
    return None


def _climb_to_host_end(function: "FunctionValues", path: Sequence[cst.CSTNode]):
    """Climb from path[-1] through what keeps the value where it is; returns the host end met,
    (statement, names) when the value is bound to local names, or None."""
    facts = function.facts
    i = len(path) - 1
    while i > 0:
        cur, parent = path[i], path[i - 1]
        grand = path[i - 2] if i >= 2 else None
        if isinstance(parent, cst.Attribute) and parent.value is cur:
            if isinstance(grand, cst.Call) and grand.func is parent:
                method = parent.attr.value
                if method in _HOST_END_METHODS:
                    return parent.attr
                if method == "cpu" or method in names.MOVES and not values.is_dtype_only_move(grand, facts):
                    return None
                i -= 2
                continue
            if parent.attr.value in names.TENSOR_VIEW_ATTRIBUTES:
                i -= 1
                continue
            return None
        if isinstance(parent, cst.Subscript) and parent.value is cur:
            i -= 1
            continue
        if isinstance(parent, (cst.Index, cst.Slice)):
            subscript = next((n for n in reversed(path[: i - 1]) if isinstance(n, cst.Subscript)), None)
            return subscript if subscript is not None and function.is_host_tensor(subscript.value) else None
        if isinstance(parent, (cst.If, cst.While)) and parent.test is cur:
            return cur
        if isinstance(parent, cst.IfExp):
            if parent.test is cur:
                return cur
            i -= 1
            continue
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is cur:
            return cur
        if isinstance(parent, (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget, cst.UnaryOperation,
                               cst.BooleanOperation)):
            i -= 1
            continue
        if isinstance(parent, (cst.Element, cst.StarredElement)) and isinstance(grand, (cst.List, cst.Tuple)):
            i -= 2
            continue
        if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
            if isinstance(grand.func, cst.Name) and grand.func.value == "range" and facts.resolve(grand.func) is None:
                return cur
            if (facts.resolve(grand.func) or "").startswith("torch."):
                i -= 2
                continue
            return None
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is cur:
            bound = _bound_names(parent)
            return (parent, bound) if bound else None
        return None
    return None

