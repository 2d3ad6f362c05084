"""DEV007 input-device-mismatch: a CPU value meets a module or a tensor the same scope moved
to an accelerator. Doc: rules/DEV007.md; fixture: tests/fixtures/DEV007.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint.core import edits, syntax
from devlint.semantic.bindings import name_bound_at
from devlint.torchinfo import names
from devlint.analysis.placements import (
    DATASET, FACTORY, HOST, LOADER, TOKENIZER, CpuValue, ScopePlacements, ScopeScan, cpu_evidence, iterated,
    placement_evidence,
)
from devlint.analysis.values import Placement
from devlint.api import SAFE, UNSAFE, FrameState, NodeFix, Rule

EXPORTS = {  # function -> how it takes the module and the example inputs
    "torch.onnx.export": "args",
    "torch.jit.trace": "example_inputs",
    "torch.jit.trace_module": "inputs",
    "torch.export.export": "args",
    "torch_tensorrt.compile": "inputs",
}


LENGTH_NAMES = ("lengths", "lens", "seq_len", "seq_lens", "seq_lengths", "lengths_cpu")


@dataclass
class _Meet:
    cpu: CpuValue
    placement: Placement
    use: cst.BaseExpression  # the argument or operand
    position: int  # where the meet stands in the scope's evaluation order
    module: bool  # met a module (else a placed tensor, in an operator, a torch function or a loss)
    star: bool = False  # `m(**inputs)`


@dataclass
class _ScopeInputs:
    meets: dict = field(default_factory=dict)  # site (factory call or use) -> first _Meet there
    input_loads: dict[str, int] = field(default_factory=dict)  # factory name -> uses in a meet
    kept_on_host: set = field(default_factory=set)  # names given as `lengths` to pack_padded_sequence


class InputDeviceMismatch(Rule):
    """A CPU value (a device-less factory, a loader batch, a data set item, a tokenizer output,
    a `.cpu()` result) meets a module or a tensor this scope placed on an accelerator; the fix
    adds the module's `device=` to a factory, or `.to(device)` at the use."""

    code = "DEV007"
    name = "input-device-mismatch"
    summary = "CPU value meets a module or tensor the same scope moved to an accelerator"
    fixes, applicabilities = "sometimes", (SAFE, UNSAFE)
    requires = (ScopePlacements,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes: FrameState[_ScopeInputs] = FrameState(_ScopeInputs)  # by scan
        ctx[ScopePlacements].on_call(self._call)
        ctx[ScopePlacements].on_operator(self._operator)
        ctx[ScopePlacements].on_scope_end(self._check_scope)

    # --- meets ---------------------------------------------------------------------------------
    def _call(self, scan: ScopeScan, call: cst.Call) -> None:
        func = call.func
        qualified = self.facts.resolve(func) or ""
        if qualified == "torch.nn.utils.rnn.pack_padded_sequence":
            lengths = syntax.keyword(call, "lengths") or (syntax.positional(call)[1:2] or [None])[0]
            if lengths is not None and isinstance(lengths.value, cst.Name):
                self._scopes[scan].kept_on_host.add(lengths.value.value)
            return
        module, inputs = self._module_and_inputs(scan, call, qualified)
        placement = scan.placed.get(module.value) if isinstance(module, cst.Name) else None
        if placement is not None:
            for arg in inputs:
                for element in syntax.unpacked_targets(arg.value):
                    self._meet(scan, call, element, placement, module=True, star=arg.star == "**")
            return
        if not self._combines(scan, func, qualified):
            return
        elements = [e for a in call.args if not a.star for e in syntax.unpacked_targets(a.value)]
        placed = next((p for p in map(scan.placement_of, elements) if p is not None), None)
        if placed is not None:
            for element in elements:
                self._meet(scan, call, element, placed, module=False)

    def _operator(self, scan: ScopeScan, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BinaryOperation):
            pairs = [(node.left, node.right)]
        else:
            operands = [node.left, *(c.comparator for c in node.comparisons)]
            pairs = [
                (a, c.comparator) for a, c in zip(operands, node.comparisons)
                if not isinstance(c.operator, (cst.In, cst.NotIn, cst.Is, cst.IsNot))
            ]
        for a, b in pairs:
            for placed, other in ((a, b), (b, a)):
                placement = scan.placement_of(placed)
                if placement is not None:
                    self._meet(scan, node, other, placement, module=False, operator=True)

    def _meet(self, scan: ScopeScan, at: cst.CSTNode, use: cst.BaseExpression, placement: Placement,
              module: bool, star: bool = False, operator: bool = False) -> None:
        cpu = scan.cpu_value(use)
        if cpu is None or (operator and cpu.kind == DATASET):
            return  # a data set item in an operator: often a Python number label (`pred == y`)
        scope = self._scopes[scan]
        site = cpu.factory if cpu.kind == FACTORY else use
        if cpu.kind == FACTORY:
            scan.order.setdefault(cpu.factory, scan.order.get(at, 0))
            if isinstance(use, cst.Name):
                scope.input_loads[use.value] = scope.input_loads.get(use.value, 0) + 1
        if site not in scope.meets:
            scope.meets[site] = _Meet(cpu, placement, use, scan.order.get(at, 0), module, star)

    def _combines(self, scan: ScopeScan, func: cst.BaseExpression, qualified: str) -> bool:
        """A torch function that combines its tensors, or a loss or metric."""
        if qualified in names.COMBINING_FUNCTIONS or qualified.startswith("torch.nn.functional."):
            return True
        if isinstance(func, cst.Name) and func.value in scan.losses:
            return True
        last = syntax.last_name(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        return last is not None and last.lower().endswith(names.LOSS_NAME_SUFFIXES)

    def _module_and_inputs(self, scan: ScopeScan, call: cst.Call, qualified: str):
        func = call.func
        if isinstance(func, cst.Name) and func.value in scan.placed:
            return func, [a for a in call.args if a.star != "*"]
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            method = func.attr.value
            bookkeeping = method in names.MODULE_BOOKKEEPING_METHODS or method.startswith(("named_", "register_"))
            if method == "forward" or (func.value.value in scan.modules and not bookkeeping):
                return func.value, [a for a in call.args if a.star != "*"]
        keyword = EXPORTS.get(qualified)
        if keyword is None:
            return None, []
        positional = syntax.positional(call)
        module = positional[0].value if positional else None
        example = syntax.keyword(call, keyword) or (positional[1] if len(positional) > 1 else None)
        return module, [example] if example is not None else []

    # --- findings ------------------------------------------------------------------------------
    def _check_scope(self, scan: ScopeScan) -> None:
        scope = self._scopes.pop(scan)
        if scope is None or self.facts.stays_on_default_device:
            return
        for site, meet in scope.meets.items():
            if _kept_on_host(meet.use, scope) or _handed_in_beside_a_global(scan, meet):
                continue
            placed = placement_evidence(meet.placement)
            made = cpu_evidence(meet.cpu) if meet.cpu.kind != FACTORY else None
            if placed is None or (made is None and meet.cpu.kind != FACTORY):
                continue  # no evidence to name: no finding
            related = [e for e in (made, placed) if e is not None]
            target = "a module" if meet.module else "a tensor"
            if meet.cpu.kind == FACTORY:
                factory = meet.cpu.factory
                source = self.facts.is_tensor_source(factory)
                fix = self._factory_fix(scan, scope, factory, source, meet)
                if meet.module:
                    message = (f"`{source}()` makes a CPU input for a module this code moved to an accelerator; "
                               "create it on the module's device (`device=`) or move it first")
                else:
                    takes_device = source in names.FACTORIES or source == names.AS_TENSOR
                    advice = ("create it on that device (`device=`) or move it first" if takes_device
                              else "move it first (`.to(device)`)")
                    message = (f"`{source}()` makes a CPU tensor that meets {target} this code moved to an "
                               f"accelerator; {advice}")
                self.report(factory.func, message, fix, related=related)
                continue
            text = _code(meet.use)
            subject = f"`{text}`" if len(text) <= 40 and "\n" not in text else "This value"
            self.report(
                meet.use,
                f"{subject} {_ORIGINS[meet.cpu.kind]}, on the CPU, and meets {target} this code moved to an "
                "accelerator; move it first (`.to(device)`)",
                self._move_fix(scan, meet),
                related=related,
            )

    def _bound_at(self, name: str, node: cst.CSTNode) -> bool:
        """Whether `name` is bound when `node`, in the scope now ending, runs (a fix may write it
        there): the scope's own binding before it, or the module's before the function."""
        *outer, root = self.ctx.ancestors
        path = next((p for n, p in syntax.walk_with_paths(root, outer) if n is node), None)
        return path is not None and name_bound_at(name, path)

    def _factory_fix(self, scan, scope, factory, source, meet: _Meet) -> Optional[NodeFix]:
        if source in names.FACTORIES or source == names.AS_TENSOR:
            applicability = _fix_applicability(scan, scope, factory, meet.placement)
            device = meet.placement.device
            if applicability is None or (isinstance(device, cst.Name) and not self._bound_at(device.value, factory)):
                return None
            device = meet.placement.device
            return NodeFix(applicability, f"Add `device={_code(device)}`", factory,
                           edits.add_arg(factory, edits.keyword_arg("device", device)))
        if source == names.FROM_NUMPY:
            return self._move_fix(scan, meet)
        return None

    def _move_fix(self, scan: ScopeScan, meet: _Meet) -> Optional[NodeFix]:
        """`.to(X)` at the use, X what the module or tensor was moved with."""
        if meet.cpu.kind == HOST or (meet.cpu.whole and meet.cpu.kind != TOKENIZER):
            return None  # moved off on purpose, or a whole batch (a tuple or dict has no `.to`)
        device = meet.placement.device
        if isinstance(device, cst.Name):
            if not self._bound_at(device.value, meet.use):
                return None
        elif device is None or syntax.string_value(device) is None:
            return None
        use = meet.use
        receiver = use if isinstance(use, _ATOMS) else use.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        moved = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("to")), args=[cst.Arg(device)])
        return NodeFix(UNSAFE, f"Move it with `.to({_code(device)})`", use, moved)


