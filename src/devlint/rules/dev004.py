"""DEV004 unregistered-tensor-attribute: a tensor stored on an nn.Module as a plain attribute.
Doc: rules/DEV004.md; fixture: tests/fixtures/DEV004.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint.analysis import values
from devlint.analysis.device_attributes import scan_class
from devlint.analysis.forward_time import ForwardTime, ForwardTimeSites
from devlint.api import SAFE, UNSAFE, FrameState, NodeFix, Rule
from devlint.core import edits, syntax
from devlint.semantic import facts as facts_module
from devlint.semantic.bindings import name_bound_at
from devlint.semantic.project import REGISTERING_NAMES
from devlint.torchinfo import names

INTEGRAL_DTYPES = frozenset(
    "torch." + name
    for name in "long int short int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool".split()
)
INTEGRAL_CONSTRUCTORS = frozenset(
    "torch." + name for name in "LongTensor IntTensor ShortTensor ByteTensor CharTensor BoolTensor".split()
)
INTEGRAL_BY_DEFAULT = frozenset({"torch.randint", "torch.randperm", "torch.tril_indices", "torch.triu_indices"})
INTEGRAL_CASTS = names.tensor_methods(names.CASTS) & {"long", "int", "short", "bool", "byte", "char"}
DTYPE_KEEPING_METHODS = names.tensor_methods(names.RESHAPES) | {"cpu", "cuda"}
INTEGRAL_OPERATORS = (
    cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo,
    cst.BitAnd, cst.BitOr, cst.BitXor, cst.LeftShift, cst.RightShift,
)


@dataclass
class _Candidate:
    target: cst.Attribute  # `self.NAME`
    statement: cst.BaseSmallStatement  # the assignment holding it
    value: cst.BaseExpression
    self_name: str
    after_init: bool  # nn.Module.__init__ has run when the assignment runs
    single_tensor: bool  # not a list, tuple or dict of tensors (register_buffer takes one tensor)
    integral: bool  # known to hold integers or bools: a dtype cast of the module leaves it as it is
    made: tuple[cst.CSTNode, str]  # where the tensor is made, and the clause saying so
    ancestors: tuple[cst.CSTNode, ...]  # from the module down to the assignment: what a fix there may name
    method: Optional[str]  # the method that makes the assignment
    every_arm_a_tensor: bool = True  # every arm of a conditional value is a tensor or None (no parameter, no number)


@dataclass
class _ClassState:
    candidates: list[_Candidate] = field(default_factory=list)
    plain: set[str] = field(default_factory=set)  # attributes set to something else than a tensor
    # attribute name -> its `self.NAME` reads: (path from the module, the method's self name, its
    # locals); whether each moves the attribute is decided at the class's end, for the flagged
    # attributes only
    read_paths: dict[str, list] = field(default_factory=dict)
    reads: Optional[ForwardTimeSites] = None  # the reads (not `is None` tests), by attribute name
    read_in: dict[str, set[str]] = field(default_factory=dict)  # attribute name -> the methods reading it
    registered: set[str] = field(default_factory=set)  # attributes read as an argument of a buffer registration
    trained: set[str] = field(default_factory=set)  # attributes set to an `nn.Parameter(...)` somewhere
    untrained: set[str] = field(default_factory=set)  # attributes set elsewhere to a value not `None` nor a literal
    input_sets: set[int] = field(default_factory=set)  # ids of the `self.NAME = ...` outside `__init__` made from the inputs


@dataclass
class _FunctionState:
    after_init: bool = False  # `super().__init__()` was called
    kinds: dict[str, Optional[str]] = field(default_factory=dict)  # local name -> TENSOR, CONTAINER or None
    integral_names: set[str] = field(default_factory=set)  # local names holding integer or bool tensors
    made: dict[str, cst.BaseExpression] = field(default_factory=dict)  # local name -> the tensor expression bound
    # local name (or `self.NAME` this method set) -> values.PARAMETERS where it lives with the
    # method's tensor parameters; None until the method's first assignment fills in the parameters
    places: Optional[dict[str, str]] = None


class UnregisteredTensorAttribute(Rule):
    """`self.NAME = <tensor>` in a method of an nn.Module class (directly, through a local
    name, or through a same-file helper); the fix registers a non-persistent buffer, safe only
    for an integer or bool tensor."""

    code = "DEV004"
    name = "unregistered-tensor-attribute"
    summary = "tensor stored on a module as a plain attribute instead of a buffer"
    fixes, applicabilities = "sometimes", (SAFE, UNSAFE)
    requires = (ForwardTime,)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.values = TensorValues(self.facts)
        self._classes: FrameState[_ClassState] = FrameState(_ClassState)
        self._functions: FrameState[_FunctionState] = FrameState(_FunctionState)
        # class name -> every attribute name its instances may already have (None: unknown,
        # e.g. a base imported from elsewhere, where a property or attribute may stand).
        self.attributes: dict[str, Optional[set[str]]] = {}
        self._apply_moves: Optional[list] = None  # see _moved_by_hand
        self.lightning_classes: set[str] = set()  # names of this file's LightningModule classes
        self._locals: dict[cst.FunctionDef, _Locals] = {}  # per open function, what its local names hold

    def visit_Attribute(self, node: cst.Attribute) -> None:
        frame = self.ctx.function
        if frame is None or not frame.in_module_class:
            return
        name = frame.self_attribute(node)
        if name is None:
            return
        ancestors = self.ctx.ancestors
        parent = ancestors[-2]
        if isinstance(parent, (cst.AssignTarget, cst.AnnAssign)) and parent.target is node:
            return  # a store, not a read
        state = self._classes[frame.klass]
        if state.reads is None:
            state.reads = ForwardTimeSites(self.ctx[ForwardTime])
        if values.reads_only_what_it_is(ancestors):
            # `self.NAME.shape`, `self.NAME is None`: what it is, not where its data lives; kept
            # only to tell which methods use it beside the other attributes (no fix then)
            state.reads.add(_ASKED + name, node, frame)
            return
        if _list_method(ancestors):
            return  # `self.paths.append(p)`: no tensor has the method; the name holds a list there
        if _written_into(ancestors) or _cast_where_it_is(ancestors, self.facts):
            # `self.pe[:, 0::2] = v` copies v into the table, and `self.pe = self.pe.to(dtype=d)`
            # keeps it where it is: neither meets what the table lives beside
            state.reads.add(_ASKED + name, node, frame)
            return
        local = self._locals.get(frame.node)
        if local is None:
            local = self._locals[frame.node] = _Locals(frame.node, frame.self_name, self.facts)
        state.read_in.setdefault(name, set()).add(frame.method)
        if _in_buffer_registration(ancestors, frame.self_name):
            state.registered.add(name)
        state.read_paths.setdefault(name, []).append((tuple(ancestors), frame.self_name, local))
        state.reads.add(name, node, frame)

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        if frame is None or not frame.in_module_class:
            return
        if syntax.is_base_init(node):
            self._functions[frame].after_init = True

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.ctx.function
        self._functions.pop(frame)
        state = self._classes.get(frame.klass) if frame is not None and frame.in_module_class else None
        if state is not None and state.reads is not None:
            state.reads.leave_function(frame)
        self._locals.pop(node, None)

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
        state = self._functions[frame]
        env, integral_names = state.kinds, state.integral_names
        if state.places is None:
            state.places = {**_forward_input_attributes(frame, self.facts), **_input_places(frame)}
        held = self.values.value(value, env, frame.self_name, methods, state.places)
        kind = held.kind if held.kind in (values.TENSOR, values.CONTAINER) else None
        with_inputs = held.place == values.PARAMETERS and frame.method not in (None, "__init__")
        integral = kind == TENSOR and is_integral(value, integral_names, self.facts)
        properties = self.facts.properties(frame.klass.node)
        for target in targets:
            if isinstance(target, (cst.Tuple, cst.List)):  # `self.a, self.b = None, None`: attributes taken
                for name, part in _unpacked(target, value):  # `x, y = z[:, :-1], z[:, 1:]`
                    part_place = self.values.value(part, env, frame.self_name, methods, state.places).place if part is not value \
                        else held.place
                    _set_place(state.places, name, part_place)
                self._classes[frame.klass].plain.update(
                    a for a in (frame.self_attribute(t) for t in syntax.unpacked_targets(target)) if a is not None)
                continue
            attribute = frame.self_attribute(target)
            if attribute is not None and frame.method != "__init__":
                _set_place(state.places, f"{frame.self_name}.{attribute}", held.place)
                if with_inputs:
                    self._classes[frame.klass].input_sets.add(id(statement))
            if isinstance(target, cst.Name):
                _set_place(state.places, target.value, held.place)
            if attribute is not None:
                if attribute in properties:
                    continue  # a property's setter decides where the value goes: not a plain attribute
                if kind is not None:
                    after_init = frame.method != "__init__" or state.after_init
                    local = value.value if isinstance(value, cst.Name) and value.value in state.made else None
                    made = (state.made[local], f"`{local}` is made") if local else (value, self._made_clause(value))
                    klass = self._classes[frame.klass]
                    klass.candidates.append(
                        _Candidate(target, statement, value, frame.self_name, after_init, kind == TENSOR, integral, made,
                                   tuple(self.ctx.ancestors), frame.method,
                                   not isinstance(value, cst.IfExp) or all(  # the value itself was `held`
                                       syntax.dotted_name(arm) == "None"  # `register_buffer` takes None
                                       or self.values.value(arm, env, frame.self_name, methods, state.places).kind == TENSOR
                                       for arm in _arms(value)))
                    )
                    if with_inputs:  # decided at the class's end, once it is known whether this runs at forward time
                        if klass.reads is None:
                            klass.reads = ForwardTimeSites(self.ctx[ForwardTime])
                        klass.reads.add(_WITH_INPUTS + attribute, target, frame)
                else:  # None, a number, a Parameter, a submodule: register_buffer would raise KeyError
                    klass = self._classes[frame.klass]
                    klass.plain.add(attribute)
                    made = self.facts.resolve(value.func) or "" if isinstance(value, cst.Call) else ""
                    if names.makes_nn_object(made):
                        if made in values.PARAMETER_CLASSES:
                            klass.trained.add(attribute)
                        # `self.t = torch.rand(n); self.t *= s; self.t = nn.Parameter(self.t)` (or
                        # `nn.Embedding.from_pretrained(self.t)`): the plain tensor lives only until the
                        # next statements of the same block make it a parameter or a submodule
                        block = _block_made_parameter(self.ctx.ancestors, attribute, frame.self_name, self.facts)
                        klass.candidates = [c for c in klass.candidates if not (
                            c.target.attr.value == attribute and _runs_in_block(c.ancestors, block))]
                    elif not (syntax.is_number_literal(value) or syntax.string_value(value) is not None
                              or isinstance(value, cst.Name) and value.value in ("None", "True", "False")):
                        klass.untrained.add(attribute)
            elif isinstance(target, cst.Name):
                env[target.value] = kind
                if kind is not None:
                    state.made[target.value] = value
                else:
                    state.made.pop(target.value, None)
                if integral:
                    integral_names.add(target.value)
                else:
                    integral_names.discard(target.value)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        state = self._classes.pop(self.ctx.klass) or _ClassState()
        existing = self._existing_attributes(node, state.plain)
        self.attributes[node.name.value] = existing
        lightning = self._is_lightning_module(node)
        if lightning:
            self.lightning_classes.add(node.name.value)
        if not state.candidates or self._moves_tensor_attributes(node) or self.facts.stays_on_default_device:
            return  # (a `__setattr__` of the class or of a base registers its tensors, or its `_apply` moves them)
        moved_by_hand = self._moved_by_hand(node)
        buffers = self.facts.buffers(node)
        info = self.facts.class_info(node)
        loader_time = _loader_time_methods(info)
        class_methods = info.methods if info is not None else {}
        keeps_tensors = self.facts.keeps_its_tensors(node)
        recorded = scan_class(self.facts, node)
        # the reads of each flagged attribute that move it right there, or after an earlier move
        moving = {}
        for name in {c.target.attr.value for c in state.candidates}:
            moving[name] = {
                id(path[-1]) for path, self_name, local in state.read_paths.get(name, ())
                if _moved_at_read(list(path), self_name, self.facts, local)
                or _moved_earlier(list(path), name, self_name, self.facts, local)
            }
        # An attribute set in `__init__` and in another method is fixed in `__init__` only: once a
        # buffer, a later `self.NAME = t` sets the buffer, and registering it again elsewhere while
        # `__init__` still sets a plain attribute raises KeyError.
        methods_of: dict[str, set[str]] = {}
        for candidate in state.candidates:
            methods_of.setdefault(candidate.target.attr.value, set()).add(candidate.method)

        def elsewhere(candidate: _Candidate) -> bool:
            return len(methods_of[candidate.target.attr.value]) > 1 and candidate.method != "__init__"
        found = []
        for candidate in state.candidates:
            name = candidate.target.attr.value
            # reads in `__init__` run before any `model.to()`: only the later ones need a move; a
            # read in the value of the store that makes the tensor (`self.ids =
            # torch.tensor(self.ids)`) reads what it is made from, not the tensor
            making = {id(c.value) for c in state.candidates if c.target.attr.value == name}
            reads_of = [path for path, _, _ in state.read_paths.get(name, ())
                        if not syntax.in_init(path) and not any(id(n) in making for n in path)]
            moved_at_every_read = bool(reads_of) and all(id(path[-1]) in moving[name] for path in reads_of)
            if name in buffers or moved_at_every_read or name in moved_by_hand:
                continue
            read_in = state.read_in.get(name, set())
            if read_in <= {"__init__"} and name not in _read_after_init(self.facts):
                continue  # read by nothing that runs after construction: it meets no input
            if _set_before_every_read(candidate, [path for path, _, _ in state.read_paths.get(name, ())], class_methods):
                continue  # a value of one call, not state that outlives it
            if name in state.registered and read_in <= {"__init__"}:
                continue  # a host copy of a tensor registered as a buffer under another name, used only there
            if read_in & loader_time and read_in <= loader_time | {"__init__"}:
                continue  # read only where a DataLoader runs the class's methods on host batches
            if lightning and name == "example_input_array":  # Lightning moves it to the module's device
                continue
            if _made_on_recorded_device(candidate.made[0], candidate.self_name, recorded, self.facts):
                continue  # placed by the device the class records, with all it makes there (DEV012's concern)
            taken = existing is not None and name in existing
            # A buffer follows the module away from the host batches a loader-time method meets it with.
            # Under an `_apply` that moves nothing, a buffer stays where the attribute stays: no fix.
            fix = None if existing is None or taken or read_in & loader_time or keeps_tensors or elsewhere(candidate) \
                else _register_buffer_fix(candidate, name, self._buffer_class(candidate))
            if fix is not None and _meets_cpu_local(state.read_paths.get(name, ()), self.facts):
                fix = None  # registered, it would move away from a CPU tensor made where it is read
            found.append((candidate, self._message(name, candidate.single_tensor, taken), fix))
        reads = state.reads
        # Attributes that move otherwise than a buffer would: an `nn.Parameter` on one path and a
        # plain value on another, or a flagged attribute that gets no fix (but for the assignments
        # outside `__init__` of one fixed in `__init__`: those set the buffer it becomes).
        apart = (state.trained & state.untrained) | {
            c.target.attr.value for c, _, fix in found if fix is None and not elsewhere(c)}

        def report() -> None:
            """Once it is known which reads run at forward time: each finding names where its tensor
            is made and where forward-time code reads it (where it meets the inputs' device)."""
            for candidate, message, fix in found:
                name = candidate.target.attr.value
                if reads is not None and any(t is candidate.target for t, _ in reads.at_forward_time(_WITH_INPUTS + name)) \
                        and _renewed_at_every_call(candidate, state.input_sets):
                    continue  # computed afresh from the inputs at every forward call: it lives where they do
                uses = [(read, method) for read, method in (reads.at_forward_time(name) if reads is not None else [])
                        if id(read) not in moving[name]]
                if fix is not None and (
                        _read_beside(name, uses + list(reads.at_forward_time(_ASKED + name) if reads else []), apart, reads)
                        or _read_beside_after_init(name, apart, state.read_paths)):
                    fix = None  # registered alone, it would move away from a sibling that stays
                related = [candidate.made, *((read, f"read in `{method}`") for read, method in uses[:MAX_READS_SHOWN])]
                self.report(candidate.target, message, fix, related=related)

        if reads is None:
            report()
        else:
            reads.when_all_known(report)

    def _made_clause(self, value: cst.BaseExpression) -> str:
        """`torch.zeros()` makes the tensor; else the tensor is made."""
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and self.facts.resolve(value.func) is None:
            value = value.func.value  # `torch.arange(n).float()`: the factory
        if isinstance(value, cst.Call) and (self.facts.resolve(value.func) or "").startswith("torch."):
            # only a factory decides the device; another torch function computes where its inputs are
            where = "" if syntax.keyword(value, "device") or self.facts.is_tensor_source(value) is None else " on the CPU"
            return f"`{syntax.dotted_name(value.func)}()` makes the tensor{where}"
        return "the tensor is made"

    def _moved_by_hand(self, node: cst.ClassDef) -> set[str]:
        """The attributes of this class that an override of `_apply` in this file reassigns, so that
        the module moves them itself with every `model.to()`, `.cuda()` or `.half()`: on `self` in
        this class or a same-file base (`self.grid = fn(self.grid)`); on another object whose class
        is this one or a same-file base of it (`m.grid = list(map(fn, m.grid))` with `m =
        self.head` and `self.head = Detect(...)`, or under `isinstance(m, Detect)`); on another
        object of a class not known, in any class but the override's own."""
        if self._apply_moves is None:
            self._apply_moves = [move for info in self.facts.classes.values()
                                 for method in info.methods.get("_apply", ()) for move in _apply_moves(info, method, self.facts)]
        lineage = self._lineage(node)
        return {
            attribute for classes, owner, attribute in self._apply_moves
            if (classes & lineage if classes is not None else owner not in lineage)
        }

    def _moves_tensor_attributes(self, node: cst.ClassDef) -> bool:
        """Whether the class or a base defines a `__setattr__` that registers what it is given as
        a buffer or a parameter (`if isinstance(value, Tensor): self.register_buffer(name,
        value)`), or an `_apply` that walks its `__dict__` (moving each tensor in it): a base of
        this file, or one that the project defines in another file."""
        lineage = self._lineage(node)  # with the names of its bases from other files
        infos = [info for info in self.facts.classes.values() if info.name in lineage]
        if any(_registering_setattr(d) for info in infos for d in info.methods.get("__setattr__", ())) \
                or any(_walks_its_dict(d) for info in infos for d in info.methods.get("_apply", ())):
            return True
        imported = lineage - {info.name for info in self.facts.classes.values()}
        return any(self.ctx.project.moves_tensor_attributes(base.rsplit(".", 1)[-1]) for base in sorted(imported)
                   if not self.facts.from_outside_projects(base))

    def _lineage(self, node: cst.ClassDef) -> set[str]:
        """The class's name and those of its bases, through its same-file bases, transitively."""
        names_, pending = set(), [node.name.value]
        while pending:
            name = pending.pop()
            if name in names_:
                continue
            names_.add(name)
            pending.extend(base for info in self.facts.classes.values() if info.name == name
                           for base in info.base_names if base is not None)
        return names_

    def _message(self, name: str, single_tensor: bool, taken: bool) -> str:
        nn_buffer = self.ctx.torch_at_least(2, 5)
        if not single_tensor:
            return (f"`self.{name}` holds tensors in a plain container, which `model.to(device)` leaves behind; "
                    + ("make each tensor an `nn.Buffer`" if nn_buffer else "register each tensor as a buffer")
                    + ", or stack them into one")
        advice = (
            (f"make it an `nn.Buffer` under a name not already taken (`{name}` is already an attribute)" if nn_buffer
             else f"register it as a buffer under a name not already taken (`{name}` is already an attribute)")
            if taken else (f"register it with `self.{name} = nn.Buffer(...)`" if nn_buffer
                           else f'register it with `self.register_buffer("{name}", ...)`')
        )
        return f"`self.{name}` holds a tensor as a plain attribute, which `model.to(device)` leaves behind; {advice}"

    def _is_lightning_module(self, node: cst.ClassDef) -> bool:
        """A base named `LightningModule` (`pl.LightningModule`, `L.LightningModule`), or a class of
        this file that is one."""
        for base in node.bases:
            dotted = syntax.dotted_name(base.value)
            if dotted is not None and (dotted.rsplit(".", 1)[-1] == "LightningModule" or dotted in self.lightning_classes):
                return True
        return False

    def _buffer_class(self, candidate: _Candidate) -> Optional[cst.BaseExpression]:
        """`nn.Buffer` as this file can name it, where the target torch has it (2.5); else None."""
        if not self.ctx.torch_at_least(2, 5):
            return None
        # Only a name bound where the assignment runs (not an import below the class, nor under `__main__`).
        spelled = self.facts.spelling("torch.nn.Buffer", bound=lambda name: name_bound_at(name, candidate.ancestors))
        return cst.parse_expression(spelled) if spelled is not None else None

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


MAX_READS_SHOWN = 3  # forward-time reads a finding names


# the key under which a class's sites record the assignments of `self.NAME` made from the inputs
_WITH_INPUTS = "="
# The key prefix of the reads that ask only what the tensor is (`self.NAME.shape`).
_ASKED = "?"


def _registering_setattr(definition: cst.FunctionDef) -> bool:
    return any(isinstance(n, cst.Attribute) and n.attr.value in REGISTERING_NAMES for n in syntax.walk(definition))


def _walks_its_dict(definition: cst.FunctionDef) -> bool:
    """An `_apply` that reads the object's own `__dict__` (`self.__dict__.items()`, `vars(self)`;
    not `vars(feature)` of another object)."""
    self_name = syntax.instance_self(definition)
    return self_name is not None and any(
        isinstance(n, cst.Attribute) and n.attr.value == "__dict__" and syntax.dotted_name(n.value) == self_name
        or isinstance(n, cst.Call) and syntax.dotted_name(n.func) == "vars" and len(n.args) == 1
        and syntax.dotted_name(n.args[0].value) == self_name
        for n in syntax.walk(definition))


def _input_places(frame) -> dict[str, str]:
    """A method's parameters (but `self`, `*args`, `**kwargs` and those annotated as Python
    numbers), each living with the inputs (`values.PARAMETERS`); none for `__init__`."""
    if frame.method in (None, "__init__"):
        return {}
    scalars = values.scalar_annotated(frame.node)
    return {p.name.value: values.PARAMETERS for p in syntax.all_params(frame.node.params)
            if p.star not in ("*", "**") and p.name.value not in scalars and p.name.value != frame.self_name}


def _forward_input_attributes(frame, facts) -> dict[str, str]:
    """`self.NAME` (by the method's own name for itself) living with the inputs, for the other
    methods of a class whose `forward` sets it from its inputs (`self.mask = x[1]`) and that never
    sets it otherwise outside `__init__`: what those methods compute from it is per-call data."""
    if frame.method in (None, "__init__", "forward") or frame.self_name is None:
        return {}
    memo = facts.memo.setdefault("forward input attributes", {})
    klass = frame.klass.node
    if id(klass) not in memo:
        memo[id(klass)] = _attributes_set_from_forward_inputs(klass)
    return {f"{frame.self_name}.{name}": values.PARAMETERS for name in memo[id(klass)]}


def _attributes_set_from_forward_inputs(klass: cst.ClassDef) -> frozenset[str]:
    from_inputs, otherwise = set(), set()
    for method in klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ():
        if not isinstance(method, cst.FunctionDef) or method.name.value == "__init__":
            continue
        self_name = syntax.instance_self(method)
        inputs = set(syntax.param_names(method.params)) - {self_name}
        for node in syntax.walk(method.body):
            if not isinstance(node, cst.Assign):
                continue
            for target in node.targets:
                for part in syntax.unpacked_targets(target.target):
                    if isinstance(part, cst.Attribute) and isinstance(part.value, cst.Name) and part.value.value == self_name:
                        read = _input_read(node.value, inputs) if len(node.targets) == 1 and part is target.target else None
                        (from_inputs if method.name.value == "forward" and read else otherwise).add(part.attr.value)
    return frozenset(from_inputs - otherwise)


def _input_read(value: cst.BaseExpression, inputs: set[str]) -> bool:
    """An input itself, or an item of it (`x[1]`, `batch["mask"]`)."""
    while isinstance(value, cst.Subscript):
        value = value.value
    return isinstance(value, cst.Name) and value.value in inputs


def _renewed_at_every_call(candidate: _Candidate, input_sets: set[int]) -> bool:
    """Whether the method that makes the candidate sets `self.NAME` from its inputs at every
    call: in a statement of its own body, or in every arm of an `if`/`else` there (a lazy cache
    set only under `if self.NAME is None:` is not renewed: it outlives the call)."""
    function = syntax.enclosing_function(candidate.ancestors)
    if function is None or not isinstance(function.body, cst.IndentedBlock):
        return False
    return _sets_from_inputs(function.body, candidate.target.attr.value, candidate.self_name, input_sets)


def _sets_from_inputs(block, name: str, self_name: Optional[str], input_sets: set[int]) -> bool:
    """A statement of `block` sets `self.NAME` from the inputs, or an `if` there does in every arm."""
    for statement in block.body:
        if isinstance(statement, cst.SimpleStatementLine) and _sets(statement, name, self_name) \
                and any(id(small) in input_sets for small in statement.body):
            return True
        bodies = _arm_bodies(statement) if isinstance(statement, cst.If) else None
        if bodies is not None and all(_sets_from_inputs(body, name, self_name, input_sets) for body in bodies):
            return True
    return False


def _arm_bodies(node: cst.If) -> Optional[list[cst.BaseSuite]]:
    """The bodies of an `if`/`elif`/`else` chain, or None where it ends without an `else` (there
    a call may run none of them)."""
    bodies: list[cst.BaseSuite] = []
    arm: Optional[cst.CSTNode] = node
    while isinstance(arm, cst.If):
        bodies.append(arm.body)
        arm = arm.orelse
    return bodies + [arm.body] if isinstance(arm, cst.Else) else None


def _unpacked(target: cst.Tuple | cst.List, value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """The local names a tuple target binds, each with its part of a tuple value of the same
    length, or with the whole value (the parts of a value live where it does)."""
    elements = [e.value for e in target.elements]
    if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements) \
            and not any(isinstance(e, cst.StarredElement) for e in value.elements):
        pairs = zip(elements, (e.value for e in value.elements))
    else:
        pairs = ((e, value) for e in elements)
    return [(t.value, part) for t, part in pairs if isinstance(t, cst.Name)]


def _set_place(places: dict[str, str], key: str, place: Optional[str]) -> None:
    if place == values.PARAMETERS:
        places[key] = place
    else:
        places.pop(key, None)


def _set_before_every_read(candidate: _Candidate, read_paths, methods) -> bool:
    """Whether a method other than `__init__` (the one that makes the candidate, or for a
    candidate made in `__init__`, any method of the class) sets `self.NAME` unconditionally, in a
    statement of its own body, before every read of it outside `__init__`, and no other method
    reads it: each call computes it afresh before using it, so no `model.to()` between calls can
    leave it behind (where it is made on the CPU, DEV003 reports the factory), and a value set in
    `__init__` is never read once the module is built."""
    name, self_name = candidate.target.attr.value, candidate.self_name
    if candidate.method != "__init__":
        function = syntax.enclosing_function(candidate.ancestors)
        return function is not None and bool(read_paths) and _set_first_in(function, name, self_name, read_paths)
    later = [path for path in read_paths if not syntax.in_init(path)]
    return bool(later) and any(
        _set_first_in(method, name, syntax.self_name(method), later)
        for method_name, definitions in methods.items() if method_name != "__init__" for method in definitions)


def _set_first_in(function: cst.FunctionDef, name: str, self_name: Optional[str], read_paths) -> bool:
    """Whether every read at `read_paths` is in `function`'s own body, after a statement of that
    body that sets `self.NAME`."""
    if not isinstance(function.body, cst.IndentedBlock):
        return False
    body = function.body.body
    first = next((k for k, statement in enumerate(body) if _sets(statement, name, self_name)), None)
    if first is None:
        return False
    for path in read_paths:
        k = next((i for i, node in enumerate(path) if node is function), None)
        if k is None or k + 2 >= len(path) or path[k + 1] is not function.body:
            return False  # read in another method
        if next(i for i, statement in enumerate(body) if statement is path[k + 2]) <= first:
            return False  # read before it is set (or in the statement that sets it)
    return True


def _sets(statement: cst.BaseStatement, name: str, self_name: Optional[str]) -> bool:
    """`self.NAME = ...` as a whole statement."""
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Assign) and any(
            isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
            and t.target.value.value == self_name and t.target.attr.value == name for t in small.targets)
        for small in statement.body)


