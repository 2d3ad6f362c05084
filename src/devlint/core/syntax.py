"""Small, pure helpers over libcst nodes."""
from __future__ import annotations

import ast
import functools
import re
from typing import Iterator, Optional, Sequence

import libcst as cst

from devlint.core.findings import CELL_MARKER

CUDA_LITERAL = re.compile(r"cuda(:\d+)?")
DEVICE_LITERAL = re.compile(r"(cuda|cpu|mps|xpu|xla|meta|hpu|npu)(:\d+)?")


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def last_name(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Call):
        return last_name(node.func)
    return None


def string_value(node: cst.CSTNode) -> Optional[str]:
    """The value of a plain (non f-, non byte-) string literal."""
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower():
        return _literal_string(node.value)
    return None


@functools.lru_cache(maxsize=4096)
def _literal_string(literal: str) -> Optional[str]:
    body = literal.lstrip("rRuU")
    prefix = literal[:len(literal) - len(body)].lower()
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    if "\\" not in body or "r" in prefix:
        return body[len(quote):-len(quote)]  # no escapes (or raw): the text between the quotes
    # ast.literal_eval builds recursive closures on every call: a garbage cycle each time.
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def is_cuda_literal(node: cst.CSTNode) -> bool:
    value = string_value(node)
    return value is not None and CUDA_LITERAL.fullmatch(value) is not None


def fstring_starts_with_cuda(node: cst.CSTNode) -> bool:
    """An f-string whose text starts with `cuda` (`f"cuda:{rank}"`)."""
    if not isinstance(node, cst.FormattedString) or "b" in node.prefix.lower() or not node.parts:
        return False
    first = node.parts[0]
    return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda")


def method_name(call: cst.Call) -> Optional[str]:
    """`name` for a call written `<receiver>.name(...)`."""
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def option_destination(call: cst.Call) -> str:
    """The attribute an `add_argument(...)` call's option is read as: its `dest=`, or its first long
    flag (`--device-id` -> `device_id`), or its first flag; "" when not written as strings."""
    dest = keyword(call, "dest")
    flags = [string_value(a.value) or "" for a in positional(call)]
    name = string_value(dest.value) if dest is not None else next(
        (f.lstrip("-") for f in flags if f.startswith("--")), flags[0].lstrip("-") if flags else "")
    return (name or "").replace("-", "_")


