"""DEV013 module-built-in-forward: a module with weights built at forward time.
Doc: rules/DEV013.md; fixture: tests/fixtures/DEV013.py."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint import syntax
from devlint.analysis import values
from devlint.analysis.device_contexts import DeviceContexts
from devlint.analysis.forward_time import ForwardTime
from devlint.base import FrameState, Rule
from devlint.facts import ClassInfo
from devlint.torch_nn_tensors import MAKES_TENSORS, TENSORS_OFF

# A module moved by one of these keeps no CPU weights: `.to(x.device)`, `.cuda()`, `.to_empty(...)`.
MOVES = frozenset({"to", "cuda", "to_empty", "xpu", "mps"})
CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer"})


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
        self._locals: dict[cst.FunctionDef, set[str]] = {}  # per function: the names it binds

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        if frame is None or frame.klass is None:
            return
        built = self._module_with_tensors(node, self.ctx.ancestors)
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

    def _module_with_tensors(self, call: cst.Call, path) -> Optional[str]:
        """The class a construction builds, as written, when that class makes parameters or buffers
        (and the call does not turn them all off); None otherwise."""
        spelled = syntax.dotted_name(call.func)
        if spelled is None:
            return None
        qualified = self.facts.resolve_dotted(spelled) or ""
        if qualified.startswith("torch.nn.") and "functional" not in qualified:
            short = qualified.rsplit(".", 1)[-1]
            if short not in MAKES_TENSORS:
                return None
            off = TENSORS_OFF.get(short)
            if off and all(_is_false(syntax.keyword(call, flag)) for flag in off):
                return None
            return spelled
        if isinstance(call.func, cst.Name):
            info = self._module_classes().get(call.func.value)
            # (a name a function binds, such as a loop variable, is not the class)
            if info is not None and self._makes_tensors(info, set()) and not self._bound_locally(info.name, path):
                return spelled
        return None

    def _bound_locally(self, name: str, path) -> bool:
        """Whether a function around the code binds `name` (a parameter, an assignment, a loop or
        `with` target, an import): then the name is not the class of the file."""
        for node in path:
            if isinstance(node, cst.FunctionDef):
                local = self._locals.get(node)
                if local is None:
                    local = self._locals[node] = _local_names(node)
                if name in local:
                    return True
        return False

    def _module_classes(self) -> dict[str, ClassInfo]:
        """The file's module classes by name (the last one of a name)."""
        found = self.facts.memo.get("DEV013 classes")
        if found is None:
            found = self.facts.memo["DEV013 classes"] = {i.name: i for i in self.facts.classes.values() if i.is_module}
        return found

    def _makes_tensors(self, info: ClassInfo, seen: set[str]) -> bool:
        """Whether a same-file module class's `__init__` (or a same-file base's) makes parameters
        or buffers: builds a `torch.nn` class that does, an `nn.Parameter`, a registered buffer, or
        a same-file class that does."""
        if info.name in seen:
            return False
        seen.add(info.name)
        for owner in self.facts._lineage(info):
            for init in owner.methods.get("__init__", ()):
                for node in syntax.walk(init.body):
                    if not isinstance(node, cst.Call):
                        continue
                    qualified = self.facts.resolve(node.func) or ""
                    if syntax.method_name(node) == "register_buffer" or qualified in PARAMETERS:
                        # a tensor made from an argument lives where the argument does: only a
                        # factory makes one on the CPU
                        if any(isinstance(n, cst.Call) and self.facts.is_tensor_source(n) for n in syntax.walk(node)):
                            return True
                        continue
                    if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1] in MAKES_TENSORS:
                        return True
                    if isinstance(node.func, cst.Name):
                        other = self._module_classes().get(node.func.value)
                        if other is not None and self._makes_tensors(other, seen):
                            return True
        return False


def _is_false(arg: Optional[cst.Arg]) -> bool:
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "False"


def _moved_where_built(facts, call: cst.Call, path: tuple) -> bool:
    """`nn.Linear(...).to(x.device)`, also around a container: `nn.Sequential(nn.Linear(...)).cuda()`;
    a move to the CPU is none."""
    inner = call
    nodes = list(reversed(path))
    for index, node in enumerate(nodes):
        if isinstance(node, cst.Attribute) and node.value is inner and node.attr.value in MOVES:
            parent = nodes[index + 1] if index + 1 < len(nodes) else None
            return isinstance(parent, cst.Call) and parent.func is node and not values.to_cpu(facts, parent)
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
    `NAME.to_empty(...)`."""
    moved = set()
    for node in syntax.walk(function.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in MOVES \
                and not values.to_cpu(facts, node):
            name = syntax.dotted_name(node.func.value)
            if name is not None:
                moved.add(name)
    return moved


def _local_names(function: cst.FunctionDef) -> set[str]:
    """The names a function binds: its parameters, and the targets of its assignments, loops,
    `with ... as`, imports and nested definitions (not those of the functions nested in it)."""
    names = {param.name.value for param in syntax.all_params(function.params)}
    nodes = list(syntax.children(function.body))
    while nodes:
        node = nodes.pop()
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For)):
            targets = [node.target]
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets = [node.asname.name]
        elif isinstance(node, cst.CompFor):
            targets = [node.target]
        elif isinstance(node, cst.ImportAlias):
            bound = syntax.dotted_name(node.asname.name if node.asname else node.name)
            if bound:
                names.add(bound.split(".")[0])
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            names.add(node.name.value)
            continue  # its own scope
        for target in targets:
            for leaf in syntax.unpacked_targets(target):
                if isinstance(leaf, cst.Name):
                    names.add(leaf.value)
        nodes.extend(syntax.children(node))
    return names
