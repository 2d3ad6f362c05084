"""Whether a name is bound where, and when, a piece of code runs: the names a fix may write.

`name_bound_at(name, ancestors)` answers it for the node at the end of `ancestors` (the path
from the module down, as the traversal keeps it in `Context.ancestors`). Python looks a name up
in the innermost function that binds it, then in the module; a class body is not seen from the
methods in it. A name is bound here when:

- a function holding the code (its body, not its decorators or defaults) takes it as a
  parameter, or binds it earlier in the text (`device = ...`, `for device in ...`, `with ... as
  device`, an import, a nested `def`); a binding only later in the text makes the name local to
  that function and unbound here, so the search stops there;
- else the module binds it earlier in the text. For code inside a function, "earlier" means
  before the module-level definition that holds the function (a global bound further down the
  file is not there when the definition is read, and a caller that imports the function may
  call it before), and not only under `if __name__ == "__main__":` (that block does not run
  when the file is imported), unless the function is defined in that block too.

An earlier binding counts only where it has run whenever the code runs: not in one arm of an
`if` the code is not in (unless every arm binds the name), nor in a loop's body or an `except`
block the code is not in.

Decorators and defaults run where their definition stands. A class body sees its own earlier
bindings. Comprehension variables and star imports are not counted (a fix does not write them).
"""
from __future__ import annotations

from typing import Iterator, Optional, Sequence

import libcst as cst

from devlint.core import syntax

