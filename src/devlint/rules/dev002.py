"""DEV002 load-without-map-location: `torch.load(...)` without `map_location`. Doc:
rules/DEV002.md; fixture: tests/fixtures/DEV002.py."""
from typing import Optional

import libcst as cst

from devlint import edits, names, syntax
from devlint.base import SAFE, UNSAFE, NodeFix, Rule


class LoadWithoutMapLocation(Rule):
    """A loader of `names.LOADERS` called without `map_location` (keyword or positional slot)
    or `**kwargs`; the fix adds `map_location="cpu"`, safe straight into `load_state_dict`
    (or through a local name used only there)."""

    code = "DEV002"
    name = "load-without-map-location"
    summary = "`torch.load` without `map_location`"
    fixes, applicabilities = "always", (SAFE, UNSAFE)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.facts.resolve(node.func)
        slot = names.LOADERS.get(qualified)
        if slot is None:
            return
        if syntax.keyword(node, "map_location") is not None or syntax.has_star_args(node):
            return
        if len(syntax.positional(node)) > slot:
            return
        if self._saved_here(node) or self._in_temporary_folder(node):
            return
        # Into load_state_dict, the module copies the tensors onto its own device: mapping
        # them to the CPU changes nothing else. Elsewhere they used to land on the GPU; inside
        # `__setstate__` the object being restored is whatever the pickle held.
        safe = not self._in_setstate() and (
            self._loaded_into_load_state_dict(self.ctx.ancestors) or self._loaded_through_name()
        )
        fix = NodeFix(
            SAFE if safe else UNSAFE,
            'Add `map_location="cpu"`',
            node,
            edits.add_arg(node, edits.keyword_arg("map_location", edits.string("cpu"))),
        )
        self.report(
            node.func,
            f"`{qualified}()` without `map_location`: a checkpoint saved on a GPU fails to load on a machine without one",
            fix,
        )

    def _loaded_through_name(self) -> bool:
        """`state = torch.load(p)` (or `torch.load(p)["model"]`) whose name the scope uses once,
        as `x.load_state_dict(state)` (or `state["model"]`): nothing else sees the loaded
        tensors. A second use, a rebinding, a use in a nested function, `global` or
        `nonlocal` keep it unsafe."""
        path = self.ctx.ancestors
        i = _climb_subscripts(path)
        assign = path[i - 1] if i > 0 else None
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            target = assign.targets[0].target
        elif isinstance(assign, cst.AnnAssign):
            target = assign.target  # `state: dict = torch.load(p)`
        else:
            return False
        if assign.value is not path[i] or not isinstance(target, cst.Name):
            return False
        frame = self.ctx.function
        scope = frame.node if frame is not None else path[0]
        use_path = _only_use(scope, target)
        if use_path is None or any(isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) for n in use_path[1:]):
            return False
        above = list(path[:next(i for i, n in enumerate(path) if n is scope)])
        return self._loaded_into_load_state_dict(above + use_path)

    def _loaded_into_load_state_dict(self, path) -> bool:
        """`x.load_state_dict(<path[-1]>)` (see `loaded_into_load_state_dict`) where x may be a
        torch object: not a module bound by an import (`dist_util.load_state_dict(...)`)."""
        call = loaded_into_load_state_dict(path, copies=True)
        return call is not None and self.facts.receiver_may_be_torch_object(call.func.value, path[:next(i for i, n in enumerate(path) if n is call) + 1])

    def _in_setstate(self) -> bool:
        frame = self.ctx.function
        return frame is not None and frame.method == "__setstate__"


    def _in_temporary_folder(self, load: cst.Call) -> bool:
        """Whether the loaded path lies in a folder this run made (`tmp_path / "model.pt"`): the
        file in it was written on this machine, so its tensors come back where they were."""
        path = _path_argument(load)
        frame = self.ctx.function
        return path is not None and frame is not None and _mentions(path, _temporary_folders(frame.node))

    def _saved_here(self, load: cst.Call) -> bool:
        """Whether the same function (or the module's top level) saves to the path or in-memory
        buffer it loads (`torch.save(obj, p)`, `fabric.save(p, ...)`, `with incremental_save(p)`;
        `torch.save(obj, buf)` then `torch.load(buf)` or `torch.load(io.BytesIO(buf.getvalue()))`)
        before the load can run: earlier in its text, or later where the save cannot follow the
        load in one run (a cache's other branch, a loop's earlier pass). This process wrote it,
        so its tensors come back where they were."""
        path = _path_argument(load)
        if path is None:
            return False
        path = _unwrap_path(path)
        frame = self.ctx.function
        # in a function, its nested functions too (a handler that saves); at the top level, not
        # the functions, whose names are their own
        root = frame.node if frame is not None else self.ctx.ancestors[0]
        parents: dict[int, cst.CSTNode] = {}
        stack, after_load = [root], False
        while stack:
            node = stack.pop()
            if node is load:
                after_load = True
            if isinstance(node, cst.Call) and "save" in (syntax.last_name(node.func) or "").lower():
                if any(_unwrap_path(arg.value).deep_equals(path) for arg in node.args):
                    if not after_load or _cannot_follow(load, node, parents):
                        return True
            if frame is None and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not root:
                continue
            children = syntax.children(node)
            for child in children:
                parents[id(child)] = node
            stack.extend(reversed(children))
        return False


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


