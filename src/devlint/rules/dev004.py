from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from devlint import edits, flow, syntax
from devlint.engine import SAFE, NodeFix, Rule


@dataclass
class _Candidate:
    target: cst.Attribute  # `self.NAME`
    statement: cst.BaseSmallStatement  # the assignment holding it
    value: cst.BaseExpression
    self_name: str
    after_init: bool  # nn.Module.__init__ has run when the assignment runs


class UnregisteredTensorAttribute(Rule):
    code = "DEV004"
    name = "unregistered-tensor-attribute"
    summary = "tensor stored on a module as a plain attribute instead of a buffer"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.values = flow.TensorValues(self.facts)
        # class name -> every attribute name its instances may already have (None: unknown,
        # e.g. a base imported from elsewhere, where a property or attribute may stand).
        self.attributes: dict[str, Optional[set[str]]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        if frame is None or not frame.in_module_class:
            return
        if frame.self_attribute(node.func) == "register_buffer":
            name_arg = syntax.keyword(node, "name") or next(iter(syntax.positional(node)), None)
            name = syntax.string_value(name_arg.value) if name_arg is not None else None
            if name is not None:
                frame.klass.data.setdefault("buffers", set()).add(name)
        elif _is_base_init(node):
            frame.data["after_init"] = True

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assign(node, [t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node, [node.target], node.value)

    def _assign(self, statement, targets, value: cst.BaseExpression) -> None:
        frame = self.ctx.function
        if frame is None or not frame.in_module_class:
            return
        klass_info = self.facts.class_info(frame.klass.node)
        methods = klass_info.methods if klass_info else {}
        env = frame.data.setdefault(self.code, {})  # local name -> holds a tensor
        is_tensor = self.values.is_tensor(value, env, frame.self_name, methods)
        for target in targets:
            attribute = frame.self_attribute(target)
            if attribute is not None:
                if is_tensor:
                    after_init = frame.method != "__init__" or frame.data.get("after_init", False)
                    frame.klass.data.setdefault(self.code, []).append(
                        _Candidate(target, statement, value, frame.self_name, after_init)
                    )
                else:  # None, a number, a Parameter, a submodule: register_buffer would raise KeyError
                    frame.klass.data.setdefault("plain", set()).add(attribute)
            elif isinstance(target, cst.Name):
                env[target.value] = is_tensor

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        klass = self.ctx.klass
        buffers = klass.data.get("buffers", set())
        existing = self._existing_attributes(node, klass.data.get("plain", set()))
        self.attributes[node.name.value] = existing
        for candidate in klass.data.get(self.code, []):
            name = candidate.target.attr.value
            if name in buffers:
                continue
            self.report(
                candidate.target,
                f"`self.{name}` holds a tensor as a plain attribute, which `model.to(device)` leaves behind; "
                f'register it with `self.register_buffer("{name}", ...)`',
                None if existing is None or name in existing else _register_buffer_fix(candidate, name),
            )

    def _existing_attributes(self, node: cst.ClassDef, plain: set[str]) -> Optional[set[str]]:
        """Names that register_buffer would find taken: plain attributes set in methods, names
        in the class body (class attributes, methods, properties), and the same in base classes."""
        names = set(plain)
        for stmt in syntax.block_statements(node.body):
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                names.add(stmt.name.value)
            for small in syntax.small_statements(stmt):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
                    [small.target] if isinstance(small, cst.AnnAssign) else [])
                names.update(t.value for t in targets if isinstance(t, cst.Name))
        for base in node.bases:
            qualified = self.facts.resolve(base.value)
            if qualified is not None and qualified.startswith("torch.nn."):
                continue  # nn.Module and its torch subclasses: no user attribute names
            inherited = self.attributes.get(syntax.dotted_name(base.value) or "")
            if inherited is None:
                return None
            names |= inherited
        return names


def _register_buffer_fix(candidate: _Candidate, name: str) -> Optional[NodeFix]:
    statement = candidate.statement
    single_target = isinstance(statement, cst.AnnAssign) or len(statement.targets) == 1
    if not (candidate.after_init and single_target) or isinstance(candidate.value, (cst.List, cst.Tuple, cst.Dict, cst.Set)):
        return None
    call = edits.method_call(
        candidate.self_name,
        "register_buffer",
        [cst.Arg(edits.string(name)), cst.Arg(candidate.value), edits.keyword_arg("persistent", cst.Name("False"))],
    )
    replacement = cst.Expr(call, semicolon=statement.semicolon)
    return NodeFix(SAFE, f'Register `{name}` as a non-persistent buffer', statement, replacement)


def _is_base_init(call: cst.Call) -> bool:
    """`super().__init__(...)`, `super(Cls, self).__init__(...)`, `nn.Module.__init__(self)`."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "__init__"):
        return False
    receiver = func.value
    if isinstance(receiver, cst.Call):
        return syntax.dotted_name(receiver.func) == "super"
    return syntax.dotted_name(receiver) is not None
