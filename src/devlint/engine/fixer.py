"""`--fix`: apply the fixes' text edits, in rounds, and prove the result is sound.

Pure like the engine: text in, text out. A fix is the list of text edits the report shows, so
what `--fix` writes is exactly what a report's consumer would apply. A round takes every
applicable fix whose edits do not overlap another's (the outer one wins; an inner one is
proposed again in the next round, checked against the new text) and applies their edits.
Rounds stop when nothing applicable is left. The result must parse, keep every comment and
the file's line endings, and be stable: otherwise nothing is applied.
"""
from __future__ import annotations

import io
import re
import sys
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from devlint.core.findings import Edit, Finding, ParseError

MAX_ROUNDS = 10


@dataclass
class FixResult:
    text: str
    fixed: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    problem: Optional[str] = None  # why no fix was applied
    before: list[Finding] = field(default_factory=list)  # the findings in the source
    baselined: int = 0  # findings a baseline hid in `text`
    baselined_before: int = 0  # and in the source


Check = Callable[[str], "list[Finding]"]


def fix_text(source: str, check: Check, unsafe: bool, findings: Optional[list[Finding]] = None) -> FixResult:
    """Apply every fix `check` offers (safe ones, and unsafe ones when asked) until none is left.

    `check` is what a plain run does (rules, noqa and per-file ignores applied), so `--fix`
    touches exactly what a check reports. `findings`, when given, are `check(source)`.
    """
    text = source
    fixed: list[Finding] = []
    before = findings = check(text) if findings is None else findings

    def unchanged(problem: Optional[str] = None) -> FixResult:
        return FixResult(source, remaining=before, problem=problem, before=before)

    for _ in range(MAX_ROUNDS):
        chosen = _non_overlapping([f for f in findings if f.fixable(unsafe)])
        if not chosen:
            break
        new_text = apply_edits(text, [e for f in chosen for e in f.fix.edits])
        if new_text == text:
            return unchanged("a fix made no change")
        fixed.extend(chosen)
        text = new_text
        try:
            findings = check(text)
        except ParseError as exc:
            return unchanged(f"the fixed code does not parse ({exc.message})")
    else:
        if any(f.fixable(unsafe) for f in findings):
            return unchanged(f"fixes did not settle in {MAX_ROUNDS} rounds")
    if text == source:
        return unchanged()
    problem = soundness_problem(source, text)
    if problem is not None:
        return unchanged(problem)
    return FixResult(text, fixed, findings, before=before)


_NEWLINE = re.compile(r"\r\n?|\n")  # the line breaks that rows count (libcst's)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with non-overlapping edits applied (rows and columns are 1-based, in characters)."""
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offset(row: int, column: int) -> int:
        return line_starts[row - 1] + column - 1

    pieces, end = [], len(text)
    for edit in sorted(edits, key=lambda e: (e.row, e.column), reverse=True):
        start, stop = offset(edit.row, edit.column), offset(edit.end_row, edit.end_column)
        if stop > end:
            raise ValueError(f"overlapping edits at {edit.row}:{edit.column}")
        pieces.append(text[stop:end])
        pieces.append(edit.content)
        end = start
    pieces.append(text[:end])
    return "".join(reversed(pieces))


def _span(finding: Finding) -> tuple[tuple[int, int], tuple[int, int]]:
    edits = finding.fix.edits
    return min((e.row, e.column) for e in edits), max((e.end_row, e.end_column) for e in edits)


def _non_overlapping(findings: Sequence[Finding]) -> list[Finding]:
    """Outer fixes first; a fix inside (or across) one already taken waits for the next round."""
    chosen, taken = [], []
    for f in sorted(findings, key=lambda f: (_span(f)[0], tuple(-x for x in _span(f)[1]))):
        start, end = _span(f)
        if all(end <= s or start >= e for s, e in taken):
            chosen.append(f)
            taken.append((start, end))
    return chosen


def soundness_problem(before: str, after: str) -> Optional[str]:
    """Why `after` may not replace `before`, or None."""
    try:
        from devlint import engine  # imports libcst
        from devlint.engine.traversal import python_error

        engine.parse(after)
        compile(after, "<fixed>", "exec", dont_inherit=True, flags=0x400)  # ast.PyCF_ONLY_AST
    except (ParseError, SyntaxError, ValueError) as exc:
        if isinstance(exc, SyntaxError) and python_error(before) is not None:
            # libcst reads syntax of newer Pythons than the one running: the file was never
            # valid here, so nothing this Python writes can be checked against it
            return f"this Python ({sys.version_info[0]}.{sys.version_info[1]}) cannot parse the file itself ({exc})"
        return f"the fixed code does not parse ({exc})"
    lost = Counter(_comments(before)) - Counter(_comments(after))
    if lost:
        return f"a fix would drop a comment ({next(iter(lost))!r})"
    if "\r\n" in before and before.count("\n") == before.count("\r\n") and after.count("\n") != after.count("\r\n"):
        return "a fix would mix line endings"
    return None


def _comments(text: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return []
