"""Where values live in one scope: which local names the code placed on an accelerator, and
which hold CPU tensors made without `device=`. Shared by DEV007 and DEV008.

A statement-order scan of one function body (or a script's module level); it never guesses:
a name is placed only by what this scope did to it (`m.cuda()`, `m.to(device)`,
`m = torch.load(p)`), and a name reassigned to anything else is forgotten.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

import libcst as cst

from devlint import flow, names, syntax
from devlint.facts import FileFacts

EXPORTS = {  # function -> how it takes the module and the example inputs
    "torch.onnx.export": "args",
    "torch.jit.trace": "example_inputs",
    "torch.jit.trace_module": "inputs",
    "torch.export.export": "args",
    "torch_tensorrt.compile": "inputs",
}
TRANSPARENT = frozenset(  # methods whose result lives where their receiver does
    "eval train requires_grad_ detach squeeze unsqueeze float double half long int bool clone contiguous view reshape flatten permute"
    " transpose softmax log_softmax sigmoid argmax argmin max min sum mean round abs exp".split()
)


@dataclass
class Placement:
    device: Optional[cst.BaseExpression]  # what it was moved with; None for `.cuda()` or torch.load
    exact: bool = True  # the expression names the device itself (`.to(device)`), not an index (`.cuda(rank)`)


@dataclass
class ScopeScan:
    facts: FileFacts
    placed: dict[str, Placement] = field(default_factory=dict)
    factories: dict[str, cst.Call] = field(default_factory=dict)  # name -> the device-less factory it holds
    inputs: list[tuple[cst.Call, Placement]] = field(default_factory=list)  # DEV007: factory, module placement
    numpy_calls: list[cst.Call] = field(default_factory=list)  # DEV008: `.numpy()` on a placed value
    order: dict = field(default_factory=dict)  # node -> position in evaluation order
    first_binding: dict[str, int] = field(default_factory=dict)  # name -> position of its first binding
    input_loads: dict[str, int] = field(default_factory=dict)  # factory name -> uses as a module input
    factory_names: dict = field(default_factory=dict)  # factory call -> the name it was bound to
    root: Optional[cst.CSTNode] = None

    # --- what an expression is -------------------------------------------------------------
    def device_less_factory(self, expr: cst.BaseExpression) -> Optional[cst.Call]:
        """The factory call when expr is one (with host-only methods on it), made without device=."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and self.facts.resolve(expr.func) is None:
            if expr.func.attr.value not in names.SHAPE_METHODS:
                return None
            expr = expr.func.value
        if isinstance(expr, cst.Name):
            return self.factories.get(expr.value)
        if not isinstance(expr, cst.Call) or self.facts.is_tensor_source(expr) is None:
            return None
        if syntax.keyword(expr, "device") or syntax.has_double_star(expr):
            return None
        return expr

    def placement_of(self, expr: cst.BaseExpression) -> Optional[Placement]:
        """Where expr lives when this scope put it on an accelerator, else None (CPU or unknown)."""
        while True:
            if isinstance(expr, cst.Subscript):
                expr = expr.value
                continue
            if not isinstance(expr, cst.Call):
                break
            func = expr.func
            method = func.attr.value if isinstance(func, cst.Attribute) else None
            if method == "cpu" or (method == "to" and self._to_cpu(expr)):
                return None
            if method == "cuda":
                index = syntax.keyword(expr, "device") or next(iter(syntax.positional(expr)), None)
                return Placement(index.value if index is not None else None, exact=False)
            if method == "to" and not flow.is_dtype_only_move(expr, self.facts):
                device = syntax.keyword(expr, "device") or next(iter(syntax.positional(expr)), None)
                return Placement(device.value if device is not None else None)
            if method == "forward" or isinstance(func, cst.Name):  # calling a placed module
                module = func.value if method == "forward" else func
                return self.placed.get(module.value) if isinstance(module, cst.Name) else None
            if method in TRANSPARENT:
                expr = func.value
                continue
            return None
        if isinstance(expr, cst.Name):
            return self.placed.get(expr.value)
        return None

    def _to_cpu(self, call: cst.Call) -> bool:
        device = syntax.keyword(call, "device") or next(iter(syntax.positional(call)), None)
        if device is None:
            return False
        value = device.value
        if syntax.string_value(value) == "cpu":
            return True
        if isinstance(value, cst.Call) and self.facts.resolve(value.func) == "torch.device":
            first = syntax.positional(value)[:1]
            return bool(first) and syntax.string_value(first[0].value) == "cpu"
        return False

    # --- the scan ----------------------------------------------------------------------------
    def replay(self, scope: cst.CSTNode, events: list) -> "ScopeScan":
        """Follow the scope's calls, bindings and expression statements, in evaluation order
        (recorded during the engine's one traversal: nothing is walked again)."""
        self.root = scope
        if isinstance(scope, cst.FunctionDef):
            for param in syntax.all_params(scope.params):
                self.first_binding.setdefault(param.name.value, -1)
        for position, (kind, node) in enumerate(events):
            self.order[node] = position
            if kind == "call":
                self._call(node)
            elif kind == "bind" and node.value is not None:
                self._bind(node)
            elif kind == "expr":
                self._move_in_place(node.value)
        return self

    def _move_in_place(self, expr: cst.BaseExpression) -> None:
        """`model.cuda()`, `model.to(device).eval()` as a statement: a module moves in place."""
        moves = []
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method in ("cuda", "to", "cpu"):
                moves.append(expr)
            expr = expr.func.value
        if not moves or not isinstance(expr, cst.Name) or expr.value in self.factories:
            return
        last = moves[0]  # the outermost move decides
        if last.func.attr.value == "cpu" or (last.func.attr.value == "to" and self._to_cpu(last)):
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

    def _call(self, call: cst.Call) -> None:
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        receiver = func.value if isinstance(func, cst.Attribute) else None
        if method == "numpy" and receiver is not None and self.placement_of(receiver) is not None:
            self.numpy_calls.append(call)
            return
        module, inputs = self._module_and_inputs(call)
        placement = self.placed.get(module.value) if isinstance(module, cst.Name) else None
        if placement is None:
            return
        for expr in inputs:
            for element in _elements(expr):
                factory = self.device_less_factory(element)
                if factory is not None:
                    self.inputs.append((factory, placement))
                    self.order.setdefault(factory, self.order.get(call, 0))
                    if isinstance(element, cst.Name):
                        self.input_loads[element.value] = self.input_loads.get(element.value, 0) + 1

    def _loads(self, name: str) -> int:
        """How often the scope reads `name` (its bindings not counted)."""
        return sum(
            1 for node, parent in flow.walk_with_parents(self.root)
            if isinstance(node, cst.Name) and node.value == name and not _is_target(node, parent)
        )

    def fix_applicability(self, factory: cst.Call, placement: Placement) -> Optional[str]:
        """'safe', 'unsafe', or None (no fix) for adding `device=<placement.device>` to `factory`."""
        device = placement.device
        if isinstance(device, cst.Name):
            bound = self.first_binding.get(device.value)
            if bound is not None and bound > self.order.get(factory, 0):
                return None  # `device` is bound only after the factory runs
        elif device is None or syntax.string_value(device) is None:
            return None  # only a name or a literal in scope
        name = self.factory_names.get(factory)
        other_uses = name is not None and self._loads(name) > self.input_loads.get(name, 0)
        # on the device, the tensor's other uses (`.numpy()`, host code) would change
        return "safe" if placement.exact and not other_uses else "unsafe"

    def _module_and_inputs(self, call: cst.Call):
        func = call.func
        if isinstance(func, cst.Name) and func.value in self.placed:
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


