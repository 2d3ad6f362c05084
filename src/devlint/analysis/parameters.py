"""Tensor parameters of a function and the values derived from them: shared by DEV003
(factories that meet them), DEV010 (moves on them) and DEV012 (the fix's `device=X.device`)."""
from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from devlint.analysis import values
from devlint.core import syntax
from devlint.semantic.facts import FileFacts
from devlint.torchinfo import names
from devlint.torchinfo.tensor_members import TENSOR_MEMBERS


def tensor_parameters(func: cst.FunctionDef, facts: FileFacts, every_parameter: bool = False,
                      evidence: frozenset = names.TENSOR_ONLY_MEMBERS) -> list[str]:
    """Parameters that hold tensors, in declaration order (the first used one comes first):
    annotated `Tensor` (or a container of tensors), or used with one of the `evidence` members."""
    params = [p for p in syntax.all_params(func.params) if p.star not in ("*", "**")]
    foreign, arrays = _foreign_member_readers(func, facts)
    foreign |= _converted_to_tensors(func, facts)
    candidates = [p.name.value for p in params if p.name.value not in ("self", "cls")]
    if every_parameter:
        return [n for n in candidates if n not in foreign]
    annotated = {
        p.name.value
        for p in params
        if p.annotation is not None and "Tensor" in (syntax.dotted_name(_unwrap_annotation(p.annotation.annotation)) or "")
    }
    used = set()
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            if node.attr.value in evidence:
                used.add(node.value.value)
        elif isinstance(node, cst.Call):
            tested = tested_as_tensor(node, facts)
            if tested is not None:
                used.add(tested)
    # `a.size > n` raises on a tensor: the code only runs on arrays, whatever the annotation says
    return [n for n in candidates if n not in arrays and (n in annotated or (n in used and n not in foreign))]


def _foreign_member_readers(func: cst.FunctionDef, facts: FileFacts) -> tuple[set[str], set[str]]:
    """Parameters read for a member no tensor has (`state.num_processes`) or calling one a
    tensor has only as a value (`store.shape(key)`), or handed (or a
    comparison or arithmetic of them handed) as the data of a call that takes only host data
    (`torch.BoolTensor(seqs == 0)`, `torch.from_numpy(a)`, `np.asarray(a)`: a list or an
    array); and those read as arrays (`a.size` not called: a NumPy array's element count):
    whatever else they share with tensors (`state.device`), they are not tensors. Only names the
    body never rebinds (after `x = self.encoder(x)`, `x.last_hidden_state` says nothing of the
    parameter; after `x = x["seq"]`, neither does `torch.BoolTensor(x == 0)`)."""
    readers, sizes, shapes, called, rebound = set(), [], [], set(), set()
    host, assigned = set(), set()  # handed as host data; bound by any assignment (`x = x["seq"]` too)
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and not node.attr.value.startswith("__"):
            if node.attr.value not in TENSOR_MEMBERS:
                readers.add(node.value.value)
            elif node.attr.value == "size":
                sizes.append(node)
            elif node.attr.value == "shape":
                shapes.append(node)
        elif isinstance(node, cst.Call):
            called.add(id(node.func))
            data = _host_data_of(node, facts)
            if data is not None:
                host.add(data)
        elif isinstance(node, cst.Assign):
            for target in node.targets:
                names_ = [t.value for t in syntax.unpacked_targets(target.target) if isinstance(t, cst.Name)]
                assigned.update(names_)
                rebound.update(n for n in names_ if not _part_of(node.value, n))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.AsName)):
            target = node.name if isinstance(node, cst.AsName) else node.target
            names_ = [t.value for t in syntax.unpacked_targets(target) if isinstance(t, cst.Name)]
            rebound.update(names_)
            if isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                assigned.update(names_)
    # `a.size` not called: a NumPy array's element count (a tensor's `size` is a method)
    arrays = {node.value.value for node in sizes if id(node) not in called}
    # `store.shape(key)` called: a tensor's `shape` is no method (a sparse tensor's `.device()`
    # and `.dtype()` are, so only `shape` says so)
    readers |= {node.value.value for node in shapes if id(node) in called}
    # a parameter declared as something that holds no tensor (`ax: Axes | None`) and read for a
    # member no tensor has is no tensor, even where the body rebinds it (`_, ax = plt.subplots()`)
    declared_other = {p.name.value for p in syntax.all_params(func.params)
                      if p.annotation is not None and not _may_hold_a_tensor(p.annotation.annotation)}
    return (readers - rebound) | (host - assigned) | (readers & declared_other), arrays - rebound


