"""DEV010 discarded-move: `x.to(device)` as a statement on a tensor, whose result is dropped.
Doc: rules/DEV010.md; fixture: tests/fixtures/DEV010.py."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.analysis import values
from devlint.analysis.parameters import tensor_parameters
from devlint.api import SAFE, UNSAFE, FrameState, NodeFix, Rule
from devlint.core import syntax
from devlint.semantic import bindings
from devlint.torchinfo import names
from devlint.torchinfo.tensor_members import TENSOR_MEMBERS

MOVE_METHODS = frozenset({"to", "cuda", "cpu"})
# Members a module has too: no evidence of a tensor for this rule (`model.to(d)` moves in place).
MODULE_MEMBERS = frozenset(
    {"to", "cuda", "cpu", "device", "dtype", "float", "half", "double", "bfloat16", "type", "requires_grad_"}
)
EVIDENCE = names.TENSOR_ONLY_MEMBERS - MODULE_MEMBERS
# Uses no module allows: `x.shape`, `x.size()`, `x.view(...)`.
TENSOR_ONLY_ATTRIBUTES = frozenset({"shape", "ndim"})
TENSOR_ONLY_CALLS = frozenset({"size", "dim", "numel", "item", "view", "reshape", "unsqueeze"})
# Tensor methods whose result is a tensor whatever the receiver (modules have none of them).
TENSOR_RESULT_METHODS = (names.SHAPE_METHODS | {"repeat_interleave", "masked_fill", "gather", "index_select", "matmul"}) - MODULE_MEMBERS


class DiscardedMove(Rule):
    """`X.to(...)`, `X.cuda(...)` or `X.cpu()` as a whole statement where X is known to be a tensor
    (tensor moves return a copy: the statement does nothing); the fix assigns the result back."""

    code = "DEV010"
    name = "discarded-move"
    summary = "`x.to(device)` on a tensor as a statement: the moved copy is dropped"
    fixes, applicabilities = "sometimes", (SAFE, UNSAFE)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._moves: FrameState[list[cst.Expr]] = FrameState(list)  # by function frame; None: module level

    def visit_Expr(self, node: cst.Expr) -> None:
        value = node.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MOVE_METHODS:
            self._moves[self.ctx.function].append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.ctx.function
        moves = self._moves.pop(frame)
        if not moves:
            return
        # every parameter of a module's `forward` is a tensor parameter (the shared definition)
        forward = frame.method == "forward" and frame.node is node and frame.in_module_class
        self._check(node, frame.self_name, node.body, moves, forward)

    def leave_Module(self, node: cst.Module) -> None:
        # a notebook cell's last expression is displayed: its value is used, not dropped
        shown = syntax.cell_results(node)
        moves = [m for m in self._moves.pop(None) or () if id(m) not in shown]
        if moves:
            self._check(None, None, node, moves, False)

    def _check(self, func: Optional[cst.FunctionDef], self_name: Optional[str], body: cst.CSTNode,
               moves: list[cst.Expr], forward_params: bool) -> None:
        scope = _Scope(self.facts, func, self_name, body, forward_params)
        # `torch.ones(0).to(d)` on a statement of its own keeps nothing by design: a probe of
        # whether the move works (nothing else could ever read its result)
        flagged = [s for s in moves if scope.is_tensor(s.value.func.value)
                   and not _made_here(s.value.func.value, self.facts)
                   and not _made_as_moved(s.value, func if func is not None else body, self.facts)]
        # Moved back, a tensor meets the scope's CPU-made tensors on the new device: safe only
        # when each of those is moved back by a fix here too.
        fixed_keys = {_key(s.value.func.value) for s in flagged}
        applicability = SAFE if scope.cpu_made <= fixed_keys else UNSAFE
        for statement in flagged:
            call = statement.value
            receiver = call.func.value
            fix = None
            if isinstance(receiver, cst.Name) or _self_attribute(receiver, scope.self_name) is not None:
                assign = cst.Assign(targets=[cst.AssignTarget(receiver)], value=call)
                fix = NodeFix(applicability, "Assign the moved tensor back", statement, assign)
            method = call.func.attr.value
            self.report(
                call.func.attr,
                f"`.{method}()` on a tensor returns a moved copy, which this statement drops: the tensor stays "
                f"where it was; assign the result (`x = x.{method}(...)`)",
                fix,
            )


def _zero_dim(call: cst.Call, facts) -> bool:
    """`torch.zeros(())`, `torch.tensor(0.0)`: a 0-dim tensor, which meets tensors on any device."""
    args = syntax.positional(call)
    return values.is_scalar_factory(call, facts) or (
        len(args) == 1 and isinstance(args[0].value, (cst.Tuple, cst.List)) and not args[0].value.elements)


def _self_attribute(expr: cst.BaseExpression, self_name: Optional[str]) -> Optional[str]:
    if self_name and isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == self_name:
        return expr.attr.value
    return None


def _string_key(subscript: cst.Subscript) -> bool:
    """`x["labels"]`: only a mapping takes a string key."""
    return len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index) and isinstance(
        subscript.slice[0].slice.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


def _key(expr: cst.BaseExpression) -> Optional[str]:
    """`x` or `self.x`: what bindings and uses are tracked under."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        return f"{expr.value.value}.{expr.attr.value}"
    return None


