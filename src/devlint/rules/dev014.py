"""DEV014 module-added-after-move: a module with weights set on a model after the same scope moved the
model to an accelerator. Doc: rules/DEV014.md; fixture: tests/fixtures/DEV014.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint.analysis.module_tensors import ModuleTensors, move_where_built, moves_off_the_cpu
from devlint.analysis.placements import ScopePlacements, ScopeScan, placement_evidence
from devlint.api import UNSAFE, FrameState, Rule
from devlint.core import syntax


# Builtins that read or attach to a module, and never move it: a module passed to them stays the scope's.
KEEPING_BUILTINS = frozenset({"setattr", "getattr", "hasattr", "isinstance", "print", "len", "id", "type", "repr", "str"})


@dataclass
class _Added:
    model: str  # the name of the model it is set on
    target: Optional[str]  # `model.fc` where an assignment sets it, else None
    report_at: cst.CSTNode  # the assignment target, or the `setattr` / `add_module` call
    order: int  # where the construction stands in the scope's calls


@dataclass
class _Scope:
    added: dict = field(default_factory=dict)  # construction call -> _Added
    moves: list = field(default_factory=list)  # (order, dotted receiver) of each move off the CPU
    calls: int = 0  # the calls seen so far: the order of the next one
    found: list = field(default_factory=list)  # (construction, _Added, class name, placement, path)
    handed: set = field(default_factory=set)  # names handed to other code, which may move a module in place


class ModuleAddedAfterMove(Rule):
    """`m.ATTR = <module with weights>` (also `m.A.B = ...`, `setattr(m, name, ...)`,
    `m.add_module(name, ...)`) after the scope placed `m` on an accelerator (DEV007's
    placement), with no later move of `m` or of the new module in the scope, and `m` not handed
    to other code (returned, stored on an object, passed to a call), which may move it. The fix moves the
    new module where it is built, with the device `m` was moved with."""

    code = "DEV014"
    name = "module-added-after-move"
    summary = "a module with weights set on a model after the model was moved to an accelerator"
    fixes, applicabilities = "sometimes", (UNSAFE,)
    requires = (ScopePlacements,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes: FrameState[_Scope] = FrameState(_Scope)  # by function frame; None: module level
        self._tensors = ModuleTensors(self.facts)
        self._paths: dict = {}  # construction call -> its ancestors
        ctx[ScopePlacements].on_call(self._placed_call)
        ctx[ScopePlacements].on_scope_end(self._scope_end)

    # --- the traversal: what the scope sets on which object, and what it moves -------------
    def visit_Call(self, node: cst.Call) -> None:
        scope = self._scopes[self.ctx.function]
        order, scope.calls = scope.calls, scope.calls + 1
        if node in scope.added:
            self._paths[node] = tuple(self.ctx.ancestors)
        if moves_off_the_cpu(self.facts, node):
            receiver = syntax.dotted_name(node.func.value)
            if receiver is not None:
                scope.moves.append((order, receiver))
            return
        if not (isinstance(node.func, cst.Name) and node.func.value in KEEPING_BUILTINS):
            for arg in node.args:
                if isinstance(arg.value, cst.Name):
                    scope.handed.add(arg.value.value)
        target = self._added_by_call(node)
        if target is not None:
            model, value = target
            if isinstance(value, cst.Call):
                scope.added[value] = _Added(model, None, node, order + 1)  # the construction is the next call

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:  # `return model`, `return loader, model, optimizer`
            for leaf in syntax.unpacked_targets(node.value):
                if isinstance(leaf, cst.Name):
                    self._scopes[self.ctx.function].handed.add(leaf.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Name) and not all(isinstance(t.target, cst.Name) for t in node.targets):
            self._scopes[self.ctx.function].handed.add(node.value.value)  # `self.model = model`
        if len(node.targets) != 1 or not isinstance(node.value, cst.Call):
            return
        target = syntax.dotted_name(node.targets[0].target)
        if target is None or "." not in target:
            return
        scope = self._scopes[self.ctx.function]
        # the value's calls are visited after this: the construction is the next call
        scope.added[node.value] = _Added(target.split(".")[0], target, node.targets[0].target, scope.calls)

    def _added_by_call(self, call: cst.Call) -> Optional[tuple[str, cst.BaseExpression]]:
        """(model, module) for `setattr(model, name, module)` and `model.add_module(name, module)`."""
        func = call.func
        args = [a.value for a in call.args if a.keyword is None]
        if isinstance(func, cst.Name) and func.value == "setattr" and len(args) == 3 and isinstance(args[0], cst.Name):
            return args[0].value, args[2]
        if isinstance(func, cst.Attribute) and func.attr.value == "add_module" and isinstance(func.value, cst.Name) \
                and len(args) == 2:
            return func.value.value, args[1]
        return None

    # --- the replay: was the model placed when the module was added? ------------------------
    def _placed_call(self, scan: ScopeScan, call: cst.Call) -> None:
        scope = self._scopes.get(self.ctx.function)
        added = scope.added.get(call) if scope is not None else None
        if added is None:
            return
        placement = scan.placement_of(cst.Name(added.model))
        if placement is None or placement_evidence(placement) is None:
            return
        path = self._paths.get(call)
        if path is None or syntax.keyword(call, "device") is not None or syntax.has_double_star(call):
            return
        name = self._tensors.built(call, path)
        if name is not None:
            scope.found.append((call, added, name, placement, path))

    def _scope_end(self, scan: ScopeScan) -> None:
        scope = self._scopes.pop(self.ctx.function)
        if scope is None:
            return
        for call, added, name, placement, path in scope.found:
            moved_later = any(order > added.order and receiver in (added.model, added.target)
                              for order, receiver in scope.moves)
            if moved_later or added.model in scope.handed:
                continue  # moved here, or handed to code that may move it (a module moves in place)
            what = f"`{added.target}`" if added.target else f"a module of `{added.model}`"
            self.report(
                added.report_at,
                f"{what} is set to a new `{name}(...)` after `{added.model}` was moved to the accelerator: its "
                f"weights stay on the CPU; move it too, or set it before `{added.model}` is moved",
                move_where_built(call, placement, path),
                related=[placement_evidence(placement)],
            )