def _only_use(scope: cst.CSTNode, target: cst.Name) -> Optional[list[cst.CSTNode]]:
    """The path from scope down to the one mention of target's name in it besides target
    itself (nested functions, `global` and `nonlocal` included); None when there are more, or none."""
    parents: dict[int, cst.CSTNode] = {}
    use = None
    stack = [scope]
    while stack:
        node = stack.pop()
        for child in syntax.children(node):
            parents[id(child)] = node
            stack.append(child)
        if isinstance(node, cst.Name) and node.value == target.value and node is not target:
            parent = parents.get(id(node))
            if (isinstance(parent, cst.Attribute) and parent.attr is node) or (
                    isinstance(parent, cst.Arg) and parent.keyword is node):
                continue  # `x.state`, `f(state=...)`: not the name
            if use is not None:
                return None
            use = node
    if use is None:
        return None
    use_path = [use]
    while use_path[-1] is not scope:
        use_path.append(parents[id(use_path[-1])])
    return use_path[::-1]


def _climb_subscripts(path) -> int:
    """The index in path of the outermost subscript of path[-1] (`torch.load(p)["model"]`)."""
    i = len(path) - 1
    while i > 0 and isinstance(path[i - 1], cst.Subscript) and path[i - 1].value is path[i]:
        i -= 1
    return i


TEMPORARY_FOLDER_FIXTURES = frozenset({"tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory"})


def _path_argument(load: cst.Call) -> Optional[cst.BaseExpression]:
    args = syntax.positional(load)
    return args[0].value if args else getattr(syntax.keyword(load, "f"), "value", None)


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
    """The path under `str(p)`, `os.fspath(p)`, `Path(p)`, `p.as_posix()`; the buffer under
    `io.BytesIO(buf.getvalue())` (a copy of what was written into `buf`)."""
    while isinstance(expr, cst.Call) and len(expr.args) <= 1:
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("as_posix", "getvalue", "getbuffer") and not expr.args:
            expr = expr.func.value
        elif syntax.last_name(expr.func) == "BytesIO" and expr.args and not expr.args[0].keyword:
            expr = expr.args[0].value
        elif syntax.last_name(expr.func) in ("str", "fspath", "Path") and expr.args and not expr.args[0].keyword:
            expr = expr.args[0].value
        else:
            break
    return expr


def loaded_into_load_state_dict(path, copies: bool = False) -> Optional[cst.Call]:
    """The `<x>.load_state_dict(...)` call that the value made by path[-1] goes straight into,
    possibly through constant subscripts (`torch.load(p)["model"]`), or None. With copies=True,
    only where the module copies the tensors onto its own device (not `assign=True`)."""
    i = _climb_subscripts(path)
    if i < 2:
        return None
    arg, call = path[i - 1], path[i - 2]
    into = (
        isinstance(arg, cst.Arg)
        and arg.keyword is None
        and isinstance(call, cst.Call)
        and syntax.method_name(call) == "load_state_dict"
        and syntax.positional(call)[:1] == [arg]
        and not (copies and _assigns(call))
    )
    return call if into else None


def _assigns(call: cst.Call) -> bool:
    """`load_state_dict(sd, assign=...)` with anything but a literal False (or a star-argument)."""
    if syntax.has_star_args(call) or len(syntax.positional(call)) > 2:
        return True
    assign = syntax.keyword(call, "assign")
    return assign is not None and syntax.dotted_name(assign.value) != "False"
