"""`with torch.device(...):` blocks, where factories default to that device, and `with
FakeTensorMode(...):` blocks, where tensors are fake: placing one on "cuda" needs no GPU."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.api import Analysis

FAKE_MODES = frozenset({"torch._subclasses.FakeTensorMode", "torch._subclasses.fake_tensor.FakeTensorMode"})


class DeviceContexts(Analysis):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._depth = 0
        self._fake_depth = 0
        # per scope (function node, None for the module): names bound to a `FakeTensorMode(...)`
        self._fake_names: dict[Optional[cst.CSTNode], set[str]] = {}

    def visit_With(self, node: cst.With) -> None:
        if self._opens_device_context(node):
            self._depth += 1
        if self._opens_fake_mode(node):
            self._fake_depth += 1

    def leave_With(self, node: cst.With) -> None:
        if self._opens_device_context(node):
            self._depth -= 1
        if self._opens_fake_mode(node):
            self._fake_depth -= 1

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and self.facts.resolve(node.value.func) in FAKE_MODES:
            scope = self.ctx.function.node if self.ctx.function is not None else None
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self._fake_names.setdefault(scope, set()).add(target.target.value)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._fake_names.pop(node, None)

    @property
    def active(self) -> bool:
        """Inside `with torch.device(...):`."""
        return self._depth > 0

    @property
    def fake(self) -> bool:
        """Inside `with FakeTensorMode(...):` (or a name bound to one in the same scope or at the
        module level): tensors there carry a device without touching it."""
        return self._fake_depth > 0

    def _opens_device_context(self, node: cst.With) -> bool:
        return any(
            isinstance(item.item, cst.Call) and self.facts.resolve(item.item.func) == "torch.device"
            for item in node.items
        )

    def _opens_fake_mode(self, node: cst.With) -> bool:
        scope = self.ctx.function.node if self.ctx.function is not None else None
        bound = self._fake_names.get(scope, set()) | self._fake_names.get(None, set())
        return any(
            (isinstance(item.item, cst.Call) and self.facts.resolve(item.item.func) in FAKE_MODES)
            or (isinstance(item.item, cst.Name) and item.item.value in bound)
            for item in node.items
        )
