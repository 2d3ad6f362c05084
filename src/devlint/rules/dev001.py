import libcst as cst

from devlint.engine import Rule


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
        self.report(func.attr, "`.cuda()` hardcodes the CUDA device and fails where there is none; use `.to(device)`")
