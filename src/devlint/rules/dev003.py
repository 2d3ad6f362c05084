"""DEV003 factory-without-device: a tensor factory without `device=` whose CPU tensor meets
tensors on other devices. Doc: rules/DEV003.md; fixtures: tests/fixtures/DEV003.py, and
tests/fixtures/dev003_spared.py for what it spares and where the fix is withheld."""
from __future__ import annotations

import libcst as cst

from devlint.analysis.device_contexts import DeviceContexts
from devlint.analysis.forward_time import ForwardTime
from devlint.analysis.host_ends import MEETS, host_copy, host_end, joins
from devlint.analysis.parameters import cpu_test, host_at_every_call, is_derived, maybe_not_a_tensor, not_a_tensor_here
from devlint.api import UNSAFE, FrameState, NodeFix, Rule
from devlint.core import edits, syntax
from devlint.rules.dev003_values import ASSIGNED, FunctionValues, fate
from devlint.torchinfo import names

# Sources that take a `device=` argument (from_numpy and the legacy constructors do not).
PLACEABLE = names.FACTORIES | {names.AS_TENSOR}
# The dtype each legacy constructor makes: they reject every device but the CPU, so the advice
# is `torch.tensor(..., dtype=D, device=...)` instead.
LEGACY_DTYPES = {
    "torch.Tensor": "torch.float", "torch.FloatTensor": "torch.float", "torch.DoubleTensor": "torch.double",
    "torch.HalfTensor": "torch.half", "torch.BFloat16Tensor": "torch.bfloat16", "torch.ByteTensor": "torch.uint8",
    "torch.CharTensor": "torch.int8", "torch.ShortTensor": "torch.short", "torch.IntTensor": "torch.int",
    "torch.LongTensor": "torch.long", "torch.BoolTensor": "torch.bool",
}


class FactoryWithoutDevice(Rule):
    """A factory made without `device=` and not moved before use, anywhere in forward-time
    code, or elsewhere where its value meets a tensor derived from a tensor parameter. Spared:
    0-dim tensors of Python scalars, `copy_` sources and index-only values (dev003_values).
    The fix adds `device=X.device` for the first parameter X known to be a tensor that the
    function uses; none with `generator=` or on `from_numpy` and the legacy constructors."""

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
        if source is None or self.ctx[DeviceContexts].active or self.facts.stays_on_default_device:
            return
        if syntax.keyword(node, "device") or syntax.keyword(node, "out") or syntax.has_double_star(node):
            return
        self._candidates[frame].append((node, source, list(self.ctx.ancestors)))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.ctx.function
        candidates = self._candidates.pop(frame)
        if not candidates:
            return
        function = FunctionValues(node, self.facts, is_forward=node.name.value == "forward" and frame.in_module_class)
        info = self.facts.class_info(frame.klass.node) if frame.klass is not None else None
        if info is not None and frame.method == node.name.value:
            function.methods = info.methods
            function.klass = info
        function.host_tables = frozenset(
            found.name for found in (fate(path, self.facts, function.is_tensor, methods=function.methods) for _, _, path in candidates)
            if found.kind == ASSIGNED
        )
        verdicts = [(call, source, path, function.verdict(call, source, path)) for call, source, path in candidates]

        def decide(forward_time: bool) -> None:
            reports = []
            for call, source, path, verdict in verdicts:
                use = verdict.forward_use if forward_time else verdict.meeting
                if use is None or _on_the_cpu_arm(path, function.params) or _after_numpy_of_input(path, function, self.facts) \
                        or _numpy_of_what_it_meets(call, use, function) or _meets_host_arguments(use, function, node, self.facts):
                    continue
                related = self._evidence(frame, function, call, source, use, forward_time)
                if related is None:  # no evidence to name: no finding
                    continue
                param = function.first_used_param(path)
                # where a failed `isinstance(p, Tensor)` test guards the call, or one the function
                # makes elsewhere says p may be a number, `p.device` is no device
                usable = param if param and not not_a_tensor_here(cst.Name(param), path, self.facts) \
                    and not maybe_not_a_tensor(param, node, path, self.facts) else None
                ends = (host_end(node, call, self.facts) or host_copy(node, usable, self.facts)) if usable else None
                message, fix = _message(call, source, usable, ends), _fix(call, source, usable, ends, path)
                reports.append((call, message, fix, related))
            for call, message, fix, related in _without_partial_fixes(reports, candidates, node, self.facts):
                self.report(call.func, message, fix, related=related)

        self.ctx[ForwardTime].when_known(frame, decide)


    def _evidence(self, frame, function: FunctionValues, call: cst.Call, source: str, use, forward_time: bool):
        """The places that decide a finding: where the CPU tensor is made, the call path from
        `forward` (forward-time code), where it meets a tensor or is first used. None when
        the call path from `forward` is not known."""
        related = [(call, f"`{source}()` makes a CPU tensor")]
        if forward_time:
            path = self.ctx[ForwardTime].call_path(frame)
            if path is None:
                return None
            related += [(site, f"called from `{caller}`") for site, caller in path]
        node, clause = function.evidence(use)
        if node is not None:
            related.append((node, clause))
        return related


