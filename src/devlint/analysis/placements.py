"""Where values live in one scope: which names the code placed on an accelerator, and which hold
CPU tensors made without `device=`. Shared by DEV007, DEV008, DEV014 and DEV015.

The traversal records each scope's calls, bindings and expression statements in evaluation
order; at the scope's end, when a rule asks, a statement-order scan replays them
(devlint.analysis.scope_scan): nothing is walked again. It never guesses: a name is placed only
by what this scope did to it (`m.cuda()`, `m.to(device)`, `m = torch.load(p)` of a file this
process did not write), or, for a module, by the module level or the class around a method
(devlint.analysis.outer_placements); a name reassigned to anything else is forgotten. Here too:
the evidence a finding names (where a value was placed, where a CPU value was made).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import libcst as cst

from devlint.analysis.outer_placements import attribute_placements, module_moved_loaders, module_placements
from devlint.analysis.scope_scan import (  # noqa: F401 (the scan's names, for the rules)
    DATASET, FACTORY, HOST, LOADER, TOKENIZER, CpuValue, ScopeScan,
)
from devlint.analysis.values import Placement
from devlint.api import Analysis, FrameState
from devlint.core import syntax
from devlint.semantic.facts import ClassInfo
from devlint.torchinfo import names


def placement_evidence(placement: Optional[Placement]) -> Optional[tuple[cst.CSTNode, str]]:
    """(node, clause) naming where a placed value was put on the accelerator, for a finding's
    evidence; None when the placement has no known site."""
    at = placement.at if placement is not None else None
    if not isinstance(at, cst.Call):
        return None
    func = at.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda"):
        receiver = _short(func.value)
        subject = f"`{receiver}`" if receiver is not None else "it"
        return at, f"{subject} is moved to the accelerator"
    if syntax.keyword(at, "device_map") is not None:
        return at, "`device_map=` places the model on the accelerator"
    return at, f"`{syntax.dotted_name(func) or 'the load'}()` without `map_location` loads it onto the device it was saved on"


def cpu_evidence(value: "CpuValue") -> Optional[tuple[cst.CSTNode, str]]:
    """(node, clause) naming where a CPU value was made, for a finding's evidence."""
    origin = value.origin
    if origin is None:
        return None
    if value.kind == LOADER:
        origin = iterated(origin)
        source = _short(origin)
        return origin, f"the batch comes from {'`' + source + '`' if source else 'a data loader'} at {{line}} (CPU)"
    if value.kind == DATASET:
        return origin, "the data set is built at {line} (CPU)"
    if value.kind == TOKENIZER:
        return origin, "the tokenizer makes it at {line} (CPU)"
    if value.kind == HOST:
        return origin, "`.cpu()` moves it to the host"
    return origin, "it is made at {line} (CPU)"


