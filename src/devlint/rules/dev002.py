"""DEV002 load-without-map-location: `torch.load(...)` without `map_location`. Doc:
rules/DEV002.md; fixture: tests/fixtures/DEV002.py."""
import libcst as cst

from devlint import edits, names, syntax
from devlint.base import SAFE, UNSAFE, NodeFix, Rule


class LoadWithoutMapLocation(Rule):
    """A loader of `names.LOADERS` called without `map_location` (keyword or positional slot)
    or `**kwargs`; the fix adds `map_location="cpu"`, safe straight into `load_state_dict`."""

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
        # Into load_state_dict, the module copies the tensors onto its own device: mapping
        # them to the CPU changes nothing else. Elsewhere they used to land on the GPU.
        safe = loaded_into_load_state_dict(self.ctx.ancestors, copies=True)
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


def loaded_into_load_state_dict(path, copies: bool = False) -> bool:
    """Whether the value made by path[-1] goes straight into `<x>.load_state_dict(...)`,
    possibly through constant subscripts (`torch.load(p)["model"]`). With copies=True, only
    where the module copies the tensors onto its own device (not `assign=True`)."""
    i = len(path) - 1
    while i > 0 and isinstance(path[i - 1], cst.Subscript) and path[i - 1].value is path[i]:
        i -= 1
    if i < 2:
        return False
    arg, call = path[i - 1], path[i - 2]
    return (
        isinstance(arg, cst.Arg)
        and arg.keyword is None
        and isinstance(call, cst.Call)
        and syntax.method_name(call) == "load_state_dict"
        and syntax.positional(call)[:1] == [arg]
        and not (copies and _assigns(call))
    )


def _assigns(call: cst.Call) -> bool:
    """`load_state_dict(sd, assign=...)` with anything but a literal False (or a star-argument)."""
    if syntax.has_star_args(call) or len(syntax.positional(call)) > 2:
        return True
    assign = syntax.keyword(call, "assign")
    return assign is not None and syntax.dotted_name(assign.value) != "False"