def _read_after_init(facts) -> frozenset[str]:
    """The attribute names this file reads (`obj.NAME` loaded, or `getattr(obj, "NAME")`) outside
    `__init__` methods: where a tensor attribute can meet the inputs once the module is built. A
    call `obj.NAME(...)` is no such read: a tensor is not callable (`x.mean()` reads no `self.mean`).
    Worked out once per file, and only for a file that has an attribute no method reads."""
    found = facts.memo.get("dev004 read after init")
    if found is None:
        found = set()
        stack: list[tuple[cst.CSTNode, Optional[cst.CSTNode]]] = [(facts.module, None)]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, cst.FunctionDef) and node.name.value == "__init__":
                continue
            if isinstance(node, cst.Attribute) and not _stored(node, parent) \
                    and not (isinstance(parent, cst.Call) and parent.func is node):  # `x.mean()` calls a method
                found.add(node.attr.value)
            elif isinstance(node, cst.Call) and syntax.dotted_name(node.func) == "getattr" and len(node.args) > 1:
                name = node.args[1].value
                if isinstance(name, cst.SimpleString):
                    found.add(name.raw_value)  # not `evaluated_value`: `ast.literal_eval` leaves a reference cycle
            stack.extend((child, node) for child in syntax.children(node))
        found = facts.memo["dev004 read after init"] = frozenset(found)
    return found


