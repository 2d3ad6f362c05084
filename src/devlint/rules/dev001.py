"""DEV001 hardcoded-cuda-call: `.cuda()` outside a CUDA guard. Doc: rules/DEV001.md; fixture:
tests/fixtures/DEV001.py."""
import libcst as cst

from devlint.analysis.cuda_guards import CudaGuards
from devlint.analysis.device_contexts import DeviceContexts
from devlint.analysis.device_names import DeviceNames
from devlint.api import UNSAFE, NodeFix, Rule
from devlint.core import syntax

# What `.cuda()` raises on a CPU build of torch ("Torch not compiled with CUDA enabled"): a
# `try` catching it guards the call.
RAISED_WITHOUT_CUDA = "AssertionError"


class HardcodedCudaCall(Rule):
    """A `.cuda(...)` method call on any receiver but a name bound by an import, that is not
    guarded (nor in a `try` catching its AssertionError); the fix writes `.to(device)` where a
    `device` name is in scope."""

    code = "DEV001"
    name = "hardcoded-cuda-call"
    summary = "`.cuda()` call outside a CUDA guard"
    fixes, applicabilities = "sometimes", (UNSAFE,)
    requires = (CudaGuards, DeviceNames, DeviceContexts)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "cuda":
            return
        if self.facts.resolve(func.value) == "torch":
            return
        if not self.facts.receiver_may_be_torch_object(func.value, self.ctx.ancestors):
            return  # `imed_utils.cuda(x, ...)`: a function of an imported module, not the tensor method
        frame = self.ctx.function
        if frame is not None and "cuda" in (frame.node.name.value, frame.method):
            return  # an override calling super().cuda(), or the functions nested in one
        guards = self.ctx[CudaGuards]
        if guards.is_guarded() or guards.caught(RAISED_WITHOUT_CUDA) or self.ctx[DeviceContexts].fake:
            return  # guarded, or under `with FakeTensorMode():` (a fake tensor needs no GPU)
        fix = None
        if not syntax.positional(node) and self.ctx[DeviceNames].device_in_scope():
            device = cst.Arg(cst.Name("device"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if node.args else cst.MaybeSentinel.DEFAULT)
            replacement = node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=[device, *node.args])
            fix = NodeFix(UNSAFE, "Replace `.cuda()` with `.to(device)`" + self._choose(), node, replacement)
        self.report(func.attr, "`.cuda()` hardcodes the CUDA device and fails where there is none; use `.to(device)`"
                    + self._choose(), fix)

    def _choose(self) -> str:
        """From torch 2.6, the advice names the accelerator API (CUDA, MPS, XPU and the CPU alike)."""
        if self.ctx.torch_at_least(2, 6):
            return (" (`device = torch.accelerator.current_accelerator()` when `torch.accelerator.is_available()`, "
                    'else `"cpu"`)')
        return ""
