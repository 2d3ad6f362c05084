"""What an expression holds, as far as the syntax tells: questions shared by the rules that
follow tensors (DEV003, DEV004, DEV007, DEV008)."""
from __future__ import annotations

import libcst as cst

from devlint import names, syntax


def is_dtype_only_move(call: cst.Call, facts) -> bool:
    """`.to(torch.float16)` / `.to(dtype=...)` converts but does not move."""
    if not call.args or any(a.star for a in call.args):
        return False
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value not in ("dtype", "non_blocking", "copy", "memory_format"):
                return False
        elif not _is_dtype(arg.value, facts):
            return False
    return True


def _is_dtype(expr: cst.BaseExpression, facts) -> bool:
    """`torch.float16`, or a `.dtype` attribute (`x.to(y.dtype)`)."""
    if facts.resolve(expr) in names.DTYPE_NAMES:
        return True
    return isinstance(expr, (cst.Name, cst.Attribute)) and syntax.last_name(expr) == "dtype"
