"""`--fix`: apply fixes as libcst transformations, in rounds, and prove the result is sound.

Pure like the engine: text in, text out. A round re-checks the current text, takes every
applicable fix whose target does not overlap another's (the outer one wins; an inner one is
proposed again in the next round), and replaces the targets in one transformation. Rounds
stop when nothing applicable is left. The result must parse, keep every comment and the
file's line endings, and be stable: otherwise nothing is applied.
"""
from __future__ import annotations

import io
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import libcst as cst

from devlint import engine

MAX_ROUNDS = 10


@dataclass
class FixResult:
    text: str
    fixed: list[engine.Finding] = field(default_factory=list)
    remaining: list[engine.Finding] = field(default_factory=list)
    problem: Optional[str] = None  # why no fix was applied
    before: list[engine.Finding] = field(default_factory=list)  # the findings in the source


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):
        return self.replacements.get(original_node, updated_node)


Check = Callable[[str], "tuple[Optional[cst.Module], list[engine.Finding]]"]


def fix_text(source: str, check: Check, unsafe: bool) -> FixResult:
    """Apply every fix `check` offers (safe ones, and unsafe ones when asked) until none is left.

    `check` is what a plain run does (rules, noqa and per-file ignores applied) and returns the
    module its findings' nodes belong to, so `--fix` touches exactly what a check reports.
    """
    text = source
    fixed: list[engine.Finding] = []
    module, findings = check(text)
    before = findings

    def unchanged(problem: Optional[str] = None) -> FixResult:
        return FixResult(source, remaining=before, problem=problem, before=before)

    for _ in range(MAX_ROUNDS):
        chosen = _non_overlapping([f for f in findings if f.fix is not None and f.fix.applies(unsafe)])
        if not chosen:
            break
        new_text = module.visit(_Replace({f.node_fix.target: f.node_fix.replacement for f in chosen})).code
        if new_text == text:
            return unchanged("a fix made no change")
        fixed.extend(chosen)
        text = new_text
        try:
            module, findings = check(text)
        except engine.ParseError as exc:
            return unchanged(f"the fixed code does not parse ({exc.message})")
    else:
        if any(f.fix is not None and f.fix.applies(unsafe) for f in findings):
            return unchanged(f"fixes did not settle in {MAX_ROUNDS} rounds")
    if text == source:
        return unchanged()
    problem = soundness_problem(source, text)
    if problem is not None:
        return unchanged(problem)
    return FixResult(text, fixed, findings, before=before)


def _non_overlapping(findings: Sequence[engine.Finding]) -> list[engine.Finding]:
    """Outer fixes first; a fix inside (or across) one already taken waits for the next round."""
    def span(f):
        (edit,) = f.fix.edits
        return (edit.row, edit.column), (edit.end_row, edit.end_column)

    chosen, taken = [], []
    for f in sorted(findings, key=lambda f: (span(f)[0], tuple(-x for x in span(f)[1]))):
        start, end = span(f)
        if all(end <= s or start >= e for s, e in taken):
            chosen.append(f)
            taken.append((start, end))
    return chosen


def soundness_problem(before: str, after: str) -> Optional[str]:
    """Why `after` may not replace `before`, or None."""
    try:
        engine.parse(after)
        compile(after, "<fixed>", "exec", dont_inherit=True, flags=0x400)  # ast.PyCF_ONLY_AST
    except (engine.ParseError, SyntaxError, ValueError) as exc:
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