_ORIGINS = {
    LOADER: "comes from a data loader",
    DATASET: "is a data set item",
    TOKENIZER: "is a tokenizer's output",
    HOST: "was moved with `.cpu()`",
}
_ATOMS = (cst.Name, cst.Attribute, cst.Subscript, cst.Call)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _kept_on_host(use: cst.BaseExpression, scope: _ScopeInputs) -> bool:
    """Lengths stay on the CPU on purpose (`pack_padded_sequence` wants them there)."""
    name = syntax.last_name(use) if isinstance(use, (cst.Name, cst.Attribute)) else None
    return name is not None and (name in scope.kept_on_host or name.lower() in LENGTH_NAMES
                                 or name.lower().endswith(("_lengths", "_lens")))


def _handed_in_beside_a_global(scan: ScopeScan, meet: _Meet) -> bool:
    """Batches of a loader the function does not build (a parameter `test_loader`) meeting a
    model the module level placed: the module level makes the data as it makes the model, and may
    have placed both (a notebook that moves its tensors, then builds the loader); only the
    function's own data is known to be on the CPU."""
    if meet.cpu.kind != LOADER or not any(meet.placement is p for p in scan.outer.values()):
        return False
    origin = iterated(meet.cpu.origin)
    return not (isinstance(origin, cst.Call) or (isinstance(origin, cst.Name) and scan.loaders.get(origin.value)))