def _list_method(ancestors) -> bool:
    """`self.NAME.append(v)` (`extend`, `insert`, `remove`): a method no tensor has."""
    node, method, call = ancestors[-1], ancestors[-2], ancestors[-3] if len(ancestors) > 2 else None
    return isinstance(method, cst.Attribute) and method.value is node and method.attr.value in _LIST_METHODS \
        and isinstance(call, cst.Call) and call.func is method


_LIST_METHODS = frozenset({"append", "extend", "insert", "remove"})


def _written_into(ancestors) -> bool:
    """`self.NAME[i] = v`, `self.NAME[:, 0::2] = v`: a write by integers and slices (a copy that
    works across devices), not a read."""
    node, subscript, target = ancestors[-1], ancestors[-2], ancestors[-3]
    if not (isinstance(subscript, cst.Subscript) and subscript.value is node
            and isinstance(target, cst.AssignTarget) and target.target is subscript):
        return False
    for element in subscript.slice:
        if isinstance(element.slice, cst.Index):
            if not syntax.is_number_literal(element.slice.value):
                return False
        elif any(p is not None and not syntax.is_number_literal(p)
                 for p in (element.slice.lower, element.slice.upper, element.slice.step)):
            return False
    return True


def _cast_where_it_is(ancestors, facts) -> bool:
    """`self.NAME = self.NAME.to(dtype=x.dtype)` (or `.to(torch.float16)`): cast, stored back."""
    if len(ancestors) < 4:
        return False
    node, method, call, statement = ancestors[-1], ancestors[-2], ancestors[-3], ancestors[-4]
    return isinstance(method, cst.Attribute) and method.value is node and isinstance(call, cst.Call) \
        and call.func is method and values.is_dtype_only_move(call, facts) \
        and isinstance(statement, cst.Assign) and statement.value is call and len(statement.targets) == 1 \
        and statement.targets[0].target.deep_equals(node)


