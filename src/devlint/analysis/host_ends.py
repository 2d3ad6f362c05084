"""Where a value's uses need it on the host: the question a `device=X.device` fix asks first.

`host_end(function, node, facts)` follows the value that `node` makes (a factory call, a moved
tensor) through what keeps it where it is (tensor methods, indexing, operators, torch
functions, the local names it is bound to, read after the binding) to a host end, with no
`.cpu()` or move between:

- `.numpy()`, `.tolist()`, `.item()`: on a device tensor `.numpy()` raises, and the others turn
  a host computation into a device round trip;
- Python control flow over it: the test of an `if`/`while` or a conditional expression, what a
  `for` iterates, an argument of `range(...)`, its elements walked by `list`, `tuple`, `zip`,
  `enumerate`, `sorted` or `reversed` into such a test or loop (`if list(shape) != list(expected):`);
  a Python number made of it (`float(t.max())`, `int(n)`, `bool`, `complex`: `.item()` by another
  name); an argument of a numpy function (`np.amin(v)`);
- an index into a CPU tensor (a local name bound to a factory without `device=`, to
  `torch.from_numpy(...)` or to a `.cpu()` result): a device index into a CPU tensor raises;
- a host copy it is combined with (`torch.stack([torch.zeros(b), lens.cpu()])`): the code
  builds a host value there.

A fix that puts such a value on the device would break that end on a GPU: it is withheld there.

`joins(function, nodes, facts)`: the collections each value is gathered into with others (a
list or tuple display, `torch.cat([a, b])`, a list it is appended to, `pieces.append(a)`), and
the arithmetic it meets others in (`orig + 2 * pad`), followed the same way. A fix that places
one piece whose other pieces stay on the CPU only moves the mixing to where they meet.

`host_copy(function, name, facts)`: where the function copies the tensor `name` itself to the
host (`y.cpu()`, `y.to("cpu")`). Such a function computes on the host on purpose
(what it makes meets the host copy): `device=y.device` is no fix there either.
"""
from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from devlint.analysis import values
from devlint.analysis.parameters import assigned_names
from devlint.core import syntax
from devlint.torchinfo import names

__all__ = ["MEETS", "host_copy", "host_end", "joins"]

HOST_END_METHODS = values.HOST_METHODS - {"cpu"}  # `.cpu()` brings the value back; the others end there
# Builtins that turn a tensor into a Python number, and those that walk its elements in Python.
_HOST_NUMBERS = frozenset({"float", "int", "bool", "complex"})
_PYTHON_ITERATION = frozenset({"list", "tuple", "zip", "enumerate", "sorted", "reversed"})
# Nodes that only wrap their child where it stands (an argument, an element, an index).
_WRAPPERS = (cst.Arg, cst.Element, cst.StarredElement, cst.ComparisonTarget)


def host_end(function: cst.FunctionDef, node: cst.CSTNode, facts) -> Optional[cst.CSTNode]:
    """The host end the value made by `node` reaches in `function` (see the module's doc), or None."""
    paths = list(syntax.walk_with_paths(function, ()))
    start = next((path for found, path in paths if found is node), None)
    if start is None:
        return None
    cpu_tensors = _cpu_tensor_names(function, facts)
    return _follow(paths, start, lambda path: _climb(path, facts, cpu_tensors))


def _follow(paths: list, start: Sequence[cst.CSTNode], step):
    """Run `step` on `start` and, where it answers (statement, names), on each read of those
    local names after that statement; the first other answer it gives, or None."""
    pending, followed = [start], set()
    while pending:
        found = step(pending.pop())
        if isinstance(found, tuple):  # bound to local names: follow their reads after the binding
            statement, bound = found
            new = bound - followed
            followed |= new
            after = False
            for candidate, path in paths:
                if candidate is statement:
                    after = True
                elif after and isinstance(candidate, cst.Name) and candidate.value in new and not _is_store(path):
                    if statement not in path:
                        pending.append(path)
        elif found is not None:
            return found
    return None


