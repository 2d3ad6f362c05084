"""Where a tensor value goes inside one function: moved, used, stored, or dropped.

Shared by the rules that follow values (DEV003, DEV004). Everything is syntactic and
local to one function: no types, no inter-procedural flow beyond same-file helpers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Sequence

import libcst as cst

from devlint import names, syntax
from devlint.analysis import values
from devlint.facts import FileFacts

MOVE, NON_TENSOR, NEUTRAL, USE, ASSIGNED = "move", "non-tensor", "neutral", "use", "assigned"



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
    """
    met: list[cst.BaseExpression] = []
    siblings: list[cst.BaseExpression] = []  # values beside it in a list or tuple literal
    i = len(path) - 1
    while i > 0:
        cur, parent = path[i], path[i - 1]
        grand = path[i - 2] if i >= 2 else None
        if isinstance(parent, cst.Attribute) and parent.value is cur:
            attr = parent.attr.value
            if isinstance(grand, cst.Call) and grand.func is parent:
                if attr in names.MOVES and not (attr == "to" and values.is_dtype_only_move(grand, facts)):
                    return Fate(MOVE, met)
                if attr in names.NON_TENSOR_METHODS:
                    return Fate(NON_TENSOR, met)
                tensors = [a.value for a in grand.args if is_tensor(a.value)]
                if attr in names.MOVES or attr in names.SHAPE_METHODS or not tensors:
                    i -= 2
                    continue
                return Fate(USE, met + tensors)
            if attr in ("T", "mT", "H", "mH", "data", "real", "imag"):
                i -= 1
                continue
            return Fate(NON_TENSOR, met)
        if isinstance(parent, cst.Subscript) and parent.value is cur:
            met.extend(e for e in _index_expressions(parent) if is_tensor(e))
            i -= 1
            continue
        if isinstance(parent, (cst.SubscriptElement, cst.Index, cst.Slice)):
            j = i - 1
            while j > 0 and not isinstance(path[j], cst.Subscript):
                j -= 1
            subscript = path[j]
            if isinstance(subscript, cst.Subscript):
                return Fate(USE, met + [subscript.value])
            return Fate(USE, met)
        if isinstance(parent, (cst.UnaryOperation, cst.IfExp)):
            if isinstance(parent, cst.IfExp) and parent.test is cur:
                return Fate(NEUTRAL, met)
            i -= 1
            continue
        if isinstance(parent, (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget)):
            comparison = grand if isinstance(parent, cst.ComparisonTarget) else parent
            if isinstance(comparison, cst.BinaryOperation):
                others = [comparison.right if comparison.left is cur else comparison.left]
            else:
                others = [comparison.left, *(t.comparator for t in comparison.comparisons)]
                others = [o for o in others if o is not cur]
            tensors = [o for o in others if is_tensor(o)]
            if tensors:
                return Fate(USE, met + tensors)
            i -= 2 if comparison is grand else 1  # `t * 2`, `t < 0.5`: still where t is
            continue
        if isinstance(parent, cst.BooleanOperation):
            return Fate(NEUTRAL, met)
        if isinstance(parent, (cst.Element, cst.StarredElement)) and isinstance(grand, (cst.List, cst.Tuple, cst.Set)):
            siblings.extend(e.value for e in grand.elements if e is not parent)
            i -= 2
            continue
        if isinstance(parent, cst.Arg):
            call = grand
            if not isinstance(call, cst.Call):
                return Fate(USE, met)
            others = [a.value for a in call.args if a is not parent and is_tensor(a.value)]
            others += [s for s in siblings if is_tensor(s)]
            func = call.func
            if isinstance(func, cst.Name) and func.value in names.NON_TENSOR_BUILTINS:
                return Fate(NON_TENSOR, met)
            qualified = facts.resolve(func)
            if qualified is not None and qualified.startswith("torch."):
                if others:
                    return Fate(USE, met + others)
                i -= 2  # `torch.log(t)`: the result stays where t is
                siblings = []
                continue
            if isinstance(func, cst.Attribute):  # an argument to a method of another value
                return Fate(USE, met + others + [func.value])
            return Fate(USE, met)
        if isinstance(parent, cst.Assign) and parent.value is cur:
            targets = [t.target for t in parent.targets]
            if len(targets) == 1 and isinstance(targets[0], cst.Name):
                return Fate(ASSIGNED, met, targets[0].value, parent)
            if all(isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value in host_tables for t in targets):
                return Fate(NEUTRAL, met)  # copied into a local table (`rel[..., 0] = t`)
            return Fate(USE, met + [t.value for t in targets if isinstance(t, cst.Subscript)])
        if isinstance(parent, cst.AnnAssign) and parent.value is cur:
            if isinstance(parent.target, cst.Name):
                return Fate(ASSIGNED, met, parent.target.value, parent)
            return Fate(USE, met + ([parent.target.value] if isinstance(parent.target, cst.Subscript) else []))
        if isinstance(parent, cst.AugAssign):
            other = parent.target if parent.value is cur else parent.value
            return Fate(USE, met + [other]) if is_tensor(other) else Fate(NEUTRAL, met)
        if isinstance(parent, cst.AssignTarget):  # `t[i] = v` writes v into t
            value = grand.value if isinstance(grand, cst.Assign) else None
            return Fate(USE, met + [value]) if value is not None and is_tensor(value) else Fate(NEUTRAL, met)
        if isinstance(parent, (cst.Expr, cst.For, cst.CompFor, cst.Del)):
            return Fate(NEUTRAL, met)
        return Fate(USE, met)
    return Fate(NEUTRAL, met)