def _stored(node: cst.Attribute, parent: Optional[cst.CSTNode]) -> bool:
    return isinstance(parent, (cst.AssignTarget, cst.AnnAssign)) and parent.target is node


def _read_beside(name: str, uses: list, apart: set[str], reads: Optional[ForwardTimeSites]) -> bool:
    """Whether a forward-time method reading `name` also reads an attribute of `apart` (one that
    stays where it is, or moves only under a flag)."""
    methods = {method for _, method in uses}
    return reads is not None and any(
        method in methods for other in apart - {name} for _, method in reads.at_forward_time(other)
    )


def _read_beside_after_init(name: str, apart: set[str], read_paths: dict) -> bool:
    """Whether a statement run after construction (at forward time or not) computes with `name`
    and an attribute of `apart` (`-torch.sqrt(self.weights) * self.goal`; not as two items of a
    display, `return self.a, self.b`)."""
    def statements(attribute: str) -> set:
        return {id(next(n for n in reversed(path) if isinstance(n, cst.BaseSmallStatement)))
                for path, _, _ in read_paths.get(attribute, ())
                if not syntax.in_init(path) and not isinstance(path[-2], cst.Element)
                and any(isinstance(n, cst.BaseSmallStatement) for n in path)}

    mine = statements(name)
    return any(mine & statements(other) for other in apart - {name})