def _may_hold_a_tensor(annotation: cst.BaseExpression) -> bool:
    """Whether an annotation names a tensor anywhere in it (`Tensor | None`, `list[Tensor]`,
    `"torch.Tensor"`), or anything at all (`Any`, `object`)."""
    for node in syntax.walk(annotation):
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
            return True  # a forward reference: not read here
        if isinstance(node, cst.Name) and ("Tensor" in node.value or node.value in ("Parameter", "Any", "object")):
            return True
    return False


# Calls whose data must be on the host: the legacy constructors reject a CUDA tensor
# (`torch.BoolTensor(cuda_t == 0)`: "expected a CPU tensor"), `from_numpy` takes an array.
HOST_DATA_CALLS = names.LEGACY_CONSTRUCTORS | {"torch.from_numpy"}


def _host_data_of(call: cst.Call, facts: FileFacts) -> Optional[str]:
    """The name a call that takes only host data (or NumPy) is given as its data, directly or
    under comparisons and arithmetic (`seqs` of `torch.BoolTensor(seqs == 0)`)."""
    qualified = facts.resolve(call.func) or ""
    if qualified not in HOST_DATA_CALLS and not qualified.startswith("numpy."):
        return None
    data = syntax.positional(call)[:1]
    value = data[0].value if data else None
    while isinstance(value, (cst.Comparison, cst.BinaryOperation)):
        value = value.left
    return value.value if isinstance(value, cst.Name) else None


# Factories that copy their data: given a tensor, they warn (use `clone().detach()`), so code
# that rebinds a parameter to one (`x = torch.tensor(x, dtype=torch.float)`) was given data (a
# list, numbers), not a tensor. `torch.as_tensor(x)` takes tensors as they are: no such sign.
DATA_COPIES = frozenset({"torch.tensor"})


def _converted_to_tensors(func: cst.FunctionDef, facts: FileFacts) -> set[str]:
    """Parameters the body rebinds to a copy of their data (`x = torch.tensor(x)`, also
    `x, k = torch.tensor(x), min(len(x), k)`): the parameter held data, not a tensor."""
    converted = set()
    for node in syntax.walk_expressions(func.body):
        if not isinstance(node, cst.Assign):
            continue
        for target in node.targets:
            pairs = [(target.target, node.value)]
            if isinstance(target.target, cst.Tuple) and isinstance(node.value, cst.Tuple) \
                    and len(target.target.elements) == len(node.value.elements):
                pairs = [(t.value, v.value) for t, v in zip(target.target.elements, node.value.elements)]
            for name, value in pairs:
                if isinstance(name, cst.Name) and isinstance(value, cst.Call) \
                        and facts.resolve(value.func) in DATA_COPIES:
                    data = syntax.positional(value)
                    if data and isinstance(data[0].value, cst.Name) and data[0].value.value == name.value:
                        converted.add(name.value)
    return converted


def _part_of(value: Optional[cst.BaseExpression], name: str) -> bool:
    """`value` is a part of `name` itself (`x[a:b]`, `x[i][j]`): the same kind of value."""
    while isinstance(value, cst.Subscript):
        value = value.value
    return isinstance(value, cst.Name) and value.value == name


def _not_one_tensor(func: cst.FunctionDef) -> set[str]:
    """Parameters that may hold tensors but are not one torch tensor, so `X.device` is no
    device: annotated with anything but a tensor (`list[Tensor]`, a model class,
    `SparseTensor`), or whose `.device` is called (`adj_t.device()`)."""
    out = set()
    for p in syntax.all_params(func.params):
        if p.annotation is not None and not _names_a_tensor(_unwrap_annotation(p.annotation.annotation, keep_lists=True)):
            out.add(p.name.value)
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, cst.Call) and syntax.method_name(node) == "device" \
                and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
            out.add(node.func.value.value)
    return out