def iterated(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What a loop iterates, under its wrappers: the loader of `enumerate(tqdm(loader))`."""
    while isinstance(expr, cst.Call) and expr.args and syntax.last_name(expr.func) in _ITERATION_WRAPPERS:
        expr = expr.args[0].value
    return expr


_ITERATION_WRAPPERS = names.ITERATION_WRAPPERS | {"enumerate"}


def _short(node: cst.CSTNode) -> Optional[str]:
    text = cst.Module([]).code_for_node(node)
    return text if len(text) <= 40 and "\n" not in text else None


@dataclass
class _ScopeEvents:
    events: list = field(default_factory=list)  # (kind, node): "call", "bind" or "expr"
    moves: bool = False  # the scope calls `.cuda()`, `.to()`, `.numpy()` or a loader
    scan: Optional[ScopeScan] = None


class ScopePlacements(Analysis):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes: FrameState[_ScopeEvents] = FrameState(_ScopeEvents)  # by function frame; None: module level
        self._on_call: list[Callable[[ScopeScan, cst.Call], None]] = []
        self._on_operator: list[Callable[[ScopeScan, cst.CSTNode], None]] = []
        self._on_scope_end: list[Callable[[ScopeScan], None]] = []

    def on_call(self, listener: Callable[[ScopeScan, cst.Call], None]) -> None:
        """Have `listener(scan, call)` called for every call of every scope that is scanned."""
        self._on_call.append(listener)

    def on_operator(self, listener: Callable[[ScopeScan, cst.CSTNode], None]) -> None:
        """Have `listener(scan, node)` called for every binary operation and comparison."""
        self._on_operator.append(listener)

    def on_scope_end(self, listener: Callable[[ScopeScan], None]) -> None:
        """Have `listener(scan)` called at the end of every scope that is scanned."""
        self._on_scope_end.append(listener)

    def scan(self) -> Optional[ScopeScan]:
        """The scan of the current scope (call it at the scope's end), made once, and only where
        the scope moves something."""
        scope = self._scopes.get(self.ctx.function)
        if scope is None or not scope.moves:
            return None
        if scope.scan is None:
            root = self.ctx.function.node if self.ctx.function is not None else self.ctx.ancestors[0]
            frame = self.ctx.function
            outer = module_placements(self.facts) if frame is not None else None
            outer_loaders = module_moved_loaders(self.facts) if frame is not None else frozenset()
            self_name, attributes = self._class_placements(frame)
            scope.scan = ScopeScan(self.facts).replay(root, scope.events, self._on_call, self._on_operator,
                                                      outer, attributes, self_name, outer_loaders)
        return scope.scan

    def _record(self, kind: str, node: cst.CSTNode) -> None:
        scope = self._scopes[self.ctx.function]
        scope.events.append((kind, node))
        if kind == "call" and not scope.moves:
            func = node.func
            if (isinstance(func, cst.Attribute) and func.attr.value in names.SCAN_TRIGGERING_METHODS) or (
                self.facts.resolve(func) in names.LOADERS
            ) or syntax.keyword(node, "device_map") is not None or self._uses_placed_module(node):
                scope.moves = True

    def _uses_placed_module(self, call: cst.Call) -> bool:
        """A function's call of a module the module level placed, or passing one (`m(x)`,
        `torch.onnx.export(m, ...)`), or a method's call of one its class placed as `self.NAME`:
        the scope works with a placed module."""
        frame = self.ctx.function
        if frame is None:
            return False
        func = call.func
        if isinstance(func, cst.Name) or any(isinstance(a.value, cst.Name) for a in call.args):
            placed = module_placements(self.facts)
            if placed and any(isinstance(v, cst.Name) and v.value in placed for v in (func, *(a.value for a in call.args))):
                return True
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == frame.self_name:
            self_name, attributes = self._class_placements(frame)
            return self_name is not None and func.attr.value in attributes
        return False

    def _class_placements(self, frame) -> tuple[Optional[str], dict]:
        """For a method (not a function nested in one): its `self`, and the modules its class
        places as `self.NAME`."""
        info = self.facts.definers.get(frame.node) if frame is not None else None
        if not isinstance(info, ClassInfo) or frame.self_name is None:
            return None, {}
        return frame.self_name, attribute_placements(self.facts, info)

    def visit_Call(self, node: cst.Call) -> None:
        self._record("call", node)

    def leave_Assign(self, node: cst.Assign) -> None:
        self._record("bind", node)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._record("bind", node)

    def leave_Expr(self, node: cst.Expr) -> None:
        self._record("expr", node)

    def visit_For(self, node: cst.For) -> None:
        self._record("for", node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if self._on_operator:
            self._record("operator", node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if self._on_operator:
            self._record("operator", node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._end_scope()
        self._scopes.pop(self.ctx.function)

    def leave_Module(self, node: cst.Module) -> None:
        self._end_scope()

    def _end_scope(self) -> None:
        scan = self.scan() if self._on_scope_end else None
        if scan is not None:
            for listener in self._on_scope_end:
                listener(scan)