def _meets_cpu_local(read_paths, facts) -> bool:
    """Whether a read of the attribute outside `__init__` meets, in an operator or a torch call
    (an element of its list or tuple too), a factory without `device=`, written there or bound
    to a local name (`shape = torch.tensor(x.shape[1:])` then `shape < self.modes`;
    `torch.cat((self.weights, torch.ones(n)))`): that tensor is on the CPU wherever the module
    is, so the attribute, moved with the module as a buffer, would no longer meet it there."""
    for path, _, local in read_paths:
        if syntax.in_init(path):
            continue
        read, k = path[-1], len(path) - 2
        while k > 0 and isinstance(path[k], (cst.ComparisonTarget, cst.Element, cst.List, cst.Tuple)):
            read, k = path[k], k - 1
        holder = path[k]
        if isinstance(holder, cst.Comparison):
            others = [holder.left, *(t.comparator for t in holder.comparisons)]
        elif isinstance(holder, cst.BinaryOperation):
            others = [holder.left, holder.right]
        elif isinstance(holder, cst.Arg) and k > 0 and isinstance(path[k - 1], cst.Call) \
                and (facts.resolve(path[k - 1].func) or "").startswith("torch."):
            others = [e.value if isinstance(e, cst.Element) else e for a in path[k - 1].args
                      for e in (a.value.elements if isinstance(a.value, (cst.List, cst.Tuple)) else [a.value])]
        else:
            continue
        cpu = values.cpu_factory_names(local.func, facts)
        for other in others:
            if other is read or any(node is read for node in syntax.walk(other)):
                continue
            if isinstance(other, cst.Name) and other.value in cpu or any(
                    isinstance(node, cst.Call) and facts.is_tensor_source(node) is not None
                    and syntax.keyword(node, "device") is None
                    and not any(isinstance(outer, cst.Call) and values.is_move(outer, facts) for outer in inner[:-1])
                    for node, inner in syntax.walk_with_paths(other, [])):
                return True  # (not `torch.ones(n).to(self.device)`: moved on the spot)
    return False


def _made_on_recorded_device(made: cst.CSTNode, self_name: Optional[str], recorded, facts) -> bool:
    """Whether the tensor is made on the device the class records for itself (`torch.zeros(n,
    device=self.device)`, `torch.tensor(v).to(self.device)`, a method chain or arithmetic on
    such): every tensor made in the expression is placed there. The class places what it makes
    by that value, not by `model.to()`; a buffer would part from the rest."""
    if self_name is None or not isinstance(made, cst.BaseExpression):
        return False

    def names_recorded_device(arg: Optional[cst.Arg]) -> bool:
        value = arg.value if arg is not None else None
        return isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) \
            and value.value.value == self_name and recorded.recorded_device(value.attr.value, facts) is not None

    placed: set[int] = set()  # the nodes under a `.to(self.device)`: all they make lands there
    sources = 0
    for node in syntax.walk(made):  # outer calls before those in their receivers
        if not isinstance(node, cst.Call):
            continue
        if values.is_move(node, facts) and isinstance(node.func, cst.Attribute):
            if names_recorded_device(syntax.keyword(node, "device") or next(iter(syntax.positional(node)), None)):
                placed.update(id(inner) for inner in syntax.walk(node.func.value))
            continue
        if facts.is_tensor_source(node) is None:
            continue
        sources += 1
        if not names_recorded_device(syntax.keyword(node, "device")) and id(node) not in placed:
            return False
    return sources > 0


