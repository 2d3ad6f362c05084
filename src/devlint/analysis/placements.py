"""Where values live in one scope: which local names the code placed on an accelerator, and
which hold CPU tensors made without `device=`. Shared by DEV007 and DEV008.

A statement-order scan of one function body (or a script's module level); it never guesses:
a name is placed only by what this scope did to it (`m.cuda()`, `m.to(device)`,
`m = torch.load(p)`), and a name reassigned to anything else is forgotten. The traversal
records the scope's calls, bindings and expression statements in evaluation order; the scan
replays them when a rule asks for it at the scope's end: nothing is walked again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import libcst as cst

from devlint import names, syntax
from devlint.analysis import values
from devlint.analysis.values import Placement, ValueModel
from devlint.analysis.base import Analysis
from devlint.base import FrameState


@dataclass(eq=False)  # one scan a scope: compared (and hashed) by identity
class ScopeScan:
    facts: object
    placed: dict[str, Placement] = field(default_factory=dict)
    factories: dict[str, cst.Call] = field(default_factory=dict)  # name -> the device-less factory it holds
    order: dict = field(default_factory=dict)  # node -> position in evaluation order
    first_binding: dict[str, int] = field(default_factory=dict)  # name -> position of its first binding
    factory_names: dict = field(default_factory=dict)  # factory call -> the name it was bound to
    root: Optional[cst.CSTNode] = None

    def __post_init__(self) -> None:
        self.model = ValueModel(self.facts, placed=self.placed, factories=self.factories)

    def device_less_factory(self, expr: cst.BaseExpression) -> Optional[cst.Call]:
        return self.model.device_less_factory(expr)

    def placement_of(self, expr: cst.BaseExpression) -> Optional[Placement]:
        return self.model.placement_of(expr)

    # --- the scan ----------------------------------------------------------------------------
    def replay(self, scope: cst.CSTNode, events: list, on_call: list[Callable[["ScopeScan", cst.Call], None]]) -> "ScopeScan":
        """Follow the scope's recorded events in evaluation order; each call is also handed to
        `on_call` (the rules' own questions), with the scan as it stands at that call."""
        self.root = scope
        if isinstance(scope, cst.FunctionDef):
            for param in syntax.all_params(scope.params):
                self.first_binding.setdefault(param.name.value, -1)
        for position, (kind, node) in enumerate(events):
            self.order[node] = position
            if kind == "call":
                for listener in on_call:
                    listener(self, node)
            elif kind == "bind" and node.value is not None:
                self._bind(node)
            elif kind == "expr":
                self._move_in_place(node.value)
        return self

    def _move_in_place(self, expr: cst.BaseExpression) -> None:
        """`model.cuda()`, `model.to(device).eval()` as a statement: a module moves in place."""
        moves = []
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in names.PLACING_METHODS:
                moves.append(expr)
            expr = expr.func.value
        if not moves or not isinstance(expr, cst.Name) or expr.value in self.factories:
            return
        last = moves[0]  # the outermost move decides
        if last.func.attr.value == "cpu" or (last.func.attr.value == "to" and values.to_cpu(self.facts, last)):
            self.placed.pop(expr.value, None)
        else:
            placement = self.placement_of(last)
            if placement is not None:
                self.placed[expr.value] = placement

    def _bind(self, node) -> None:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        value = node.value
        placement = self.placement_of(value)
        loaded = isinstance(value, cst.Call) and self.facts.resolve(value.func) in names.LOADERS and not (
            syntax.keyword(value, "map_location") or len(syntax.positional(value)) > names.LOADERS[self.facts.resolve(value.func)]
        )
        factory = self.device_less_factory(value)
        for target in targets:
            if not isinstance(target, cst.Name):
                continue
            name = target.value
            self.first_binding.setdefault(name, self.order.get(node, 0))
            self.placed.pop(name, None)
            self.factories.pop(name, None)
            if placement is not None:
                self.placed[name] = placement
            elif loaded:
                self.placed[name] = Placement(None)
            elif factory is not None:
                self.factories[name] = factory
                self.factory_names[factory] = name
                self.order.setdefault(factory, self.order.get(node, 0))


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

    def on_call(self, listener: Callable[[ScopeScan, cst.Call], None]) -> None:
        """Have `listener(scan, call)` called for every call of every scope that is scanned."""
        self._on_call.append(listener)

    def scan(self) -> Optional[ScopeScan]:
        """The scan of the current scope (call it at the scope's end), made once, and only where
        the scope moves something."""
        scope = self._scopes.get(self.ctx.function)
        if scope is None or not scope.moves:
            return None
        if scope.scan is None:
            root = self.ctx.function.node if self.ctx.function is not None else self.ctx.ancestors[0]
            scope.scan = ScopeScan(self.facts).replay(root, scope.events, self._on_call)
        return scope.scan

    def _record(self, kind: str, node: cst.CSTNode) -> None:
        scope = self._scopes[self.ctx.function]
        scope.events.append((kind, node))
        if kind == "call" and not scope.moves:
            func = node.func
            if (isinstance(func, cst.Attribute) and func.attr.value in names.SCAN_TRIGGERING_METHODS) or (
                self.facts.resolve(func) in names.LOADERS
            ):
                scope.moves = True

    def visit_Call(self, node: cst.Call) -> None:
        self._record("call", node)

    def leave_Assign(self, node: cst.Assign) -> None:
        self._record("bind", node)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._record("bind", node)

    def leave_Expr(self, node: cst.Expr) -> None:
        self._record("expr", node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.pop(self.ctx.function)