# Annotations naming a torch tensor (`torch.Tensor`, `Tensor`, and the parameter classes).
_TENSOR_ANNOTATIONS = frozenset({"Tensor", "FloatTensor", "LongTensor", "BoolTensor", "Parameter"})
# Subscripted annotations that hold several values (or none), never one tensor.
_CONTAINER_ANNOTATIONS = frozenset({"list", "List", "tuple", "Tuple", "Sequence", "Iterable", "Iterator", "dict",
                                    "Dict", "Mapping", "set", "Set", "Callable", "type", "Type"})


def _names_a_tensor(annotation: cst.BaseExpression) -> bool:
    """`Tensor`, `torch.FloatTensor`, and shape-typed tensors (`TensorType[...]`,
    jaxtyping's `Float[Tensor, "b c"]`); not `list[Tensor]` nor `SparseTensor`."""
    if isinstance(annotation, cst.Subscript):
        if syntax.last_name(annotation.value) in _CONTAINER_ANNOTATIONS:
            return False
        return syntax.last_name(annotation.value) == "TensorType" or any(
            isinstance(e.slice, cst.Index) and _names_a_tensor(e.slice.value) for e in annotation.slice)
    return (syntax.dotted_name(annotation) or "").split(".")[-1] in _TENSOR_ANNOTATIONS


def tested_as_tensor(call: cst.Call, facts: FileFacts) -> Optional[str]:
    """NAME for `torch.is_tensor(NAME)` or `isinstance(NAME, torch.Tensor)`: the function
    expects a tensor there (not `isinstance(NAME, (torch.Tensor, float))`: it may be a number)."""
    args = [a.value for a in call.args]
    if not args or not isinstance(args[0], cst.Name):
        return None
    qualified = facts.resolve(call.func)
    if qualified == "torch.is_tensor" and len(args) == 1:
        return args[0].value
    if isinstance(call.func, cst.Name) and call.func.value == "isinstance" and qualified is None and len(args) == 2:
        if facts.resolve(args[1]) == "torch.Tensor":
            return args[0].value
    return None


def _unwrap_annotation(node: cst.BaseExpression, keep_lists: bool = False) -> cst.BaseExpression:
    """The type an annotation names, through `Optional[T]`, `T | None` and quotes; through
    `list[T]` too unless `keep_lists`."""
    if isinstance(node, cst.Subscript) and node.slice and syntax.last_name(node.value) != "Literal" and (
            not keep_lists or syntax.last_name(node.value) in ("Optional", "Union")):
        first = node.slice[0].slice
        if isinstance(first, cst.Index):
            return _unwrap_annotation(first.value, keep_lists)
    if isinstance(node, cst.BinaryOperation):  # Tensor | None
        return _unwrap_annotation(node.left, keep_lists)
    if isinstance(node, cst.SimpleString):
        parts = (syntax.string_value(node) or "").split(".")  # a forward reference: "torch.Tensor"
        return cst.Name(parts[-1]) if all(part.isidentifier() for part in parts) else node
    return node


def stable_parameters(func: cst.FunctionDef, params: Sequence[str], facts: FileFacts) -> set[str]:
    """The parameters never rebound to something not computed from a tensor parameter.

    `pos = torch.arange(pos)` makes `pos` unstable: its later uses may be either value;
    `x = x * 2` keeps `x` stable.
    """
    stable = set(params)
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            if not is_derived(node.value, set(params), facts):
                stable -= {t.value for t in assigned_names(node)}
    return stable


def assigned_names(node: cst.Assign | cst.AnnAssign) -> list[cst.Name]:
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    return [t for t in targets if isinstance(t, cst.Name)]


