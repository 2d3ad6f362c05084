"""Positions of the nodes in a few module-level statements, without generating the whole file.

libcst's PositionProvider generates the code of the whole module to learn where each node is:
on a large file that costs more than the rules. A finding needs the positions of one
statement only. `ast` (ten times cheaper than that code generation) says on which line each
module-level statement starts; libcst's position-recording code generation then runs over
the statements that hold findings, starting at their line.
"""
from __future__ import annotations

import ast
import functools
import warnings
from typing import Optional, Sequence

import libcst as cst
from libcst.metadata.position_provider import PositionProvidingCodegenState


class _Positions:
    """What the code generation state writes to: node -> CodeRange."""

    def __init__(self) -> None:
        self._computed: dict = {}


def statement_positions(
    module: cst.Module, source: str, statements: Sequence[cst.CSTNode], first_lines: Optional[dict[int, int]] = None
) -> Optional[dict]:
    """node -> CodeRange for every node in `statements` (module-level statements of `module`,
    parsed from `source`); None when `ast` reads the source otherwise than libcst."""
    first_lines = first_lines or statement_first_lines(module, source)
    if first_lines is None:
        return None
    holder = _Positions()
    for statement in statements:
        line = first_lines.get(id(statement))
        if line is None:
            return None
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent, default_newline=module.default_newline, provider=holder, line=line,
        )
        statement._codegen(state)
    return holder._computed


def statement_first_lines(module: cst.Module, source: str) -> Optional[dict[int, int]]:
    """id(statement) -> the line its code (leading blank and comment lines included) starts on;
    None when `ast` reads the source otherwise than libcst."""
    try:
        body = module_body(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    out, i = {}, 0
    for statement in module.body:
        count = len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        if i + count > len(body):
            return None
        node = body[i]
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        out[id(statement)] = first - len(statement.leading_lines)
        i += count
    return out if i == len(body) else None


@functools.lru_cache(maxsize=1)
def module_body(source: str) -> list:
    """`ast.parse(source).body`, kept for the last source: the language server's reparse
    (`incremental`) reads it too. Raises what ast.parse raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source).body
