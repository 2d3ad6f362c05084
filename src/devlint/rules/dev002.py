import libcst as cst

from devlint import edits, names, syntax
from devlint.engine import SAFE, UNSAFE, NodeFix, Rule


class LoadWithoutMapLocation(Rule):
    code = "DEV002"
    name = "load-without-map-location"
    summary = "`torch.load` without `map_location`"

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
        safe = edits.loaded_into_load_state_dict(self.ctx.ancestors, copies=True)
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
