import libcst as cst

from devlint import syntax
from devlint.engine import UNSAFE, NodeFix, Rule


class HardcodedCudaCall(Rule):
    code = "DEV001"
    name = "hardcoded-cuda-call"
    summary = "`.cuda()` call outside a CUDA guard"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "cuda":
            return
        if self.facts.resolve(func.value) == "torch":
            return
        frame = self.ctx.function
        if frame is not None and frame.node.name.value == "cuda":  # an override calling super().cuda()
            return
        if self.ctx.is_guarded():
            return
        fix = None
        if not syntax.positional(node) and self.ctx.device_in_scope():
            device = cst.Arg(cst.Name("device"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if node.args else cst.MaybeSentinel.DEFAULT)
            replacement = node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=[device, *node.args])
            fix = NodeFix(UNSAFE, "Replace `.cuda()` with `.to(device)`", node, replacement)
        self.report(func.attr, "`.cuda()` hardcodes the CUDA device and fails where there is none; use `.to(device)`", fix)
