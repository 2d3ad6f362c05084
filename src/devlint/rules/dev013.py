"""DEV013 module-built-in-forward: a module with weights built at forward time.
Doc: rules/DEV013.md; fixture: tests/fixtures/DEV013.py."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.analysis.device_contexts import DeviceContexts
from devlint.analysis.forward_time import ForwardTime
from devlint.analysis.module_tensors import CONTAINERS, ModuleTensors, moves_off_the_cpu
from devlint.api import FrameState, Rule
from devlint.core import syntax


class ModuleBuiltInForward(Rule):
    """The construction, in forward-time code, of a module that makes parameters or buffers
    (a `torch.nn` class that does so when built, from a table generated from torch, or a
    same-file module class whose `__init__` makes some), not given `device=` and not moved where
    it is built or later in the function."""

    code = "DEV013"
    name = "module-built-in-forward"
    summary = "a module with weights built at forward time: CPU weights at every call, never trained"
    fixes, applicabilities = "never", ()
    requires = (DeviceContexts, ForwardTime)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._built: FrameState[list[tuple[cst.Call, str, tuple]]] = FrameState(list)  # per function: (call, class, path)
        self._tensors = ModuleTensors(self.facts)

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        if frame is None or frame.klass is None or self.facts.stays_on_default_device:
            return
        built = self._tensors.built(node, self.ctx.ancestors)
        if built is None or syntax.keyword(node, "device") or syntax.has_double_star(node):
            return
        if self.ctx[DeviceContexts].active:
            return  # under `with torch.device(...)` a module is built on that device
        path = tuple(self.ctx.ancestors)
        if _moved_where_built(self.facts, node, path):
            return
        container = self._container_around(path)
        if container is not None:  # one finding for `nn.Sequential(nn.Linear(...), ...)`, at the container
            node, built, path = container
        if all(node is not call for call, _, _ in self._built[frame]):
            self._built[frame].append((node, built, path))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.ctx.function
        built = self._built.pop(frame)
        if built:
            self.ctx[ForwardTime].when_known(frame, lambda forward_time: forward_time and self._check(frame, node, built))

    def _check(self, frame, function: cst.FunctionDef, built: list[tuple[cst.Call, str, tuple]]) -> None:
        moved = _moved_names(self.facts, function)
        for call, name, path in built:
            target = _bound_to(call, path)
            if target is not None and target in moved:
                continue  # `layer = nn.Linear(...)` ... `layer.to(x.device)`
            stored = target is not None and target.startswith(f"{frame.self_name}.")
            where = f"`{target}`, set at forward time," if stored else "it"
            related = [(site, f"called from `{caller}`") for site, caller in self.ctx[ForwardTime].call_path(frame) or []]
            self.report(
                call.func,
                f"`{name}(...)` built at forward time makes its weights on the CPU: {where} meets inputs on the "
                "model's device, and the optimizer never sees its weights; build it once in `__init__`",
                related=related,
            )

    def _container_around(self, path: tuple) -> Optional[tuple[cst.Call, str, tuple]]:
        """The outermost `nn.Sequential` / `nn.ModuleList` / `nn.ModuleDict` built in the same
        statement around the construction at the end of `path`."""
        start = 0
        for index, node in enumerate(path[:-1]):
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                start = index  # the innermost statement holding the construction
        for index in range(start + 1, len(path) - 1):
            node = path[index]
            if isinstance(node, cst.Call) and self.facts.resolve(node.func) in CONTAINERS:
                return node, syntax.dotted_name(node.func), path[:index + 1]
        return None


def _moved_where_built(facts, call: cst.Call, path: tuple) -> bool:
    """`nn.Linear(...).to(x.device)`, also around a container: `nn.Sequential(nn.Linear(...)).cuda()`;
    a move to the CPU is none."""
    inner = call
    nodes = list(reversed(path))
    for index, node in enumerate(nodes):
        if isinstance(node, cst.Attribute) and node.value is inner:
            parent = nodes[index + 1] if index + 1 < len(nodes) else None
            return isinstance(parent, cst.Call) and parent.func is node and moves_off_the_cpu(facts, parent)
        if isinstance(node, (cst.BaseSuite, cst.BaseStatement, cst.BaseSmallStatement)):
            return False
        inner = node
    return False


def _bound_to(call: cst.Call, path: tuple) -> Optional[str]:
    """The name or `self.name` a construction is assigned to, as written."""
    for node in reversed(path):
        if isinstance(node, cst.Assign) and node.value is call and len(node.targets) == 1:
            return syntax.dotted_name(node.targets[0].target)
        if isinstance(node, (cst.AnnAssign,)) and node.value is call:
            return syntax.dotted_name(node.target)
        if isinstance(node, (cst.BaseSuite, cst.BaseStatement)):
            return None
    return None


def _moved_names(facts, function: cst.FunctionDef) -> set[str]:
    """The names and `self.name`s the function moves off the CPU: `NAME.to(...)`, `NAME.cuda()`,
    `NAME.to_empty(...)`; and those it puts in a container that it moves
    (`nn.Sequential(layer, nn.ReLU()).to(x.device)`, or `block = nn.Sequential(layer)` then
    `block.to(d)`): a module's `.to()` moves its children in place."""
    nodes = list(syntax.walk(function.body))
    containers = {}  # name -> the container construction bound to it
    for node in nodes:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call) \
                and facts.resolve(node.value.func) in CONTAINERS:
            name = syntax.dotted_name(node.targets[0].target)
            if name is not None:
                containers[name] = node.value
    moved = set()
    for node in nodes:
        if isinstance(node, cst.Call) and moves_off_the_cpu(facts, node):
            receiver = node.func.value
            name = syntax.dotted_name(receiver)
            if name is not None:
                moved.add(name)
            container = receiver if isinstance(receiver, cst.Call) and facts.resolve(receiver.func) in CONTAINERS \
                else containers.get(name)
            if container is not None:
                moved.update(_held_names(container))
    return moved


def _held_names(container: cst.Call) -> set[str]:
    """The names a container construction is given as its modules: `nn.Sequential(a, b)`,
    `nn.ModuleList([a, b])`."""
    held = set()
    for arg in container.args:
        items = [e.value for e in arg.value.elements] if isinstance(arg.value, (cst.List, cst.Tuple)) else [arg.value]
        held.update(name for name in map(syntax.dotted_name, items) if name is not None)
    return held

