from __future__ import annotations

import libcst as cst

from devlint import flow, syntax
from devlint.engine import Rule


class UnregisteredTensorAttribute(Rule):
    code = "DEV004"
    name = "unregistered-tensor-attribute"
    summary = "tensor stored on a module as a plain attribute instead of a buffer"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.values = flow.TensorValues(self.facts)

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        if frame is None or not frame.in_module_class or frame.self_attribute(node.func) != "register_buffer":
            return
        name_arg = syntax.keyword(node, "name") or next(iter(syntax.positional(node)), None)
        name = syntax.string_value(name_arg.value) if name_arg is not None else None
        if name is not None:
            frame.klass.data.setdefault("buffers", set()).add(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assign([t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign([node.target], node.value)

    def _assign(self, targets, value: cst.BaseExpression) -> None:
        frame = self.ctx.function
        if frame is None or not frame.in_module_class:
            return
        klass_info = self.facts.class_info(frame.klass.node)
        methods = klass_info.methods if klass_info else {}
        env = frame.data.setdefault(self.code, {})  # local name -> holds a tensor
        is_tensor = None
        for target in targets:
            if frame.self_attribute(target) is not None:
                if is_tensor is None:
                    is_tensor = self.values.is_tensor(value, env, frame.self_name, methods)
                if is_tensor:
                    frame.klass.data.setdefault(self.code, []).append(target)
            elif isinstance(target, cst.Name):
                if is_tensor is None:
                    is_tensor = self.values.is_tensor(value, env, frame.self_name, methods)
                env[target.value] = is_tensor

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        klass = self.ctx.klass
        buffers = klass.data.get("buffers", set())
        for target in klass.data.get(self.code, []):
            name = target.attr.value
            if name not in buffers:
                self.report(
                    target,
                    f"`self.{name}` holds a tensor as a plain attribute, which `model.to(device)` leaves behind; "
                    f'register it with `self.register_buffer("{name}", ...)`',
                )