def _in_buffer_registration(ancestors: list[cst.CSTNode], self_name: Optional[str]) -> bool:
    """Whether the read at `ancestors[-1]` is (part of) an argument of `self.register*buffer*(...)`."""
    for node, inner in zip(reversed(ancestors[:-1]), reversed(ancestors[1:])):
        if isinstance(node, cst.Call):
            if facts_module.is_buffer_registration(node, self_name) and isinstance(inner, cst.Arg):
                return True
        elif isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


def _loader_time_methods(info) -> set[str]:
    """The methods of the class handed to a DataLoader as `collate_fn=self.NAME`, and those they
    call on `self`, transitively: they run in the loader, on host batches, not at forward time."""
    if info is None:
        return set()
    handed = set()
    for definitions in info.methods.values():
        for definition in definitions:
            for node in syntax.walk_expressions(definition.body):
                if isinstance(node, cst.Call):
                    arg = syntax.keyword(node, "collate_fn")
                    value = arg.value if arg is not None else None
                    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) \
                            and value.value.value == syntax.self_name(definition):
                        handed.add(value.attr.value)
    reached, pending = set(), [name for name in handed if name in info.methods]
    while pending:
        method = pending.pop()
        if method in reached:
            continue
        reached.add(method)
        for definition in info.methods.get(method, ()):
            self_name = syntax.self_name(definition)
            for node in syntax.walk_expressions(definition.body):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                        and isinstance(node.func.value, cst.Name) and node.func.value.value == self_name \
                        and node.func.attr.value in info.methods:
                    pending.append(node.func.attr.value)
    return reached


def _moved_earlier(ancestors: list[cst.CSTNode], name: str, self_name: Optional[str], facts, local: "_Locals") -> bool:
    """Whether a statement before the read, in its block or an enclosing one of the same function,
    reassigns the attribute moved to a tensor's device (`self.NAME = self.NAME.to(x.device)`),
    itself or as the body of an `if` (no `else`) that tests where the attribute is (`if
    self.NAME.device != x.device:`: where the test fails, it is there already): the read then
    finds it there, at every call."""
    starts = [i for i, node in enumerate(ancestors) if isinstance(node, (cst.FunctionDef, cst.Lambda))]
    if not starts or not isinstance(ancestors[starts[-1]], cst.FunctionDef):
        return False
    for earlier in syntax.earlier_statements(ancestors):
        statements = [earlier]
        if isinstance(earlier, cst.If) and earlier.orelse is None and _tests_attribute(earlier.test, name, self_name):
            statements += list(syntax.block_statements(earlier.body))
        if any(_moves_itself(small, name, self_name, facts, local)
               for statement in statements for small in syntax.small_statements(statement)):
            return True
    return False


def _tests_attribute(test: cst.BaseExpression, name: str, self_name: Optional[str]) -> bool:
    """The test reads where the attribute is (`self.NAME.device`, `self.NAME.is_cuda`)."""
    return any(isinstance(n, cst.Attribute) and n.attr.value in ("device", "is_cuda")
               and isinstance(n.value, cst.Attribute) and n.value.attr.value == name
               and isinstance(n.value.value, cst.Name) and n.value.value.value == self_name for n in syntax.walk(test))


def _moves_itself(small: cst.BaseSmallStatement, name: str, self_name: Optional[str], facts, local: "_Locals") -> bool:
    """`self.NAME = self.NAME.to(x.device)` (after integer indices and slices too)."""
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)):
        return False
    target = small.targets[0].target
    if not (isinstance(target, cst.Attribute) and target.attr.value == name and isinstance(target.value, cst.Name)
            and target.value.value == self_name):
        return False
    chain: list[cst.CSTNode] = [small.value, small.value.func]
    node = small.value.func.value if isinstance(small.value.func, cst.Attribute) else None
    while isinstance(node, cst.Subscript):
        chain.append(node)
        node = node.value
    if not (isinstance(node, cst.Attribute) and node.attr.value == name and isinstance(node.value, cst.Name)
            and node.value.value == self_name):
        return False
    return _moved_at_read([*chain, node], self_name, facts, local)


def _apply_moves(info, method: cst.FunctionDef, facts) -> list[tuple[Optional[frozenset], str, str]]:
    """(classes covered, the override's class, attribute) for each attribute an `_apply` override
    reassigns: classes covered is the override's own for `self.NAME = ...`, the receiver's class
    (or classes) where known for `m.NAME = ...`, None where not known."""
    self_name = syntax.self_name(method)
    tested: dict[str, set[str]] = {}  # receiver -> classes an `isinstance(receiver, ...)` names
    bound: dict[str, set[str]] = {}  # local name -> classes it is built as, or taken from `self.ATTR` as
    found = []
    for node in syntax.walk_expressions(method.body):
        if isinstance(node, cst.Call) and syntax.dotted_name(node.func) == "isinstance" and len(node.args) == 2:
            receiver = syntax.dotted_name(node.args[0].value)
            kinds = node.args[1].value
            kinds = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
            if receiver is not None:
                tested.setdefault(receiver, set()).update(syntax.last_name(k) or "" for k in kinds)
        elif isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            classes = _built_class(node.value, self_name, info)
            if classes:
                bound.setdefault(node.targets[0].target.value, set()).update(classes)
    for node in syntax.walk_expressions(method.body):
        if not isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            continue
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            for element in syntax.unpacked_targets(target):
                if not isinstance(element, cst.Attribute):
                    continue  # `self.grid[i] = fn(...)` writes into the table: it moves nothing
                receiver = element.value
                if isinstance(receiver, cst.Name) and receiver.value == self_name:
                    found.append((frozenset({info.name}), info.name, element.attr.value))
                    continue
                dotted = syntax.dotted_name(receiver)
                classes = set(tested.get(dotted or "", ()))
                if isinstance(receiver, cst.Name):
                    classes |= bound.get(receiver.value, set())
                else:
                    classes |= _built_class(receiver, self_name, info)
                found.append((frozenset(classes) if classes else None, info.name, element.attr.value))
    return found


def _built_class(value: cst.BaseExpression, self_name: Optional[str], info) -> set[str]:
    """The class names `value` is known to be an instance of: `Detect(...)`, or `self.ATTR` where a
    method of the class assigns `self.ATTR = Detect(...)`."""
    if isinstance(value, cst.Call):
        name = syntax.dotted_name(value.func)
        return {name.rsplit(".", 1)[-1]} if name is not None and name[:1].isupper() else set()
    if not (isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == self_name):
        return set()
    classes = set()
    for definitions in info.methods.values():
        for definition in definitions:
            for node in syntax.walk_expressions(definition.body):
                if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
                    for target in node.targets:
                        if isinstance(target.target, cst.Attribute) and target.target.attr.value == value.attr.value \
                                and isinstance(target.target.value, cst.Name):
                            classes |= _built_class(node.value, None, info)
    return classes