def is_constant(node: cst.BaseExpression) -> bool:
    if syntax.is_number_literal(node) or isinstance(node, (cst.SimpleString, cst.Ellipsis)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(is_constant(e.value) for e in node.elements)
    return False


def _index_expressions(subscript: cst.Subscript) -> list[cst.BaseExpression]:
    out = []
    for element in subscript.slice:
        if isinstance(element.slice, cst.Index):
            value = element.slice.value
            if not (syntax.is_number_literal(value) or isinstance(value, cst.Ellipsis) or syntax.dotted_name(value) == "None"):
                out.append(value)
    return out


# --- tensor parameters and values derived from them ----------------------------------------
def tensor_parameters(func: cst.FunctionDef, facts: FileFacts, every_parameter: bool = False) -> list[str]:
    """Parameters that hold tensors, in declaration order (the first used one comes first)."""
    params = [p for p in syntax.all_params(func.params) if p.star not in ("*", "**")]
    candidates = [p.name.value for p in params if p.name.value not in ("self", "cls")]
    if every_parameter:
        return candidates
    annotated = {
        p.name.value
        for p in params
        if p.annotation is not None and "Tensor" in (syntax.dotted_name(_unwrap_annotation(p.annotation.annotation)) or "")
    }
    used = set()
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            if node.attr.value in names.TENSOR_ONLY_MEMBERS:
                used.add(node.value.value)
    return [n for n in candidates if n in annotated or n in used]


def _unwrap_annotation(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, cst.Subscript) and node.slice:  # Optional[Tensor]
        first = node.slice[0].slice
        if isinstance(first, cst.Index):
            return _unwrap_annotation(first.value)
    if isinstance(node, cst.BinaryOperation):  # Tensor | None
        return _unwrap_annotation(node.left)
    if isinstance(node, cst.SimpleString):
        value = syntax.string_value(node) or ""
        return cst.Name(value.split(".")[-1]) if value.replace(".", "").isidentifier() else node
    return node


def stable_parameters(func: cst.FunctionDef, params: Sequence[str], facts: FileFacts) -> set[str]:
    """The parameters never rebound to something not computed from a tensor parameter.

    `pos = torch.arange(pos)` makes `pos` unstable: its later uses may be either value;
    `x = x * 2` keeps `x` stable.
    """
    stable = set(params)
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            if not is_derived(node.value, set(params), facts):
                stable -= {t.value for t in _assigned_names(node)}
    return stable


def derived_names(func: cst.FunctionDef, params: Sequence[str], facts: FileFacts) -> set[str]:
    """Tensor parameters and the local names computed from them (flow-insensitive)."""
    assigns = [n for n in syntax.walk_expressions(func.body) if isinstance(n, (cst.Assign, cst.AnnAssign))]
    seeds = stable_parameters(func, params, facts)
    derived = set(seeds)
    for _ in range(2):  # a second pass catches names assigned in loops before their sources
        for node in assigns:
            if node.value is not None and is_derived(node.value, derived, facts):
                derived.update(t.value for t in _assigned_names(node) if t.value not in params or t.value in seeds)
    return derived


def _assigned_names(node: cst.Assign | cst.AnnAssign) -> list[cst.Name]:
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    return [t for t in targets if isinstance(t, cst.Name)]


def is_derived(expr: cst.BaseExpression, derived: set[str], facts: FileFacts) -> bool:
    """Whether expr is a tensor computed from a tensor parameter."""
    if isinstance(expr, cst.Name):
        return expr.value in derived
    if isinstance(expr, cst.Attribute):
        return expr.attr.value not in names.NON_TENSOR_ATTRIBUTES and is_derived(expr.value, derived, facts)
    if isinstance(expr, cst.Subscript):
        return is_derived(expr.value, derived, facts)
    if isinstance(expr, cst.BinaryOperation):
        return is_derived(expr.left, derived, facts) or is_derived(expr.right, derived, facts)
    if isinstance(expr, cst.Comparison):  # `x == 1` is a bool tensor where x is
        return is_derived(expr.left, derived, facts) or any(is_derived(t.comparator, derived, facts) for t in expr.comparisons)
    if isinstance(expr, cst.UnaryOperation):
        return is_derived(expr.expression, derived, facts)
    if isinstance(expr, cst.IfExp):
        return is_derived(expr.body, derived, facts) or is_derived(expr.orelse, derived, facts)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and facts.resolve(func) is None:
            if func.attr.value in names.NON_TENSOR_METHODS:
                return False
            if is_derived(func.value, derived, facts):
                return True
        qualified = facts.resolve(func)
        if qualified is not None and qualified.startswith("torch."):
            device = syntax.keyword(expr, "device")
            if device is not None and any(isinstance(n, cst.Name) and n.value in derived for n in syntax.walk(device.value)):
                return True
            if qualified in names.TENSOR_SOURCES:  # `torch.arange(n)` ignores where n lives
                return False
            return any(_holds_derived(a.value, derived, facts) for a in expr.args)
    return False


def _holds_derived(node: cst.BaseExpression, derived: set[str], facts: FileFacts) -> bool:
    """A derived tensor, or a list or tuple holding one (`torch.cat([x, y])`)."""
    if isinstance(node, (cst.List, cst.Tuple)):
        return any(is_derived(e.value, derived, facts) for e in node.elements)
    return is_derived(node, derived, facts)
