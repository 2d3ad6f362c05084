"""DEV009 module-in-plain-container: modules or parameters kept in a plain list, tuple or dict
on an nn.Module, where `model.to()`, `parameters()` and `state_dict()` never see them.
Doc: rules/DEV009.md; fixture: tests/fixtures/DEV009.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import libcst as cst

from devlint.analysis.forward_time import ForwardTime, ForwardTimeSites
from devlint.api import UNSAFE, FrameState, NodeFix, Rule
from devlint.core import syntax
from devlint.semantic.bindings import name_bound_at
from devlint.torchinfo import names

MODULE, PARAMETER = "module", "parameter"
PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Classes of torch.nn that are not modules.
NON_MODULE_NN = frozenset({"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"})
# Module methods that return the module itself: `nn.Linear(4, 4).to(device)` is still one built here.
SELF_RETURNING = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval", "requires_grad_"})
ADDING_METHODS = frozenset({"append", "extend", "insert"})
REGISTERING_METHODS = frozenset({"add_module", "register_module", "register_parameter", "__setattr__"})
# Calls that only pass a container's items on (`nn.Sequential(*list(self.blocks))`).
# Calls whose result holds the items of their arguments (`sum(zip(a, b), ())` interleaves them).
PASSING_CALLS = frozenset({"list", "tuple", "dict", "reversed", "iter", "enumerate", "zip", "sorted", "sum",
                           "chain", "itertools.chain"})
# What `self.NAME(...)` records among the methods called on NAME: no container module has a
# `forward`, so a container that is called raises after the fix as before it.
CALLED = "__call__"
# The container each kind of content is wrapped in, and the list or dict methods it lacks.
WRAPPERS = {
    (False, MODULE): ("torch.nn.ModuleList", {"clear", "copy", "count", "index", "remove", "reverse", "sort", CALLED}),
    (False, PARAMETER): ("torch.nn.ParameterList",
                         {"clear", "copy", "count", "index", "insert", "pop", "remove", "reverse", "sort", CALLED}),
    (True, MODULE): ("torch.nn.ModuleDict", {"copy", "fromkeys", "get", "popitem", "setdefault", CALLED}),
    (True, PARAMETER): ("torch.nn.ParameterDict", {CALLED}),
}


# torch.nn modules with no parameters, no buffers and no training mode (Dropout and PReLU have).
_STATELESS_NN = frozenset(
    "ReLU ReLU6 LeakyReLU GELU SiLU Sigmoid Tanh ELU SELU CELU Softplus Softsign Hardtanh Hardswish"
    " Hardsigmoid Mish Tanhshrink Softshrink Hardshrink LogSigmoid Softmax LogSoftmax Softmin Identity"
    " Flatten Unflatten Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle"
    " MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d"
    " AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d LPPool1d LPPool2d"
    " ZeroPad1d ZeroPad2d ZeroPad3d ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d"
    " ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d".split()
)
_MODULE_BASE = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# Module members that make or touch state: a class that uses them may hold parameters or buffers.
_STATE_MEMBERS = frozenset({"training", "train", "eval", "register_buffer", "register_parameter", "add_module",
                            "register_module", "load_state_dict", "state_dict", "parameters", "buffers",
                            "apply", "_apply", "children", "modules"})
# torch.nn's containers, known by name where a star import hides the module they come from.
_NN_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})


@dataclass(eq=False)
class _Contents:
    """What a container built in a method holds, as far as the rule follows it."""

    mapping: bool  # a dict
    kinds: set[str] = field(default_factory=set)  # MODULE, PARAMETER: items built right there
    other: bool = False  # an item not known to be a module or parameter built here (no fix)
    nested: bool = False  # items in inner containers (no fix: the wrapper takes modules only)
    bad_keys: bool = False  # a key a ModuleDict may refuse (not a string literal without ".")
    names: set[str] = field(default_factory=set)  # local names put in it
    added_in: list = field(default_factory=list)  # (that method's `stored`, local name) for each named item put in
    passed_on: bool = False  # wrapped into an nn container, or given to a module, in the class
    drawn_from: set[str] = field(default_factory=set)  # `self.NAME`s whose items were put in it
    stateful: bool = False  # an item with parameters, buffers or a training mode (not `nn.ReLU()`)


_Local = Union[str, _Contents]  # MODULE, PARAMETER or a container


@dataclass
class _Method:
    env: dict[str, _Local] = field(default_factory=dict)
    stored: set[str] = field(default_factory=set)  # locals registered by hand or set as `self.X = name`
    loop_refs: dict[str, tuple[set[str], list[_Contents]]] = field(default_factory=dict)  # loop variable -> what it walks
    after_init: bool = False
    made: dict[str, cst.BaseExpression] = field(default_factory=dict)  # local name -> the container expression bound


@dataclass
class _Candidate:
    target: cst.Attribute  # `self.NAME`
    statement: cst.BaseSmallStatement
    value: cst.BaseExpression
    contents: _Contents
    method: _Method
    after_init: bool
    made: cst.BaseExpression  # where the container is made (the value, or the local's value)
    ancestors: tuple[cst.CSTNode, ...]  # from the module down to the assignment: what a fix there may name


@dataclass
class _Class:
    candidates: list[_Candidate] = field(default_factory=list)
    added: dict[str, _Contents] = field(default_factory=dict)  # NAME -> what `self.NAME.append(...)` etc. add
    passed_on: set[str] = field(default_factory=set)  # NAMEs wrapped, registered by hand or given to a module
    methods_called: dict[str, set[str]] = field(default_factory=dict)  # NAME -> `self.NAME.m(...)` names
    other_values: set[str] = field(default_factory=set)  # NAMEs also assigned something else than a container
    uses: Optional[ForwardTimeSites] = None  # reads of `self.NAME` that use the items, by NAME
    deleted: set[tuple[int, str]] = field(default_factory=set)  # (id of a _Method, NAME): `del self.NAME` there


class ModuleInPlainContainer(Rule):
    """`self.NAME = [nn.Linear(...), ...]` (a list, tuple or dict of modules or parameters built
    right there, directly, through a local name, or filled by `.append`) in a method of an
    nn.Module class; the fix wraps the container into `nn.ModuleList` and its kin."""

    code = "DEV009"
    name = "module-in-plain-container"
    summary = "modules or parameters kept in a plain list, tuple or dict on a module"
    fixes, applicabilities = "sometimes", (UNSAFE,)
    requires = (ForwardTime,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._classes: FrameState[_Class] = FrameState(_Class)
        self._methods: FrameState[_Method] = FrameState(_Method)
        self._module_classes: Optional[set[str]] = None
        self._stateless_classes: dict[int, bool] = {}  # id of a ClassInfo -> it holds no state
        self._file_reads: Optional[set[str]] = None  # attribute names the file reads anywhere
        self._setattr_positions: dict[str, list[int]] = {}  # same-file function -> what it hands to setattr

    # --- what is built here ----------------------------------------------------------------
    def _built(self, expr: cst.BaseExpression, env: dict[str, _Local]) -> Optional[str]:
        """MODULE or PARAMETER when expr builds one right there (or names a local bound to one)."""
        if isinstance(expr, cst.Name):
            held = env.get(expr.value)
            return held if isinstance(held, str) else None
        if not isinstance(expr, cst.Call):
            return None
        chained = False
        while isinstance(expr.func, cst.Attribute) and isinstance(expr.func.value, cst.Call) \
                and expr.func.attr.value in SELF_RETURNING:
            expr, chained = expr.func.value, True
        kind = self._constructor(expr.func)
        return None if kind == PARAMETER and chained else kind  # `Parameter(...).to(d)` is a plain tensor

    def _stateless(self, item: cst.BaseExpression) -> bool:
        """`nn.ReLU()`, `nn.MaxPool2d(2)`, or a module class of this file that holds no state: a
        module with no parameters, no buffers and no training mode, which `.to()`, `state_dict()`
        and `.train()` have nothing to do with."""
        if not isinstance(item, cst.Call):
            return False
        qualified = self.facts.resolve(item.func) or ""
        if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1] in _STATELESS_NN:
            return True
        if qualified or not isinstance(item.func, cst.Name):
            return False
        own = [info for info in self.facts.classes.values() if info.name == item.func.value]
        if len(own) != 1:
            return False
        if id(own[0]) not in self._stateless_classes:
            self._stateless_classes[id(own[0])] = self._holds_no_state(own[0])
        return self._stateless_classes[id(own[0])]

    def _holds_no_state(self, info) -> bool:
        """A module class of this file, derived from `nn.Module` alone, whose code builds no module
        or parameter, registers nothing, never reads its training mode, and keeps only values it
        never calls, reads attributes of or hands to a call (numbers, strings: a module kept
        there would be called or handed on)."""
        if len(info.node.bases) != 1 or self.facts.resolve(info.node.bases[0].value) not in _MODULE_BASE:
            return False
        for definition in (d for ds in info.methods.values() for d in ds):
            if not self._keeps_no_state(definition, syntax.self_name(definition), info):
                return False
        return True

    def _keeps_no_state(self, method: cst.FunctionDef, self_name: Optional[str], info) -> bool:
        for node, path in syntax.walk_with_paths(method, []):
            if isinstance(node, cst.FunctionDef) and node is not method:
                return False  # a nested function: not followed
            if isinstance(node, cst.Call):
                if self._constructor(node.func) is not None or syntax.dotted_name(node.func) in ("setattr", "getattr"):
                    return False
            elif isinstance(node, cst.Attribute):
                if node.attr.value in _STATE_MEMBERS:
                    return False
                if not (isinstance(node.value, cst.Name) and node.value.value == self_name) \
                        or node.attr.value in info.methods:
                    continue
                parent = path[-2]  # the path ends at the node itself
                if (isinstance(parent, cst.Call) and parent.func is node) \
                        or (isinstance(parent, cst.Attribute) and parent.value is node) \
                        or isinstance(parent, cst.Arg):
                    return False  # `self.X(...)`, `self.X.y`, `f(self.X)`: may be a module
        return True

    def _constructor(self, func: cst.BaseExpression) -> Optional[str]:
        """MODULE when func is a module class (torch.nn's, this file's, or an imported one named
        like one), PARAMETER for `nn.Parameter`."""
        qualified = self.facts.resolve(func)
        if qualified in PARAMETER_CLASSES:
            return PARAMETER
        if qualified is None:
            if isinstance(func, cst.Attribute) and func.attr.value in _NN_CONTAINERS:
                return MODULE  # `nn.Sequential` where a star import hides where `nn` comes from
            if self._module_classes is None:
                self._module_classes = {info.name for info in self.facts.classes.values() if info.is_module}
            return MODULE if isinstance(func, cst.Name) and func.value in self._module_classes else None
        parts = qualified.split(".")
        last = parts[-1]
        if not last[:1].isupper():
            return None
        if parts[0] in names.OTHER_FRAMEWORKS:
            return None
        if parts[0] == "torch":
            in_nn = len(parts) == 3 or (len(parts) > 3 and parts[2] in ("modules", "parallel"))
            return MODULE if parts[1] == "nn" and in_nn and last not in NON_MODULE_NN else None
        is_module = last in names.FRAMEWORK_MODULE_BASES or last.endswith(names.MODULE_BASE_SUFFIXES)
        return MODULE if is_module else None

    def _contents(self, expr: cst.BaseExpression, env: dict[str, _Local]) -> Optional[_Contents]:
        """The contents of the list, tuple or dict that expr builds; None when it builds none."""
        if isinstance(expr, cst.Call):
            func = syntax.dotted_name(expr.func)
            if func not in ("list", "tuple", "dict") or self.facts.resolve(expr.func) is not None:
                return None
            contents = _Contents(mapping=func == "dict")
            for arg in expr.args:
                if arg.keyword is not None:
                    self._add(contents, arg.value, env, key=cst.SimpleString(f'"{arg.keyword.value}"'))
                elif arg.star:
                    contents.other = True
                else:  # an iterable of items (of pairs, for dict)
                    inner = self._contents(arg.value, env)
                    if inner is None or (contents.mapping and not inner.nested and inner.kinds):
                        contents.other = True
                    else:
                        _merge(contents, inner, nested_pairs=contents.mapping)
            return contents
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            contents = _Contents(mapping=False)
            for element in expr.elements:
                if isinstance(element, cst.StarredElement):
                    contents.other = True
                else:
                    self._add(contents, element.value, env)
            return contents if not isinstance(expr, cst.Set) else None
        if isinstance(expr, cst.Dict):
            contents = _Contents(mapping=True)
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    self._add(contents, element.value, env, key=element.key)
                else:
                    contents.other = True
            return contents
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            contents = _Contents(mapping=False)
            self._add(contents, expr.elt, env)
            return contents
        if isinstance(expr, cst.DictComp):
            contents = _Contents(mapping=True)
            self._add(contents, expr.value, env, key=expr.key)
            return contents
        return None

    def _add(self, contents: _Contents, item: cst.BaseExpression, env: dict[str, _Local], key=None,
             depth: int = 0) -> None:
        """Record one item put into a container (and, one level down, the items of an inner one)."""
        if contents.mapping and not _valid_key(key):
            contents.bad_keys = True
        if isinstance(item, cst.IfExp):
            self._add(contents, item.body, env, key, depth)
            self._add(contents, item.orelse, env, key, depth)
            return
        frame = self._frame()
        if isinstance(item, cst.Name):
            contents.names.add(item.value)
            if frame is not None:
                contents.added_in.append((self._methods[frame].stored, item.value))
        if frame is not None:  # `unique.append(layer)` in `for layer in self.layers:`
            contents.drawn_from |= self._refs(item, frame, self._methods[frame])[0]
        kind = self._built(item, env)
        if kind is not None:
            if depth:
                contents.nested = True
            contents.kinds.add(kind)
            contents.stateful |= not self._stateless(item)
            return
        inner = self._contents(item, env) if depth == 0 else None
        if inner is not None and inner.kinds and not inner.nested:
            contents.nested = True
            contents.kinds |= inner.kinds
            contents.stateful |= inner.stateful
            contents.names |= inner.names
        else:
            contents.other = True

    # --- the traversal ---------------------------------------------------------------------
    def _frame(self):
        frame = self.ctx.function
        return frame if frame is not None and frame.in_module_class else None

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.ctx.function
        self._methods.pop(frame)
        klass = self._classes.get(frame.klass) if frame is not None and frame.in_module_class else None
        if klass is not None and klass.uses is not None:
            klass.uses.leave_function(frame)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """A read of `self.NAME` that uses what it holds (not a store, nor `.append(...)` and kin)."""
        frame = self._frame()
        name = frame.self_attribute(node) if frame is not None else None
        if name is None:
            return
        parent = self.ctx.ancestors[-2]
        if isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and parent.target is node:
            return
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in ADDING_METHODS:
            return
        if isinstance(parent, cst.Subscript) and isinstance(self.ctx.ancestors[-3], cst.AssignTarget):
            return  # `self.heads[k] = ...` fills the container
        klass = self._classes[frame.klass]
        if klass.uses is None:
            klass.uses = ForwardTimeSites(self.ctx[ForwardTime])
        klass.uses.add(name, node, frame)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assign(node, [t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node, [node.target], node.value)

    def _assign(self, statement, targets: list[cst.BaseExpression], value: cst.BaseExpression) -> None:
        frame = self._frame()
        if frame is None:
            return
        klass, method = self._classes[frame.klass], self._methods[frame]
        env = method.env
        local = env.get(value.value) if isinstance(value, cst.Name) else None
        contents = local if isinstance(local, _Contents) else self._contents(value, env)
        built = self._built(value, env)
        properties = self.facts.properties(frame.klass.node)
        for target in targets:
            attribute = frame.self_attribute(target)
            if attribute in properties:
                continue  # a property's setter decides where the value goes: not a plain attribute
            if attribute is not None:
                if isinstance(value, cst.Name) and contents is None:
                    method.stored.add(value.value)  # `self.conv = conv`: registered under its own name
                if contents is not None:
                    made = method.made.get(value.value, value) if isinstance(value, cst.Name) else value
                    klass.candidates.append(_Candidate(
                        target, statement, value, contents, method,
                        frame.method != "__init__" or method.after_init, made, tuple(self.ctx.ancestors)))
                elif built is None:
                    klass.other_values.add(attribute)
                else:
                    # `self.heads = []` then `self.heads = nn.ModuleList()` in the same block: the plain
                    # container is gone before anything is added to the attribute
                    block = _innermost_block(self.ctx.ancestors)
                    klass.candidates = [c for c in klass.candidates if not (
                        c.target.attr.value == attribute and c.method is method
                        and _innermost_block(c.ancestors) is block)]
            elif isinstance(target, cst.Name):
                method.made.pop(target.value, None)
                method.loop_refs.pop(target.value, None)
                if contents is not None:
                    env[target.value] = contents
                    if local is None:
                        method.made[target.value] = value
                elif built is not None:
                    env[target.value] = built
                else:
                    env.pop(target.value, None)
                    drawn = self._refs(value, frame, method)
                    if drawn[0] or drawn[1]:  # `module_list = sum(zip(self.layers, acts), ())`
                        method.loop_refs[target.value] = drawn
            elif isinstance(target, cst.Subscript):  # `self.heads[k] = ...`, `heads[k] = ...`
                added = self._added_to(frame, klass, env, target.value)
                index = target.slice[0].slice if len(target.slice) == 1 else None
                if added is not None:
                    key = index.value if isinstance(index, cst.Index) else None
                    added.bad_keys |= not _valid_key(key)
                    self._add(added, value, env, key=key)
            else:
                for name in syntax.walk(target):
                    if isinstance(name, cst.Name):
                        env.pop(name.value, None)

    def visit_Del(self, node: cst.Del) -> None:
        """`del self.NAME` in the method that makes the container: it is gone before the object is
        used (its items' weights copied elsewhere first, if at all)."""
        frame = self._frame()
        if frame is None:
            return
        for target in [node.target] + [e.value for e in getattr(node.target, "elements", ())]:
            attribute = frame.self_attribute(target)
            if attribute is not None:
                self._classes[frame.klass].deleted.add((id(self._methods[frame]), attribute))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        """`self.layers += [...]`: an `.extend(...)`."""
        frame = self._frame()
        if frame is None or not isinstance(node.operator, cst.AddAssign):
            return
        klass, method = self._classes[frame.klass], self._methods[frame]
        added = self._added_to(frame, klass, method.env, node.target)
        if added is not None:
            self._add_call(added, cst.Call(func=cst.Name("extend"), args=[cst.Arg(node.value)]), "extend", method.env)

    def _added_to(self, frame, klass: _Class, env: dict[str, _Local], receiver) -> Optional[_Contents]:
        """Where items put into `receiver` (`self.NAME` or a local container) are recorded."""
        attribute = frame.self_attribute(receiver)
        if attribute is not None:
            return klass.added.setdefault(attribute, _Contents(mapping=False))
        held = env.get(receiver.value) if isinstance(receiver, cst.Name) else None
        return held if isinstance(held, _Contents) else None

    def visit_Call(self, node: cst.Call) -> None:
        frame = self._frame()
        if frame is None:
            return
        klass, method = self._classes[frame.klass], self._methods[frame]
        func = node.func
        if syntax.is_base_init(node):
            method.after_init = True
            return
        if isinstance(func, cst.Attribute):
            called = frame.self_attribute(func)
            if called is not None:
                klass.methods_called.setdefault(called, set()).add(CALLED)
            attribute = frame.self_attribute(func.value)
            if attribute is not None:
                klass.methods_called.setdefault(attribute, set()).add(func.attr.value)
            if func.attr.value in ADDING_METHODS:
                added = self._added_to(frame, klass, method.env, func.value)
                if added is not None:
                    self._add_call(added, node, func.attr.value, method.env)
                return
        registered = None
        if frame.self_attribute(func) in REGISTERING_METHODS:  # `self.add_module("n", m)`
            registered = syntax.keyword(node, "module") or syntax.keyword(node, "param")
            registered = registered or next(iter(syntax.positional(node)[1:2]), None)
        elif isinstance(func, cst.Name) and func.value == "setattr" and len(node.args) == 3 \
                and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == frame.self_name:
            registered = node.args[2]
        elif isinstance(func, cst.Name) and not syntax.has_star_args(node):
            # `set_deep_attr(self, "blocks.0.hook", wrapper)`: a function of this file that
            # hands that argument to `setattr` puts it into the module tree by hand
            positional = syntax.positional(node)
            if func.value not in self._setattr_positions:
                self._setattr_positions[func.value] = [
                    i for definition in self.facts.module_functions(func.value) for i in _set_as_attribute(definition)]
            registered = next((positional[i] for i in self._setattr_positions[func.value] if i < len(positional)), None)
        if registered is not None:
            self._passed_on(registered.value, frame, klass, method)
            if isinstance(registered.value, cst.Name):
                method.stored.add(registered.value.value)
        elif (self._constructor(func) is not None or _builds_an_object(func)) and frame.method != "forward":
            # `nn.ModuleList(self.blocks)`, `nn.Sequential(*layers)`, `_SelectionNetwork(scalers=self.scalers)`
            # (a class from elsewhere may register what it is given); one built in forward registers nothing
            for arg in node.args:
                self._passed_on(arg.value, frame, klass, method)

    def _add_call(self, added: _Contents, call: cst.Call, method: str, env: dict[str, _Local]) -> None:
        args = syntax.positional(call)
        if method == "insert":
            args = args[1:]
        if len(args) != 1 or syntax.has_star_args(call):
            added.other = True
        elif method == "extend":
            inner = self._contents(args[0].value, env)
            held = env.get(args[0].value.value) if isinstance(args[0].value, cst.Name) else None
            inner = inner or (held if isinstance(held, _Contents) else None)
            if inner is None:
                added.other = True
            else:
                _merge(added, inner)
        else:
            self._add(added, args[0].value, env)

    def _passed_on(self, expr: cst.BaseExpression, frame, klass: _Class, method: _Method) -> None:
        attributes, locals_ = self._refs(expr, frame, method)
        klass.passed_on |= attributes
        for contents in locals_:
            contents.passed_on = True
            klass.passed_on |= contents.drawn_from  # its items came from those containers

    def _refs(self, expr: cst.BaseExpression, frame, method: _Method) -> tuple[set[str], list[_Contents]]:
        """The containers whose items expr hands over: `self.NAME`, a local container, an item or
        a loop variable over them, or those passed through `list(...)`, `.values()`, a comprehension."""
        attributes: set[str] = set()
        locals_: list[_Contents] = []
        stack = [expr]
        while stack:
            current = stack.pop()
            attribute = frame.self_attribute(current)
            if attribute is not None:
                attributes.add(attribute)
            elif isinstance(current, cst.Name):
                held = method.env.get(current.value)
                if isinstance(held, _Contents):
                    locals_.append(held)
                looped = method.loop_refs.get(current.value)
                if looped is not None:
                    attributes |= looped[0]
                    locals_.extend(looped[1])
            elif isinstance(current, cst.Subscript):
                stack.append(current.value)
            elif isinstance(current, cst.Call):
                name = syntax.dotted_name(current.func)
                if name in PASSING_CALLS:
                    stack.extend(a.value for a in current.args)
                elif isinstance(current.func, cst.Attribute) and current.func.attr.value in ("values", "items"):
                    stack.append(current.func.value)
            elif isinstance(current, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
                comp = current.for_in
                while comp is not None:
                    stack.append(comp.iter)
                    comp = comp.inner_for_in
            elif isinstance(current, (cst.List, cst.Tuple)):
                stack.extend(e.value for e in current.elements)
        return attributes, locals_

    def visit_For(self, node: cst.For) -> None:
        self._loop(node.target, node.iter)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._loop(node.target, node.iter)

    def _loop(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        frame = self._frame()
        if frame is None:
            return
        method = self._methods[frame]
        refs = self._refs(iterable, frame, method)
        if refs[0] or refs[1]:
            for name in syntax.walk(target):
                if isinstance(name, cst.Name):
                    method.loop_refs[name.value] = refs

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        klass = self._classes.pop(self.ctx.klass)
        if klass is None:
            return
        found = []
        unfixable: set[str] = set()  # a plain list stored there as well would raise once it is a ModuleList
        for candidate in klass.candidates:
            name = candidate.target.attr.value
            if not self._read_anywhere(name, klass) or (id(candidate.method), name) in klass.deleted:
                continue  # its items never run in this file, or the method that makes it deletes it
            contents = _Contents(mapping=candidate.contents.mapping)
            _merge(contents, candidate.contents)
            if name in klass.added:
                _merge(contents, klass.added[name])
            if not contents.kinds or candidate.contents.passed_on or name in klass.passed_on or not contents.stateful \
                    or contents.names & candidate.method.stored \
                    or any(name_ in stored for stored, name_ in contents.added_in):
                unfixable.add(name)
                continue
            wrapper, fix = self._fix(candidate, contents, klass, name)
            if fix is None:
                unfixable.add(name)
            found.append((candidate, contents, wrapper, fix))
        uses = klass.uses

        def report() -> None:
            """Once it is known which methods run at forward time: each finding names where the
            container is made and where forward-time code uses its items."""
            for candidate, contents, wrapper, fix in found:
                name = candidate.target.attr.value
                what = "parameters" if contents.kinds == {PARAMETER} else "modules"
                shape = "dict" if contents.mapping else ("tuple" if _is_tuple(candidate.value) else "list")
                used = uses.at_forward_time(name)[:MAX_USES_SHOWN] if uses is not None else []
                related = [(candidate.made, f"the plain {shape} is made"),
                           *((node, f"its {what} are used in `{method}`") for node, method in used)]
                self.report(
                    candidate.target,
                    f"`self.{name}` keeps {what} in a plain {shape}: `model.to(device)`, `parameters()` (so the "
                    f"optimizer), `state_dict()` and `.train()`/`.eval()` skip them; use `{wrapper.replace('torch.', '')}`",
                    None if name in unfixable else fix,
                    related=related,
                )

        if uses is None:
            report()
        else:
            uses.when_all_known(report)

    def _read_anywhere(self, name: str, klass: _Class) -> bool:
        """Whether the class reads `self.NAME` (not only stores or fills it), or any code of the
        file reads an attribute `NAME` (`model.NAME`, `self.NAME` in a subclass)."""
        if klass.uses is not None and klass.uses.any(name):
            return True
        if self._file_reads is None:
            self._file_reads = _attributes_read(self.ctx.ancestors[0])
        return name in self._file_reads

    def _fix(self, candidate: _Candidate, contents: _Contents, klass: _Class, name: str) -> tuple[str, Optional[NodeFix]]:
        kind = PARAMETER if contents.kinds == {PARAMETER} else MODULE
        wrapper, lacking = WRAPPERS[(contents.mapping, kind)]
        statement = candidate.statement
        knowable = (
            len(contents.kinds) == 1 and not contents.other and not contents.nested
            and not (contents.mapping and contents.bad_keys)
            and candidate.after_init
            and (isinstance(statement, cst.AnnAssign) or len(statement.targets) == 1)
            and name not in klass.other_values
            and not (klass.methods_called.get(name, set()) & lacking)
        )
        # Only a name bound where the assignment runs (not an import below the class, nor under `__main__`).
        spelled = self.facts.spelling(wrapper, bound=lambda n: name_bound_at(n, candidate.ancestors)) if knowable else None
        if spelled is None:
            return wrapper, None
        return wrapper, NodeFix(UNSAFE, f"Wrap `self.{name}` in `{spelled}`", candidate.value,
                                _wrapped(candidate.value, cst.parse_expression(spelled)))


MAX_USES_SHOWN = 3  # forward-time uses a finding names


def _set_as_attribute(function: cst.FunctionDef) -> list[int]:
    """The positions of the parameters the function hands to `setattr(obj, name, PARAM)`."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    found = []
    for node in syntax.walk(function.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "setattr" \
                and len(node.args) == 3 and isinstance(node.args[2].value, cst.Name) and node.args[2].value.value in params:
            found.append(params.index(node.args[2].value.value))
    return found


def _wrapped(value: cst.BaseExpression, wrapper: cst.BaseExpression) -> cst.Call:
    """`[...]` -> `nn.ModuleList([...])`, `list(gen)` -> `nn.ModuleList(gen)`, `[]` -> `nn.ModuleList()`."""
    if isinstance(value, (cst.List, cst.Dict)) and not value.elements and not value.lpar:
        return cst.Call(func=wrapper)
    if isinstance(value, cst.Call) and syntax.dotted_name(value.func) in ("list", "tuple") and not value.lpar:
        return value.with_changes(func=wrapper)
    if isinstance(value, cst.Tuple) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=wrapper, args=[cst.Arg(value)])


def _attributes_read(module: cst.CSTNode) -> set[str]:
    """The attribute names that the code reads (`x.NAME` not as an assignment target, nor only
    filled by `.append`/`.extend`/`.insert` or `x.NAME[k] = ...`), or names as a string
    (`getattr(self, "NAME")`)."""
    read: set[str] = set()
    stack: list[tuple[cst.CSTNode, Optional[cst.CSTNode], Optional[cst.CSTNode]]] = [(module, None, None)]
    while stack:
        node, parent, grand = stack.pop()
        stack.extend((child, node, parent) for child in syntax.children(node))
        if isinstance(node, cst.SimpleString):
            text = syntax.string_value(node)
            if text and text.isidentifier():
                read.add(text)
        if not isinstance(node, cst.Attribute):
            continue
        if isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and parent.target is node:
            continue
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in ADDING_METHODS:
            continue
        if isinstance(parent, cst.Subscript) and isinstance(grand, cst.AssignTarget):
            continue
        read.add(node.attr.value)
    return read


def _is_tuple(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Tuple) or (isinstance(value, cst.Call) and syntax.dotted_name(value.func) == "tuple")


def _valid_key(key: Optional[cst.BaseExpression]) -> bool:
    """A key that ModuleDict takes: a string literal (or f-string) without "."."""
    text = syntax.string_value(key) if key is not None else None
    if text is not None:
        return bool(text) and "." not in text
    if isinstance(key, cst.FormattedString):
        return all("." not in part.value for part in key.parts if isinstance(part, cst.FormattedStringText))
    return False


def _merge(into: _Contents, other: _Contents, nested_pairs: bool = False) -> None:
    """Add other's items to into's (nested_pairs: other holds (key, value) pairs, for `dict(...)`)."""
    into.kinds |= other.kinds
    into.stateful |= other.stateful
    into.names |= other.names
    into.added_in += other.added_in
    into.other |= other.other
    into.bad_keys |= other.bad_keys or nested_pairs
    into.nested |= other.nested and not nested_pairs


def _innermost_block(ancestors) -> Optional[cst.CSTNode]:
    """The block (a function's or a compound statement's body) that holds the statement."""
    return next((n for n in reversed(ancestors) if isinstance(n, (cst.IndentedBlock, cst.Module))), None)


def _builds_an_object(func: cst.BaseExpression) -> bool:
    """A call of a class by its name (capitalised, a leading underscore aside: `_Selection(...)`,
    `blocks.Stage(...)`), which may be a module that registers what it is given."""
    last = syntax.last_name(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
    return last is not None and last.lstrip("_")[:1].isupper()