def is_derived(expr: cst.BaseExpression, derived: set[str], facts: FileFacts) -> bool:
    """Whether expr is a tensor computed from a tensor parameter (it lives where the parameters
    do). `derived` may hold `module_self(name)`: in a module's `forward`, what the module's own
    submodules return for such a tensor lives there too (`self.head(x)`)."""
    def value_of(name: str) -> values.Value:
        if name in derived:
            return _DERIVED
        return _MODULE_SELF if module_self(name) in derived else values.UNKNOWN

    return values.ValueModel(facts, value_of).of(expr).place == values.PARAMETERS


def module_self(name: str) -> str:
    """The entry of a derived-name set that says `name` is the module itself (never a Python name)."""
    return f"<module>{name}"


_DERIVED = values.Value(values.TENSOR, values.PARAMETERS)
_MODULE_SELF = values.Value(values.MODULE_SELF)


def first_used_param(func: cst.FunctionDef, params: Sequence[str], facts: FileFacts,
                     path: Optional[Sequence[cst.CSTNode]] = None) -> Optional[str]:
    """The tensor parameter the function body mentions first, for `device=X.device` at `path`
    (see `used_tensor_params`)."""
    return first_fit(used_tensor_params(func, params, facts), path)


def used_tensor_params(func: cst.FunctionDef, params: Sequence[str], facts: FileFacts) -> list[tuple[str, bool]]:
    """The parameters fit to name in `device=X.device`, in the order the body first mentions
    them, each with whether it is declared to admit None (`mask: Tensor | None`).

    Only a parameter known to be a tensor (annotation, tensor-only members) qualifies: being a
    parameter of `forward` is not enough (`inv_temperature=100.`). One with a default of None or
    of a literal, or rebound to another value, is never used.
    """
    declared = [p for p in syntax.all_params(func.params) if p.star not in ("*", "**")]
    usable = {p.name.value for p in declared if p.default is None or not _is_literal_default(p.default)}
    usable &= stable_parameters(func, params, facts)
    optional = {p.name.value for p in declared
                if p.annotation is not None and "None" in values.union_members(p.annotation.annotation)}
    known = {n for n in tensor_parameters(func, facts) if n in usable} - _not_one_tensor(func)
    order: dict[str, bool] = {}
    for node in syntax.walk_expressions(func.body):
        if isinstance(node, cst.Name) and node.value in known:
            order.setdefault(node.value, node.value in optional)
    return list(order.items())


def first_fit(used: list[tuple[str, bool]], path: Optional[Sequence[cst.CSTNode]]) -> Optional[str]:
    """The first of `used_tensor_params` that is not None at `path`: one declared to admit None
    only where the code has ruled None out before it (see `none_ruled_out`)."""
    return next((name for name, optional in used if not optional or path is not None and none_ruled_out(name, path)), None)


def none_ruled_out(name: str, path: Sequence[cst.CSTNode]) -> bool:
    """Whether `name` cannot be None where path[-1] runs: in the arm of a test that rules it out
    (`if mask is not None:`), or after a statement of the function that would have failed on
    None (`assert mask is not None`, `n = mask.size(1)`, `if mask is None: return x`)."""
    for holder, arm in zip(path, path[1:]):
        if isinstance(holder, (cst.If, cst.IfExp)) and arm is not holder.test:
            held = _not_none_test(holder.test, name)
            if held is not None and (arm is holder.body) == held:
                return True
    for statement in syntax.earlier_statements(path):
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assert) and _not_none_test(small.test, name):
                    return True
                if not any(isinstance(n, (cst.IfExp, cst.BooleanOperation, cst.Lambda, *values.COMPREHENSIONS))
                           for n in syntax.walk(small)) and any(
                        isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == name
                        for n in syntax.walk(small)):
                    return True  # `n = mask.size(1)`: read unconditionally
        elif isinstance(statement, cst.If) and statement.orelse is None and _not_none_test(statement.test, name) is False \
                and _leaves(statement.body):
            return True
    return False


