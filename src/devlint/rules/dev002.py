"""DEV002 load-without-map-location: `torch.load(...)` without `map_location`. Doc:
rules/DEV002.md; fixture: tests/fixtures/DEV002.py."""
from typing import Optional

import libcst as cst

from devlint import edits, names, syntax
from devlint.analysis import round_trips, values
from devlint.base import SAFE, UNSAFE, NodeFix, Rule


class LoadWithoutMapLocation(Rule):
    """A loader of `names.LOADERS` called without `map_location` (keyword or positional slot)
    or `**kwargs`; the fix adds `map_location="cpu"`, safe straight into `load_state_dict`
    (or through a local name used only there)."""

    code = "DEV002"
    name = "load-without-map-location"
    summary = "`torch.load` without `map_location`"
    fixes, applicabilities = "sometimes", (SAFE, UNSAFE)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.facts.resolve(node.func)
        slot = names.LOADERS.get(qualified)
        if slot is None:
            return
        if syntax.keyword(node, "map_location") is not None or syntax.has_star_args(node):
            return
        if len(syntax.positional(node)) > slot:
            return
        # A file or buffer this process wrote (a test's round trip, a cache in a temporary folder,
        # a deep copy through memory): its tensors come back where they were saved.
        frame = self.ctx.function
        if round_trips.round_trip(node, frame.node if frame is not None else self.ctx.ancestors[0]):
            return
        # Into load_state_dict, the module copies the tensors onto its own device: mapping
        # them to the CPU changes nothing else. Elsewhere they used to land on the GPU; inside
        # `__setstate__` the object being restored is whatever the pickle held.
        safe = not self._in_setstate() and (
            self._loaded_into_load_state_dict(self.ctx.ancestors) or self._loaded_through_name()
        )
        # The class's own saved state (`torch.save(state, self.queue_path)` in another method)
        # comes back where the program kept it: mapped to the CPU it would stay there.
        own_state = frame is not None and frame.klass is not None \
            and round_trips.saved_by_its_class(node, frame.klass.node, frame.self_name)
        fix = None if self._runs_as_loaded() or (own_state and not safe) else NodeFix(
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

    def _runs_as_loaded(self) -> bool:
        """`model = torch.load(p)` (or `torch.jit.load(p)`) that the same scope calls as a module
        (`model(x)`) and never moves, while it moves other values to a device (`x.to(device)`):
        the module runs where it was saved, beside those inputs, and `map_location="cpu"` would
        run it on the CPU. (With inputs the scope leaves where they are, the fix keeps the two
        together on the CPU.)"""
        path = self.ctx.ancestors
        assign = path[-2] if len(path) > 1 else None
        if not (isinstance(assign, cst.Assign) and assign.value is path[-1] and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)):
            return False
        name = assign.targets[0].target.value
        frame = self.ctx.function
        scope = frame.node if frame is not None else path[0]
        called = moved = inputs_placed = False
        for node in syntax.walk(scope):
            if isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Name) and func.value == name:
                    called = True
                elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name \
                        and func.attr.value in names.PLACING_METHODS:
                    moved = True
                elif values.is_move(node, self.facts) and not values.is_host_call(node, self.facts):
                    inputs_placed = True  # `x.to(device)`, `x.cuda()`: the scope puts values on a device
        return called and not moved and inputs_placed

    def _in_setstate(self) -> bool:
        frame = self.ctx.function
        return frame is not None and frame.method == "__setstate__"


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