__all__ = ["name_bound_at", "function_bindings"]

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def name_bound_at(name: str, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether `name` is bound when the code at `ancestors[-1]` runs (see the module's doc)."""
    if not ancestors or not isinstance(ancestors[0], cst.Module):
        return False
    scopes = _enclosing_scopes(ancestors)
    for depth, (scope, position) in enumerate(scopes[:-1]):
        if isinstance(scope, cst.ClassDef) and depth > 0:
            continue  # a class body is not seen from its methods
        if not isinstance(scope, cst.ClassDef):
            if any(p.name.value == name for p in syntax.all_params(scope.params)):
                return True
            declared = _declaration(scope, name)
            if declared == "global":
                break
            if declared == "nonlocal":
                continue
        bindings = list(_bindings(scope, name, position))
        if bindings:  # local to this scope: bound only by an earlier binding on every path
            return any(before and _runs_first(path, ancestors, name) for before, path in bindings)
    module, position = scopes[-1]
    in_function = len(scopes) > 1
    return any(
        before and not (in_function and _only_under_main(path, ancestors)) and _runs_first(path, ancestors, name)
        for before, path in _bindings(module, name, position)
    )


def _runs_first(path: list, ancestors: Sequence[cst.CSTNode], name: str) -> bool:
    """Whether the binding at the end of `path` has run whenever the code at `ancestors[-1]`
    runs: every branch it sits in (an arm of an `if`, a loop's body, an `except` or `else`
    block) holds that code too, or is an arm of an `if` whose every arm binds the name.
    `device = ...` in one arm of an `if` alone is not there after it."""
    held = {id(node) for node in ancestors}
    for node, child in zip(path, path[1:]):
        if isinstance(node, cst.If) and child is not node.test and id(child) not in held:
            if not _binds_in_every_arm(node, name):
                return False  # in an arm the code is not in
        elif isinstance(node, cst.For) and child is not node.iter and id(node) not in held:
            return False  # a loop's body (or its target) may never run
        elif isinstance(node, cst.While) and child is not node.test and id(node) not in held:
            return False
        elif isinstance(node, cst.Try) and child is not node.body and id(child) not in held:
            return False  # an `except`, `else` or `finally` block
    return True


def _binds_in_every_arm(node: cst.If, name: str) -> bool:
    """`if a: device = x` / `elif b: device = y` / `else: device = z`: every arm binds the name in
    its own block (an `if` there binding it in every arm counts)."""
    arm: Optional[cst.CSTNode] = node
    while isinstance(arm, cst.If):
        if not _block_binds(arm.body, name):
            return False
        arm = arm.orelse
    return isinstance(arm, cst.Else) and _block_binds(arm.body, name)


def _block_binds(block: cst.BaseSuite, name: str) -> bool:
    for statement in syntax.block_statements(block):
        if isinstance(statement, cst.If) and _binds_in_every_arm(statement, name):
            return True
        for small in syntax.small_statements(statement):
            if isinstance(small, cst.Assign) and any(
                isinstance(t, cst.Name) and t.value == name
                for target in small.targets for t in syntax.unpacked_targets(target.target)):
                return True
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar) and any(
                (syntax.dotted_name(a.asname.name) if a.asname else (syntax.dotted_name(a.name) or "").split(".")[0]) == name
                for a in small.names):
                return True
    return False


def function_bindings(name: str, ancestors: Sequence[cst.CSTNode]) -> Optional[list[cst.CSTNode]]:
    """The nodes that bind `name` in the innermost function holding the code at `ancestors[-1]`
    that binds it (its `Param` when a parameter; `ImportAlias` nodes for imports), or None when
    no function holding the code binds it (then the name is the module's, or a builtin)."""
    if not ancestors or not isinstance(ancestors[0], cst.Module):
        return None
    scopes = _enclosing_scopes(ancestors)
    for depth, (scope, position) in enumerate(scopes[:-1]):
        if isinstance(scope, cst.ClassDef):
            continue  # a class body binds nothing its methods see
        params = [p for p in syntax.all_params(scope.params) if p.name.value == name]
        if params:
            return params
        declared = _declaration(scope, name)
        if declared == "global":
            return None
        if declared == "nonlocal":
            continue
        bindings = [path[-1] for _, path in _bindings(scope, name, position)]
        if bindings:
            return bindings
    return None


def bound_values(name: str, ancestors: Sequence[cst.CSTNode]) -> Optional[list[cst.BaseExpression]]:
    """The values bound to `name` where the code at `ancestors[-1]` reads it: every binding in
    the innermost function holding the code that binds it, or else in the module. None where a
    binding is not a plain assignment of one value (a parameter, a loop target, an import, a
    tuple target, `with ... as`), or nothing binds it."""
    if not ancestors or not isinstance(ancestors[0], cst.Module):
        return None
    scopes = _enclosing_scopes(ancestors)
    for scope, position in scopes:
        if isinstance(scope, cst.ClassDef):
            continue
        if scope is not ancestors[0] and (any(p.name.value == name for p in syntax.all_params(scope.params))
                                          or _declaration(scope, name) is not None):
            return None
        paths = [path for _, path in _bindings(scope, name, position)]
        if paths:
            return _plain_values(paths)
    return None


def scope_bindings(scope: cst.CSTNode, name: str) -> list[list[cst.CSTNode]]:
    """The path, from the scope's body, of each binding of `name` in its own text (nested scopes
    not entered): assignments, loop targets, `with ... as`, `:=`, imports, definitions."""
    return [path for _, path in _bindings(scope, name, scope)]


def scope_values(scope: cst.CSTNode, name: str) -> Optional[list[cst.BaseExpression]]:
    """The values a scope's own text binds to `name` (a function's parameters are not in its
    text): None where a binding is not a plain assignment of one value, or nothing binds it."""
    paths = scope_bindings(scope, name)
    return _plain_values(paths) if paths else None


def _plain_values(paths: list[list[cst.CSTNode]]) -> Optional[list[cst.BaseExpression]]:
    """The value of each binding at `paths` (`name = v`, `name: T = v`); None where one is any
    other kind (a loop target, a tuple target, `with ... as`, an import)."""
    found = []
    for path in paths:
        holder = path[-2] if len(path) > 1 else None
        statement = path[-3] if len(path) > 2 else None
        if isinstance(holder, cst.AssignTarget) and isinstance(statement, cst.Assign):
            found.append(statement.value)
        elif isinstance(holder, cst.AnnAssign) and holder.value is not None:
            found.append(holder.value)
        else:
            return None
    return found


def _enclosing_scopes(ancestors: Sequence[cst.CSTNode]) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """(scope, position) pairs, innermost first, the module last: each scope whose body holds
    the code, and the node standing for the code in that scope's own text (the code itself, or
    the definition of the next scope in)."""
    scopes: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    position = ancestors[-1]
    for i in range(len(ancestors) - 2, 0, -1):
        node, child = ancestors[i], ancestors[i + 1]
        if isinstance(node, _SCOPES):
            if child is node.body:
                scopes.append((node, position))
            position = node  # a decorator or a default runs where the definition stands
    scopes.append((ancestors[0], position))
    return scopes


def _declaration(function: cst.CSTNode, name: str) -> Optional[str]:
    for node in syntax.walk_expressions(function.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(item.name.value == name for item in node.names):
            return "global" if isinstance(node, cst.Global) else "nonlocal"
    return None


def _bindings(scope: cst.CSTNode, name: str, position: cst.CSTNode) -> Iterator[tuple[bool, list]]:
    """For each binding of `name` in scope's own text (nested scopes not entered): whether it
    runs before `position` (in evaluation order: an assignment's value before its targets;
    a binding whose statement holds position, as in `for device in devices(device)`, does not),
    and its path from scope."""
    seen_position = False
    root = scope.body if isinstance(scope, _SCOPES) else scope
    for node, path in syntax.walk_with_paths(root, ()):
        if node is position:
            seen_position = True
        if _binds(node, path, name):
            yield not seen_position and not any(n is position for n in path) and not _in_own_loop_iter(path, position), path


def _in_own_loop_iter(path: list, position: cst.CSTNode) -> bool:
    """Whether the binding at path[-1] is a `for` target and `position` lies in that loop's
    iterable, which is evaluated before the target is bound (`for d in [torch.device(d)]`)."""
    loop = next((n for n in reversed(path) if isinstance(n, (cst.For, cst.CompFor))), None)
    return loop is not None and any(n is position for n in syntax.walk(loop.iter))


def _binds(node: cst.CSTNode, path: list, name: str) -> bool:
    if isinstance(node, cst.ImportAlias):
        if node.asname is not None:
            return isinstance(node.asname.name, cst.Name) and node.asname.name.value == name
        dotted = syntax.dotted_name(node.name)
        return dotted is not None and dotted.split(".")[0] == name  # `import a.b` binds `a`
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return len(path) > 1 and node.name.value == name
    if not (isinstance(node, cst.Name) and node.value == name):
        return False
    i = len(path) - 2
    while i >= 0 and isinstance(path[i], (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        i -= 1  # an element of a tuple or list target: `device, rank = ...`
    holder, target = (path[i], path[i + 1]) if i >= 0 else (None, None)
    if isinstance(holder, cst.AsName):  # `with ... as device`, `except E as device` (an import's alias is above)
        return not (i > 0 and isinstance(path[i - 1], cst.ImportAlias))
    if isinstance(holder, cst.AssignTarget):
        return True
    if isinstance(holder, cst.AnnAssign):
        return holder.target is target and holder.value is not None  # `device: str` alone binds nothing
    if isinstance(holder, (cst.AugAssign, cst.For, cst.NamedExpr)):
        return holder.target is target
    return False


def _only_under_main(path: list, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether path lies in an `if __name__ == "__main__":` block that the code is not in."""
    for node in path:
        if isinstance(node, cst.If) and _is_main_test(node.test):
            return not any(a is node for a in ancestors)
    return False


def _is_main_test(test: cst.BaseExpression) -> bool:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    return (
        isinstance(test.comparisons[0].operator, cst.Equal)
        and any(isinstance(s, cst.Name) and s.value == "__name__" for s in sides)
        and any(syntax.string_value(s) == "__main__" for s in sides)
    )