def _moved_at_read(ancestors: list[cst.CSTNode], self_name: Optional[str], facts, local: "_Locals") -> bool:
    """Whether the `self.NAME` read at `ancestors[-1]` is moved right there to a device taken from a
    tensor: `self.NAME.to(x.device)`, `.to(x)`, `.to(device=x.device)`, `.type_as(x)`, `.to(device)`
    with `device` a local name bound to a tensor's device (`device = x.device`), after integer
    indices and slices too (`self.NAME[:, :n].to(x.device)`, `self.NAME[0].to(x)`), and as a branch of
    a conditional expression (`(self.NAME if c else t).type_as(x)`). Any other index
    (`self.NAME[t].to(x.device)`) is taken on the CPU table before the move: with a device `t` it
    raises there."""
    read, index = ancestors[-1], len(ancestors) - 2
    while isinstance(ancestors[index], cst.Subscript) and ancestors[index].value is read:
        if not all(_moves_nothing(element, facts, local) for element in ancestors[index].slice):
            return False
        read, index = ancestors[index], index - 1
    while True:
        read, index = values.through_casts(ancestors, index, read, facts)  # `cast(Tensor, self.NAME).to(x)`
        if isinstance(ancestors[index], cst.IfExp) and ancestors[index].test is not read:
            read, index = ancestors[index], index - 1  # `(self.NAME if c else other).type_as(x)`: either is moved
        elif _keeps_device_of(ancestors, index, read, facts):
            read, index = ancestors[index - 1], index - 2  # `torch.clone(self.NAME).to(x.device)`
        else:
            break
    method, call = ancestors[index], ancestors[index - 1]
    if not (isinstance(method, cst.Attribute) and method.value is read and method.attr.value in ("to", "type_as")
            and isinstance(call, cst.Call) and call.func is method and not syntax.has_star_args(call)):
        return False
    device = syntax.keyword(call, "device") if method.attr.value == "to" else None
    if device is None:
        device = next(iter(syntax.positional(call)), None)
    if device is None:
        return False
    value = device.value
    if values.is_tensor_device(value, self_name):  # `x.device`, `self.weight.device`
        return True
    if method.attr.value == "type_as" and _rooted_in_self(value, self_name):
        return True  # `.type_as(self.generator.model[0].weight)`: a tensor of this object
    if isinstance(value, cst.Name) and value.value in local.device_names():  # `device = x.device`
        return True
    # `.to(x)`: a local name, not an imported one (`from torch import float16`)
    return (device.keyword is None and isinstance(value, cst.Name) and facts.resolve(value) is None
            and values.may_be_tensor(value, self_name))


def _rooted_in_self(value: cst.BaseExpression, self_name: Optional[str]) -> bool:
    """`self.a.b[0].c`: an attribute chain (through indices) that starts at the object itself."""
    if not isinstance(value, (cst.Attribute, cst.Subscript)):
        return False
    while isinstance(value, (cst.Attribute, cst.Subscript)):
        value = value.value
    return self_name is not None and isinstance(value, cst.Name) and value.value == self_name


# torch functions whose result is a tensor where their one tensor argument is (no `device=`)
DEVICE_KEEPING_FUNCTIONS = frozenset({"torch.clone", "torch.as_tensor", "torch.tensor", "torch.detach"})


def _keeps_device_of(ancestors, index: int, read: cst.CSTNode, facts) -> bool:
    """`ancestors[index]` is the only argument of a torch function that makes its result where the
    argument is (`torch.clone(self.NAME)`, `torch.as_tensor(self.NAME)`), with no `device=`."""
    arg, call = ancestors[index], ancestors[index - 1]
    return (isinstance(arg, cst.Arg) and arg.value is read and arg.keyword is None and isinstance(call, cst.Call)
            and facts.resolve(call.func) in DEVICE_KEEPING_FUNCTIONS and len(syntax.positional(call)) == 1
            and syntax.keyword(call, "device") is None and not syntax.has_star_args(call))


def _moves_nothing(element: cst.SubscriptElement, facts, local: "_Locals") -> bool:
    """An index that takes a part of a tensor wherever the tensor is: a slice, an integer (a Python
    scalar, a `for i in range(...)` name), `None` or `...`."""
    index = element.slice
    if isinstance(index, cst.Slice):
        return True
    if index.star is not None:
        return False
    value = index.value
    if isinstance(value, cst.Ellipsis) or (isinstance(value, cst.Name) and value.value == "None"):
        return True
    if isinstance(value, cst.Name) and value.value in local.range_names():
        return True
    return values.is_python_scalar(value, facts, local.scalar_names)


class _Locals:
    """What a function's local names hold, asked of one read at a time (computed on first use)."""

    def __init__(self, func: cst.FunctionDef, self_name: Optional[str], facts) -> None:
        self.func, self.self_name, self.facts = func, self_name, facts
        self._scalars: Optional[frozenset] = None
        self._devices: Optional[frozenset] = None
        self._ranges: Optional[frozenset] = None

    def scalar_names(self) -> frozenset:
        if self._scalars is None:
            self._scalars = values.scalar_names(self.func, self.facts)
        return self._scalars

    def device_names(self) -> frozenset:
        if self._devices is None:
            self._devices = values.tensor_device_names(self.func, self.self_name)
        return self._devices

    def range_names(self) -> frozenset:
        if self._ranges is None:
            self._ranges = values.range_names(self.func)
        return self._ranges


