"""Whether a `device` name is bound where the traversal is: what the DEV001 and DEV005 fixes write."""
from __future__ import annotations

import libcst as cst

from devlint import syntax
from devlint.analysis.base import Analysis


class DeviceNames(Analysis):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._bound_in_function: list[bool] = []  # per open function: an assignment to `device` was seen
        self._bound_at_module_level = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bound_in_function.append(False)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bound_in_function.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(isinstance(t.target, cst.Name) and t.target.value == "device" for t in node.targets):
            if self._bound_in_function:
                self._bound_in_function[-1] = True
            else:
                self._bound_at_module_level = True

    def device_in_scope(self) -> bool:
        """Whether a `device` name bound here can stand for the current node's hardcoded device:
        bound by a parameter or an earlier assignment, and not the fallback of `device` itself
        (`device = device or torch.device("cuda")`)."""
        ctx = self.ctx
        for node in reversed(ctx.ancestors):
            if isinstance(node, (cst.Assign, cst.AnnAssign, cst.BooleanOperation, cst.IfExp)):
                if any(isinstance(n, cst.Name) and n.value == "device" for n in syntax.walk(node)):
                    return False
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                break
        scopes = list(zip(ctx.functions, self._bound_in_function))
        if scopes and not _in_body(ctx.ancestors, scopes[-1][0].node):
            scopes.pop()  # a decorator or a default: evaluated outside the function
        for frame, bound in reversed(scopes):
            if bound or "device" in syntax.param_names(frame.node.params):
                return True
            if _assigns_device(frame.node):  # a later assignment makes `device` local: unbound here
                return False
        return self._bound_at_module_level or (bool(scopes) and self.facts.module_device_bound)


def _in_body(ancestors, function: cst.FunctionDef) -> bool:
    at = next(i for i in range(len(ancestors) - 1, -1, -1) if ancestors[i] is function)
    return at + 1 < len(ancestors) and ancestors[at + 1] is function.body


def _assigns_device(function: cst.FunctionDef) -> bool:
    for node in syntax.walk_expressions(function):
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == "device" for t in node.targets):
            return True
        if isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name) and node.target.value == "device":
            return True
    return False
