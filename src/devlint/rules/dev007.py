from __future__ import annotations

import libcst as cst

from devlint import edits, names
from devlint.engine import NodeFix, Rule
from devlint.placement import PlacementEvents


class InputDeviceMismatch(PlacementEvents, Rule):
    code = "DEV007"
    name = "input-device-mismatch"
    summary = "CPU input passed to a module the same scope moved to an accelerator"

    def check_scope(self, scan) -> None:
        seen = set()
        for factory, placement in scan.inputs:
            if factory in seen:
                continue
            seen.add(factory)
            source = self.facts.is_tensor_source(factory)
            applicability = scan.fix_applicability(factory, placement)
            fix = None
            if applicability is not None and (source in names.FACTORIES or source == names.AS_TENSOR):
                device = placement.device
                fix = NodeFix(applicability, f"Add `device={cst.Module([]).code_for_node(device)}`", factory,
                              edits.add_arg(factory, edits.keyword_arg("device", device)))
            self.report(
                factory.func,
                f"`{source}()` makes a CPU input for a module this code moved to an accelerator; "
                "create it on the module's device (`device=`) or move it first",
                fix,
            )