def has_star_args(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def has_double_star(call: cst.Call) -> bool:
    return any(a.star == "**" for a in call.args)


def is_number_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
        return True
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return isinstance(node.expression, (cst.Integer, cst.Float, cst.Imaginary))
    return False


def is_base_init(call: cst.Call) -> bool:
    """`super().__init__(...)`, `super(Cls, self).__init__(...)`, `nn.Module.__init__(self)`."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "__init__"):
        return False
    receiver = func.value
    if isinstance(receiver, cst.Call):
        return dotted_name(receiver.func) == "super"
    return dotted_name(receiver) is not None


def param_names(params: cst.Parameters) -> list[str]:
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    return names


def all_params(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from params.posonly_params
    yield from params.params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg
    yield from params.kwonly_params
    if params.star_kwarg is not None:
        yield params.star_kwarg


def self_name(func: cst.FunctionDef) -> Optional[str]:
    """The name of a function's first positional parameter (`self` in a method), or None."""
    params = [*func.params.posonly_params, *func.params.params]
    return params[0].name.value if params else None


def instance_self(func: cst.FunctionDef) -> Optional[str]:
    """The `self` of a method: its first positional parameter, or None for a staticmethod or a
    classmethod (or a function with none)."""
    decorators = decorator_names(func)
    return None if "staticmethod" in decorators or "classmethod" in decorators else self_name(func)


def unpacked_targets(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The leaves of a nested tuple or list, as in the targets of `a, (b, c) = ...` or the
    elements of `f((a, (b, c)))`: a, b and c (anything else: itself)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from unpacked_targets(element.value)
    else:
        yield target


def decorator_names(defn: cst.FunctionDef | cst.ClassDef) -> list[Optional[str]]:
    out = []
    for d in defn.decorators:
        target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        out.append(dotted_name(target))
    return out


# Fields that hold only whitespace, comments and punctuation: no rule looks below them.
_LAYOUT_FIELDS = frozenset({
    "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace", "comma", "semicolon", "colon",
    "first_colon", "second_colon", "equal", "dot", "relative", "operator", "asynchronous", "leading_lines", "lines_after_decorators",
    "header", "footer", "newline",
})
_VISITED_FIELD = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')
_child_fields: dict[type, Optional[tuple[str, ...]]] = {}


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The children of `node` that hold code, in source order: `node.children` without the
    whitespace, comments and punctuation, and without the cost (libcst builds its list by
    visiting, which rebuilds the node)."""
    kind = type(node)
    try:
        fields = _child_fields[kind]
    except KeyError:
        fields = _child_fields[kind] = _code_fields(kind)
    if fields is None:
        return [c for c in node.children if not _is_layout(c)]
    out = []
    for name in fields:
        value = getattr(node, name)
        if value is None or value is cst.MaybeSentinel.DEFAULT:
            continue
        if type(value) in (tuple, list):
            out.extend(value)
        else:
            out.append(value)
    return out


def _code_fields(kind: type) -> Optional[tuple[str, ...]]:
    """The fields libcst visits for this node type, in its (source) order, read from the
    node's own `_visit_and_replace_children`; None when its source cannot be read."""
    import inspect

    try:
        source = inspect.getsource(kind._visit_and_replace_children)
    except (OSError, TypeError):
        return None
    names = dict.fromkeys(_VISITED_FIELD.findall(source))  # a field may be named twice, in branches
    return tuple(name for name in names if name not in _LAYOUT_FIELDS and "whitespace" not in name)


_LAYOUT_NODES = (
    cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Newline, cst.Comment,
    cst.Comma, cst.Dot, cst.Semicolon, cst.Colon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
    cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp, cst.Asynchronous,
)


def _is_layout(node: cst.CSTNode) -> bool:
    return isinstance(node, _LAYOUT_NODES)


def enclosing_function(path: Sequence[cst.CSTNode]) -> Optional[cst.FunctionDef]:
    """The innermost function on a path of ancestors (None at module or class level)."""
    return next((node for node in reversed(path) if isinstance(node, cst.FunctionDef)), None)


def in_init(path: Sequence[cst.CSTNode]) -> bool:
    """Whether a path of ancestors is inside an `__init__` (construction, before any `model.to()`)."""
    function = enclosing_function(path)
    return function is not None and function.name.value == "__init__"


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node below `node` that holds code (itself included), in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def walk_expressions(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Like walk, but does not enter nested functions, classes or lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(children(current)))


def block_statements(body: cst.BaseSuite) -> Sequence[cst.BaseStatement]:
    return body.body if isinstance(body, cst.IndentedBlock) else ()


def small_statements(stmt: cst.CSTNode) -> Sequence[cst.BaseSmallStatement]:
    return stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()


def _evaluation_order(node: cst.CSTNode) -> list[cst.CSTNode]:
    """A node's children, an assignment's value before its targets."""
    ordered = children(node)
    if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and node.value is not None:
        ordered.remove(node.value)
        ordered.insert(0, node.value)
    return ordered


def walk_with_paths(root: cst.CSTNode, prefix: Sequence[cst.CSTNode]) -> Iterator[tuple[cst.CSTNode, list]]:
    """Nodes under root in evaluation order, each with its full ancestor path; nested
    functions and classes are not entered."""
    stack: list[tuple[cst.CSTNode, list]] = [(root, list(prefix) + [root])]
    while stack:
        node, path = stack.pop()
        yield node, path
        if node is not root and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        stack.extend((child, path + [child]) for child in reversed(_evaluation_order(node)))


def earlier_statements(path: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """The statements that run before the one holding path[-1] in its function: those before it
    in its block and in each enclosing block, up to the innermost function's own body."""
    start = max((i for i, n in enumerate(path) if isinstance(n, (cst.FunctionDef, cst.Lambda))), default=0)
    for index in range(start, len(path) - 1):
        block, statement = path[index], path[index + 1]
        if isinstance(block, cst.IndentedBlock):
            for earlier in block.body:
                if earlier is statement:
                    break
                yield earlier


def in_exclusive_arms(root: cst.CSTNode, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """Whether `first` and `second` (nodes under root) stand in different arms of one `if` (or
    conditional expression): never both in one pass."""
    paths = {}
    for node, path in walk_with_paths(root, []):
        if node is first or node is second:
            paths[id(node)] = path
            if len(paths) == 2:
                break
    if len(paths) < 2:
        return False
    a, b = paths[id(first)], paths[id(second)]
    depth = 0
    while depth < min(len(a), len(b)) and a[depth] is b[depth]:
        depth += 1
    if depth == 0 or depth >= min(len(a), len(b)):
        return False
    common, arm_a, arm_b = a[depth - 1], a[depth], b[depth]
    if isinstance(common, (cst.If, cst.IfExp)):
        arms = (common.body, common.orelse)
        return arm_a in arms and arm_b in arms and arm_a is not arm_b
    return False


def walk_with_parents(root: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, Optional[cst.CSTNode]]]:
    """Like walk_with_paths, with only each node's parent: no path is built."""
    stack: list[tuple[cst.CSTNode, Optional[cst.CSTNode]]] = [(root, None)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        if node is not root and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        stack.extend((child, node) for child in reversed(_evaluation_order(node)))


def _starts_cell(lines: Sequence[cst.EmptyLine]) -> bool:
    return any(line.comment is not None and line.comment.value.startswith(CELL_MARKER) for line in lines)


def cell_results(module: cst.Module) -> set[int]:
    """The ids of the small statements that end a cell of a joined notebook (the last one before
    the next cell's marker, or the module's last one): Jupyter displays the value of such a
    statement when it is an expression, so that value is used. Empty for a module that is no
    notebook."""
    if not _starts_cell(module.header):
        return set()
    body = list(module.body)
    return {id(statement.body[-1]) for statement, following in zip(body, body[1:] + [None])
            if isinstance(statement, cst.SimpleStatementLine)
            and (following is None or _starts_cell(following.leading_lines))}


def if_chain_top(path: Sequence[cst.CSTNode], block_index: int) -> Optional[int]:
    """Where the block path[block_index] is an arm of an `if` (its body, its `else`, an `elif`'s),
    the index in `path` of the chain's first `if`; None where the block is no arm of one."""
    top = block_index - 1
    if top >= 1 and isinstance(path[top], cst.Else):
        top -= 1
    if top < 0 or not isinstance(path[top], cst.If):
        return None
    while top >= 1 and isinstance(path[top - 1], cst.If) and path[top - 1].orelse is path[top]:
        top -= 1  # an `elif`: its chain starts higher
    return top


def suites(stmt: cst.CSTNode) -> Iterator[Sequence[cst.BaseStatement]]:
    """The statement lists of a compound statement's blocks, in source order (an `if`'s body, its
    `elif` as a one-statement list, `else`, a `try`'s handlers and `finally`, `match` cases)."""
    for child in children(stmt):
        if isinstance(child, cst.IndentedBlock):
            yield child.body
        elif isinstance(child, (cst.Else, cst.If, cst.ExceptHandler, cst.Finally)) or type(child).__name__ in (
            "ExceptStarHandler",
            "MatchCase",
        ):
            yield from suites(child) if not isinstance(child, cst.If) else [[child]]
