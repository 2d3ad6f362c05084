"""Facts about one file that every rule shares, gathered once by a statement-level scan.

The scan never descends into expressions, so it costs a small fraction of the traversal:
imports (any depth), classes and whether each is an nn.Module class, module-level functions
and methods by name, and a file-wide CUDA skip marker. What needs expressions is for the
analyses (`devlint.analysis`) and the rules, during the one traversal; imports inside
functions are added as the traversal meets them.
"""
from __future__ import annotations

import builtins
import re
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import libcst as cst

from devlint.core import syntax
from devlint.semantic import bindings
from devlint.semantic.project import ProjectView
from devlint.torchinfo import guards, names
from devlint.torchinfo.torch_buffers import TORCH_MODULE_BUFFERS

@dataclass
class ClassInfo:
    node: cst.ClassDef
    name: str
    base_names: list[Optional[str]]
    methods: dict[str, list[cst.FunctionDef]] = field(default_factory=dict)
    is_module: bool = False
    kind: str = "unknown"  # one of the kinds below: module, not-module, unknown, other-framework


class FileFacts:
    def __init__(self, module: cst.Module, project: Optional[ProjectView] = None, source: Optional[str] = None) -> None:
        self.project = project  # what the file's classes inherit from other files, where known
        self._source = source  # the text the module was parsed from, where the engine has it
        self.aliases: dict[str, str] = {}
        self.classes: dict[cst.ClassDef, ClassInfo] = {}
        self.functions: dict[str, list[cst.FunctionDef]] = {}  # module-level, by name
        # each function's definer: its class (a method), its enclosing function, or None (module level)
        self.definers: dict[cst.FunctionDef, "ClassInfo | cst.FunctionDef | None"] = {}
        self.module = module
        # what an analysis works out once per file and keeps with it (gone with the file's facts;
        # plain values only: a value that holds the facts would make a cycle)
        self.memo: dict = {}
        self.file_guarded = False
        self.module_device_bound = False  # a module-level `device = ...`
        # module-level names bound to a legacy CUDA tensor type where CUDA is there:
        # `Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor`
        self.cuda_type_aliases: set[str] = set()
        # module-level names bound only to a legacy CPU tensor type (`float_type = torch.DoubleTensor`)
        self.cpu_type_aliases: set[str] = set()
        self._not_cpu_types: set[str] = set()  # names the module level binds to anything else too
        self._bound_torch = False
        self._properties: dict[int, frozenset[str]] = {}  # id of a ClassInfo -> its own properties
        self._buffers: dict[int, frozenset[str]] = {}  # id of a ClassInfo -> the names its own methods register as buffers
        self._scan(module.body, top_level=True, in_class=None, in_function=None)
        if not self._bound_torch:
            # Snippets and notebooks use `torch` without importing it in this file.
            self.aliases.setdefault("torch", "torch")
        self._classify_modules()

    @property
    def stays_on_default_device(self) -> bool:
        """A test module (one that imports pytest or unittest, or defines `test_*` functions or
        `Test*` classes of `test_*` methods) whose text never names a device: no `cuda`, `device`,
        `mps`, `xpu`, `npu`, `hpu`, `xla`, `accelerator`, no `.to(`. A test makes its own inputs,
        and here nothing places them: every tensor stays on the default device, so none meets a
        tensor on another."""
        if "stays_on_default_device" not in self.memo:
            tests = any(t.partition(".")[0] in ("pytest", "unittest") for t in self.aliases.values()) or any(
                name.startswith("test_") for name in self.functions) or any(
                info.name.startswith("Test") and any(m.startswith("test_") for m in info.methods)
                for info in self.classes.values())
            self.memo["stays_on_default_device"] = tests and self.names_no_device
        return self.memo["stays_on_default_device"]

    @property
    def names_no_device(self) -> bool:
        """The file's text never names a device: no `cuda`, `device`, `mps`, `xpu`, `npu`, `hpu`,
        `xla`, `accelerator`, no `.to(`, even in a comment. Nothing in it places a value anywhere
        but the default device."""
        if "names_no_device" not in self.memo:
            text = self._source if self._source is not None else self.module.code
            self.memo["names_no_device"] = _NAMES_A_DEVICE.search(text) is None
        return self.memo["names_no_device"]

    # --- names -------------------------------------------------------------------------
    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        """The qualified name that an expression refers to through the file's imports."""
        dotted = syntax.dotted_name(node)
        return None if dotted is None else self.resolve_dotted(dotted)

    def resolve_dotted(self, dotted: str) -> Optional[str]:
        head, _, rest = dotted.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return None
        return f"{target}.{rest}" if rest else target

    def spelling(self, qualified: str, bound: Optional[Callable[[str], bool]] = None) -> Optional[str]:
        """How this file's imports let it write a qualified name (`nn.ModuleList` after
        `from torch import nn`), through the most specific import; None when none binds it.
        With `bound`, only the local names it accepts count (those bound where a fix writes them:
        `analysis.bindings.name_bound_at`)."""
        best = None
        for local, target in self.aliases.items():
            if bound is not None and not bound(local):
                continue
            if (qualified == target or qualified.startswith(target + ".")) and (local != "torch" or self._bound_torch):
                if best is None or len(target) > len(best[1]):
                    best = (local, target)
        return None if best is None else best[0] + qualified[len(best[1]):]

    def is_tensor_source(self, call: cst.Call) -> Optional[str]:
        qualified = self.resolve(call.func)
        return qualified if qualified in names.TENSOR_SOURCES else None

    def add_import(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = syntax.dotted_name(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self._bind(alias.asname.name.value, full)
                else:
                    head = full.split(".")[0]
                    self._bind(head, head)
            return
        if isinstance(node.names, cst.ImportStar):
            return
        module = syntax.dotted_name(node.module) if node.module is not None else ""
        if module is None:
            return
        module = "." * len(node.relative) + module
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self._bind(local, f"{module}.{alias.name.value}" if module else alias.name.value)

    def _bind(self, local: str, target: str) -> None:
        if local == "torch":
            self._bound_torch = True
        self.aliases[local] = target

    # --- receivers of methods matched by name ----------------------------------------------
    def receiver_may_be_torch_object(self, receiver: cst.BaseExpression, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether `receiver` of a method matched by its name (`X.load_state_dict(...)`,
        `X.to(...)`) may be a torch object (a module, tensor, optimizer, scheduler, scaler),
        where the code at `ancestors[-1]` runs. Not when it is a name bound by an import (`from
        pkg import dist_util`, `import utils`, `import a.b as c`, at the module level or in the
        function): that is a module, and the call is that module's function; nor when it is a
        class of this file that is not a module, optimizer or scheduler (`Registry.load(...)`).
        A parameter or local binding of the same name in a function holding the code hides both."""
        if not isinstance(receiver, cst.Name):
            return True
        name = receiver.value
        local = bindings.function_bindings(name, ancestors)
        if local is not None:
            return not all(isinstance(b, cst.ImportAlias) for b in local)
        if name in self.aliases:
            return False
        classes = [info for info in self.classes.values() if info.name == name]
        return not classes or any(self._may_be_torch_class(info, frozenset()) for info in classes)

    def _may_be_torch_class(self, info: ClassInfo, seen: frozenset) -> bool:
        """A module class, a class of unknown kind, or one whose bases lead into torch or are
        named as optimizers and schedulers are (`class Lamb(Optimizer)`)."""
        if info.kind in (MODULE, UNKNOWN):
            return True
        for base in info.base_names:
            if base is None:
                return True
            last = base.rsplit(".", 1)[-1]
            if (self.resolve_dotted(base) or "").startswith("torch.") or last.endswith(TORCH_OBJECT_BASE_SUFFIXES):
                return True
            local = [c for c in self.classes.values() if c.name == base and id(c) not in seen]
            if any(self._may_be_torch_class(c, seen | {id(info)}) for c in local):
                return True
        return False

    # --- classes and functions -----------------------------------------------------------
    def class_info(self, node: cst.ClassDef) -> Optional[ClassInfo]:
        return self.classes.get(node)

    def module_functions(self, name: str) -> list[cst.FunctionDef]:
        return self.functions.get(name, [])

    def properties(self, node: cst.ClassDef) -> frozenset[str]:
        """The names the class, or a base class of the same file (transitively), defines as a
        property (`@property`, `@NAME.setter`): `self.NAME = ...` calls its setter (or raises), it
        sets no plain attribute."""
        return self._over_lineage(node, self._properties, lambda info: {
            name for name, definitions in info.methods.items() if any(_is_property(d) for d in definitions)})

    def buffers(self, node: cst.ClassDef) -> frozenset[str]:
        """The names the class, or a base class of the same file (transitively), registers as
        buffers in any of its methods: a string given to a `self.register*buffer*(...)` call
        (`register_buffer`, or a wrapper of it such as `register_uninitialized_buffer`), and each
        string of a list or tuple a loop hands to one (`for key in self._buffer_names:
        self.register_buffer(key, None)`, the list written in the loop or bound in the body of the
        class or of a same-file base). `self.NAME = ...` then sets that buffer, which
        `model.to()` moves: it sets no plain attribute. So do the torch classes it derives from
        (`weight` of `nn.BCELoss`, `running_mean` of `nn.BatchNorm2d`: a table generated from torch)."""
        return self._over_lineage(node, self._buffers, lambda info: {
            name for definitions in info.methods.values() for definition in definitions
            for name in _registered_buffers(definition, self.lineage(info))} | self._torch_base_buffers(info))

    def _torch_base_buffers(self, info: ClassInfo) -> set[str]:
        found = set()
        for base in info.node.bases:
            qualified = self.resolve(base.value) or ""
            if qualified.startswith("torch.nn."):
                found |= TORCH_MODULE_BUFFERS.get(qualified) or TORCH_MODULE_BUFFERS.get(
                    "torch.nn." + qualified.rsplit(".", 1)[-1], frozenset())
        return found

    def _over_lineage(self, node: cst.ClassDef, cache: dict, own) -> frozenset[str]:
        """What `own(info)` finds in the class or any of its same-file bases; each class's own
        part is computed once (`cache`: id of a ClassInfo -> its own part)."""
        info = self.classes.get(node)
        if info is None:
            return frozenset()
        found: set[str] = set()
        for current in self.lineage(info):
            part = cache.get(id(current))
            if part is None:
                part = cache[id(current)] = frozenset(own(current))
            found |= part
        return frozenset(found)

    def keeps_its_tensors(self, node: cst.ClassDef) -> bool:
        """Whether the class, or a same-file base, overrides `_apply` without calling the base's:
        `model.to()` then moves none of its parameters or buffers (a host cache kept on purpose)."""
        info = self.class_info(node)
        if info is None:
            return False
        for owner in self.lineage(info):
            for method in owner.methods.get("_apply", ()):
                calls_base = any(isinstance(n, cst.Attribute) and n.attr.value == "_apply" and isinstance(n.value, cst.Call)
                                 and syntax.last_name(n.value.func) == "super" for n in syntax.walk(method.body))
                return not calls_base  # the nearest override decides
        return False

    def with_subclasses(self, info: ClassInfo) -> list[ClassInfo]:
        """The class and the classes of this file that derive from it, transitively."""
        return [other for other in self.classes.values() if any(base is info for base in self.lineage(other))]

    def lineage(self, info: ClassInfo) -> list[ClassInfo]:
        """The class and its same-file bases, transitively, nearest first."""
        found, pending = [], [info]
        while pending:
            current = pending.pop(0)
            if any(current is known for known in found):
                continue
            found.append(current)
            pending.extend(other for base in current.base_names for other in self.classes.values() if other.name == base)
        return found

    def _scan(self, statements, top_level: bool, in_class: Optional[ClassInfo],
              in_function: Optional[cst.FunctionDef]) -> None:
        for stmt in statements:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        self.add_import(small)
                    elif top_level and isinstance(small, cst.Assign):
                        self._scan_module_assign(small)
            elif isinstance(stmt, cst.ClassDef):
                info = ClassInfo(stmt, stmt.name.value, [_base_name(a.value) for a in stmt.bases])
                self.classes[stmt] = info
                self._scan(syntax.block_statements(stmt.body), top_level=False, in_class=info, in_function=None)
            elif isinstance(stmt, cst.FunctionDef):
                self.definers[stmt] = in_class if in_class is not None else in_function
                if in_class is not None:
                    in_class.methods.setdefault(stmt.name.value, []).append(stmt)
                elif top_level:
                    self.functions.setdefault(stmt.name.value, []).append(stmt)
                self._scan(syntax.block_statements(stmt.body), top_level=False, in_class=None, in_function=stmt)
            else:
                # if / try / with / for / while: definitions inside still belong to this level.
                for suite in syntax.suites(stmt):
                    self._scan(suite, top_level=top_level, in_class=in_class, in_function=in_function)

    def _scan_module_assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.IfExp) and any(
                names.is_legacy_cuda_type(self.resolve(arm) or "") for arm in (node.value.body, node.value.orelse)):
            self.cuda_type_aliases.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        held = self.resolve(node.value) if isinstance(node.value, (cst.Name, cst.Attribute)) else None
        cpu_type = held in names.LEGACY_CONSTRUCTORS and held != "torch.Tensor"
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                if cpu_type and target.target.value not in self._not_cpu_types:
                    self.cpu_type_aliases.add(target.target.value)
                elif not cpu_type:
                    self._not_cpu_types.add(target.target.value)
                    self.cpu_type_aliases.discard(target.target.value)
        for target in node.targets:
            if isinstance(target.target, cst.Name) and target.target.value == "device":
                self.module_device_bound = True
            if isinstance(target.target, cst.Name) and target.target.value == "pytestmark":
                values = node.value.elements if isinstance(node.value, (cst.List, cst.Tuple)) else [node.value]
                if any(guards.is_skip_marker(getattr(v, "value", v)) for v in values):
                    self.file_guarded = True

    def _classify_modules(self) -> None:
        by_name: dict[str, list[ClassInfo]] = {}
        for info in self.classes.values():
            by_name.setdefault(info.name, []).append(info)
        decided: dict[int, str] = {}
        for info in self.classes.values():
            info.kind = self._class_kind(info, frozenset(), by_name, decided)
            info.is_module = info.kind == MODULE

    # Methods, not closures: a recursive closure is a reference cycle that would keep the
    # whole tree alive until the garbage collector finds it.
    def _class_kind(self, info: ClassInfo, seen: frozenset, by_name, decided: dict[int, str]) -> str:
        if id(info) in decided:
            return decided[id(info)]
        seen = seen | {id(info)}
        kinds = [self._base_kind(base, by_name, seen, decided) for base in info.base_names]
        kind = _strongest([UNKNOWN if k == NAMED_MODULE else k for k in kinds])
        # a base named like a module and code of its own that is one, or a `forward` over a
        # base of unknown kind: a module, unless the project defines those bases as plain classes
        if kind == UNKNOWN and (NAMED_MODULE in kinds and self._acts_as_module(info)
                                or "forward" in info.methods and not _skips_base_init(info)):
            kind = NOT_MODULE if self._plain_in_project(info, by_name, seen, decided) else MODULE
        decided[id(info)] = kind
        return kind

    def _base_kind(self, base: Optional[str], by_name, seen: frozenset, decided) -> str:
        if base is None:
            return UNKNOWN  # not a name: `with_metaclass(ABCMeta, nn.Module)`
        # A same-file class, unless it is the class itself shadowing an import (`class Foo(Foo):`).
        local_classes = [c for c in by_name.get(base, ()) if id(c) not in seen]
        if local_classes:
            return _strongest([self._class_kind(c, seen, by_name, decided) for c in local_classes])
        qualified = self.resolve_dotted(base)
        last = base.rsplit(".", 1)[-1]
        if qualified is None and "." not in base and hasattr(builtins, base):
            return NOT_MODULE  # `object`, `Exception`, `dict`
        package = qualified.split(".")[0] if qualified is not None else None
        if package == "torch":
            is_module = (qualified.startswith("torch.nn.") and last not in names.NN_NON_MODULE_CLASSES
                         or qualified == "torch.jit.ScriptModule")
            return MODULE if is_module else NOT_MODULE  # `torch.utils.data.Dataset`, `torch.autograd.Function`
        if package in names.OTHER_FRAMEWORKS:
            return OTHER_FRAMEWORK
        if _standard_package(package):
            return NOT_MODULE  # `ABC`, `Generic[T]`, `Enum`, `NamedTuple`
        if last.endswith(names.NOT_MODULE_BASE_SUFFIXES):
            return NOT_MODULE  # `LightningDataModule`, `Dataset`, `Trainer`: named for what they are
        if last in names.FRAMEWORK_MODULE_BASES:
            required = names.FRAMEWORK_BASE_PACKAGES.get(last)
            if required is None or package is None or package in ("", required):
                return MODULE
            return UNKNOWN
        return NAMED_MODULE if last.endswith(names.MODULE_BASE_SUFFIXES) else UNKNOWN

    def _plain_in_project(self, info: ClassInfo, by_name, seen: frozenset, decided) -> bool:
        """Every base of the class is known to be no module, or is a plain class of the
        project: one of this file whose own bases are, or one imported from the project's own
        code that is plain there (`class Transform:` in another file of the package it is
        imported from). Then no `torch.nn.Module` is among its bases."""
        if self.project is None:
            return False
        for base in info.base_names:
            if self._base_kind(base, by_name, seen, decided) == NOT_MODULE:
                continue
            local = [c for c in by_name.get(base, ()) if id(c) not in seen]
            if local:
                if not all(self._plain_in_project(c, by_name, seen | {id(c)}, decided) for c in local):
                    return False
                continue
            qualified = self.resolve_dotted(base) if base is not None else None
            if qualified is None:
                return False  # a name of unknown origin
            package = "." if qualified.startswith(".") else qualified.split(".")[0]
            if not self.project.is_plain_class(package, qualified.rsplit(".", 1)[-1]):
                return False
        return True

    def from_outside_projects(self, base: str) -> bool:
        """Whether a base names a class no project defines: a builtin (`object`), or one of torch,
        the standard library or typing (`nn.Module`, `abc.ABC`, `Generic[T]`)."""
        qualified = self.resolve_dotted(base)
        if qualified is None:
            return "." not in base and hasattr(builtins, base)
        package = qualified.split(".")[0]
        return package == "torch" or _standard_package(package)

    def _acts_as_module(self, info: ClassInfo) -> bool:
        """The class's own methods do what only a module does: define `forward`, keep a
        `torch.nn` module or parameter it builds on `self` (`self.proj = nn.Linear(...)`,
        `self.layers.append(nn.Linear(...))`, `setattr(self, name, nn.Linear(...))`; a loss built
        into a local of a training method is the method's), or register a buffer, a parameter or
        a submodule."""
        if "forward" in info.methods:
            return True
        for definitions in info.methods.values():
            for definition in definitions:
                for node in syntax.walk(definition):
                    if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None \
                            and _stored_on_self(node) and _builds_nn_object(node.value, self):
                        return True  # `self.proj = nn.Linear(...)`, `self.w = nn.Parameter(...)`
                    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                            and node.func.attr.value in _REGISTRATIONS:
                        return True
                    if isinstance(node, cst.Call) and _given_to_self(node) \
                            and any(_builds_nn_object(a.value, self) for a in node.args):
                        return True  # `self.layers.append(nn.Linear(...))`
        return False


# Any word of a device in a file's text (a comment counts too: rather one finding too many).
_NAMES_A_DEVICE = re.compile(r"cuda|device|\bmps\b|xpu|\bnpu\b|\bhpu\b|\bxla\b|accelerat|\.to\(", re.IGNORECASE)


def _standard_package(package: Optional[str]) -> bool:
    return package in sys.stdlib_module_names or package in names.TYPING_PACKAGES


def _stored_on_self(statement: cst.Assign | cst.AnnAssign) -> bool:
    targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
    return any(isinstance(t, cst.Attribute) and syntax.dotted_name(t.value) == "self" for t in targets)


def _given_to_self(call: cst.Call) -> bool:
    """A method of something kept on `self` (`self.layers.append(...)`), or `setattr(self, ...)`."""
    name = syntax.dotted_name(call.func) or ""
    if name == "setattr":
        return bool(call.args) and syntax.dotted_name(call.args[0].value) == "self"
    return name.startswith("self.")


def _builds_nn_object(value: cst.BaseExpression, facts: "FileFacts") -> bool:
    """`nn.Linear(...)`, `nn.Sequential(*layers)` or `nn.ModuleList([...])`, anywhere in the value."""
    return any(isinstance(n, cst.Call) and names.makes_nn_object(facts.resolve(n.func) or "") for n in syntax.walk(value))


# What a class or a base is, weakest first: a class is what its strongest base makes it (one
# base from another framework rules it out; one module base makes it a module).
NOT_MODULE, UNKNOWN, MODULE, OTHER_FRAMEWORK = "not-module", "unknown", "module", "other-framework"
# An imported base named like a module (`*Model`, `*Decoder`): a guess, which the class's own
# code confirms (see `_acts_as_module`); without that, the class is of unknown kind.
NAMED_MODULE = "named-module"
_REGISTRATIONS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})
_STRENGTH = {NOT_MODULE: 0, UNKNOWN: 1, MODULE: 2, OTHER_FRAMEWORK: 3}
# Base names of torch objects that are not modules but have `load_state_dict`, `state_dict`...
TORCH_OBJECT_BASE_SUFFIXES = ("Optimizer", "Scheduler", "LR", "Scaler")


def _skips_base_init(info: ClassInfo) -> bool:
    """Whether the class defines `__init__` and it never calls a base's (`super().__init__()`,
    `Base.__init__(self)`): an `nn.Module` sets up its tables there, so such a class cannot be a
    working module (calling it, or its `.to()`, raises AttributeError). PyG's `BaseTransform`
    subclasses with a `forward` are the common case."""
    inits = info.methods.get("__init__", ())
    return bool(inits) and not any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "__init__"
        for init in inits for n in syntax.walk(init.body)
    )


def _strongest(kinds: list[str]) -> str:
    """A class without bases is no module."""
    return max(kinds, key=_STRENGTH.__getitem__, default=NOT_MODULE)


def _is_property(definition: cst.FunctionDef) -> bool:
    """`@property`, `@functools.property`-style, and `@NAME.setter` / `.getter` / `.deleter`
    (not `cached_property`: assigning one sets a plain attribute)."""
    for decorator in syntax.decorator_names(definition):
        if decorator is not None and (decorator.rsplit(".", 1)[-1] == "property"
                                      or decorator.endswith((".setter", ".getter", ".deleter"))):
            return True
    return False


def is_buffer_registration(call: cst.Call, self_name: Optional[str]) -> bool:
    """`self.register_buffer(...)`, `self.register_uninitialized_buffer(...)`: a method of `self`
    whose name starts with `register` (or `_register`) and mentions a buffer; and torchmetrics'
    `self.add_state(name, default)`, whose states `Metric._apply` moves with the module."""
    func = call.func
    if not (self_name is not None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            and func.value.value == self_name):
        return False
    method = func.attr.value
    return method.lstrip("_").startswith("register") and "buffer" in method or method == "add_state"


def _registered_buffers(method: cst.FunctionDef, lineage: list[ClassInfo]) -> set[str]:
    """The buffer names a method of `lineage[0]` registers: string literals, and the strings a
    loop hands over."""
    self_name = syntax.self_name(method)
    loops: dict[str, list[str]] = {}  # loop name -> the strings it takes
    found: set[str] = set()
    for node in syntax.walk_expressions(method.body):
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name):
            strings = _strings(node.iter)
            if strings is None:
                iterable = node.iter
                holder = iterable.value if isinstance(iterable, cst.Attribute) else None
                if isinstance(holder, cst.Name) and holder.value in {self_name, *(i.name for i in lineage)} \
                        or isinstance(holder, cst.Call) and syntax.dotted_name(holder.func) == "type":
                    strings = _class_strings(lineage, iterable.attr.value)  # `self.NAMES`, `type(self).NAMES`, `Cls.NAMES`
            if strings is not None:
                loops[node.target.value] = strings
        elif isinstance(node, cst.Call) and is_buffer_registration(node, self_name):
            name_arg = syntax.keyword(node, "name") or next(iter(syntax.positional(node)), None)
            if name_arg is None:
                continue
            literal = syntax.string_value(name_arg.value)
            if literal is not None:
                found.add(literal)
            elif isinstance(name_arg.value, cst.Name):
                found.update(loops.get(name_arg.value.value, ()))
    return found


def _strings(node: cst.BaseExpression) -> Optional[list[str]]:
    """The strings of a list or tuple literal of string literals."""
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    strings = [syntax.string_value(e.value) if isinstance(e, cst.Element) else None for e in node.elements]
    return strings if all(s is not None for s in strings) else None


def _class_strings(lineage: list[ClassInfo], name: str) -> Optional[list[str]]:
    """The strings of the list or tuple literal `name` is bound to in the body of the nearest
    class of `lineage` that binds it, or as `self.NAME = [...]` in one of its methods."""
    for info in lineage:
        for stmt in syntax.block_statements(info.node.body):
            for small in syntax.small_statements(stmt):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
                    [small.target] if isinstance(small, cst.AnnAssign) and small.value is not None else [])
                if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                    return _strings(small.value)
        for definitions in info.methods.values():
            for definition in definitions:
                self_name = syntax.self_name(definition)
                for node in syntax.walk_expressions(definition.body):
                    if isinstance(node, cst.Assign) and any(
                            isinstance(t.target, cst.Attribute) and t.target.attr.value == name
                            and isinstance(t.target.value, cst.Name) and t.target.value.value == self_name
                            for t in node.targets):
                        strings = _strings(node.value)
                        if strings is not None:
                            return strings
    return None


def _base_name(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Subscript):  # Generic[T]-style bases
        node = node.value
    return syntax.dotted_name(node)
