"""The language server's code actions: a quick fix per fixable finding in the requested range,
and `source.fixAll.devlint` (`devlint --fix` on the buffer, or on a notebook's cells)."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Optional, Sequence

from lsprotocol import types

from devlint.core.findings import Edit, Finding, ParseError
from devlint.frontends.server.documents import NotebookResult, Result, path_of
from devlint.frontends.server.publishing import keep_ends, lines_of, row_column

FIX_ALL = "source.fixAll.devlint"
log = logging.getLogger("devlint.frontends.server")


class Actions:
    """The code actions' side of `DevlintServer` (a mixin)."""

    async def notebook_code_actions(self, notebook_uri: str, uri: str,
                                    params: types.CodeActionParams) -> Optional[list[types.CodeAction]]:
        result = await self.current_notebook_result(notebook_uri)
        cell = result.cell(uri) if result is not None else None
        if cell is None or result.settings is None:
            return None
        only = params.context.only
        lines = lines_of(cell.source)
        actions = self.quick_fixes(uri, cell.version, lines, result.in_cell(cell), params.range) if _wanted(
            types.CodeActionKind.QuickFix, only) else []
        if _wanted(FIX_ALL, only) and any(f.fixable(result.settings.unsafe_fixes) for f in result.findings):
            action = await asyncio.get_running_loop().run_in_executor(
                self.checker, self.fix_all_notebook, notebook_uri, result)
            if action is not None:
                actions.append(action)
        return actions

    def fix_all_notebook(self, uri: str, result: NotebookResult) -> Optional[types.CodeAction]:
        """`devlint --fix` on the notebook's cells: one edit on each cell it changes."""
        from devlint.workspace import notebook
        from devlint.workspace.linter import Linter

        unsafe = result.settings.unsafe_fixes
        nb = notebook.join([(c.number, c.source) for c in result.cells])
        try:
            fixed = Linter(result.settings, path_of(uri) or Path("untitled.ipynb")).fix(nb.module, unsafe)
            changed = notebook.split(nb, fixed.text) if fixed.problem is None else {}
        except (ParseError, notebook.NotebookError) as exc:
            log.warning("fixes not applied to %s: %s", uri, getattr(exc, "message", exc))
            return None
        if fixed.problem is not None:
            log.warning("fixes not applied to %s: %s", uri, fixed.problem)
        if not changed:
            return None
        edit = types.WorkspaceEdit(document_changes=[], changes={})
        for c in result.cells:
            if c.number in changed:
                one = self.workspace_edit(c.uri, c.version, self.text_edits(
                    lines_of(c.source), [_replacement(c.source, changed[c.number])]))
                edit.document_changes.extend(one.document_changes or [])
                edit.changes.update(one.changes or {})
        n = len(fixed.fixed)
        which = "safe and unsafe" if unsafe else "safe"
        return types.CodeAction(title=f"devlint: apply the {which} fixes ({n} finding{'s' * (n != 1)})", kind=FIX_ALL,
                                edit=types.WorkspaceEdit(document_changes=edit.document_changes or None,
                                                         changes=edit.changes or None))

    # --- code actions ----------------------------------------------------------------------------
    async def code_actions(self, params: types.CodeActionParams) -> Optional[list[types.CodeAction]]:
        uri = params.text_document.uri
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            return await self.notebook_code_actions(notebook.uri, uri, params)
        result = await self.current_result(uri)
        if result is None or result.settings is None:
            return None
        only = params.context.only
        lines = lines_of(result.source)
        actions: list[types.CodeAction] = []
        if _wanted(types.CodeActionKind.QuickFix, only):
            actions = self.quick_fixes(uri, result.version, lines, result.findings, params.range)
        if _wanted(FIX_ALL, only) and any(f.fixable(result.settings.unsafe_fixes) for f in result.findings):
            action = await asyncio.get_running_loop().run_in_executor(self.checker, self.fix_all, uri, result)
            if action is not None:
                actions.append(action)
        return actions

    def quick_fixes(self, uri: str, version: Optional[int], lines: Sequence[str], findings: Sequence[Finding],
                    where: types.Range) -> list[types.CodeAction]:
        """A quick fix for each fixable finding of `findings` that meets the range `where`."""
        start = self.engine_position(lines, where.start)
        end = self.engine_position(lines, where.end)
        actions = []
        for f in findings:
            if f.fix is None or (f.end_row, f.end_column) < start or (f.row, f.column) > end:
                continue
            actions.append(types.CodeAction(
                title=f"Fix {f.code}: {f.fix.message} ({f.fix.applicability})",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[self.diagnostic(lines, f, lambda cell, f=f: (uri, lines) if cell == f.cell else None)],
                is_preferred=f.fix.applicability == "safe",
                edit=self.workspace_edit(uri, version, self.text_edits(lines, f.fix.edits)),
            ))
        return actions

    def fix_all(self, uri: str, result: Result) -> Optional[types.CodeAction]:
        """`devlint --fix` on the buffer (with unsafe fixes when the configuration asks for them),
        as one edit over the span that changes."""
        from devlint.workspace.linter import Linter

        unsafe = result.settings.unsafe_fixes
        try:
            fixed = Linter(result.settings, path_of(uri) or Path("untitled.py")).fix(result.source, unsafe, result.findings)
        except ParseError:
            return None
        if fixed.problem is not None or fixed.text == result.source:
            if fixed.problem is not None:
                log.warning("fixes not applied to %s: %s", uri, fixed.problem)
            return None
        edit = _replacement(result.source, fixed.text)
        lines = lines_of(result.source)
        n = len(fixed.fixed)
        which = "safe and unsafe" if unsafe else "safe"
        return types.CodeAction(
            title=f"devlint: apply the {which} fixes ({n} finding{'s' * (n != 1)})",
            kind=FIX_ALL,
            edit=self.workspace_edit(uri, result.version, self.text_edits(lines, [edit])),
        )


def _wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    """Whether a client asking for the kinds `only` wants an action of `kind` (`source.fixAll`
    covers `source.fixAll.devlint`)."""
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def _replacement(old: str, new: str) -> Edit:
    """One edit from `old` to `new`: the whole lines between their common first and last lines."""
    a, b = keep_ends(old), keep_ends(new)
    same = min(len(a), len(b))
    head = 0
    while head < same and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < same - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = sum(map(len, a[:head]))
    end = len(old) - sum(map(len, a[len(a) - tail:]))
    return Edit("".join(b[head:len(b) - tail]), *row_column(old, start), *row_column(old, end))