def _without_partial_fixes(reports, candidates, function: cst.FunctionDef, facts):
    """The reports, each fix withheld where the value is gathered with others (a `torch.cat`
    list, a list it is appended to) and one of them, a factory of the function without
    `device=`, gets no fix: the pieces would still meet on different devices where they join.
    So too where it meets, in arithmetic, a reported one that gets no fix (what is not reported
    mixes with any device there: a 0-dim scalar)."""
    fixed = {id(call) for call, _, fix, _ in reports if fix is not None}
    if not fixed or len(candidates) < 2:
        return reports
    reported = {id(call) for call, _, _, _ in reports}
    gathered = joins(function, [call for call, _, _ in candidates], facts)
    staying = frozenset().union(*(
        gathered[id(call)] if id(call) in reported else {k for k in gathered[id(call)] if not _meeting(k)}
        for call, _, _ in candidates if id(call) not in fixed))
    return [(call, message, None if gathered[id(call)] & staying else fix, related)
            for call, message, fix, related in reports]


def _meeting(key) -> bool:
    return isinstance(key, tuple) and key[0] == MEETS


def _on_the_cpu_arm(path, params) -> bool:
    """Whether the call is in the arm of an `if` (or a conditional expression) taken only when a
    tensor parameter is on the CPU: `if x.device == torch.device("cpu"):`, `x.device.type ==
    "cpu"`, `not x.is_cuda`, `x.get_device() < 0`, the `else` of `x.device.type == "cuda"` and
    of `if x.is_cuda or other:`, the body of `if x.is_cpu and other:`. There every tensor it can
    meet is on the CPU too."""
    for holder, arm in zip(path, path[1:]):
        if isinstance(holder, (cst.If, cst.IfExp)) and arm is not holder.test:
            on_cpu = cpu_test(holder.test, params)
            if on_cpu is not None and (arm is holder.body) == on_cpu:
                return True
    return False


def _numpy_of_what_it_meets(call: cst.Call, use, function: FunctionValues) -> bool:
    """Whether the call's own arguments, which run before it, call `.numpy()` on a tensor
    derived from the same parameter as the tensor it meets (`x - torch.from_numpy(smooth(
    x.numpy()))`): that raises on a device tensor, so where the call runs that tensor is on the
    CPU."""
    met = next((e for e in use.met if function.is_tensor(e)), None)
    roots = function.roots(met) if met is not None else set()
    return bool(roots) and any(
        isinstance(node, cst.Call) and syntax.method_name(node) == "numpy" and not node.args
        and isinstance(node.func, cst.Attribute) and function.roots(node.func.value) & roots
        for arg in call.args for node in syntax.walk(arg))


def _meets_host_arguments(use, function: FunctionValues, node: cst.FunctionDef, facts) -> bool:
    """Whether the tensor the call meets comes only from parameters that every call of this
    function, one only the file calls, gives a CPU value (`_pad(torch.zeros(n))`): then it is
    on the CPU too."""
    met = next((e for e in use.met if function.is_tensor(e)), None)
    roots = function.parameter_roots(met) if met is not None else None
    return bool(roots) and all(host_at_every_call(node, param, facts) for param in roots)


def _after_numpy_of_input(path, function: FunctionValues, facts) -> bool:
    """Whether a statement that runs before the call, in its block or an enclosing one, calls
    `.numpy()` on a tensor derived from the parameters (`edges_np = edges.numpy()`): that raises
    on a device tensor, so where the call runs the parameters are on the CPU, and so is what it
    meets."""
    for statement in syntax.earlier_statements(path):
        for node in syntax.walk(statement):
            if isinstance(node, cst.Call) and syntax.method_name(node) == "numpy" and not node.args \
                    and isinstance(node.func, cst.Attribute) and is_derived(node.func.value, function.derived, facts):
                return True
    return False


def _message(call: cst.Call, source: str, param, ends) -> str:
    device = f"device={param}.device" if param else "device="
    if source in LEGACY_DTYPES:
        advice = f"use `torch.tensor(..., dtype={LEGACY_DTYPES[source]}, {device}{'' if param else '...'})`"
    elif syntax.keyword(call, "generator"):
        advice = f"pass `{device}` with a generator on that device, or move the result"
    elif ends is not None:
        advice = f"pass `{device}` and move it back with `.cpu()` where the host needs it"
    else:
        advice = f"pass `{device}`"
    return f"`{source}()` without `device=` makes a CPU tensor that meets tensors on other devices; {advice}"


def _fix(call: cst.Call, source: str, param, ends, path) -> NodeFix | None:
    # A CPU `generator=` fixes the device: `device=` would raise "Expected a 'cuda' device type for generator".
    if param is None or source not in PLACEABLE or syntax.keyword(call, "generator"):
        return None
    if ends is not None:  # the value reaches a host end (`.numpy()`, `if`, a CPU table's index): it must stay
        return None
    if _rebound_around(path, param):  # `param` is another value where the call runs
        return None
    if any(isinstance(node, cst.Param) for node in path):
        return None  # a parameter's default runs when the `def` does: no parameter is bound there
    replacement = edits.add_arg(call, edits.keyword_arg("device", edits.device_of(param)))
    return NodeFix(UNSAFE, f"Add `device={param}.device`", call, replacement)


def _rebound_around(path, name: str) -> bool:
    """Whether a lambda or a comprehension around the call binds `name` (the fix would name
    that value, not the parameter)."""
    for node in path:
        if isinstance(node, cst.Lambda) and name in syntax.param_names(node.params):
            return True
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            clause = node.for_in
            while clause is not None:
                if any(isinstance(n, cst.Name) and n.value == name for n in syntax.walk(clause.target)):
                    return True
                clause = clause.inner_for_in
    return False
