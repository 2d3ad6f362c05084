"""DEV015 unmoved-module: a module with tensors built in a scope and never moved there, called on a
value the scope put on an accelerator, or wrapped in DataParallel. Doc: rules/DEV015.md; fixture:
tests/fixtures/DEV015.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint.analysis.module_tensors import ModuleTensors, move_where_built, moves_off_the_cpu
from devlint.analysis.placements import ScopePlacements, ScopeScan, placement_evidence
from devlint.api import UNSAFE, FrameState, Rule
from devlint.core import syntax

PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                      "torch.nn.parallel.data_parallel.DataParallel"})
DISTRIBUTED = frozenset({"torch.nn.parallel.DistributedDataParallel",
                         "torch.nn.parallel.distributed.DistributedDataParallel"})
# The keywords that hand a loss a tensor it keeps as a buffer.
LOSS_TENSORS = ("weight", "pos_weight")


@dataclass
class _Built:
    call: cst.Call  # the construction
    name: str  # as written: `nn.CrossEntropyLoss`
    path: tuple  # its ancestors
    why: str  # what it holds: "weights", "a CPU `weight=` tensor"


@dataclass
class _Scope:
    built: dict[str, _Built] = field(default_factory=dict)  # name -> the module built and bound to it
    bound: dict[str, int] = field(default_factory=dict)  # name -> how many times the scope binds it
    cpu_tensors: dict[str, cst.Call] = field(default_factory=dict)  # name -> the device-less factory it holds
    moved: set = field(default_factory=set)  # names the scope moves off the CPU
    handed: set = field(default_factory=set)  # names passed to other code, which may move a module in place
    uses: dict[str, list] = field(default_factory=dict)  # name -> [(call, placement evidence)]
    wrapped: dict[str, cst.Call] = field(default_factory=dict)  # name -> the DataParallel call around it


class UnmovedModule(Rule):
    """In one scope (a function, or a script's module level): a module built there that holds
    tensors (a layer with weights, a loss given a CPU `weight=`/`pos_weight=` tensor, a module
    class of the file that makes weights), bound to a name the scope binds once, never moved off
    the CPU and never handed to other code; flagged when the scope calls it on a value it put on
    an accelerator, or wraps it in `nn.DataParallel` (or `DistributedDataParallel(..., device_ids=)`).
    The fix moves it where it is built, with the device the scope moved the value with."""

    code = "DEV015"
    name = "unmoved-module"
    summary = "a module with tensors built in a scope, never moved there, meeting values on an accelerator"
    fixes, applicabilities = "sometimes", (UNSAFE,)
    requires = (ScopePlacements,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes: FrameState[_Scope] = FrameState(_Scope)  # by function frame; None: module level
        self._tensors = ModuleTensors(self.facts)
        ctx[ScopePlacements].on_call(self._placed_call)
        ctx[ScopePlacements].on_scope_end(self._scope_end)

    # --- what the scope does, in the traversal ---------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        scope = self._scopes[self.ctx.function]
        targets = [t.target for t in node.targets]
        for target in targets:
            for leaf in syntax.unpacked_targets(target):
                if isinstance(leaf, cst.Name):
                    scope.bound[leaf.value] = scope.bound.get(leaf.value, 0) + 1
                    scope.cpu_tensors.pop(leaf.value, None)
        if len(targets) != 1 or not isinstance(targets[0], cst.Name) or not isinstance(node.value, cst.Call):
            return
        name, call = targets[0].value, node.value
        if self.facts.is_tensor_source(call) and syntax.keyword(call, "device") is None:
            scope.cpu_tensors[name] = call
        built = self._built(call, scope)
        if built is not None:
            scope.built[name] = built

    def visit_Call(self, node: cst.Call) -> None:
        scope = self._scopes[self.ctx.function]
        func = node.func
        if moves_off_the_cpu(self.facts, node) and isinstance(func.value, cst.Name):
            scope.moved.add(func.value.value)
            return
        qualified = self.facts.resolve(func) or ""
        wraps = qualified in PARALLEL or (qualified in DISTRIBUTED and syntax.keyword(node, "device_ids") is not None)
        for position, arg in enumerate(node.args):
            if isinstance(arg.value, cst.Name):
                if wraps and position == 0:
                    scope.wrapped.setdefault(arg.value.value, node)
                else:
                    scope.handed.add(arg.value.value)

    def _built(self, call: cst.Call, scope: _Scope) -> Optional[_Built]:
        if syntax.keyword(call, "device") is not None or syntax.has_double_star(call):
            return None
        name = self._tensors.built(call, self.ctx.ancestors)
        if name is not None:
            return _Built(call, name, tuple(self.ctx.ancestors), "weights")
        qualified = self.facts.resolve(call.func) or ""
        if qualified.startswith("torch.nn.") and qualified.endswith("Loss"):
            for keyword in LOSS_TENSORS:
                arg = syntax.keyword(call, keyword)
                if arg is None:
                    continue
                value = arg.value
                made_here = isinstance(value, cst.Call) and self.facts.is_tensor_source(value) \
                    and syntax.keyword(value, "device") is None
                if made_here or (isinstance(value, cst.Name) and value.value in scope.cpu_tensors):
                    return _Built(call, syntax.dotted_name(call.func) or "the loss", tuple(self.ctx.ancestors),
                                  f"a CPU `{keyword}=` tensor")
        return None

    # --- where values live: the scope's replay --------------------------------------------
    def _placed_call(self, scan: ScopeScan, call: cst.Call) -> None:
        scope = self._scopes.get(self.ctx.function)
        if scope is None or not scope.built:
            return
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        if not isinstance(func, cst.Name) or func.value not in scope.built:
            return
        for arg in call.args:
            evidence = placement_evidence(scan.placement_of(arg.value))
            if evidence is not None:
                scope.uses.setdefault(func.value, []).append((call, evidence, scan.placement_of(arg.value)))
                return

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self._scopes[self.ctx.function]
        self._check_wrapped(scope)
        if not scope.built:
            self._scopes.pop(self.ctx.function)  # nothing for the replay to find

    def leave_Module(self, node: cst.Module) -> None:
        self._check_wrapped(self._scopes[None])

    def _scope_end(self, scan: ScopeScan) -> None:
        scope = self._scopes.pop(self.ctx.function)
        if scope is None:
            return
        for name, uses in scope.uses.items():
            built = self._kept(scope, name)
            if built is None:
                continue
            call, evidence, placement = uses[0]
            self.report(
                built.call.func,
                f"`{name}` is built with {built.why} and never moved, but it is called on a value this code put on an "
                "accelerator: they meet on two devices; move it where it is built",
                move_where_built(built.call, placement, built.path),
                related=[(call, f"`{name}` is called on it"), evidence],
            )

    def _check_wrapped(self, scope: _Scope) -> None:
        for name, wrapper in scope.wrapped.items():
            built = self._kept(scope, name)
            if built is None:
                continue
            self.report(
                wrapper.func,
                f"`{name}` is built with {built.why} and never moved to a GPU: on one, DataParallel raises `module "
                "must have its parameters and buffers on device cuda:0 (device_ids[0])`; move it first",
                related=[(built.call, f"`{name}` is built here")],
            )

    def _kept(self, scope: _Scope, name: str) -> Optional[_Built]:
        """The module bound to `name`, when the scope binds the name once, never moves it off the
        CPU and never hands it to other code (a module moves in place, so a callee may move it)."""
        built = scope.built.get(name)
        if built is None or scope.bound.get(name, 0) != 1 or name in scope.moved or name in scope.handed:
            return None
        return built
