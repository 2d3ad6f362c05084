"""Round trips: a `torch.load(...)` of a file or buffer this same process wrote, so that its
tensors come back where they were saved. Shared by DEV002 (no `map_location` needed) and the
scope scan (such a load places nothing on an accelerator: DEV007, DEV008)."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.core import syntax

# Calls that put the file at their first argument's path at their second's.
FILE_MOVES = frozenset({"shutil.move", "shutil.copy", "shutil.copy2", "shutil.copyfile", "os.replace", "os.rename"})
TEMPORARY_FOLDER_FIXTURES = frozenset({"tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory"})


def round_trip(load: cst.Call, root: cst.CSTNode) -> bool:
    """Whether `load` (a loader call in root, a function or the module) reads what this process
    wrote: see `saved_here` and `in_temporary_folder`."""
    return saved_here(load, root) or in_temporary_folder(load, root)


def path_argument(load: cst.Call) -> Optional[cst.BaseExpression]:
    args = syntax.positional(load)
    return args[0].value if args else getattr(syntax.keyword(load, "f"), "value", None)


def in_temporary_folder(load: cst.Call, root: cst.CSTNode) -> bool:
    """Whether the loaded path lies in a folder this run made (`tmp_path / "model.pt"`), in a
    function: the file in it was written on this machine, so its tensors come back where they were."""
    path = path_argument(load)
    return path is not None and isinstance(root, cst.FunctionDef) and _mentions(path, _temporary_folders(root))


def saved_here(load: cst.Call, root: cst.CSTNode) -> bool:
    """Whether root (a function, its nested functions included; or the module's top level, not
    its functions) saves to the path or in-memory buffer `load` reads (`torch.save(obj, p)`,
    `fabric.save(p, ...)`, `fs.torch_save(obj, p)`, `with incremental_save(p)`; `torch.save(obj,
    buf)` then `torch.load(buf)` or `torch.load(io.BytesIO(buf.getvalue()))`) before the load can
    run: earlier in its text, or later where the save cannot follow the load in one run (a cache's
    other branch, a loop's earlier pass). A local name stands for the expression it was last
    bound to before it is read (`f = osp.join(d, "x.pt")` ... `path = osp.join(d, "x.pt")`: the
    same path). This process wrote it, so its tensors come back where they were."""
    path = path_argument(load)
    if path is None:
        return False
    top_level = isinstance(root, cst.Module)
    parents: dict[int, cst.CSTNode] = {}
    order: dict[int, int] = {}
    bindings: dict[str, list[tuple[int, cst.BaseExpression]]] = {}
    saves: list[cst.Call] = []
    moves: list[cst.Call] = []  # `shutil.move(tmp, p)`: what was saved to tmp is then at p
    stack = [root]
    while stack:
        node = stack.pop()
        order[id(node)] = len(order)
        if isinstance(node, cst.Call) and "save" in (syntax.last_name(node.func) or "").lower():
            saves.append(node)
        elif isinstance(node, cst.Call) and syntax.dotted_name(node.func) in FILE_MOVES and len(syntax.positional(node)) == 2:
            moves.append(node)
        target, value = _binding(node)
        if target is not None:
            bindings.setdefault(target, []).append((len(order), value))
        if top_level and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not root:
            continue
        children = syntax.children(node)
        for child in children:
            parents[id(child)] = node
        stack.extend(reversed(children))

    def resolved(expr: cst.BaseExpression, at: cst.CSTNode) -> cst.BaseExpression:
        expr = _unwrap_path(expr)
        if isinstance(expr, cst.Name):
            before = [value for i, value in bindings.get(expr.value, ()) if i <= order[id(at)]]
            if before:  # the binding last in the text before the read
                return _unwrap_path(before[-1])
        return expr

    def saved_to(expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
        found = _canonical(resolved(expr, at))
        return any(_canonical(resolved(arg.value, arg)).deep_equals(found) for save in saves for arg in save.args)

    # a file saved under one name and moved into place is saved there too (a cache written
    # atomically: `torch.save(obj, tmp)` then `shutil.move(tmp, p)`)
    saves += [move for move in moves if saved_to(syntax.positional(move)[0].value, move)]
    wanted = _canonical(resolved(path, load))
    for save in saves:
        if any(_canonical(resolved(arg.value, arg)).deep_equals(wanted) for arg in save.args):
            arms = _exclusive_arms(load, save, parents)
            if arms is not None and not _tests_existence(arms):
                continue  # `if mode == "train": save ... elif mode == "test": load`: two runs
            if order[id(save)] < order[id(load)] or _cannot_follow(load, save, parents):
                return True
            if _under_existence_test(load, parents, False) and _under_existence_test(save, parents, True):
                return True  # `if exists(p): load(p)` ... `if not exists(p): save(p)`: a cache
    return False


def _under_existence_test(node: cst.CSTNode, parents: dict, negated: bool) -> bool:
    """Whether node runs only when a file exists (or, `negated`, only when it does not): it
    stands in the body of an `if` whose test asks for existence (`not`-ed when `negated`), or
    in the `else` of one whose test asks the opposite."""
    chain = _chain(node, parents)
    for k, statement in enumerate(chain[:-1]):
        if not isinstance(statement, cst.If):
            continue
        in_body = chain[k + 1] is statement.body
        in_else = isinstance(statement.orelse, cst.Else) and chain[k + 1] is statement.orelse
        asks = _asks_existence(statement.test)
        if asks is not None and ((in_body and asks != negated) or (in_else and asks == negated)):
            return True
    return False


def _asks_existence(test: cst.BaseExpression) -> Optional[bool]:
    """True for a test that a file exists (`os.path.exists(p)`, `p is not None and
    Path(p).exists()`), False for one that it does not (`not Path(p).exists()`), else None."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _asks_existence(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        parts = [_asks_existence(test.left), _asks_existence(test.right)]
        known = [p for p in parts if p is not None]
        return known[0] if len(known) == 1 else None
    if isinstance(test, cst.Call) and syntax.last_name(test.func) in _EXISTENCE_TESTS:
        return True
    return None


class _StringValues(cst.CSTTransformer):
    """Spell every plain string literal one way, so `"a.pt"` and `'a.pt'` are the same path."""

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        value = syntax.string_value(original)
        return updated if value is None else cst.SimpleString(repr(value))


def _canonical(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.visit(_StringValues())


def _chain(node: cst.CSTNode, parents: dict) -> list:
    out = [node]
    while id(out[-1]) in parents:
        out.append(parents[id(out[-1])])
    return out[::-1]  # from the root down


def _exclusive_arms(load: cst.CSTNode, save: cst.CSTNode, parents: dict) -> Optional[cst.If]:
    """The `if` whose different arms hold the load and the save, or None."""
    common = None
    for a, b in zip(_chain(load, parents), _chain(save, parents)):
        if a is not b:
            break
        common = a
    return common if isinstance(common, cst.If) else None


def _tests_existence(statement: cst.If) -> bool:
    """Whether the tests of an `if`/`elif` chain ask whether a file exists (a cache: the load
    runs because an earlier run of this code wrote the file here)."""
    tests, node = [], statement
    while isinstance(node, cst.If):
        tests.append(node.test)
        node = node.orelse if isinstance(node.orelse, cst.If) else None
    return any(isinstance(n, cst.Call) and syntax.last_name(n.func) in _EXISTENCE_TESTS
               for test in tests for n in syntax.walk(test))


_EXISTENCE_TESTS = frozenset({"exists", "isfile", "is_file", "lexists"})


def _binding(node: cst.CSTNode) -> tuple[Optional[str], Optional[cst.BaseExpression]]:
    """`name = value`, `name: T = value` or `with value as name:`: (name, value); else (None, None)."""
    if isinstance(node, cst.WithItem) and node.asname is not None and isinstance(node.asname.name, cst.Name):
        return node.asname.name.value, node.item
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
        return node.targets[0].target.value, node.value
    if isinstance(node, cst.AnnAssign) and node.value is not None and isinstance(node.target, cst.Name):
        return node.target.value, node.value
    return None, None


def _cannot_follow(load: cst.CSTNode, save: cst.CSTNode, parents: dict) -> bool:
    """Whether a save later in the text than the load cannot run after it in the same pass: the
    two stand in different arms of an `if` or `try`, or the load's statement leaves the
    function (`return`, `raise`) before the save. A save that follows the load in one pass (a
    resumed run writing its checkpoint back) writes over a file that may come from elsewhere."""
    def chain(node):
        out = [node]
        while id(out[-1]) in parents:
            out.append(parents[id(out[-1])])
        return out[::-1]  # from the root down

    load_chain, save_chain = chain(load), chain(save)
    depth = 0
    while depth < min(len(load_chain), len(save_chain)) and load_chain[depth] is save_chain[depth]:
        depth += 1
    common = load_chain[depth - 1]
    if isinstance(common, (cst.If, cst.Try, cst.TryStar)):
        return True  # body and orelse, or body and a handler: one or the other runs
    if depth < len(load_chain):
        branch = load_chain[depth]  # the statement (in the common block) that holds the load
        return any(isinstance(n, (cst.Return, cst.Raise)) for n in syntax.walk_expressions(branch))
    return False


def _mentions(expr: cst.BaseExpression, names_: set[str]) -> bool:
    return any(isinstance(n, cst.Name) and n.value in names_ for n in syntax.walk_expressions(expr))


def _temporary_folders(function: cst.FunctionDef) -> set[str]:
    """Names in function that hold a folder this run made: pytest's `tmp_path`-style fixtures,
    `tempfile.mkdtemp()` / `TemporaryDirectory()` results, and paths built from them."""
    folders = {name for name in syntax.param_names(function.params) if name in TEMPORARY_FOLDER_FIXTURES}
    bindings = []
    for node in syntax.walk_expressions(function.body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            bindings.append((node.targets[0].target.value, node.value))
        elif isinstance(node, cst.WithItem) and node.asname is not None and isinstance(node.asname.name, cst.Name):
            bindings.append((node.asname.name.value, node.item))
    for _ in range(2):  # a second pass for names built from names bound later in the text
        for name, value in bindings:
            made_here = isinstance(value, cst.Call) and syntax.last_name(value.func) in ("mkdtemp", "TemporaryDirectory")
            if made_here or _mentions(value, folders):
                folders.add(name)
    return folders


def _unwrap_path(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The path under `str(p)`, `os.fspath(p)`, `Path(p)`, `p.as_posix()`; the file under
    `open(p, mode)` (saved through `open(p, "wb")`, read through `open(p, "rb")`); the buffer
    under `io.BytesIO(buf.getvalue())` (a copy of what was written into `buf`)."""
    while isinstance(expr, cst.Call):
        if syntax.last_name(expr.func) == "open" and expr.args and not expr.args[0].keyword and len(expr.args) <= 3:
            expr = expr.args[0].value
        elif len(expr.args) > 1:
            break
        elif isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("as_posix", "getvalue", "getbuffer") and not expr.args:
            expr = expr.func.value
        elif syntax.last_name(expr.func) == "BytesIO" and expr.args and not expr.args[0].keyword:
            expr = expr.args[0].value
        elif syntax.last_name(expr.func) in ("str", "fspath", "Path") and expr.args and not expr.args[0].keyword:
            expr = expr.args[0].value
        else:
            break
    return expr


def saved_by_its_class(load: cst.Call, method: cst.FunctionDef, methods: list[cst.FunctionDef]) -> bool:
    """Whether another of `methods` (those of the load's class and its same-file bases) saves to
    the path `load` reads in `method`: a path under the object's own attributes, spelled the same
    in both methods but for the names each method binds or takes (`Path(self.processed_dir,
    f"data_{i}.pt")` saved in a loop over `i`, loaded as `Path(self.processed_dir,
    f"data_{idx}.pt")`), through local names bound to such: the class's own files, which it wrote
    from what it made."""
    path = path_argument(load)
    if path is None:
        return False
    self_name = syntax.instance_self(method)
    if self_name is None:
        return False
    wanted = _pattern(_resolved_in(method, path, load), _local_names(method, self_name))
    if not any(isinstance(n, cst.Name) and n.value == self_name for n in syntax.walk_expressions(wanted)):
        return False
    for other in methods:
        if other is method or syntax.instance_self(other) != self_name:
            continue
        local = None
        for node in syntax.walk(other.body):
            if isinstance(node, cst.Call) and "save" in (syntax.last_name(node.func) or "").lower():
                local = _local_names(other, self_name) if local is None else local
                if any(_pattern(_resolved_in(other, arg.value, arg), local).deep_equals(wanted) for arg in node.args):
                    return True
    return False


def _resolved_in(function: cst.FunctionDef, expr: cst.BaseExpression, at: cst.CSTNode) -> cst.BaseExpression:
    """expr, a local name standing for the expression it was last bound to in function before `at`."""
    expr = _unwrap_path(expr)
    if not isinstance(expr, cst.Name):
        return expr
    last = None
    for node in syntax.walk(function.body):
        if node is at:
            break
        target, value = _binding(node)
        if target == expr.value:
            last = value
    return _unwrap_path(last) if last is not None else expr


class _Wildcards(cst.CSTTransformer):
    """Spell every name in `local` as `_`: what varies from call to call (an index, a parameter)."""

    def __init__(self, local: set[str]) -> None:
        super().__init__()
        self.local = local

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return cst.Name("_") if original.value in self.local else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # `self.stage` keeps its name beside a parameter `stage`


def _local_names(method: cst.FunctionDef, self_name: str) -> set[str]:
    """The names the method takes or binds (loop variables too), but its `self`."""
    local = set(syntax.param_names(method.params)) - {self_name}
    for node in syntax.walk(method.body):
        target, _ = _binding(node)
        if target is not None:
            local.add(target)
        elif isinstance(node, (cst.For, cst.CompFor)):
            local.update(n.value for n in syntax.walk(node.target) if isinstance(n, cst.Name))
    return local


def _pattern(expr: cst.BaseExpression, local: set[str]) -> cst.BaseExpression:
    """expr with its string literals spelled one way and the method's `local` names as `_`, so
    that two methods' spellings of one file pattern compare equal."""
    return _canonical(expr).visit(_Wildcards(local))
