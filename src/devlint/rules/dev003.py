"""DEV003 factory-without-device: a tensor factory without `device=` whose CPU tensor meets
tensors on other devices. Doc: rules/DEV003.md; fixture: tests/fixtures/DEV003.py."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint import edits, flow, names, syntax
from devlint.analysis.device_contexts import DeviceContexts
from devlint.analysis.forward_time import ForwardTime
from devlint.base import UNSAFE, FrameState, NodeFix, Rule

# Sources that take a `device=` argument (from_numpy and the legacy constructors do not).
PLACEABLE = names.FACTORIES | {names.AS_TENSOR}


class FactoryWithoutDevice(Rule):
    """A factory made without `device=` and not moved before use, anywhere in forward-time
    code, or elsewhere where its value meets a tensor derived from a tensor parameter; the fix
    adds `device=X.device` for the first tensor parameter X the function uses."""

    code = "DEV003"
    name = "factory-without-device"
    summary = "tensor factory without `device=` where the tensor meets device data"
    fixes, applicabilities = "sometimes", (UNSAFE,)
    requires = (DeviceContexts, ForwardTime)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._candidates: FrameState[list] = FrameState(list)  # per function: (call, source, path)

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        if frame is None:
            return
        source = self.facts.is_tensor_source(node)
        if source is None or self.ctx[DeviceContexts].active:
            return
        if syntax.keyword(node, "device") or syntax.keyword(node, "out") or syntax.has_double_star(node):
            return
        args = syntax.positional(node)
        if source == "torch.tensor" and len(args) == 1 and syntax.is_number_literal(args[0].value):
            return  # a 0-dim CPU scalar may mix with tensors on any device
        self._candidates[frame].append((node, source, list(self.ctx.ancestors)))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.ctx.function
        candidates = self._candidates.pop(frame)
        if not candidates:
            return
        function = _Function(node, self.facts, is_forward=node.name.value == "forward" and frame.in_module_class)
        function.host_tables = frozenset(
            fate.name for fate in (flow.fate(path, self.facts, function.is_tensor) for _, _, path in candidates)
            if fate.kind == flow.ASSIGNED
        )
        verdicts = [(call, source, function.verdict(call, source, path)) for call, source, path in candidates]

        def decide(forward_time: bool) -> None:
            param = ...  # found on the first report: it walks the whole function
            for call, source, (if_forward_time, otherwise) in verdicts:
                if not (if_forward_time if forward_time else otherwise):
                    continue
                if param is ...:
                    param = function.first_used_param()
                fix = None
                if param is not None and source in PLACEABLE:
                    replacement = edits.add_arg(call, edits.keyword_arg("device", edits.device_of(param)))
                    fix = NodeFix(UNSAFE, f"Add `device={param}.device`", call, replacement)
                hint = f"`device={param}.device`" if param else "`device=`"
                self.report(
                    call.func,
                    f"`{source}()` without `device=` makes a CPU tensor that meets tensors on other devices; pass {hint}",
                    fix,
                )

        self.ctx[ForwardTime].when_known(frame, decide)


class _Function:
    """The dataflow facts of one function, computed on first use."""

    def __init__(self, node: cst.FunctionDef, facts, is_forward: bool) -> None:
        self.node, self.facts, self.is_forward = node, facts, is_forward
        self.host_tables: frozenset = frozenset()  # local names bound to device-less factories
        self._params: Optional[list[str]] = None
        self._derived: Optional[set[str]] = None

    @property
    def params(self) -> list[str]:
        if self._params is None:
            self._params = flow.tensor_parameters(self.node, self.facts, every_parameter=self.is_forward)
        return self._params

    @property
    def derived(self) -> set[str]:
        if self._derived is None:
            self._derived = flow.derived_names(self.node, self.params, self.facts)
        return self._derived

    def first_used_param(self) -> Optional[str]:
        """The tensor parameter the function body mentions first, for `device=X.device`.

        Parameters with evidence of being tensors (annotation, tensor-only members) come before
        the rest of `forward`'s; one that may be None (default None) or is rebound to another
        value is never used.
        """
        params = [p for p in syntax.all_params(self.node.params) if p.star not in ("*", "**")]
        usable = {p.name.value for p in params if p.default is None or syntax.dotted_name(p.default) != "None"}
        usable &= flow.stable_parameters(self.node, self.params, self.facts)
        evidence = [n for n in flow.tensor_parameters(self.node, self.facts) if n in usable]
        for group in (evidence, [n for n in self.params if n in usable]):
            for node in syntax.walk_expressions(self.node.body):
                if isinstance(node, cst.Name) and node.value in group:
                    return node.value
        return None

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor computed from a tensor parameter: one that may live on another device."""
        return flow.is_derived(expr, self.derived, self.facts)

    def meets_derived(self, met) -> bool:
        return any(self.is_tensor(expr) for expr in met)

    def verdict(self, call: cst.Call, source: str, path) -> tuple[bool, bool]:
        """(flag if this runs at forward time, flag otherwise)."""
        if source in (names.AS_TENSOR, "torch.tensor"):  # tensor data keeps its device
            data = syntax.positional(call)[:1]
            if data and flow.is_derived(data[0].value, self.derived, self.facts):
                return False, False
        fate = flow.fate(path, self.facts, self.is_tensor, self.host_tables)
        if fate.kind == flow.USE:
            return True, self.meets_derived(fate.met)
        if fate.kind != flow.ASSIGNED:
            return False, False
        return self._follow(fate.name, path)

    def _follow(self, name: str, path) -> tuple[bool, bool]:
        """Follow a local name from the statement that binds it to its later uses."""
        binding = next(n for n in reversed(path) if isinstance(n, (cst.Assign, cst.AnnAssign)))
        tracked = {name}
        started = False
        used_before_move = meets = False
        move_assigns = set()
        rebinds: dict = {}  # statement -> tracked name it binds to the value
        for node, node_path in syntax.walk_with_paths(self.node, []):
            if node is binding:
                started = True
                continue
            if not started or binding in node_path or not isinstance(node, cst.Name) or node.value not in tracked:
                continue
            parent = node_path[-2]
            if _is_store(node, parent):
                assign = node_path[-3] if isinstance(parent, cst.AssignTarget) else parent
                if rebinds.get(assign) == node.value:
                    continue
                if assign in move_assigns:  # `t = t.to(...)`: moved before any later use
                    break
                tracked.discard(node.value)
                if not tracked:
                    break
                continue
            fate = flow.fate(node_path, self.facts, self.is_tensor, self.host_tables)
            if fate.kind == flow.MOVE:
                statement = next((n for n in reversed(node_path) if isinstance(n, (cst.Assign, cst.AnnAssign))), None)
                if statement is not None:
                    move_assigns.add(statement)
            elif fate.kind == flow.USE:
                used_before_move = True
                meets = meets or self.meets_derived(fate.met)
            elif fate.kind == flow.ASSIGNED and fate.name:
                tracked.add(fate.name)
                rebinds[fate.at] = fate.name
        return used_before_move, meets


def _is_store(node: cst.Name, parent: cst.CSTNode) -> bool:
    if isinstance(parent, cst.AssignTarget):
        return parent.target is node
    if isinstance(parent, cst.AnnAssign):
        return parent.target is node
    if isinstance(parent, (cst.For, cst.CompFor)):
        return parent.target is node
    return isinstance(parent, cst.Del)