def _fix_applicability(scan: ScopeScan, scope: _ScopeInputs, factory: cst.Call, placement: Placement) -> Optional[str]:
    """SAFE, UNSAFE, or None (no fix) for adding `device=<placement.device>` to `factory`."""
    device = placement.device
    if isinstance(device, cst.Name):
        if not _a_device(scan, device):
            return None  # `.to(ref)` also takes a tensor, which `device=` does not
    elif device is None or syntax.string_value(device) is None:
        return None  # only a name or a literal in scope
    name = scan.factory_names.get(factory)
    other_uses = name is not None and _loads(scan.root, name) > scope.input_loads.get(name, 0)
    # on the device, the tensor's other uses (`.numpy()`, host code) would change
    return SAFE if placement.exact and not other_uses else UNSAFE


# Words a name uses to say it holds a device (`device`, `dev`, `gpu_id`, `local_rank`).
_DEVICE_WORDS = ("device", "dev", "gpu", "cuda", "rank")


def _a_device(scan: ScopeScan, name: cst.Name) -> bool:
    """A name known to hold a device: bound here to one, or saying so (`device`, `local_rank`)."""
    return name.value in scan.devices or any(word in name.value.lower() for word in _DEVICE_WORDS)


def _loads(root: cst.CSTNode, name: str) -> int:
    """How often the scope reads `name` (its bindings not counted)."""
    return sum(
        1 for node, parent in syntax.walk_with_parents(root)
        if isinstance(node, cst.Name) and node.value == name and not _is_target(node, parent)
    )


def _is_target(node: cst.Name, parent) -> bool:
    return isinstance(parent, (cst.AssignTarget, cst.AnnAssign)) and parent.target is node

