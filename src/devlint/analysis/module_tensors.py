"""What a module construction makes: whether `nn.Linear(...)`, `Block(...)` builds parameters or
buffers, read from a table generated from torch (`devlint.torchinfo.torch_nn_tensors`) for `torch.nn`
classes and from the class's `__init__` for the file's own. Shared by DEV013 and DEV015."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.analysis import values
from devlint.api import UNSAFE, NodeFix
from devlint.core import syntax
from devlint.semantic import bindings
from devlint.semantic.facts import ClassInfo
from devlint.torchinfo.torch_nn_tensors import MAKES_TENSORS, TENSORS_OFF

# A module moved by one of these keeps no CPU weights: `.to(x.device)`, `.cuda()`, `.to_empty(...)`.
MOVES = frozenset({"to", "cuda", "to_empty", "xpu", "mps"})
CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer"})


def moves_off_the_cpu(facts, call: cst.Call) -> bool:
    """`X.to(d)`, `X.cuda()`, `X.to_empty(device=d)`, not `X.to("cpu")`."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in MOVES and not values.to_cpu(facts, call)


def move_where_built(call: cst.Call, placement, path) -> Optional[NodeFix]:
    """The unsafe fix of a module left on the CPU beside a placed value: `.to(D)` where it is built,
    D the device name the value was moved with (`.to(device)`), when that name is bound there."""
    device = placement.device if placement is not None and placement.exact else None
    if not isinstance(device, cst.Name) or not bindings.name_bound_at(device.value, path):
        return None
    moved = cst.Call(func=cst.Attribute(value=call, attr=cst.Name("to")), args=[cst.Arg(value=device)])
    return NodeFix(UNSAFE, f"Move it with `.to({device.value})` where it is built", call, moved)


class ModuleTensors:
    """Per file: which constructions make parameters or buffers."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self._locals: dict[cst.FunctionDef, set[str]] = {}  # per function: the names it binds
        self._classes: Optional[dict[str, ClassInfo]] = None
        self._weighted: dict[str, bool] = {}  # class name -> built, it makes weights on the CPU

    def built(self, call: cst.Call, path) -> Optional[str]:
        """The class a construction builds, as written, when that class makes parameters or
        buffers (and the call does not turn them all off); None otherwise. `path`: the
        ancestors of the call (a name a function around it binds is not the file's class)."""
        spelled = syntax.dotted_name(call.func)
        if spelled is None:
            return None
        qualified = self.facts.resolve_dotted(spelled) or ""
        if qualified in CONTAINERS:  # `nn.Sequential(nn.Linear(...), ...)` holds what it is built around
            inner = (n for n in syntax.walk(call) if n is not call and isinstance(n, cst.Call))
            return spelled if any(self.built(n, path) for n in inner) else None
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
            if info is not None and self._makes_cpu_weights(info) and not self._bound_locally(info.name, path):
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

    def _makes_cpu_weights(self, info: ClassInfo) -> bool:
        """Whether building the file's class makes weights that stay on the CPU (decided once a class)."""
        if info.name not in self._weighted:
            self._weighted[info.name] = self._makes_tensors(info, set()) and not self._places_itself(info)
        return self._weighted[info.name]

    def _places_itself(self, info: ClassInfo) -> bool:
        """Whether the class's `__init__` (or a same-file base's) moves the module off the CPU
        (`self.to(device)`, `self = self.to(device)`): it is placed by its construction."""
        for owner in self.facts.lineage(info):
            for init in owner.methods.get("__init__", ()):
                this = syntax.self_name(init)
                for node in syntax.walk(init.body):
                    if isinstance(node, cst.Call) and moves_off_the_cpu(self.facts, node) \
                            and isinstance(node.func.value, cst.Name) and node.func.value.value == this:
                        return True
        return False

    def _module_classes(self) -> dict[str, ClassInfo]:
        """The file's module classes by name (the last one of a name)."""
        if self._classes is None:
            self._classes = {i.name: i for i in self.facts.classes.values() if i.is_module}
        return self._classes

    def _makes_tensors(self, info: ClassInfo, seen: set[str]) -> bool:
        """Whether a same-file module class's `__init__` (or a same-file base's) makes parameters
        or buffers: builds a `torch.nn` class that does, an `nn.Parameter`, a registered buffer, or
        a same-file class that does."""
        if info.name in seen:
            return False
        seen.add(info.name)
        for owner in self.facts.lineage(info):
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
