"""From the engine's findings to the client's diagnostics and edits: the engine's 1-based rows
and character columns to the client's positions in UTF-16 code units, and back."""
from __future__ import annotations

import re
from typing import Callable, Optional, Sequence

from lsprotocol import types

from devlint.core.findings import Edit, Finding
from devlint.frontends.server.documents import NotebookResult, Result

_NEWLINE = re.compile(r"\r\n?|\n")  # the line breaks both LSP and the engine's rows count


class Publishing:
    """The diagnostics' side of `DevlintServer` (a mixin)."""

    def publish_notebook(self, uri: str, result: NotebookResult) -> None:
        """Each cell's diagnostics on the cell's document; cleared on cells that are no longer
        Python code cells of the notebook."""
        by_number = {cell.number: (cell.uri, lines_of(cell.source)) for cell in result.cells}

        def cells(number: Optional[int]):
            return by_number.get(number)

        for cell in result.cells:
            lines = lines_of(cell.source)
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=cell.uri, diagnostics=[self.diagnostic(lines, f, cells) for f in result.in_cell(cell)],
                version=cell.version))
        now = {cell.uri for cell in result.cells}
        for gone in self.cells_published.get(uri, set()) - now:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=gone, diagnostics=[]))
        self.cells_published[uri] = now

    def publish(self, uri: str, result: Result) -> None:
        lines = lines_of(result.source)
        diagnostics = [self.diagnostic(lines, f, lambda cell: (uri, lines))
                       for f in ([result.error] if result.error else []) + result.findings]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=result.version))

    def diagnostic(self, lines: Sequence[str], f: Finding,
                   document_of: Callable[[Optional[int]], Optional[tuple[str, Sequence[str]]]] = lambda cell: None,
                   ) -> types.Diagnostic:
        """`document_of(cell)`: the URI and lines of the document a related location is in
        (the cell's, in a notebook); a related location with none is left out."""
        from devlint.frontends.output import rule_url

        related = []
        for r in f.related:
            document = document_of(r.cell)
            if document is not None:
                related.append(types.DiagnosticRelatedInformation(
                    location=types.Location(uri=document[0], range=self.range(document[1], r.row, r.column, r.end_row, r.end_column)),
                    message=r.clause(f.cell)))

        if f.is_file_error:
            return types.Diagnostic(range=self.range(lines, f.row, f.column, f.row, f.column), message=f.message,
                                    severity=types.DiagnosticSeverity.Error, source="devlint")
        return types.Diagnostic(
            range=self.range(lines, f.row, f.column, f.end_row, f.end_column),
            message=f.message,
            severity=types.DiagnosticSeverity.Error,
            code=f.code,
            code_description=types.CodeDescription(href=rule_url(f.code)),
            source="devlint",
            related_information=related or None,
        )

    # --- positions: the engine's 1-based rows and character columns, the client's code units -------
    def range(self, lines: Sequence[str], row: int, column: int, end_row: int, end_column: int) -> types.Range:
        codec = self.workspace.position_codec
        return types.Range(
            start=codec.position_to_client_units(lines, types.Position(line=row - 1, character=column - 1)),
            end=codec.position_to_client_units(lines, types.Position(line=end_row - 1, character=end_column - 1)),
        )

    def engine_position(self, lines: Sequence[str], position: types.Position) -> tuple[int, int]:
        if position.line >= len(lines):
            return len(lines), len(lines[-1]) + 1
        server = self.workspace.position_codec.position_from_client_units(
            lines, types.Position(line=position.line, character=position.character))
        return server.line + 1, server.character + 1

    def text_edits(self, lines: Sequence[str], edits: Sequence[Edit]) -> list[types.TextEdit]:
        return [types.TextEdit(range=self.range(lines, e.row, e.column, e.end_row, e.end_column), new_text=e.content)
                for e in edits]

    def workspace_edit(self, uri: str, version: Optional[int], edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        capabilities = self.client_capabilities.workspace
        versioned = bool(capabilities and capabilities.workspace_edit and capabilities.workspace_edit.document_changes)
        if versioned:  # the client refuses the edit if the document changed since
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=edits)])
        return types.WorkspaceEdit(changes={uri: edits})


def lines_of(text: str) -> list[str]:
    return _NEWLINE.split(text)


def keep_ends(text: str) -> list[str]:
    """The lines of `text` with their line breaks."""
    return [line for line in re.split(r"(?<=\n)|(?<=\r)(?!\n)", text) if line]


def row_column(text: str, offset: int) -> tuple[int, int]:
    """The 1-based row and column of `offset`, a line start or the end of `text`."""
    starts = [0] + [m.end() for m in _NEWLINE.finditer(text, 0, offset)]
    return len(starts), offset - starts[-1] + 1
