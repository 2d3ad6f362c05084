"""DEV004 unregistered-tensor-attribute: a tensor stored on an nn.Module as a plain attribute.
Doc: rules/DEV004.md; fixture: tests/fixtures/DEV004.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint import edits, names, syntax
from devlint.analysis import values
from devlint.base import SAFE, UNSAFE, FrameState, NodeFix, Rule

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


@dataclass
class _ClassState:
    candidates: list[_Candidate] = field(default_factory=list)
    buffers: set[str] = field(default_factory=set)  # names given to register_buffer
    plain: set[str] = field(default_factory=set)  # attributes set to something else than a tensor
    # attribute name -> whether every `self.NAME` read so far moves it to a tensor's device
    moved_at_reads: dict[str, bool] = field(default_factory=dict)


@dataclass
class _FunctionState:
    after_init: bool = False  # `super().__init__()` was called
    kinds: dict[str, Optional[str]] = field(default_factory=dict)  # local name -> TENSOR, CONTAINER or None
    integral_names: set[str] = field(default_factory=set)  # local names holding integer or bool tensors


class UnregisteredTensorAttribute(Rule):
    """`self.NAME = <tensor>` in a method of an nn.Module class (directly, through a local
    name, or through a same-file helper); the fix registers a non-persistent buffer, safe only
    for an integer or bool tensor."""

    code = "DEV004"
    name = "unregistered-tensor-attribute"
    summary = "tensor stored on a module as a plain attribute instead of a buffer"
    fixes, applicabilities = "sometimes", (SAFE, UNSAFE)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.values = TensorValues(self.facts)
        self._classes: FrameState[_ClassState] = FrameState(_ClassState)
        self._functions: FrameState[_FunctionState] = FrameState(_FunctionState)
        # class name -> every attribute name its instances may already have (None: unknown,
        # e.g. a base imported from elsewhere, where a property or attribute may stand).
        self.attributes: dict[str, Optional[set[str]]] = {}
        self._apply_targets: Optional[frozenset] = None  # see _moved_by_hand
        self.lightning_classes: set[str] = set()  # names of this file's LightningModule classes

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
        reads = self._classes[frame.klass].moved_at_reads
        reads[name] = reads.get(name, True) and _moved_at_read(ancestors, frame.self_name, self.facts)

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        if frame is None or not frame.in_module_class:
            return
        if frame.self_attribute(node.func) == "register_buffer":
            name_arg = syntax.keyword(node, "name") or next(iter(syntax.positional(node)), None)
            name = syntax.string_value(name_arg.value) if name_arg is not None else None
            if name is not None:
                self._classes[frame.klass].buffers.add(name)
        elif syntax.is_base_init(node):
            self._functions[frame].after_init = True

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.pop(self.ctx.function)

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
        kind = self.values.kind(value, env, frame.self_name, methods)
        integral = kind == TENSOR and is_integral(value, integral_names, self.facts)
        for target in targets:
            attribute = frame.self_attribute(target)
            if attribute is not None:
                if kind is not None:
                    after_init = frame.method != "__init__" or state.after_init
                    self._classes[frame.klass].candidates.append(
                        _Candidate(target, statement, value, frame.self_name, after_init, kind == TENSOR, integral)
                    )
                else:  # None, a number, a Parameter, a submodule: register_buffer would raise KeyError
                    self._classes[frame.klass].plain.add(attribute)
            elif isinstance(target, cst.Name):
                env[target.value] = kind
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
        for candidate in state.candidates:
            name = candidate.target.attr.value
            if name in state.buffers or state.moved_at_reads.get(name, False) or name in self._moved_by_hand():
                continue
            if lightning and name == "example_input_array":  # Lightning moves it to the module's device
                continue
            taken = existing is not None and name in existing
            self.report(
                candidate.target, self._message(name, candidate.single_tensor, taken),
                None if existing is None or taken else _register_buffer_fix(candidate, name, self._buffer_class()),
            )

    def _moved_by_hand(self) -> frozenset:
        """Attributes that an override of `_apply` in this file sets (`m.grid = list(map(fn, m.grid))`):
        the module moves them itself with every `model.to()`, `.cuda()` or `.half()`."""
        if self._apply_targets is None:
            self._apply_targets = frozenset(
                target.target.attr.value
                for info in self.facts.classes.values()
                for method in info.methods.get("_apply", ())
                for node in syntax.walk_expressions(method.body) if isinstance(node, cst.Assign)
                for target in node.targets if isinstance(target.target, cst.Attribute)
            )
        return self._apply_targets

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

    def _buffer_class(self) -> Optional[cst.BaseExpression]:
        """`nn.Buffer` as this file can name it, where the target torch has it (2.5); else None."""
        if not self.ctx.torch_at_least(2, 5):
            return None
        aliases = self.facts.aliases
        for alias, target in aliases.items():
            if target == "torch.nn":
                return cst.Attribute(cst.Name(alias), cst.Name("Buffer"))
        for alias, target in aliases.items():
            if target == "torch":
                return cst.Attribute(cst.Attribute(cst.Name(alias), cst.Name("nn")), cst.Name("Buffer"))
        return None

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


def _moved_at_read(ancestors: list[cst.CSTNode], self_name: Optional[str], facts) -> bool:
    """Whether the `self.NAME` read at `ancestors[-1]` is moved right there to a device taken from a
    tensor: `self.NAME.to(x.device)`, `.to(x)`, `.to(device=x.device)`, `.type_as(x)`, after a
    slice too (`self.NAME[:, :n].to(x.device)`)."""
    read, index = ancestors[-1], len(ancestors) - 2
    while isinstance(ancestors[index], cst.Subscript) and ancestors[index].value is read:
        read, index = ancestors[index], index - 1
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
    if isinstance(value, cst.Attribute) and value.attr.value == "device":  # `x.device`, `self.weight.device`
        return _may_be_tensor(value.value, self_name)
    # `.to(x)`: a local name, not an imported one (`from torch import float16`)
    return device.keyword is None and isinstance(value, cst.Name) and facts.resolve(value) is None and _may_be_tensor(value, self_name)


NOT_TENSOR_WORDS = ("device", "dtype", "type", "rank", "gpu", "cuda", "cpu", "args", "cfg", "config", "opt", "hparams")


def _may_be_tensor(expr: cst.BaseExpression, self_name: Optional[str]) -> bool:
    """`x`, `inputs[0]`, `self.weight`: not `self`, nor a name that says it holds a device, a dtype or
    settings (`device`, `rank`, `args`)."""
    if isinstance(expr, cst.Name) and expr.value == self_name:
        return False
    last = (syntax.last_name(expr) or "").lower()
    return last != "dev" and not any(word in last for word in NOT_TENSOR_WORDS)


def _register_buffer_fix(candidate: _Candidate, name: str, buffer_class: Optional[cst.BaseExpression]) -> Optional[NodeFix]:
    """`self.register_buffer("NAME", EXPR, persistent=False)`, or with `buffer_class` (torch 2.5)
    `self.NAME = nn.Buffer(EXPR, persistent=False)`."""
    statement = candidate.statement
    single_target = isinstance(statement, cst.AnnAssign) or len(statement.targets) == 1
    if not (candidate.after_init and single_target and candidate.single_tensor):
        return None
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


class TensorValues:
    """Decides whether an expression builds a tensor (or a container of tensors), following
    local names and same-file helpers."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self._returns: dict[cst.FunctionDef, Optional[str]] = {}

    def kind(self, expr: cst.BaseExpression, env: dict[str, Optional[str]], self_name: Optional[str] = None,
             methods: Optional[dict] = None) -> Optional[str]:
        """TENSOR, CONTAINER, or None (no tensor, or not known to be one)."""
        model = values.ValueModel(
            self.facts, lambda name: values.Value(env.get(name)), lambda call: self._returned(call, self_name, methods)
        )
        kind = model.of(expr).kind
        return kind if kind in (TENSOR, CONTAINER) else None

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