MOVE_WORDS = frozenset({"cuda", "to", "numpy"})


class PlacementEvents:
    """Records, during the traversal, what ScopeScan replays: a mixin for the rules that use it.
    Whichever of them runs first in a file records; the others read."""

    def _data(self) -> dict:
        ctx = self.ctx
        return ctx.function.data if ctx.function is not None else ctx.module_data

    def _recording(self) -> bool:
        return self.ctx.module_data.setdefault("placement-recorder", id(self)) == id(self)  # not self: no cycle

    def _record(self, kind: str, node: cst.CSTNode) -> None:
        if self._recording():
            data = self._data()
            data.setdefault("placement-events", []).append((kind, node))
            if kind == "call" and not data.get("moves"):
                func = node.func
                if (isinstance(func, cst.Attribute) and func.attr.value in MOVE_WORDS) or self.facts.resolve(func) in names.LOADERS:
                    data["moves"] = True

    def visit_Call(self, node: cst.Call) -> None:
        self._record("call", node)

    def leave_Assign(self, node: cst.Assign) -> None:
        self._record("bind", node)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._record("bind", node)

    def leave_Expr(self, node: cst.Expr) -> None:
        self._record("expr", node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        scan = self.scope_scan(node)
        if scan is not None:
            self.check_scope(scan)

    def leave_Module(self, node: cst.Module) -> None:
        scan = self.scope_scan(node)
        if scan is not None:
            self.check_scope(scan)

    def check_scope(self, scan: ScopeScan) -> None:
        raise NotImplementedError

    def scope_scan(self, scope: cst.CSTNode) -> Optional[ScopeScan]:
        """The scan of `scope`, made once for all the rules that ask, and only where the scope
        moves something (a `.cuda()`, `.to()`, `.numpy()` or a loader call)."""
        data = self.ctx.function.data if isinstance(scope, cst.FunctionDef) else self.ctx.module_data
        if not data.get("moves"):
            return None
        if "scan" not in data:
            data["scan"] = ScopeScan(self.facts).replay(scope, data.get("placement-events", []))
        return data["scan"]


def _is_target(node: cst.Name, parent) -> bool:
    return isinstance(parent, (cst.AssignTarget, cst.AnnAssign)) and parent.target is node


def _elements(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(expr, (cst.Tuple, cst.List)):
        for element in expr.elements:
            yield from _elements(element.value)
    else:
        yield expr
