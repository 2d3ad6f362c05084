"""DEV012 stale-device-attribute: forward-time code places tensors with a device that the module
captured in `__init__`. Doc: rules/DEV012.md; fixture: tests/fixtures/DEV012.py."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.analysis.device_attributes import scan_class
from devlint.analysis.forward_time import ForwardTime
from devlint.analysis.host_ends import host_end
from devlint.analysis.parameters import first_used_param, not_a_tensor_here, tensor_parameters
from devlint.api import UNSAFE, FrameState, FunctionFrame, NodeFix, Rule
from devlint.core import edits, syntax
from devlint.torchinfo import names

# torch calls that take `device=` without making a tensor.
NOT_FACTORIES = ("torch.device", "torch.Generator", "torch.autocast", "torch.cuda.", "torch.nn.", "torch.amp.")


class StaleDeviceAttribute(Rule):
    """`device=self.NAME` to a factory, or `.to(self.NAME)`, in forward-time code, where NAME holds
    a device assigned only in the class's own `__init__`: `model.to(other)` leaves it behind. The
    fix uses the device of the method's first tensor parameter."""

    code = "DEV012"
    name = "stale-device-attribute"
    summary = "forward-time code places tensors with a device captured in `__init__`"
    fixes, applicabilities = "sometimes", (UNSAFE,)
    requires = (ForwardTime,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # by function frame: (attribute name, `self.NAME`, the call, the path down to the call)
        self._uses: FrameState[list[tuple[str, cst.Attribute, cst.Call, tuple]]] = FrameState(list)

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        if frame is None or not frame.in_module_class:
            return
        for arg in self._device_args(frame, node):
            name = frame.self_attribute(arg.value)
            if name is not None:
                self._uses[frame].append((name, arg.value, node, tuple(self.ctx.ancestors)))

    def _device_args(self, frame: FunctionFrame, call: cst.Call) -> list[cst.Arg]:
        """The arguments that give `call` its device, when it makes or moves a tensor."""
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        qualified = self.facts.resolve(func)
        device = syntax.keyword(call, "device")
        if qualified is not None:
            if not qualified.startswith("torch.") or qualified.startswith(NOT_FACTORIES):
                return []
            return [device] if device is not None else []
        if method in names.NEW_TENSOR_METHODS:
            return [device] if device is not None else []
        if method != "to" or self._is_module_receiver(frame, func.value):
            return []
        if isinstance(func.value, cst.Attribute) and frame.self_attribute(func.value.value) is not None:
            return []  # `self.model.head.to(self.device)`: a part of another object, of a kind not known here
        parent = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        if isinstance(parent, cst.Call) and parent.func is call:
            return []  # `self.layers[i].to(self.device)(x)`: what is called is a module, moved in place
        first = syntax.positional(call)[:1]
        return [a for a in (device, *first) if a is not None]

    def _is_module_receiver(self, frame: FunctionFrame, receiver: cst.BaseExpression) -> bool:
        """`self.to(...)`, or `self.X.to(...)` with X a submodule (assigned a call that makes no tensor)."""
        if isinstance(receiver, cst.Name) and receiver.value == frame.self_name:
            return True
        name = frame.self_attribute(receiver)
        if name is None:
            return False
        attribute = scan_class(self.facts, frame.klass.node).attributes.get(name)
        return attribute is not None and any(
            isinstance(v, cst.Call) and self.facts.is_tensor_source(v) is None for v in attribute.init_values
        )

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.ctx.function
        uses = self._uses.pop(frame)
        if uses:
            self.ctx[ForwardTime].when_known(frame, lambda forward_time: forward_time and self._check(frame, uses))

    def _check(self, frame: FunctionFrame, uses: list[tuple[str, cst.Attribute, cst.Call, tuple]]) -> None:
        klass = scan_class(self.facts, frame.klass.node)
        if klass.parallel:
            return  # DataParallel and DDP place outputs on a chosen `output_device` on purpose
        param = ...  # found on the first report
        moves_module_to = _module_moved_to(frame)
        for name, attribute_node, call, path in uses:
            attribute = klass.recorded_device(name, self.facts)
            if attribute is None:
                continue
            if not attribute.init_targets:
                continue  # no evidence to name: no finding
            if name in moves_module_to:
                continue  # `self.to(self.device)` in the method: the weights are where `self.device` says
            if param is ...:
                func = frame.node
                forward = frame.method == "forward" and func.name.value == "forward"
                params = tensor_parameters(func, self.facts, every_parameter=forward)
                param = first_used_param(func, params, self.facts)
            related = [(attribute.init_targets[0], f"`self.{name}` is set in `__init__`")]
            fix, hint, ending = None, "the device of an input (`x.device`)", None
            if param is not None and (_placed_with(param, name, frame, call)
                                      or _moves_param_too(uses, name, param, call)):
                # `x = x.to(self.device)` above: `x.device` is `self.device` again, so the fix would change nothing
                hint = f"the device of the module's own weights (`next(self.parameters()).device`), not `{param}.device`"
            elif param is not None and _moves_itself(call, param, frame.node, self.facts):
                # `x.to(x.device)` would move nothing: the device has to come from the module's weights
                hint = f"the device of the module's own weights (`next(self.parameters()).device`), not `{param}.device`"
            elif param is not None and not_a_tensor_here(cst.Name(param), path, self.facts):
                pass  # in the arm where a failed `isinstance(x, Tensor)` says x is no tensor: `x.device` is no fix
            elif param is not None:
                hint = f"`{param}.device`"
                ending = host_end(frame.node, call, self.facts)
                if ending is None:
                    fix = NodeFix(UNSAFE, f"Use `{param}.device`", attribute_node, edits.device_of(param))
                else:
                    related.append((ending, "on a GPU the value would reach this host-only use"))
            self.report(
                attribute_node,
                f"`self.{name}` is the device the module had in `__init__`: after `model.to(other)` it still names "
                f"the old one, and tensors placed with it meet weights elsewhere; use {hint}"
                + ("; this value also ends on the host, which a device would break: keep that part on the CPU "
                   "(no fix)" if ending is not None else ""),
                fix,
                related=related,
            )


def _module_moved_to(frame: FunctionFrame) -> set[str]:
    """The NAMEs the method moves the module itself to with `self.to(self.NAME)`."""
    return {name for node in syntax.walk(frame.node.body)
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "to"
            and isinstance(node.func.value, cst.Name) and node.func.value.value == frame.self_name
            for arg in node.args if (name := frame.self_attribute(arg.value)) is not None}


def _moves_param_too(uses: list, attribute: str, param: str, call: cst.Call) -> bool:
    """Whether the method also moves `param` itself with `self.ATTRIBUTE` (`x = x.to(self.device)`
    beside `y = y.to(self.device)`): the inputs are placed by the stale device, so none of them
    tells the module's device."""
    return any(
        other is not call and isinstance(other.func, cst.Attribute) and other.func.attr.value == "to"
        and isinstance(other.func.value, cst.Name) and other.func.value.value == param and used == attribute
        for used, _, other, _ in uses)


def _placed_with(param: str, attribute: str, frame: FunctionFrame, at: cst.CSTNode) -> bool:
    """Whether `param` was last bound, before `at`, to a value placed with `self.ATTRIBUTE`
    itself (`x = x.to(self.device)`): then `x.device` names the same stale device."""
    value = _last_binding(frame.node, param, at)
    return value is not None and any(
        isinstance(n, cst.Attribute) and n.attr.value == attribute and isinstance(n.value, cst.Name)
        and n.value.value == frame.self_name for n in syntax.walk(value))


def _moves_itself(call: cst.Call, param: str, function: cst.FunctionDef, facts) -> bool:
    """Whether the fix would place `call`'s result where it already is: the call moves or makes
    a tensor from a receiver that lies on `param`'s device (`x.to(self.device)`,
    `torch.cat([x, y]).to(...)`, `x.new_zeros(n, device=...)`, `torch.zeros_like(x, device=...)`),
    so `x.device` in place of `self.device` moves nothing."""
    func = call.func
    if isinstance(func, cst.Attribute) and (func.attr.value == "to" or func.attr.value in names.NEW_TENSOR_METHODS):
        receiver = func.value
    elif (facts.resolve(func) or "").startswith("torch.") and (facts.resolve(func) or "").endswith("_like"):
        first = syntax.positional(call)[:1]
        if not first:
            return False
        receiver = first[0].value
    else:
        return False
    return _on_device_of(receiver, param, call, function, facts, set())


# Attributes and methods of a tensor that are not a tensor on its device (its size, its kind).
_METADATA = frozenset({
    "shape", "dtype", "device", "ndim", "is_cuda", "layout", "requires_grad", "size", "dim", "numel",
    "nelement", "item", "tolist", "numpy", "stride", "element_size", "get_device", "data_ptr", "cpu",
})


def _on_device_of(expr: cst.BaseExpression, param: str, at: cst.CSTNode, function: cst.FunctionDef,
                  facts, seen: set) -> bool:
    """Whether expr is a tensor made from `param` by code that keeps its device: `param` itself, a
    subscript or a method of one (`x[0]`, `x.float()`, `x.new_zeros(n)`, `x.data.new(...)`, not
    `x.shape` or `x.cpu()`), arithmetic with one, a torch function of one (`torch.cat([x, y])`,
    `torch.sigmoid(x)`), a list of one, or a local name last bound, before `at`, to such a value."""
    def on(e):
        return _on_device_of(e, param, at, function, facts, seen)

    if isinstance(expr, cst.Name):
        if expr.value == param:
            return True
        if expr.value in seen:
            return False
        seen.add(expr.value)
        value = _last_binding(function, expr.value, at)
        return value is not None and on(value)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value not in _METADATA and on(expr.value)
    if isinstance(expr, cst.Subscript):
        return on(expr.value)
    if isinstance(expr, cst.Call):
        func = expr.func
        qualified = facts.resolve(func)
        if qualified is not None:
            return qualified.startswith("torch.") and any(on(a.value) for a in expr.args)
        if isinstance(func, cst.Attribute):
            return func.attr.value not in _METADATA and on(func.value)
        return False
    if isinstance(expr, cst.BinaryOperation):
        return on(expr.left) or on(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return on(expr.expression)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(not isinstance(e, cst.StarredElement) and on(e.value) for e in expr.elements)
    return False


def _last_binding(function: cst.FunctionDef, name: str, at: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """The value of the last `name = value` in function's text before `at` (and not holding it)."""
    found = None
    for node in syntax.walk_expressions(function.body):
        if node is at:
            break
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(isinstance(t, cst.Name) and t.value == name for t in targets) and not _holds(node, at):
                found = node.value
    return found


def _holds(node: cst.CSTNode, inner: cst.CSTNode) -> bool:
    return any(n is inner for n in syntax.walk_expressions(node))