def host_copy(function: cst.FunctionDef, name: str, facts) -> Optional[cst.CSTNode]:
    """The first call in `function` that brings `name` to the host (see the module's doc), or None."""
    for node in syntax.walk_expressions(function.body):
        if isinstance(node, cst.Call) and values.is_host_call(node, facts) and syntax.method_name(node) in ("cpu", "to") \
                and isinstance(node.func.value, cst.Name) and node.func.value.value == name:
            return node
    return None


# The key of an operation where values meet, as opposed to a collection they are gathered into.
MEETS = "meets"


def joins(function: cst.FunctionDef, nodes: Sequence[cst.CSTNode], facts) -> dict[int, frozenset]:
    """For each node (by id), the collections the value it makes is gathered into (see the
    module's doc): the display nodes and the dotted names of the lists, as keys; and the
    operations it meets others in, as `(MEETS, id)`."""
    paths = list(syntax.walk_with_paths(function, ()))
    where = {id(found): path for found, path in paths}
    gathered = {}
    for node in nodes:
        keys: set = set()
        if id(node) in where:
            _follow(paths, where[id(node)], lambda path: _gather(path, facts, keys))
        gathered[id(node)] = frozenset(keys)
    return gathered


def _gather(path: Sequence[cst.CSTNode], facts, keys: set):
    """Climb from path[-1] through what keeps the value where it is, adding the collections it
    is gathered into to keys; (statement, names) when it is bound to local names, else None."""
    i = len(path) - 1
    indexed = False
    while i > 0:
        cur, parent = path[i], path[i - 1]
        if isinstance(parent, cst.Subscript) and parent.value is cur:
            indexed = indexed or any(isinstance(e.slice, cst.Index) for e in parent.slice)
        if isinstance(parent, (cst.List, cst.Tuple)):
            if not _joined_display(path[:i], facts):
                return None  # `return a, b`: each goes its own way
            keys.add(id(parent))
        elif isinstance(parent, cst.Attribute) and parent.value is cur:
            grand = path[i - 2] if i >= 2 else None
            if isinstance(grand, cst.Call) and grand.func is parent:
                if values.is_move(grand, facts) or parent.attr.value not in names.SHAPE_METHODS | {"to"}:
                    return None  # moved, or no longer the tensor's values (`.size(0)`, `.item()`)
                i -= 1
            elif parent.attr.value not in names.TENSOR_VIEW_ATTRIBUTES:
                return None
        elif isinstance(parent, cst.IfExp) and parent.test is cur:
            return None
        elif isinstance(parent, cst.BinaryOperation):  # `orig + 2 * pad`: the operands meet there
            if not indexed:  # (an element `p[i][j]` may be a 0-dim scalar, which meets any device)
                keys.add((MEETS, id(parent)))
        elif isinstance(parent, cst.Call) and parent.func is not cur:  # an argument
            method = syntax.method_name(parent)
            if method in ("append", "extend", "insert") and isinstance(parent.func, cst.Attribute):
                receiver = syntax.dotted_name(parent.func.value)
                if receiver is not None:
                    keys.add(receiver)
                return None
            if facts.is_tensor_source(parent) is not None or not names.returns_tensors(facts.resolve(parent.func) or ""):
                return None  # not computed from it (`torch.ones(n)`), or no tensor
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is cur:
            return _binding(parent)
        elif not isinstance(parent, (*_WRAPPERS, cst.Subscript, cst.BinaryOperation, cst.UnaryOperation, cst.IfExp)):
            return None
        i -= 1
    return None


def _joined_display(path: Sequence[cst.CSTNode], facts) -> bool:
    """Whether the display at path[-1] is a torch function's argument (`torch.cat([a, b])`) or a
    list bound to a name (`pieces = [a, b]`, joined later)."""
    parent = path[-2] if len(path) > 1 else None
    if isinstance(parent, cst.Arg) and len(path) > 2 and isinstance(path[-3], cst.Call):
        return (facts.resolve(path[-3].func) or "").startswith("torch.")
    return isinstance(path[-1], cst.List) and isinstance(parent, cst.Assign)


