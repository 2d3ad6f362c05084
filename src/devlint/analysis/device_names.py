"""Whether a `device` name is bound where the traversal is: what the DEV001 and DEV005 fixes write."""
from __future__ import annotations

import libcst as cst

from devlint.api import Analysis
from devlint.core import syntax
from devlint.semantic.bindings import bound_values, function_bindings, name_bound_at


class DeviceNames(Analysis):
    def device_in_scope(self) -> bool:
        """Whether a `device` name bound here can stand for the current node's hardcoded device:
        bound when this code runs (`name_bound_at`: a parameter, an earlier binding in the
        function, or a global bound above the function and not only under `if __name__ ==
        "__main__":`), and not the fallback of `device` itself (`device = device or
        torch.device("cuda")`), nor the target of the loop whose iterable holds the node (`for
        device in [torch.device("cuda")]`: there `device` is unbound, or a previous loop's last
        item), nor the target of a loop around the node over listed devices (`for device in ["cpu",
        "cuda"]:` takes each in turn, where the literal picks one), nor torch's device class
        imported under that name (`from torch import device`), nor a name bound only to
        hardcoded accelerators (`device = "cuda:1"`: writing it changes nothing, or sends the
        value to another GPU)."""
        ctx = self.ctx
        for i in range(len(ctx.ancestors) - 1, -1, -1):
            node = ctx.ancestors[i]
            if isinstance(node, (cst.For, cst.CompFor)) and i + 1 < len(ctx.ancestors) and ctx.ancestors[i + 1] is node.iter \
                    and any(isinstance(n, cst.Name) and n.value == "device" for n in syntax.walk(node.target)):
                return False
            if isinstance(node, (cst.Assign, cst.AnnAssign, cst.BooleanOperation, cst.IfExp)):
                if any(isinstance(n, cst.Name) and n.value == "device" for n in syntax.walk(node)):
                    return False
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                break
        if not name_bound_at("device", ctx.ancestors):
            return False
        if any(_sweeps_listed_devices(node, self.facts) for node in ctx.ancestors):
            return False  # `for device in ["cpu", "cuda"]:` takes each in turn; the literal stays one
        bound = bound_values("device", ctx.ancestors)
        if bound and all(_hardcoded_accelerator(value, self.facts) for value in bound):
            return False  # `device = "cuda"` (or `"cuda:1"`): the same hardcoded choice, or another GPU
        # `from torch import device` (or `torch._C.device`) at the module level binds the class
        imported = function_bindings("device", ctx.ancestors) is None and self.facts.resolve(cst.Name("device"))
        return not (imported or "").startswith("torch")


def _hardcoded_accelerator(value: cst.BaseExpression, facts) -> bool:
    """`"cuda"`, `"cuda:1"`, `torch.device("cuda")`, `torch.device("cuda", 0)`."""
    value = _named_device(value, facts)
    return value is not None and syntax.is_cuda_literal(value)


def _sweeps_listed_devices(node: cst.CSTNode, facts) -> bool:
    """A loop whose target is `device` over a list or tuple written out as device literals
    (`for device in ["cpu", "cuda"]:`, `[torch.device("cpu"), torch.device("cuda")]`)."""
    if not isinstance(node, (cst.For, cst.CompFor)) or not isinstance(node.iter, (cst.List, cst.Tuple, cst.Set)):
        return False
    if not any(isinstance(n, cst.Name) and n.value == "device" for n in syntax.walk(node.target)):
        return False
    items = [e.value for e in node.iter.elements if not isinstance(e, cst.StarredElement)]
    named = [_named_device(i, facts) for i in items]
    return bool(items) and len(items) == len(node.iter.elements) and all(
        n is not None and syntax.string_value(n) is not None for n in named)


def _named_device(value: cst.BaseExpression, facts) -> cst.BaseExpression | None:
    """What names the device: the value itself, or the first argument of `torch.device(...)`."""
    if isinstance(value, cst.Call) and facts.resolve(value.func) == "torch.device":
        first = syntax.positional(value)[:1]
        return first[0].value if first else None
    return value
