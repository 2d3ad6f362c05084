"""`with torch.device(...):` blocks, where factories default to that device."""
from __future__ import annotations

import libcst as cst

from devlint.analysis.base import Analysis


class DeviceContexts(Analysis):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._depth = 0

    def visit_With(self, node: cst.With) -> None:
        if self._opens_device_context(node):
            self._depth += 1

    def leave_With(self, node: cst.With) -> None:
        if self._opens_device_context(node):
            self._depth -= 1

    @property
    def active(self) -> bool:
        """Inside `with torch.device(...):`."""
        return self._depth > 0

    def _opens_device_context(self, node: cst.With) -> bool:
        return any(
            isinstance(item.item, cst.Call) and self.facts.resolve(item.item.func) == "torch.device"
            for item in node.items
        )
