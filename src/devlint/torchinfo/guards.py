"""Which code only runs when CUDA is there: `if torch.cuda.is_available():`, early exits, skip markers."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.core import syntax

AVAILABILITY = "availability"  # CUDA availability or a device choice (`use_gpu`, `device == "cpu"`)
PLACEMENT = "placement"  # a tensor's own placement (`x.is_cuda`, `x.device.type == "cuda"`, `x.get_device() >= 0`)
EXIT_CALLS = frozenset({"skip", "skipTest", "exit", "_exit", "abort"})


def cuda_test_kind(test: cst.BaseExpression) -> Optional[str]:
    """AVAILABILITY, PLACEMENT, or None when the expression tests nothing about CUDA."""
    kind = None
    attribute_names = set()  # the `attr` Name of each Attribute, judged with its Attribute
    for node in syntax.walk_expressions(test):
        if isinstance(node, cst.Attribute):
            attribute_names.add(id(node.attr))
        elif id(node) in attribute_names:
            continue
        if isinstance(node, (cst.Name, cst.Attribute)):
            ident = node.value if isinstance(node, cst.Name) else node.attr.value
            if ident == "is_cuda" and isinstance(node, cst.Attribute):  # `x.is_cuda`
                kind = kind or PLACEMENT
            elif "cuda" in ident.lower() or "gpu" in ident.lower() or ident == "device_ids":
                return AVAILABILITY  # `device_ids`: the CUDA devices of DataParallel / DDP
        elif isinstance(node, cst.Call) and _starts_with_cuda(node):  # `device.startswith("cuda")`
            return AVAILABILITY
        elif isinstance(node, cst.Comparison) and _compares_device_index(node):
            kind = kind or PLACEMENT  # `x.get_device() != -1`: -1 is the CPU, any other index a device
        elif isinstance(node, cst.Comparison) and _compares_device_literal(node):
            operands = [node.left, *(t.comparator for t in node.comparisons)]
            if any(_mentions_device_attribute(o) for o in operands):
                kind = kind or PLACEMENT
            else:
                return AVAILABILITY
    return kind


def _compares_device_index(node: cst.Comparison) -> bool:
    """`x.get_device()` compared with a number: where the tensor x is."""
    operands = [node.left, *(t.comparator for t in node.comparisons)]
    return any(syntax.is_number_literal(o) for o in operands) and any(
        isinstance(o, cst.Call) and isinstance(o.func, cst.Attribute) and o.func.attr.value == "get_device"
        and not o.args for o in operands)


def _starts_with_cuda(call: cst.Call) -> bool:
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "startswith" and call.args):
        return False
    value = syntax.string_value(call.args[0].value)
    return value is not None and value.startswith("cuda")


def is_cuda_check_call(node: cst.CSTNode) -> bool:
    """A statement that calls a checker named for CUDA (`_check_device_cuda(q)`, `assert_cuda()`,
    `require_gpu()`): like an `assert`, what follows runs only when the check passed."""
    if not (isinstance(node, cst.Expr) and isinstance(node.value, cst.Call)):
        return False
    name = (syntax.last_name(node.value.func) or "").lower().lstrip("_")
    return name.startswith(CHECK_PREFIXES) and ("cuda" in name or "gpu" in name)


CHECK_PREFIXES = ("check", "assert", "ensure", "require", "verify")


def _compares_device_literal(node: cst.Comparison) -> bool:
    operands = [node.left, *(t.comparator for t in node.comparisons)]
    for operand in operands:
        items = [e.value for e in operand.elements] if isinstance(operand, (cst.Tuple, cst.List, cst.Set)) else [operand]
        for item in items:
            if isinstance(item, cst.Call) and syntax.last_name(item.func) == "device" and item.args:
                # `device == torch.device("cuda")`; not `torch.device("cpu")`: not the CPU may be MPS
                if not (syntax.string_value(item.args[0].value) or "").startswith("cuda"):
                    continue
                item = item.args[0].value
            value = syntax.string_value(item)
            if value is not None and (syntax.DEVICE_LITERAL.fullmatch(value) or value.lower() == "gpu"):
                return True  # `device == "cuda"`, `accelerator == "gpu"` (Lightning's name for CUDA)
    return False


def _mentions_device_attribute(node: cst.BaseExpression) -> bool:
    return any(
        (isinstance(n, cst.Attribute) and n.attr.value in ("device", "get_device"))
        for n in syntax.walk_expressions(node)
    )


def is_skip_marker(node: cst.BaseExpression) -> bool:
    """`pytest.mark.skipif(<cuda test>)`, `unittest.skipUnless(...)`, `@requires_cuda`, `@pytest.mark.gpu`."""
    target = node.func if isinstance(node, cst.Call) else node
    name = syntax.dotted_name(target) or ""
    last = name.rsplit(".", 1)[-1].lower()
    if isinstance(node, cst.Call) and "skip" in last:
        return any(cuda_test_kind(arg.value) is not None for arg in node.args) or _reason_names_cuda(node)
    if name.startswith("torch."):
        return False
    if isinstance(node, cst.Call) and any(_asks_for_cuda(arg) for arg in node.args):
        return True  # `@RunIf(min_cuda_gpus=1)`, `@require(gpu=True)`
    return "cuda" in last or "gpu" in last


def _reason_names_cuda(call: cst.Call) -> bool:
    """`skipif(not DEVICES, reason="No CUDA devices available")`: the reason says the skip is
    about CUDA (or a GPU), whatever the condition's names are."""
    reason = syntax.keyword(call, "reason")
    positional = syntax.positional(call)
    texts = [reason.value] if reason is not None else [a.value for a in positional[1:]]
    return any(any(word in (syntax.string_value(t) or "").lower() for word in ("cuda", "gpu")) for t in texts)


