"""DEV008 numpy-on-device-tensor: `.numpy()` on a tensor the same scope put on an accelerator.
Doc: rules/DEV008.md; fixture: tests/fixtures/DEV008.py."""
from __future__ import annotations

import libcst as cst

from devlint.analysis.placements import ScopePlacements, ScopeScan, placement_evidence
from devlint.api import SAFE, FrameState, NodeFix, Rule
from devlint.core import syntax


class NumpyOnDeviceTensor(Rule):
    """`.numpy()` on a value whose chain holds `.cuda()` / `.to(accelerator)`, or on the output
    of a module placed there, with no `.cpu()` between; the fix inserts `.cpu()`."""

    code = "DEV008"
    name = "numpy-on-device-tensor"
    summary = "`.numpy()` on a tensor the same scope put on an accelerator"
    fixes, applicabilities = "always", (SAFE,)
    requires = (ScopePlacements,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._numpy_calls: FrameState[list[tuple[cst.Call, tuple]]] = FrameState(list)  # by scan: (call, evidence)
        ctx[ScopePlacements].on_call(self._call)
        ctx[ScopePlacements].on_scope_end(self._check_scope)

    def _call(self, scan: ScopeScan, call: cst.Call) -> None:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "numpy":
            force = syntax.keyword(call, "force")
            if force is not None and not (isinstance(force.value, cst.Name) and force.value.value == "False"):
                return  # `.numpy(force=True)` copies to the CPU first
            evidence = placement_evidence(scan.placement_of(func.value))
            if evidence is not None:  # placed, and where is known: a finding names it
                self._numpy_calls[scan].append((call, evidence))

    def _check_scope(self, scan: ScopeScan) -> None:
        numpy_calls = self._numpy_calls.pop(scan) or []
        if self.facts.stays_on_default_device:
            return
        for call, placed in numpy_calls:
            if syntax.in_exclusive_arms(scan.root, placed[0], call):
                continue  # `if pt: x = x.to(d)` / `else: x = x.numpy()`: never in one pass
            func = call.func
            with_cpu = cst.Call(func=cst.Attribute(value=func.value, attr=cst.Name("cpu")))
            fix = NodeFix(SAFE, "Insert `.cpu()` before `.numpy()`", call,
                          call.with_changes(func=func.with_changes(value=with_cpu)))
            self.report(
                func.attr,
                "`.numpy()` on a tensor this code put on an accelerator fails (`can't convert cuda:0 device type "
                "tensor to numpy`); call `.cpu()` first",
                fix,
                related=[placed],
            )