def _climb(path: Sequence[cst.CSTNode], facts, cpu_tensors: set[str]):
    """Climb from path[-1] through what keeps the value where it is: the host end met, or
    (statement, names) when the value is bound to local names, or None."""
    i = len(path) - 1
    while i > 0:
        cur, parent = path[i], path[i - 1]
        if isinstance(parent, (cst.Index, cst.Slice, cst.SubscriptElement)):  # an index: into what?
            subscript = next((n for n in reversed(path[:i]) if isinstance(n, cst.Subscript)), None)
            base = subscript.value if subscript is not None else None
            return subscript if isinstance(base, cst.Name) and base.value in cpu_tensors else None
        if isinstance(parent, _WRAPPERS):
            i -= 1
            continue
        grand = path[i - 2] if i >= 2 else None
        if isinstance(parent, cst.Attribute) and parent.value is cur:
            if isinstance(grand, cst.Call) and grand.func is parent:
                method = parent.attr.value
                if method in HOST_END_METHODS:
                    return parent.attr
                if method == "cpu" or values.is_move(grand, facts):
                    return None  # moved: no longer where it was made
                i -= 2
                continue
            if parent.attr.value in names.TENSOR_VIEW_ATTRIBUTES:
                i -= 1
                continue
            return None
        if isinstance(parent, cst.Subscript) and parent.value is cur:
            i -= 1
            continue
        if isinstance(parent, (cst.If, cst.While)) and parent.test is cur:
            return cur
        if isinstance(parent, cst.IfExp):
            if parent.test is cur:
                return cur
            i -= 1
            continue
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is cur:
            return cur
        if isinstance(parent, (cst.BinaryOperation, cst.Comparison, cst.UnaryOperation, cst.BooleanOperation,
                               cst.List, cst.Tuple)):
            if any(values.is_host_call(other, facts) for other in _operands(parent) if other is not cur):
                return parent  # `torch.stack([torch.zeros(b), lens.cpu()])`: built beside a host copy
            i -= 1
            continue
        if isinstance(parent, cst.Call) and parent.func is not cur:  # an argument
            builtin = parent.func.value if isinstance(parent.func, cst.Name) and facts.resolve(parent.func) is None else None
            if builtin in _HOST_NUMBERS or builtin == "range":
                return cur  # `float(t.max())` is `.item()`: a Python number
            if builtin in _PYTHON_ITERATION:
                i -= 1  # `list(t) != list(s)`, `zip(a, b)`: its elements, read one by one in Python
                continue
            if (facts.resolve(parent.func) or "").startswith("numpy."):
                return cur  # `np.amin(lengths)`: numpy reads it on the host
            if (facts.resolve(parent.func) or "").startswith("torch."):
                i -= 1
                continue
            return None
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is cur:
            return _binding(parent)
        return None
    return None


def _binding(statement: cst.Assign | cst.AnnAssign):
    """(statement, the local names it binds the value to), or None where it binds none (`t[i] = v`)."""
    bound = {t.value for t in assigned_names(statement)}
    return (statement, bound) if bound else None


def _operands(node: cst.CSTNode) -> list:
    """The values an operator or a display combines."""
    if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
        return [node.left, node.right]
    if isinstance(node, cst.Comparison):
        return [node.left, *(t.comparator for t in node.comparisons)]
    if isinstance(node, (cst.List, cst.Tuple)):
        return [e.value for e in node.elements]
    return []


def _is_store(path: Sequence[cst.CSTNode]) -> bool:
    """The name at path[-1] is an assignment target (or part of one)."""
    for j in range(len(path) - 1, 0, -1):
        parent = path[j - 1]
        if isinstance(parent, cst.AssignTarget):
            return True
        if isinstance(parent, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)) and parent.target is path[j]:
            return True
        if not isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            return False
    return False


def _cpu_tensor_names(function: cst.FunctionDef, facts) -> set[str]:
    """Local names bound (only) to a CPU tensor: a factory without `device=`, `torch.from_numpy`,
    a `.cpu()` result."""
    bound: dict[str, bool] = {}
    for node in syntax.walk_expressions(function.body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            name, value = node.targets[0].target.value, node.value
            cpu = (
                isinstance(value, cst.Call)
                and (
                    (facts.is_tensor_source(value) is not None and syntax.keyword(value, "device") is None)
                    or values.is_host_call(value, facts) and syntax.method_name(value) == "cpu"
                )
            )
            bound[name] = bound.get(name, True) and cpu
    return {name for name, cpu in bound.items() if cpu}