def _asks_for_cuda(arg: cst.Arg) -> bool:
    """A marker's keyword that asks for a GPU: named for CUDA or GPUs, given a value other than
    `0`, `False` or `None`."""
    if arg.keyword is None or not ("cuda" in arg.keyword.value.lower() or "gpu" in arg.keyword.value.lower()):
        return False
    # not `evaluated_value`: it calls `ast.literal_eval`, whose closures are a reference cycle
    return syntax.dotted_name(arg.value) not in ("False", "None") and not (
        isinstance(arg.value, cst.Integer) and int(arg.value.value, 0) == 0)


def is_marked_case(call: cst.Call) -> bool:
    """`pytest.param(..., marks=<CUDA skip marker>)`: the case's values are only used when CUDA is there."""
    if syntax.dotted_name(call.func) not in ("pytest.param", "param"):
        return False
    marks = syntax.keyword(call, "marks")
    if marks is None:
        return False
    value = marks.value
    items = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
    return any(is_skip_marker(item) for item in items)


def has_skip_marker(defn: cst.FunctionDef | cst.ClassDef) -> bool:
    return any(is_skip_marker(d.decorator) for d in defn.decorators)


def is_early_exit(node: cst.If, test_kind=cuda_test_kind) -> bool:
    """`if not torch.cuda.is_available(): return` and the like, or `if x.is_cuda: ... else:
    raise ...` (one arm of a plain if/else exits): what follows is guarded."""
    if test_kind(node.test) is None:
        return False
    if node.orelse is None:
        return _ends_in_exit(node.body)
    if isinstance(node.orelse, cst.Else):
        return _ends_in_exit(node.body) or _ends_in_exit(node.orelse.body)
    return False


def _ends_in_exit(body: cst.BaseSuite) -> bool:
    if isinstance(body, cst.SimpleStatementSuite):
        last = body.body[-1] if body.body else None
    else:
        statements = syntax.block_statements(body)
        last_stmt = statements[-1] if statements else None
        last = last_stmt.body[-1] if isinstance(last_stmt, cst.SimpleStatementLine) and last_stmt.body else last_stmt
    if isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
        return True
    return isinstance(last, cst.Expr) and isinstance(last.value, cst.Call) and syntax.last_name(last.value) in EXIT_CALLS


def handler_catches(handler: cst.ExceptHandler, exception: str) -> bool:
    """Whether `except ...:` catches `exception` (a builtin's name): bare, `Exception`,
    `BaseException` or that exact type, alone or in a tuple."""
    if handler.type is None:
        return True
    types = [e.value for e in handler.type.elements] if isinstance(handler.type, cst.Tuple) else [handler.type]
    return any(last_name(t) in ("Exception", "BaseException", exception) for t in types)


def last_name(node: cst.BaseExpression):
    return syntax.last_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