def _not_none_test(test: cst.BaseExpression, name: str) -> Optional[bool]:
    """True for a test that holds only where `name` is not None (`name is not None`, and with
    others), False for one that holds only where it is (`name is None`, or with others), None else."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _not_none_test(test.expression, name)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        parts = [_not_none_test(test.left, name), _not_none_test(test.right, name)]
        decisive = isinstance(test.operator, cst.And)  # `a and b` holds only where both do
        return decisive if decisive in parts else None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name) \
            and test.left.value == name and syntax.dotted_name(test.comparisons[0].comparator) == "None":
        operator = test.comparisons[0].operator
        return True if isinstance(operator, cst.IsNot) else False if isinstance(operator, cst.Is) else None
    return None


def _leaves(block: cst.BaseSuite) -> bool:
    """A block whose last statement returns, raises or ends the loop iteration."""
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    last = body[-1] if body else None
    if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return any(isinstance(s, (cst.Return, cst.Raise, cst.Continue, cst.Break)) for s in last.body)
    return False


def _is_literal_default(default: cst.BaseExpression) -> bool:
    """`None`, a number, a bool or a string: never a tensor."""
    if isinstance(default, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    return syntax.dotted_name(default) == "None" or syntax.is_number_literal(default)


def not_a_tensor_here(data: cst.BaseExpression, path: Sequence[cst.CSTNode], facts) -> bool:
    """Whether `data` is a name that a failed `isinstance(name, Tensor)` (or `torch.is_tensor`)
    test guards where `path` stands: in the arm of an `if` or a conditional expression taken when
    it is not a tensor (`torch.tensor(t) if not isinstance(t, Tensor) else t`)."""
    if not isinstance(data, cst.Name):
        return False
    function = next((n for n in reversed(path) if isinstance(n, cst.FunctionDef)), None)
    alternatives = declared_alternatives(data.value, function, facts)
    for holder, arm in zip(path, path[1:]):
        if isinstance(holder, (cst.IfExp, cst.If)):
            tested = _tensor_test(holder.test, data.value, facts, alternatives)
            if tested is not None and ((tested and arm is holder.orelse) or (not tested and arm is holder.body)):
                return True
            # `isinstance(X, PackedSequence) and X.length >= k`: the body runs only where each part
            # holds, and one says X is the other member of its declared union
            if arm is holder.body and alternatives and any(
                    _only_alternatives(part, data.value, facts, alternatives) for part in _conjuncts(holder.test)):
                return True
    return False


def declared_alternatives(name: str, function: Optional[cst.FunctionDef], facts) -> frozenset[str]:
    """The classes besides a tensor that a parameter's annotation declares it may hold
    (`X: torch.Tensor | PackedSequence`): where `isinstance(X, PackedSequence)` passed, X is no
    tensor. Empty when the annotation names no tensor, or holds a member that is no name."""
    resolved = _declared_union(name, function, facts)
    if not resolved or not resolved & TENSOR_TYPES:
        return frozenset()
    return frozenset(resolved - TENSOR_TYPES - {"None", "Any", "object", "typing.Any"})


def declared_without_tensor(name: str, function: Optional[cst.FunctionDef], facts) -> bool:
    """Whether a parameter's annotation names only classes other than a tensor (`w: float`,
    `w: list[float]`, `w: float | np.ndarray`); False without an annotation."""
    members = _declared_members(name, function, facts)
    return bool(members) and not members & (TENSOR_TYPES | {"Any", "typing.Any", "object"})


def _declared_union(name: str, function: Optional[cst.FunctionDef], facts) -> Optional[set[str]]:
    """The members of a parameter's annotation read as a union, each by its qualified name; None
    without an annotation or where a member is no name (`list[int]`)."""
    members = _declared_members(name, function, facts)
    return None if members is None or None in members else members


def _declared_members(name: str, function: Optional[cst.FunctionDef], facts) -> Optional[set]:
    """The members of a parameter's annotation read as a union, each by its qualified name, and
    None for a member that is no name (`list[int]`); None without an annotation."""
    declared = next((p for p in syntax.all_params(function.params) if p.name.value == name), None) if function else None
    if declared is None or declared.annotation is None:
        return None
    return {facts.resolve_dotted(m) or m if m is not None else None for m in values.union_members(declared.annotation.annotation)}


def _only_alternatives(test: cst.BaseExpression, name: str, facts, alternatives: frozenset[str]) -> bool:
    """`isinstance(name, C)` naming only classes the annotation declares beside a tensor."""
    types = _isinstance_types(test, name, facts) if isinstance(test, cst.Call) else None
    return bool(types) and types <= alternatives


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def maybe_not_a_tensor(name: str, function: cst.FunctionDef, path: Sequence[cst.CSTNode], facts) -> bool:
    """Whether the function tests what `name` is (`if torch.is_tensor(sigma) and ...:`,
    `isinstance(t, Tensor)`, `isinstance(g, float)`; not in an `assert`) and `path` does not stand
    in the arm where a tensor test passed: the test says the name may hold something else there (a
    number), whose `.device` raises."""
    nodes = list(syntax.walk(function.body))
    asserted = {id(n) for a in nodes if isinstance(a, cst.Assert) for n in syntax.walk(a.test)}
    if not any(isinstance(n, cst.Call) and id(n) not in asserted and _tensor_test(n, name, facts) is not None
               for n in nodes):
        return False
    for holder, arm in zip(path, path[1:]):
        if isinstance(holder, (cst.IfExp, cst.If)) and arm is holder.body and _tensor_test(holder.test, name, facts):
            return False
    return True


def _tensor_test(test: cst.BaseExpression, name: str, facts, alternatives: frozenset[str] = frozenset()) -> Optional[bool]:
    """True for `isinstance(name, torch.Tensor)` or `torch.is_tensor(name)`, False for their
    `not` and for a test that holds only for what is no tensor (`isinstance(name, int)`, a
    NumPy array, a class the parameter's annotation declares beside a tensor: `alternatives`),
    None for any other test."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _tensor_test(test.expression, name, facts, alternatives)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        # `isinstance(g, float) or isinstance(g, int)`: both sides say the same of either arm
        parts = {_tensor_test(test.left, name, facts, alternatives), _tensor_test(test.right, name, facts, alternatives)}
        return parts.pop() if len(parts) == 1 else None
    if not isinstance(test, cst.Call):
        return None
    if tested_as_tensor(test, facts) == name:
        return True
    types = _isinstance_types(test, name, facts)
    return False if types and types <= NOT_TENSOR_TYPES | alternatives else None


# Types whose instances are Python numbers, and types none of whose instances is a tensor: what
# a passed `isinstance(name, T)` proves.
NUMBER_TYPES = frozenset({"int", "float", "bool", "complex", "numbers.Number"})
NOT_TENSOR_TYPES = NUMBER_TYPES | {"str", "bytes", "list", "tuple", "dict", "set", "numpy.ndarray", "numpy.generic"}


def _isinstance_types(call: cst.Call, name: str, facts) -> Optional[set[str]]:
    """For `isinstance(name, T)` or `isinstance(name, (T1, T2))`, the types named: a builtin by its
    name, an imported class by its qualified name (`numpy.ndarray`); None for any other call."""
    args = [a.value for a in call.args]
    if not (isinstance(call.func, cst.Name) and call.func.value == "isinstance" and facts.resolve(call.func) is None
            and len(args) == 2 and isinstance(args[0], cst.Name) and args[0].value == name):
        return None
    kinds = [e.value for e in args[1].elements] if isinstance(args[1], cst.Tuple) else [args[1]]
    return {facts.resolve(kind) or (kind.value if isinstance(kind, cst.Name) else "") for kind in kinds}


def a_number_here(data: cst.BaseExpression, path: Sequence[cst.CSTNode], facts) -> bool:
    """Whether `data` is a name that is a Python number where `path` stands: a passed
    `isinstance(name, (int, float))` test guards it, or it is a parameter declared a number or a
    tensor (`ei: int | torch.Tensor`) where a tensor test failed. There `torch.tensor(name)` is a
    0-dim tensor of a Python number."""
    if not isinstance(data, cst.Name):
        return False
    for holder, arm in zip(path, path[1:]):
        if isinstance(holder, (cst.IfExp, cst.If)) and arm is holder.body and isinstance(holder.test, cst.Call):
            types = _isinstance_types(holder.test, data.value, facts)
            if types and types <= NUMBER_TYPES:
                return True
            if types:
                return False  # `isinstance(v, (float, np.ndarray, list))`: the code says it may be more
    function = next((n for n in reversed(path) if isinstance(n, cst.FunctionDef)), None)
    resolved = _declared_union(data.value, function, facts)
    if resolved is None or not not_a_tensor_here(data, path, facts):
        return False
    others = resolved - TENSOR_TYPES  # a union that names the tensor its test rules out, and numbers
    return others != resolved and bool(others & NUMBER_TYPES) and others <= NUMBER_TYPES | {"None"}


# The names a tensor parameter's annotation gives its type.
TENSOR_TYPES = frozenset({"torch.Tensor", "Tensor"})


# --- tests of where a parameter lives -------------------------------------------------------
def cpu_test(test: cst.BaseExpression, params) -> bool | None:
    """True when `test` holds only where a parameter is on the CPU, False when only where it is
    not, None for any other test."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = cpu_test(test.expression, params)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        # `x.is_cuda or mkl`: false only where x is on the CPU (the `else` arm is the CPU's);
        # `x.is_cpu and n > 1`: true only where it is
        parts = [cpu_test(test.left, params), cpu_test(test.right, params)]
        decisive = False if isinstance(test.operator, cst.Or) else True
        return decisive if decisive in parts else None
    if isinstance(test, cst.Attribute) and _parameter_member(test.value, params):
        return {"is_cpu": True, "is_cuda": False}.get(test.attr.value)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        operator, right = test.comparisons[0].operator, test.comparisons[0].comparator
        if _device_index_of_parameter(test.left, params):
            return _holds_for_cpu_index(operator, _integer(right))
        if isinstance(operator, (cst.Equal, cst.NotEqual)) and _device_of_parameter(test.left, params):
            named = _named_device(right)
            # `x.device.type == "cuda"` reads as `x.is_cuda` (not `x.device == "cuda"`: a
            # `cuda:0` tensor's device is not equal to `cuda`)
            by_type = isinstance(test.left, cst.Attribute) and test.left.attr.value == "type"
            if named == "cpu" or named == "cuda" and by_type:
                return isinstance(operator, cst.Equal) == (named == "cpu")
    return None


def _parameter_member(expr: cst.BaseExpression, params) -> bool:
    return isinstance(expr, cst.Name) and expr.value in params


def _device_of_parameter(expr: cst.BaseExpression, params) -> bool:
    """`x.device`, `x.device.type`, `str(x.device)` of a parameter x."""
    if isinstance(expr, cst.Call) and syntax.dotted_name(expr.func) == "str" and len(expr.args) == 1:
        expr = expr.args[0].value
    if isinstance(expr, cst.Attribute) and expr.attr.value == "type":
        expr = expr.value
    return isinstance(expr, cst.Attribute) and expr.attr.value == "device" and _parameter_member(expr.value, params)


def _device_index_of_parameter(expr: cst.BaseExpression, params) -> bool:
    """`x.get_device()` of a parameter x: -1 for a CPU tensor, the GPU's ordinal otherwise."""
    return isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute) \
        and expr.func.attr.value == "get_device" and _parameter_member(expr.func.value, params)