def _register_buffer_fix(candidate: _Candidate, name: str, buffer_class: Optional[cst.BaseExpression]) -> Optional[NodeFix]:
    """`self.register_buffer("NAME", EXPR, persistent=False)`, or with `buffer_class` (torch 2.5)
    `self.NAME = nn.Buffer(EXPR, persistent=False)`."""
    statement = candidate.statement
    single_target = isinstance(statement, cst.AnnAssign) or len(statement.targets) == 1
    if not (candidate.after_init and single_target and candidate.single_tensor and candidate.every_arm_a_tensor):
        return None  # `nn.Parameter(t) if learn else t`, `a if isinstance(a, float) else torch.tensor(a)`: no buffer
    applicability = SAFE if candidate.integral else UNSAFE
    if buffer_class is not None:
        buffer = cst.Call(buffer_class, [cst.Arg(candidate.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                         edits.keyword_arg("persistent", cst.Name("False"))])
        return NodeFix(applicability, f"Make `{name}` a non-persistent `nn.Buffer`", statement,
                       statement.with_changes(value=buffer))
    call = edits.method_call(
        candidate.self_name,
        "register_buffer",
        [cst.Arg(edits.string(name)), cst.Arg(candidate.value), edits.keyword_arg("persistent", cst.Name("False"))],
    )
    replacement = cst.Expr(call, semicolon=statement.semicolon)
    # A buffer follows `model.half()` / `model.to(torch.bfloat16)`, the plain attribute did not: only an
    # integer or bool table is sure to come out of such a cast unchanged.
    return NodeFix(applicability, f'Register `{name}` as a non-persistent buffer', statement, replacement)


TENSOR, CONTAINER = values.TENSOR, values.CONTAINER  # a tensor, or a list, tuple or dict holding one


def _arms(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values a conditional expression may give (itself for any other expression)."""
    if isinstance(value, cst.IfExp):
        return _arms(value.body) + _arms(value.orelse)
    return [value]


class TensorValues:
    """Decides whether an expression builds a tensor (or a container of tensors), following
    local names and same-file helpers."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self._returns: dict[cst.FunctionDef, Optional[str]] = {}

    def kind(self, expr: cst.BaseExpression, env: dict[str, Optional[str]], self_name: Optional[str] = None,
             methods: Optional[dict] = None) -> Optional[str]:
        """TENSOR, CONTAINER, or None (no tensor, or not known to be one)."""
        kind = self.value(expr, env, self_name, methods).kind
        return kind if kind in (TENSOR, CONTAINER) else None

    def value(self, expr: cst.BaseExpression, env: dict[str, Optional[str]], self_name: Optional[str] = None,
              methods: Optional[dict] = None, places: Optional[dict[str, str]] = None) -> values.Value:
        """What expr holds and, given `places`, whether it lives with the method's tensor parameters."""
        places = places or {}
        model = values.ValueModel(
            self.facts, lambda name: values.Value(env.get(name), places.get(name)) if name in env or name in places
            else values.UNKNOWN, lambda call: self._returned(call, self_name, methods), in_order=True
        )
        return model.of(expr)

    def _returned(self, call: cst.Call, self_name: Optional[str], methods: Optional[dict]) -> Optional[values.Value]:
        """What a call of a same-file method (`self.m(...)`) or function returns; None for other calls."""
        func = call.func
        if isinstance(func, cst.Attribute):
            if self_name is not None and isinstance(func.value, cst.Name) and func.value.value == self_name:
                defs = (methods or {}).get(func.attr.value, [])
                return values.Value(_all_kinds([self.returned_kind(d, self_name, methods) for d in defs]))
        elif isinstance(func, cst.Name) and func.value not in self.facts.aliases:
            defs = self.facts.module_functions(func.value)
            return values.Value(_all_kinds([self.returned_kind(d, None, None) for d in defs]))
        return None

    def returned_kind(self, func: cst.FunctionDef, self_name: Optional[str], methods: Optional[dict]) -> Optional[str]:
        """What every `return` of func gives (None when one of them gives no tensor)."""
        if func in self._returns:
            return self._returns[func]
        self._returns[func] = None  # recursion guard
        env: dict[str, Optional[str]] = {}
        results = []
        for node in syntax.walk_expressions(func.body):
            if isinstance(node, cst.Yield):  # a generator returns no tensor
                results.append(None)
            elif isinstance(node, cst.Assign):
                value = self.kind(node.value, env, self_name, methods)
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        env[target.target.value] = value
            elif isinstance(node, cst.Return):
                results.append(self.kind(node.value, env, self_name, methods) if node.value is not None else None)
        self._returns[func] = _all_kinds(results)
        return self._returns[func]


def _any_kind(*kinds: Optional[str]) -> Optional[str]:
    """One of several values: a container where any may be one."""
    if CONTAINER in kinds:
        return CONTAINER
    return TENSOR if TENSOR in kinds else None


def _all_kinds(kinds: list[Optional[str]]) -> Optional[str]:
    """A value that is each of `kinds` in turn (every return of a function): None where any is None."""
    if not kinds or None in kinds:
        return None
    return _any_kind(*kinds)


def is_integral(expr: cst.BaseExpression, integral_names: set[str], facts) -> bool:
    """Whether the tensor `expr` builds is known to hold integers or bools."""
    if isinstance(expr, cst.Name):
        return expr.value in integral_names
    if isinstance(expr, cst.Comparison):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return not isinstance(expr.operator, cst.Not) and is_integral(expr.expression, integral_names, facts)
    if isinstance(expr, cst.BinaryOperation):
        return isinstance(expr.operator, INTEGRAL_OPERATORS) and all(
            _is_int_literal(side) or is_integral(side, integral_names, facts) for side in (expr.left, expr.right)
        )
    if isinstance(expr, (cst.Subscript, cst.IfExp)):
        parts = [expr.value] if isinstance(expr, cst.Subscript) else [expr.body, expr.orelse]
        return all(is_integral(part, integral_names, facts) for part in parts)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in ("T", "mT", "data") and is_integral(expr.value, integral_names, facts)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    qualified = facts.resolve(func)
    if qualified in names.TENSOR_SOURCES:
        return _source_is_integral(expr, qualified, facts)
    if not isinstance(func, cst.Attribute) or qualified is not None:
        return False
    method = func.attr.value
    if method in INTEGRAL_CASTS and not expr.args:
        return True
    if method == "to":
        dtype = _dtype_argument(expr, facts)
        if dtype is not None:
            return dtype in INTEGRAL_DTYPES
        if not _moves_only(expr):
            return False
    elif method not in DTYPE_KEEPING_METHODS:
        return False
    return is_integral(func.value, integral_names, facts)


def _source_is_integral(call: cst.Call, source: str, facts) -> bool:
    dtype = syntax.keyword(call, "dtype")
    if dtype is not None:
        return facts.resolve(dtype.value) in INTEGRAL_DTYPES
    if source in INTEGRAL_CONSTRUCTORS or source in INTEGRAL_BY_DEFAULT:
        return True
    args = syntax.positional(call)
    if source == "torch.arange":
        return bool(args) and all(_is_int_literal(a.value) for a in args)
    if source in ("torch.tensor", names.AS_TENSOR):
        return len(args) == 1 and _holds_only_integers(args[0].value)
    return False


def _dtype_argument(call: cst.Call, facts) -> Optional[str]:
    """The dtype `.to(...)` converts to, when it names one."""
    dtype = syntax.keyword(call, "dtype")
    if dtype is not None:
        return facts.resolve(dtype.value) or ""
    for arg in syntax.positional(call):
        qualified = facts.resolve(arg.value)
        if qualified in names.DTYPE_NAMES:
            return qualified
    return None


def _moves_only(call: cst.Call) -> bool:
    """`.to("cuda")`, `.to(device)`, `.to(device=d)`: a device, and nothing that may be a dtype or a tensor."""
    for arg in call.args:
        if arg.star:
            return False
        if arg.keyword is not None:
            if arg.keyword.value not in ("device", "non_blocking", "copy"):
                return False
        elif not (syntax.string_value(arg.value) is not None or "device" in (syntax.last_name(arg.value) or "")):
            return False
    return True


def _is_int_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        expr = expr.expression
    return isinstance(expr, cst.Integer)


def _holds_only_integers(expr: cst.BaseExpression) -> bool:
    """`[1, 2]`, `[[0, 1], [1, 0]]`, `True`: integer or bool literals only."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(
            isinstance(e, cst.Element) and _holds_only_integers(e.value) for e in expr.elements
        )
    return _is_int_literal(expr) or (isinstance(expr, cst.Name) and expr.value in ("True", "False"))


def _block_made_parameter(ancestors, attribute: str, self_name: str, facts) -> Optional[cst.CSTNode]:
    """The block in which `self.NAME = nn.Parameter(...)` makes NAME a parameter for sure: the
    assignment's own block, or the block around an `if` every arm of which makes it one
    (`if learn: self.v = nn.Parameter(self.v) else: self.v = nn.Parameter(self.v, False)`)."""
    path = list(ancestors)
    block_index = max(i for i, n in enumerate(path) if isinstance(n, (cst.IndentedBlock, cst.Module)))
    while block_index >= 2:
        top = syntax.if_chain_top(path, block_index)
        if top is None or not _every_arm_makes_parameter(path[top], attribute, self_name, facts):
            break
        outer = max((i for i in range(top) if isinstance(path[i], (cst.IndentedBlock, cst.Module))), default=None)
        if outer is None:
            break
        block_index = outer
    return path[block_index]


def _every_arm_makes_parameter(node: cst.If, attribute: str, self_name: str, facts) -> bool:
    bodies = _arm_bodies(node)
    return bodies is not None and all(any(
        isinstance(small, cst.Assign) and isinstance(small.value, cst.Call)
        and facts.resolve(small.value.func) in values.PARAMETER_CLASSES
        and any(isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                and t.target.value.value == self_name and t.target.attr.value == attribute for t in small.targets)
        for statement in syntax.block_statements(body) for small in syntax.small_statements(statement))
        for body in bodies)


def _runs_in_block(ancestors, block: cst.CSTNode) -> bool:
    """The assignment runs as part of `block`: in it, or in a compound statement there (an arm
    of `if not isinstance(b, Tensor): self.b = torch.tensor(b)` before `self.b =
    nn.Parameter(self.b)`), not in a function or class defined there, which runs later."""
    k = next((i for i, n in enumerate(ancestors) if n is block), None)
    return k is not None and not any(isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) for n in ancestors[k + 1:])
