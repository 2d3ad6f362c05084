import libcst as cst

from devlint import names, syntax
from devlint.engine import Rule


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
        self.report(
            node.func,
            f"`{qualified}()` without `map_location`: a checkpoint saved on a GPU fails to load on a machine without one",
        )