class _Scope:
    """What one function (or a script's module level) binds and how it uses its names."""

    def __init__(self, facts, func: Optional[cst.FunctionDef], self_name: Optional[str], body: cst.CSTNode,
                 forward_params: bool) -> None:
        self.facts = facts
        self.bindings: dict[str, list[Optional[cst.BaseExpression]]] = {}  # key -> values (None: not known)
        self.items: dict[str, cst.BaseExpression] = {}  # loop target key -> the iterated expression
        self.tensor_uses: set[str] = set()
        # `**x`, `x["key"]`, `x.to_dict()`: a mapping or an object with members no tensor has
        self.non_tensor_uses: set[str] = set()
        self.self_name = self_name
        self.tensor_params: set[str] = set()
        self.cpu_made: set[Optional[str]] = set()  # keys bound to a tensor made without `device=` (None: not bound)
        if func is not None:
            self.tensor_params = set(tensor_parameters(func, facts, every_parameter=forward_params, evidence=EVIDENCE))
        for node, parent in syntax.walk_with_parents(body):
            if node is not body and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            self._visit(node, parent)

    def _visit(self, node: cst.CSTNode, parent: Optional[cst.CSTNode]) -> None:
        if isinstance(node, cst.Call) and self.facts.is_tensor_source(node) is not None \
                and syntax.keyword(node, "device") is None and not _zero_dim(node, self.facts):
            # a tensor made on the CPU: the name it is bound to (`p = torch.Tensor([...])`), or None
            bound = parent.targets[0].target if isinstance(parent, cst.Assign) and len(parent.targets) == 1 else None
            self.cpu_made.add(_key(bound) if bound is not None else None)
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and node.value is not None:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                self._bind(target, node.value if not isinstance(node, cst.AugAssign) else None)
        elif isinstance(node, (cst.For, cst.CompFor)):
            self._bind_items(node.target, node.iter)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            self._bind(node.asname.name, None)
        elif isinstance(node, cst.Attribute):
            key = _key(node.value)
            if key is None:
                return
            attr = node.attr.value
            called = isinstance(parent, cst.Call) and parent.func is node
            if attr in TENSOR_ONLY_ATTRIBUTES or (called and attr in TENSOR_ONLY_CALLS):
                self.tensor_uses.add(key)
            elif attr not in TENSOR_MEMBERS and not attr.startswith("__"):
                self.non_tensor_uses.add(key)  # `batch.to_dict()`, `batch.positions`: no tensor has it
        elif isinstance(node, cst.Arg) and node.star == "**":
            key = _key(node.value)
            if key is not None:
                self.non_tensor_uses.add(key)
        elif isinstance(node, cst.Subscript) and _string_key(node):
            key = _key(node.value)
            if key is not None:
                self.non_tensor_uses.add(key)
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, ARITHMETIC):
            if any(isinstance(o, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
                   for o in (node.left, node.right)):
                return  # `"df." + name`, `"%s" % name`: string operations, no tensor
            for operand in (node.left, node.right):
                key = _key(operand)
                if key is not None:
                    self.tensor_uses.add(key)

    def _bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                for element, item in zip(target.elements, value.elements):  # `x, y = x.to(d), y.to(d)`
                    self._bind(element.value, item.value)
                return
            for element in target.elements:  # `x, y = ...`: each may be anything
                self._bind(element.value, self._unpacked(value))
            return
        key = _key(target)
        if key is not None:
            self.bindings.setdefault(key, []).append(value)

    def _unpacked(self, value: Optional[cst.BaseExpression]) -> Optional[cst.BaseExpression]:
        """`x, y = batch` with batch a loader item: x and y are items of it (kept as a subscript)."""
        if value is not None and self._is_loader_item(value):
            return cst.Subscript(value=value, slice=[cst.SubscriptElement(cst.Index(cst.Integer("0")))])
        return None

    def _bind_items(self, target: cst.BaseExpression, iterated: cst.BaseExpression) -> None:
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else None
        for element in ([e.value for e in elements] if elements is not None else [target]):
            if isinstance(element, (cst.Tuple, cst.List)):
                self._bind_items(element, iterated)
                continue
            key = _key(element)
            if key is not None:
                self.bindings.setdefault(key, []).append(None)
                self.items[key] = iterated

    # --- the verdict ---------------------------------------------------------------------
    def is_tensor(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > 8:
            return False
        key = _key(expr)
        if key is not None:
            return self._name_is_tensor(key, depth)
        if isinstance(expr, cst.BinaryOperation):
            # no module has arithmetic, and numbers have no `.to()`; `|`, `&`, `^` and shifts are
            # also sets', flags' and pipes' (`wave | chain`)
            return isinstance(expr.operator, ARITHMETIC)
        if isinstance(expr, cst.UnaryOperation):
            return not isinstance(expr.operator, cst.Not)
        if isinstance(expr, cst.Subscript):
            return self._is_item(expr, depth)
        if isinstance(expr, cst.Call):
            return self._call_is_tensor(expr, depth) or self._is_loader_item(expr)
        return False

    def _name_is_tensor(self, key: str, depth: int) -> bool:
        if key == self.self_name:
            return False
        values = self.bindings.get(key, [])
        if any(v is not None and self._is_module_value(v) for v in values):
            return False
        if key in self.non_tensor_uses:  # no tensor: its `.to()` (a BatchEncoding's, a graph batch's) moves in place
            return False
        if key in self.tensor_uses or key in self.tensor_params:
            return True
        if key in self.items:
            return self._is_loader(self.items[key]) or self._is_tensor_list(self.items[key], depth)
        return bool(values) and all(v is not None and self.is_tensor(v, depth + 1) for v in values)

    def _is_module_value(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Name) and value.value == self.self_name:
            return True
        if not isinstance(value, cst.Call):
            return False
        qualified = self.facts.resolve(value.func)
        if qualified is not None and qualified.startswith("torch.nn.") and not qualified.startswith("torch.nn.functional"):
            return True
        last = syntax.last_name(value.func) or ""
        local = [info for info in self.facts.classes.values() if info.name == last]
        if local:
            return any(info.is_module for info in local)
        return last[:1].isupper() and last.endswith(names.MODULE_BASE_SUFFIXES)

    def _call_is_tensor(self, call: cst.Call, depth: int) -> bool:
        func = call.func
        qualified = self.facts.resolve(func)
        if qualified is not None:
            if self.facts.is_tensor_source(call) is not None:
                return True
            return names.returns_tensors(qualified)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if isinstance(func.value, cst.Name) and func.value.value == self.self_name:
                return False  # `self.detach()`: the class's own method, whatever its name
            if method in TENSOR_RESULT_METHODS:
                return True
            if method in MODULE_MEMBERS - {"device", "dtype"}:  # `x.float()`: a tensor when x is one
                return self.is_tensor(func.value, depth + 1)
        return False

    def _is_item(self, expr: cst.Subscript, depth: int) -> bool:
        """A subscript of a module's output, of a loader or tokenizer item, or of a tensor list."""
        value = expr.value
        if isinstance(value, cst.Call):
            if syntax.keyword(value, "return_tensors") is not None:
                return True  # `tokenizer(text, return_tensors="pt")["input_ids"]`
            if self.facts.resolve(value.func) is not None:  # `torch.load(p)["model"]` may be anything
                return self._call_is_tensor(value, depth)
            return _key(value.func) is not None  # a module's output: `model(x)[0]`, `self.encoder(x)[0]`
        return self.is_tensor(value, depth + 1) or self._is_loader_item(value) or self._is_tensor_list(value, depth) or self._is_tokenized(value)

    def _is_loader(self, iterated: cst.BaseExpression) -> bool:
        """`loader`, `self.train_loader`, `enumerate(loader)`, `tqdm(loader)`."""
        if isinstance(iterated, cst.Call) and iterated.args and syntax.last_name(iterated.func) in ("enumerate", "tqdm", "iter"):
            return self._is_loader(iterated.args[0].value)
        if self._is_graph_loader(iterated):
            return False  # its items are graph batches, whose `.to()` moves them in place
        name = syntax.last_name(iterated) or ""
        if name.lower().endswith("loader"):
            return True
        key = _key(iterated)
        return key is not None and any(
            isinstance(v, cst.Call) and syntax.last_name(v.func) == "DataLoader" for v in self.bindings.get(key, []) if v is not None
        )

    def _is_graph_loader(self, iterated: cst.BaseExpression) -> bool:
        """A loader of the graph library torch_geometric (`DataLoader` imported from
        `torch_geometric.loader` or `torch_geometric.data`), made where it is named or bound
        to the name: it yields `Batch` objects."""
        if isinstance(iterated, cst.Call):
            made = [iterated]
        else:
            key = _key(iterated)
            made = self.bindings.get(key, []) if key is not None else []
        return bool(made) and all(
            isinstance(v, cst.Call) and (self.facts.resolve(v.func) or "").startswith("torch_geometric.") for v in made)

    def _is_loader_item(self, expr: cst.BaseExpression) -> bool:
        """An item of iterating a loader (`for batch in loader`, `next(iter(loader))`)."""
        if isinstance(expr, cst.Call) and syntax.last_name(expr.func) == "next" and expr.args:
            return self._is_loader(expr.args[0].value)
        key = _key(expr)
        if key is None:
            return False
        if key in self.items:
            return self._is_loader(self.items[key])
        values = self.bindings.get(key, [])
        return bool(values) and all(v is not None and self._is_loader_item(v) for v in values)

    def _is_tokenized(self, expr: cst.BaseExpression) -> bool:
        key = _key(expr)
        values = self.bindings.get(key, []) if key is not None else []
        return bool(values) and all(isinstance(v, cst.Call) and syntax.keyword(v, "return_tensors") is not None for v in values)

    def _is_tensor_list(self, expr: cst.BaseExpression, depth: int) -> bool:
        """A list of tensors: `torch.split(...)`, `x.chunk(...)`, a display of tensors."""
        if isinstance(expr, (cst.List, cst.Tuple)):
            return bool(expr.elements) and all(self.is_tensor(e.value, depth + 1) for e in expr.elements)
        if isinstance(expr, cst.Call):
            method = syntax.last_name(expr.func)
            return method in ("split", "chunk", "unbind", "tensor_split") and (
                isinstance(expr.func, cst.Attribute) or (self.facts.resolve(expr.func) or "").startswith("torch.")
            )
        key = _key(expr)
        values = self.bindings.get(key, []) if key is not None else []
        return bool(values) and all(v is not None and self._is_tensor_list(v, depth + 1) for v in values)


# the operators of arithmetic, which only numbers and tensors (or arrays) take
ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power, cst.MatrixMultiply)


def _made_here(expr: cst.BaseExpression, facts) -> bool:
    """A method chain that starts with a tensor factory (`torch.ones(0).float()`) or with what a
    function or a module returns (`model(x).detach()`, `self.net(x)`), or with arithmetic on such
    values and numbers: a value the statement makes, which no name holds. Not a chain on a
    name's value (`x.float()`, `(x + 1).cpu()`: a copy of `x`)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
            and isinstance(expr.func.value, (cst.Call, cst.BinaryOperation)):
        expr = expr.func.value
    if isinstance(expr, cst.BinaryOperation):  # `(torch.zeros(1, device="cuda") + 1).cpu()`
        return all(isinstance(side, (cst.Integer, cst.Float)) or _made_here(side, facts) for side in (expr.left, expr.right))
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    return facts.is_tensor_source(expr) is not None or isinstance(func, cst.Name) \
        or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self")


def _made_as_moved(call: cst.Call, scope: cst.CSTNode, facts) -> bool:
    """`t.to(q.dtype)` where the scope (a function, or the module) binds `t` once, to a factory given `dtype=q.dtype` (or
    `device=`) for each thing the move names: the move would return `t` itself, so dropping it
    loses nothing."""
    receiver = call.func.value
    if not isinstance(receiver, cst.Name) or call.func.attr.value != "to" or not call.args:
        return False
    bound = bindings.scope_values(scope, receiver.value)
    if bound is None or len(bound) != 1 or not isinstance(bound[0], cst.Call) or facts.is_tensor_source(bound[0]) is None:
        return False
    made_with = [arg.value for arg in bound[0].args if arg.keyword is not None and arg.keyword.value in ("dtype", "device")]
    return all(any(arg.value.deep_equals(given) for given in made_with) for arg in call.args
               if arg.keyword is None or arg.keyword.value in ("dtype", "device"))