def _holds_for_cpu_index(operator, bound: int | None) -> bool | None:
    """Whether `x.get_device() <operator> bound` holds only where x is on the CPU (True), only
    where it is not (False), or either (None): `< 0` and `== -1` hold only for the CPU's -1, `>= 0`
    and `!= -1` only for a GPU's ordinal."""
    if bound is None:
        return None
    decisive = {cst.LessThan: bound == 0, cst.LessThanEqual: bound == -1, cst.Equal: bound == -1,
                cst.GreaterThanEqual: bound == 0, cst.GreaterThan: bound == -1, cst.NotEqual: bound == -1}
    if not decisive.get(type(operator), False):
        return None
    return isinstance(operator, (cst.LessThan, cst.LessThanEqual, cst.Equal))


def _integer(expr: cst.BaseExpression) -> int | None:
    """The value of an integer literal, or of one negated (`-1`), read from its text."""
    sign = 1
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        sign, expr = -1, expr.expression
    if isinstance(expr, cst.Integer) and expr.value.isdigit():
        return sign * int(expr.value)
    return None


def _named_device(expr: cst.BaseExpression) -> str | None:
    """The device a string or `torch.device(...)` of one names: `"cpu"`, `torch.device("cuda")`."""
    if isinstance(expr, cst.Call) and syntax.last_name(expr.func) == "device" and len(expr.args) == 1:
        expr = expr.args[0].value
    return syntax.string_value(expr)


