"""DEV007 input-device-mismatch: a CPU value meets a module the same scope moved to an
accelerator. Doc: rules/DEV007.md; fixture: tests/fixtures/DEV007.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

import libcst as cst

from devlint import edits, names, syntax
from devlint.analysis.placements import ScopePlacements, ScopeScan
from devlint.analysis.values import Placement
from devlint.base import SAFE, UNSAFE, FrameState, NodeFix, Rule

EXPORTS = {  # function -> how it takes the module and the example inputs
    "torch.onnx.export": "args",
    "torch.jit.trace": "example_inputs",
    "torch.jit.trace_module": "inputs",
    "torch.export.export": "args",
    "torch_tensorrt.compile": "inputs",
}


@dataclass
class _ScopeInputs:
    inputs: list[tuple[cst.Call, Placement]] = field(default_factory=list)  # device-less factory, module placement
    input_loads: dict[str, int] = field(default_factory=dict)  # factory name -> uses as a module input


class InputDeviceMismatch(Rule):
    """A device-less factory's tensor passed to a module this scope placed on an accelerator
    (called, `.forward(...)`, or exported/traced with it); the fix adds the module's `device=`."""

    code = "DEV007"
    name = "input-device-mismatch"
    summary = "CPU input passed to a module the same scope moved to an accelerator"
    fixes, applicabilities = "sometimes", (SAFE, UNSAFE)
    requires = (ScopePlacements,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes: FrameState[_ScopeInputs] = FrameState(_ScopeInputs)  # by scan
        ctx[ScopePlacements].on_call(self._call)

    def _call(self, scan: ScopeScan, call: cst.Call) -> None:
        module, inputs = self._module_and_inputs(scan, call)
        placement = scan.placed.get(module.value) if isinstance(module, cst.Name) else None
        if placement is None:
            return
        scope = self._scopes[scan]
        for expr in inputs:
            for element in _elements(expr):
                factory = scan.device_less_factory(element)
                if factory is not None:
                    scope.inputs.append((factory, placement))
                    scan.order.setdefault(factory, scan.order.get(call, 0))
                    if isinstance(element, cst.Name):
                        scope.input_loads[element.value] = scope.input_loads.get(element.value, 0) + 1

    def _module_and_inputs(self, scan: ScopeScan, call: cst.Call):
        func = call.func
        if isinstance(func, cst.Name) and func.value in scan.placed:
            return func, [a.value for a in call.args if not a.star]
        if isinstance(func, cst.Attribute) and func.attr.value == "forward" and isinstance(func.value, cst.Name):
            return func.value, [a.value for a in call.args if not a.star]
        keyword = EXPORTS.get(self.facts.resolve(func) or "")
        if keyword is None:
            return None, []
        positional = syntax.positional(call)
        module = positional[0].value if positional else None
        example = syntax.keyword(call, keyword) or (positional[1] if len(positional) > 1 else None)
        return module, [example.value] if example is not None else []

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._check_scope()

    def leave_Module(self, node: cst.Module) -> None:
        self._check_scope()

    def _check_scope(self) -> None:
        scan = self.ctx[ScopePlacements].scan()
        scope = self._scopes.pop(scan) if scan is not None else None
        if scope is None:
            return
        seen = set()
        for factory, placement in scope.inputs:
            if factory in seen:
                continue
            seen.add(factory)
            source = self.facts.is_tensor_source(factory)
            applicability = _fix_applicability(scan, scope, factory, placement)
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


def _fix_applicability(scan: ScopeScan, scope: _ScopeInputs, factory: cst.Call, placement: Placement) -> Optional[str]:
    """SAFE, UNSAFE, or None (no fix) for adding `device=<placement.device>` to `factory`."""
    device = placement.device
    if isinstance(device, cst.Name):
        bound = scan.first_binding.get(device.value)
        if bound is not None and bound > scan.order.get(factory, 0):
            return None  # `device` is bound only after the factory runs
    elif device is None or syntax.string_value(device) is None:
        return None  # only a name or a literal in scope
    name = scan.factory_names.get(factory)
    other_uses = name is not None and _loads(scan.root, name) > scope.input_loads.get(name, 0)
    # on the device, the tensor's other uses (`.numpy()`, host code) would change
    return SAFE if placement.exact and not other_uses else UNSAFE


def _loads(root: cst.CSTNode, name: str) -> int:
    """How often the scope reads `name` (its bindings not counted)."""
    return sum(
        1 for node, parent in syntax.walk_with_parents(root)
        if isinstance(node, cst.Name) and node.value == name and not _is_target(node, parent)
    )


def _is_target(node: cst.Name, parent) -> bool:
    return isinstance(parent, (cst.AssignTarget, cst.AnnAssign)) and parent.target is node


def _elements(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(expr, (cst.Tuple, cst.List)):
        for element in expr.elements:
            yield from _elements(element.value)
    else:
        yield expr
