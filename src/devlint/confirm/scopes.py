"""Where a finding stands in its file (its class, its function, the lines of each call), and the
case a rule's judge reads: the finding, the events the runs recorded, the runs that stopped."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable, Optional

from devlint import engine


@dataclass
class Scopes:
    """Where a finding stands in its file: the classes and plain functions, and each call's lines."""
    classes: list[tuple[int, int]] = field(default_factory=list)
    top_classes: list[tuple[int, int, str]] = field(default_factory=list)  # at module level, with names
    functions: list[tuple[int, int, str]] = field(default_factory=list)  # outside classes
    methods: list[tuple[int, int, str]] = field(default_factory=list)  # every function, in a class or not
    calls: list[tuple[int, int]] = field(default_factory=list)
    tree: Optional[ast.Module] = None  # the file parsed, None where it does not parse

    @classmethod
    def of(cls, source: str) -> "Scopes":
        scopes = cls()
        try:
            scopes.tree = ast.parse(source)
        except SyntaxError:
            return scopes
        for node in ast.walk(scopes.tree):
            if isinstance(node, ast.ClassDef):
                scopes.classes.append((node.lineno, node.end_lineno or node.lineno))
            elif isinstance(node, ast.Call):
                scopes.calls.append((node.lineno, node.end_lineno or node.lineno))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scopes.methods.append((node.lineno, node.end_lineno or node.lineno, node.name))
        scopes.functions = [m for m in scopes.methods if not any(a <= m[0] <= b for a, b in scopes.classes)]
        scopes.top_classes = list(_module_level_classes(scopes.tree.body))
        return scopes

    def left_out(self, row: int, only: Optional[str]) -> Optional[str]:
        """Why `FILE::ONLY` leaves the finding at `row` out, or None when it is in the selection
        (or outside every class: the selected class's run may reach it)."""
        if only is None:
            return None
        if only not in {name for _, _, name in self.top_classes}:
            return f"not selected: the file has no class {only}, the one selected, so nothing in it was run"
        owner = next((name for first, last, name in self.top_classes if first <= row <= last), None)
        if owner is None or owner == only:
            return None
        return f"not selected: line {row} is in class {owner}, and only {only} was run"

    def _innermost(self, row: int) -> Optional[tuple[int, int, str]]:
        """The innermost function around `row`, in a class or not: (first row, last row, name)."""
        around = [m for m in self.methods if m[0] <= row <= m[1]]
        return min(around, key=lambda m: m[1] - m[0]) if around else None

    def method_at(self, row: int) -> Optional[str]:
        function = self._innermost(row)
        return function[2] if function else None

    def function_span(self, row: int) -> tuple[int, int]:
        """The rows of the innermost function around `row` (just `row` outside functions)."""
        function = self._innermost(row)
        return (function[0], function[1]) if function else (row, row)

    def call_rows(self, row: int) -> set[int]:
        """The lines of the smallest call around `row`: a tensor is made on the line its call starts."""
        around = [c for c in self.calls if c[0] <= row <= c[1]]
        first, last = min(around, key=lambda c: c[1] - c[0]) if around else (row, row)
        return set(range(first, last + 1))

    def outside_classes(self, finding: engine.Finding, events: list[dict], ran: Iterable[int] = ()) -> Optional[str]:
        """Why a finding outside every class is not run, or None for one inside a class, or inside a
        function that a module's run reached (a line of it ran, or its events name one)."""
        row = finding.row
        if not self.calls and not self.classes and not self.functions or any(a <= row <= b for a, b in self.classes):
            return None
        where = [f for f in self.functions if f[0] <= row <= f[1]]
        rows = set(ran) | {e.get("row") or 0 for e in events}
        if where and any(f[0] < r <= f[1] for f in where for r in rows):  # the def line runs at import
            return None
        place = f"the function {min(where, key=lambda f: f[1] - f[0])[2]}(), which no module run reached" if where \
            else "script code that confirm does not run"
        return f"{finding.code} at line {row} is in {place}; only nn.Module classes are built and run"


def _module_level_classes(body: list) -> Iterable[tuple[int, int, str]]:
    """(first row, last row, name) of the classes in `body`, looking into if/try/with/for blocks
    (they run at import) but not into functions or classes."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            yield first, node.end_lineno or node.lineno, node.name
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for name in ("body", "orelse", "finalbody", "handlers"):
                yield from _module_level_classes([n for n in getattr(node, name, []) if isinstance(n, ast.AST)])


@dataclass
class Case:
    finding: engine.Finding
    events: list[dict]
    stopped: list[dict]  # the runs of the owning class (or of every class) that stopped early
    verdict: object  # (status, message, use=None, origin=None) -> Verdict
    scopes: Scopes

    def of_kind(self, kind: str, rows: Optional[set[int]] = None) -> list[dict]:
        return [e for e in self.events if e["kind"] == kind and (rows is None or e.get("row") in rows)]

    def mixes_from(self, rows: set) -> list[dict]:
        return [e for e in self.events if e["kind"] == "mix" and rows & set(e["origin_rows"])]