def host_at_every_call(function: cst.FunctionDef, param: str, facts: FileFacts) -> bool:
    """Whether `param` holds a CPU value wherever `function` runs: the function is one only this
    file calls (a module-level function or method whose name starts with one `_`, or a function
    nested in another), it is called at least once and used for nothing else (not passed on,
    returned or stored, which would let unseen code call it), and every call passes for `param`
    a CPU value: a factory given no `device=`, `.cpu()` or `.to("cpu")` of anything, or a local
    name of the caller bound only to such."""
    known = facts.memo.setdefault("parameters.call-sites", {})
    if function not in known:
        known[function] = _only_calls(function, facts)
    found = known[function]
    if not found:
        return False
    positional, calls = found
    if param not in positional and param not in [p.name.value for p in function.params.kwonly_params]:
        return False
    index = positional.index(param) if param in positional else None
    for call, caller in calls:
        given = syntax.keyword(call, param)
        if given is None and index is not None and index < len(syntax.positional(call)):
            given = syntax.positional(call)[index]
        if given is None or caller is None or not _cpu_value(given.value, caller, facts):
            return False
    return True


def _only_calls(function: cst.FunctionDef, facts: FileFacts):
    """(the names of its positional parameters a call fills, [(each call, the function that
    makes it)]) for a function only this file calls and uses for nothing else, called at least
    once without `*args` or `**kwargs`; else None."""
    definer = facts.definers.get(function)
    name = function.name.value
    nested = isinstance(definer, cst.FunctionDef)
    if not nested and not (name.startswith("_") and not name.startswith("__")):
        return None
    positional = [p.name.value for p in [*function.params.posonly_params, *function.params.params]]
    method = definer is not None and not nested and "staticmethod" not in [d or "" for d in syntax.decorator_names(function)]
    if method:
        positional = positional[1:]
    parents: dict[int, cst.CSTNode] = {}
    calls = []
    stack: list[cst.CSTNode] = [definer if nested else facts.module]
    while stack:
        node = stack.pop()
        for child in syntax.children(node):
            parents[id(child)] = node
            stack.append(child)
        named = isinstance(node, cst.Name) and node.value == name and not method \
            or isinstance(node, cst.Attribute) and node.attr.value == name and method
        if not named or node is function.name:
            continue
        parent = parents.get(id(node))
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue  # `x.name` of another object, for a function that is no method
        call = parent if isinstance(parent, cst.Call) and parent.func is node else None
        if call is None or syntax.has_star_args(call) or syntax.has_double_star(call):
            return None
        calls.append((call, _enclosing_function(node, parents)))
    return (positional, calls) if calls else None


def _enclosing_function(node: cst.CSTNode, parents: dict) -> Optional[cst.FunctionDef]:
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, cst.FunctionDef):
            return node
    return None


def _cpu_value(expr: cst.BaseExpression, caller: cst.FunctionDef, facts: FileFacts) -> bool:
    """A factory given no `device=`, `.cpu()` or `.to("cpu")` of anything, or a local name of the
    caller bound only to one of these."""
    if values.is_device_less_factory(expr, facts) or _to_cpu(expr):
        return True
    return isinstance(expr, cst.Name) and expr.value in values.names_bound_only_to(
        caller, lambda v: values.is_device_less_factory(v, facts) or _to_cpu(v))


def _to_cpu(expr: cst.BaseExpression) -> bool:
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return False
    method = expr.func.attr.value
    args = syntax.positional(expr)
    return method == "cpu" and not expr.args or method == "to" and len(expr.args) == 1 and len(args) == 1 \
        and syntax.string_value(args[0].value) == "cpu"
