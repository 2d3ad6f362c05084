"""Whether a `device` name is bound where the traversal is: what the DEV001 and DEV005 fixes write."""
from __future__ import annotations

import libcst as cst

from devlint import syntax
from devlint.analysis.base import Analysis
from devlint.analysis.bindings import name_bound_at


class DeviceNames(Analysis):
    def device_in_scope(self) -> bool:
        """Whether a `device` name bound here can stand for the current node's hardcoded device:
        bound when this code runs (`name_bound_at`: a parameter, an earlier binding in the
        function, or a global bound above the function and not only under `if __name__ ==
        "__main__":`), and not the fallback of `device` itself (`device = device or
        torch.device("cuda")`)."""
        ctx = self.ctx
        for node in reversed(ctx.ancestors):
            if isinstance(node, (cst.Assign, cst.AnnAssign, cst.BooleanOperation, cst.IfExp)):
                if any(isinstance(n, cst.Name) and n.value == "device" for n in syntax.walk(node)):
                    return False
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                break
        return name_bound_at("device", ctx.ancestors)
