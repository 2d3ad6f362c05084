"""`devlint server`: a Language Server over stdio (pygls), for any editor with an LSP client.

The same `Linter` as every other front end, with the settings the command line would use for
the file (the nearest pyproject.toml's [tool.devlint]). Diagnostics follow open, change and
save, debounced: a change schedules a check `debounce` seconds later and a newer change
cancels it. Checks run on one worker thread, so the connection keeps answering while libcst
works; a result for a text that has changed since is dropped.

Code actions: a quick fix per fixable finding in the requested range (the edits the engine
reports for that finding), and `source.fixAll.devlint`, which is `devlint --fix` on the buffer.

Jupyter notebooks, where the client syncs them (LSP 3.17 `notebookDocument/*`): the Python cells
are joined into one module as `devlint check` joins a `.ipynb` file's (so an import in one cell
resolves names in the next), and each diagnostic is published on its cell's document, with rows
inside the cell. A quick fix on a cell edits that cell; fixAll edits every cell it changes.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from devlint import __version__
from devlint.workspace.config import ConfigError, Settings, find_config, load_settings
from devlint.core.findings import Edit, Finding, ParseError, file_error
from devlint.engine.incremental import ChunkParser

DEFAULT_DEBOUNCE = 0.25  # seconds after the last change
FIX_ALL = "source.fixAll.devlint"
PYTHON_SUFFIXES = (".py", ".pyi")
_NEWLINE = re.compile(r"\r\n?|\n")  # the line breaks both LSP and the engine's rows count

# Notebooks of Jupyter's type, their Python cells. pygls declares it only to clients that sync notebooks.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(notebook_selector=[types.NotebookDocumentFilterWithNotebook(
    notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")])], save=True)

log = logging.getLogger(__name__)


@dataclass
class Result:
    """What a check found in one version of a document."""

    version: Optional[int]
    source: str
    findings: list[Finding]
    error: Optional[Finding]  # the text could not be checked: a syntax error, a bad configuration
    settings: Optional[Settings]


@dataclass
class NotebookCellText:
    uri: str
    number: int  # 1-based, among the notebook's cells
    version: Optional[int]
    source: str


@dataclass
class NotebookResult:
    """What a check found in one version of a notebook: findings carry their cell (`.cell`)."""

    version: Optional[int]  # the notebook's
    cells: list[NotebookCellText]  # its Python cells as checked
    findings: list[Finding]
    error: Optional[Finding]  # with `.cell` where it has a place; else shown on the first cell
    settings: Optional[Settings]

    def cell(self, uri: str) -> Optional[NotebookCellText]:
        return next((c for c in self.cells if c.uri == uri), None)

    def in_cell(self, cell: NotebookCellText) -> list[Finding]:
        first = self.cells and self.cells[0].number == cell.number
        return [f for f in ([self.error] if self.error else []) + self.findings
                if f.cell == cell.number or (f.cell is None and first)]


class DevlintServer(LanguageServer):
    def __init__(self, debounce: float = DEFAULT_DEBOUNCE) -> None:
        # Full synchronisation: pygls splits lines on every character str.splitlines() knows
        # (form feeds, U+2028, ...), which editors and Python do not, so incremental changes
        # could land in the wrong place in such a file.
        super().__init__("devlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full,
                         notebook_document_sync=NOTEBOOK_SYNC)
        self.debounce = debounce
        self.pending: dict[str, asyncio.Task] = {}
        self.results: dict[str, Union[Result, NotebookResult]] = {}
        self.cells_published: dict[str, set[str]] = {}  # notebook URI: the cell URIs it published on
        self.parsers: dict[str, ChunkParser] = {}  # per open document, used on the worker thread only
        self.checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="devlint-check")
        self._settings: dict[Path, tuple[tuple, Union[Settings, ConfigError]]] = {}

    # --- settings --------------------------------------------------------------------------------
    def settings_for(self, path: Optional[Path]) -> Union[Settings, ConfigError]:
        """The settings `devlint check PATH` would use, read again whenever a pyproject.toml
        between the file and the root of the file system changes (or appears, or goes)."""
        directory = path.parent if path is not None else self.root()
        stamp = _pyproject_stamp(directory)
        cached = self._settings.get(directory)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            config = find_config(directory)
            settings: Union[Settings, ConfigError] = load_settings(
                config, self.root(path), start=path if path is not None else directory)
        except ConfigError as exc:
            settings = exc
        self._settings[directory] = (stamp, settings)
        return settings

    def root(self, path: Optional[Path] = None) -> Path:
        """The workspace folder holding `path` (the root without a configuration file)."""
        folders = [Path(to_fs_path(f.uri) or "") for f in self.workspace.folders.values()]
        if self.workspace.root_path:
            folders.append(Path(self.workspace.root_path))
        for folder in folders:
            if path is None or _is_under(path, folder):
                return folder
        return path.parent if path is not None else Path.cwd()

    # --- checking --------------------------------------------------------------------------------
    def schedule(self, uri: str, delay: float) -> None:
        """Check `uri` after `delay` seconds; a check still pending for it is cancelled."""
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()
        self.pending[uri] = asyncio.ensure_future(self._check_later(uri, delay))

    async def _check_later(self, uri: str, delay: float) -> None:
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            if self.workspace.get_notebook_document(notebook_uri=uri) is not None:
                result = await self.check_open_notebook(uri)
                current = self.workspace.get_notebook_document(notebook_uri=uri)
                if current is not None and current.version == result.version:  # else a newer check is scheduled
                    self.results[uri] = result
                    self.publish_notebook(uri, result)
                return
            document = self.workspace.get_text_document(uri)
            if not _is_python(document):
                return
            version, source = document.version, document.source
            path = _path_of(uri)
            result = await asyncio.get_running_loop().run_in_executor(
                self.checker, self.check, path, source, version, uri)
        except asyncio.CancelledError:
            return
        finally:
            if self.pending.get(uri) is asyncio.current_task():
                del self.pending[uri]
        current = self.workspace.text_documents.get(uri)
        if current is None or current.version != version:
            return  # closed or changed meanwhile: a newer check is scheduled
        self.results[uri] = result
        self.publish(uri, result)

    def check(self, path: Optional[Path], source: str, version: Optional[int] = None, uri: Optional[str] = None) -> Result:
        """Lint one text (on the worker thread); with the `uri` of an open document, reparse only
        the statements that changed since its last check."""
        settings = self.settings_for(path)
        if isinstance(settings, ConfigError):
            error = file_error(f"invalid devlint configuration, file not checked: {settings}")
            return Result(version, source, [], error, None)
        lint_path = path if path is not None else self.root() / "untitled.py"
        if path is not None and _excluded(path, settings):
            return Result(version, source, [], None, settings)
        from devlint.workspace.linter import Linter

        from devlint.workspace.runner import DEEP_RECURSION_LIMIT, _on_a_deep_stack

        parse = self.parsers.setdefault(uri, ChunkParser()).parse if uri in self.workspace.text_documents else None
        linter = Linter(settings, lint_path, parse=parse)
        try:
            try:
                findings = linter.check(source)
            except RecursionError:  # deeply nested code, as the command line does it
                findings = _on_a_deep_stack(Linter(settings, lint_path).check, source)
        except ParseError as exc:
            return Result(version, source, [], file_error(f"cannot parse: {exc.message}", exc.row, exc.column), settings)
        except RecursionError:
            error = file_error(f"cannot check: nested deeper than {DEEP_RECURSION_LIMIT} levels")
            return Result(version, source, [], error, settings)
        except Exception as exc:  # noqa: BLE001 - a bug in devlint must not take the server down
            log.exception("checking %s", path)
            error = file_error(f"internal error: {type(exc).__name__}: {exc} (a devlint bug: please report it with this file)")
            return Result(version, source, [], error, settings)
        return Result(version, source, findings, None, settings)

    # --- notebooks -------------------------------------------------------------------------------
    def notebook_cells(self, uri: str) -> tuple[Optional[int], list[NotebookCellText]]:
        """The open notebook's version and its Python code cells, as they are now."""
        notebook = self.workspace.get_notebook_document(notebook_uri=uri)
        cells = []
        for number, cell in enumerate(notebook.cells, 1):
            document = self.workspace.text_documents.get(cell.document)
            if cell.kind == types.NotebookCellKind.Code and document is not None and document.language_id == "python":
                cells.append(NotebookCellText(cell.document, number, document.version, document.source))
        return notebook.version, cells

    async def check_open_notebook(self, uri: str) -> NotebookResult:
        version, cells = self.notebook_cells(uri)
        return await asyncio.get_running_loop().run_in_executor(
            self.checker, self.check_notebook, _path_of(uri), cells, version, uri)

    def check_notebook(self, path: Optional[Path], cells: list[NotebookCellText], version: Optional[int],
                       uri: Optional[str] = None) -> NotebookResult:
        """Lint a notebook's cells as one module, as `devlint check` does a `.ipynb` file (on the
        worker thread); with the `uri` of an open notebook, reparse only the statements that
        changed since its last check."""
        from devlint.workspace import notebook
        from devlint.workspace.linter import Linter
        from devlint.workspace.runner import DEEP_RECURSION_LIMIT, _on_a_deep_stack

        settings = self.settings_for(path)
        if isinstance(settings, ConfigError):
            error = file_error(f"invalid devlint configuration, file not checked: {settings}")
            return NotebookResult(version, cells, [], error, None)
        if (path is not None and _excluded(path, settings)) or not cells:
            return NotebookResult(version, cells, [], None, settings)
        nb = notebook.join([(c.number, c.source) for c in cells])
        is_open = uri is not None and self.workspace.get_notebook_document(notebook_uri=uri) is not None
        parse = self.parsers.setdefault(uri, ChunkParser()).parse if is_open else None
        lint_path = path if path is not None else self.root() / "untitled.ipynb"
        linter = Linter(settings, lint_path, parse=parse)
        try:
            try:
                findings = notebook.check_cells(nb, linter)
            except RecursionError:
                findings = _on_a_deep_stack(notebook.check_cells, nb, Linter(settings, lint_path))
        except ParseError as exc:
            error = replace(file_error(f"cannot parse: {exc.message}", exc.row, exc.column), cell=exc.cell)
            return NotebookResult(version, cells, [], error, settings)
        except RecursionError:
            error = file_error(f"cannot check: nested deeper than {DEEP_RECURSION_LIMIT} levels")
            return NotebookResult(version, cells, [], error, settings)
        except Exception as exc:  # noqa: BLE001 - a bug in devlint must not take the server down
            log.exception("checking %s", path)
            error = file_error(f"internal error: {type(exc).__name__}: {exc} (a devlint bug: please report it with this file)")
            return NotebookResult(version, cells, [], error, settings)
        return NotebookResult(version, cells, findings, None, settings)

    def publish_notebook(self, uri: str, result: NotebookResult) -> None:
        """Each cell's diagnostics on the cell's document; cleared on cells that are no longer
        Python code cells of the notebook."""
        by_number = {cell.number: (cell.uri, _lines(cell.source)) for cell in result.cells}

        def cells(number: Optional[int]):
            return by_number.get(number)

        for cell in result.cells:
            lines = _lines(cell.source)
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=cell.uri, diagnostics=[self.diagnostic(lines, f, cells) for f in result.in_cell(cell)],
                version=cell.version))
        now = {cell.uri for cell in result.cells}
        for gone in self.cells_published.get(uri, set()) - now:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=gone, diagnostics=[]))
        self.cells_published[uri] = now

    def forget(self, uri: str) -> None:
        """Drop what is kept for a closed document: its pending check, last result and parser."""
        pending = self.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self.results.pop(uri, None)
        try:
            self.checker.submit(self.parsers.pop, uri, None)  # the worker's: dropped on its thread
        except RuntimeError:  # shut down already
            pass

    def clear_notebook(self, uri: str) -> None:
        self.forget(uri)
        for cell_uri in sorted(self.cells_published.pop(uri, set())):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=[]))

    async def current_notebook_result(self, uri: str) -> Optional[NotebookResult]:
        """The findings for the notebook as it is now: the last check's, or a fresh check."""
        if self.workspace.get_notebook_document(notebook_uri=uri) is None:
            return None
        version, cells = self.notebook_cells(uri)
        result = self.results.get(uri)
        if isinstance(result, NotebookResult) and result.version == version and result.cells == cells:
            return result
        return await self.check_open_notebook(uri)

    async def notebook_code_actions(self, notebook_uri: str, uri: str,
                                    params: types.CodeActionParams) -> Optional[list[types.CodeAction]]:
        result = await self.current_notebook_result(notebook_uri)
        cell = result.cell(uri) if result is not None else None
        if cell is None or result.settings is None:
            return None
        only = params.context.only
        lines = _lines(cell.source)
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
            fixed = Linter(result.settings, _path_of(uri) or Path("untitled.ipynb")).fix(nb.module, unsafe)
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
                    _lines(c.source), [_replacement(c.source, changed[c.number])]))
                edit.document_changes.extend(one.document_changes or [])
                edit.changes.update(one.changes or {})
        n = len(fixed.fixed)
        which = "safe and unsafe" if unsafe else "safe"
        return types.CodeAction(title=f"devlint: apply the {which} fixes ({n} finding{'s' * (n != 1)})", kind=FIX_ALL,
                                edit=types.WorkspaceEdit(document_changes=edit.document_changes or None,
                                                         changes=edit.changes or None))

    async def current_result(self, uri: str) -> Optional[Result]:
        """The findings for the document as it is now: the last check's, or a fresh check."""
        document = self.workspace.text_documents.get(uri)
        if document is None or not _is_python(document):
            return None
        result = self.results.get(uri)
        if result is not None and result.version == document.version and result.source == document.source:
            return result
        return await asyncio.get_running_loop().run_in_executor(
            self.checker, self.check, _path_of(uri), document.source, document.version, uri)

    def publish(self, uri: str, result: Result) -> None:
        lines = _lines(result.source)
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
        lines = _lines(result.source)
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
            fixed = Linter(result.settings, _path_of(uri) or Path("untitled.py")).fix(result.source, unsafe, result.findings)
        except ParseError:
            return None
        if fixed.problem is not None or fixed.text == result.source:
            if fixed.problem is not None:
                log.warning("fixes not applied to %s: %s", uri, fixed.problem)
            return None
        edit = _replacement(result.source, fixed.text)
        lines = _lines(result.source)
        n = len(fixed.fixed)
        which = "safe and unsafe" if unsafe else "safe"
        return types.CodeAction(
            title=f"devlint: apply the {which} fixes ({n} finding{'s' * (n != 1)})",
            kind=FIX_ALL,
            edit=self.workspace_edit(uri, result.version, self.text_edits(lines, [edit])),
        )

    # --- configuration -----------------------------------------------------------------------------
    def recheck_all(self) -> None:
        self._settings.clear()
        for uri in list(self.workspace.text_documents):
            if self.workspace.get_notebook_document(cell_uri=uri) is None:  # a cell: its notebook is checked
                self.schedule(uri, 0)
        for notebook in list(self.workspace.notebook_documents.values()):
            self.schedule(notebook.uri, 0)


def _pyproject_stamp(directory: Path) -> tuple:
    """(path, mtime, size) of every pyproject.toml from `directory` up: what settings depend on."""
    stamp = []
    for d in (directory, *directory.parents):
        try:
            st = os.stat(d / "pyproject.toml")
        except OSError:
            continue
        stamp.append((str(d), st.st_mtime_ns, st.st_size))
    return tuple(stamp)


def _is_under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def _excluded(path: Path, settings: Settings) -> bool:
    """Excluded by [tool.devlint] `exclude`, as the pre-commit hooks (`--force-exclude`) see it."""
    from devlint.workspace.runner import _excluded_with_parents

    return _excluded_with_parents(path, settings)


def _path_of(uri: str) -> Optional[Path]:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


def _is_python(document) -> bool:
    return document.language_id == "python" or str(document.path).endswith(PYTHON_SUFFIXES)


def _lines(text: str) -> list[str]:
    return _NEWLINE.split(text)


def _wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    """Whether a client asking for the kinds `only` wants an action of `kind` (`source.fixAll`
    covers `source.fixAll.devlint`)."""
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def _replacement(old: str, new: str) -> Edit:
    """One edit from `old` to `new`: the whole lines between their common first and last lines."""
    a, b = _keep_ends(old), _keep_ends(new)
    same = min(len(a), len(b))
    head = 0
    while head < same and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < same - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = sum(map(len, a[:head]))
    end = len(old) - sum(map(len, a[len(a) - tail:]))
    return Edit("".join(b[head:len(b) - tail]), *_row_column(old, start), *_row_column(old, end))


def _keep_ends(text: str) -> list[str]:
    """The lines of `text` with their line breaks."""
    return [line for line in re.split(r"(?<=\n)|(?<=\r)(?!\n)", text) if line]


def _row_column(text: str, offset: int) -> tuple[int, int]:
    """The 1-based row and column of `offset`, a line start or the end of `text`."""
    starts = [0] + [m.end() for m in _NEWLINE.finditer(text, 0, offset)]
    return len(starts), offset - starts[-1] + 1


def build(debounce: float = DEFAULT_DEBOUNCE) -> DevlintServer:
    server = DevlintServer(debounce)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: DevlintServer, params: types.InitializedParams) -> None:
        watched = ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files
        if watched and watched.dynamic_registration:
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[types.Registration(
                    id="devlint-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=types.DidChangeWatchedFilesRegistrationOptions(
                        watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]),
                )]))
            except Exception as exc:  # noqa: BLE001 - settings are still re-read when they change on disk
                log.warning("could not watch pyproject.toml: %s", exc)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DevlintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DevlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: DevlintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DevlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.forget(uri)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(ls: DevlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(ls: DevlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, ls.debounce)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(ls: DevlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: DevlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.clear_notebook(params.notebook_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: DevlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(change.uri.endswith("pyproject.toml") for change in params.changes):
            ls.recheck_all()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll,
                                                   FIX_ALL]),
    )
    async def code_action(ls: DevlintServer, params: types.CodeActionParams) -> Optional[list[types.CodeAction]]:
        return await ls.code_actions(params)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: DevlintServer, *args) -> None:
        for task in ls.pending.values():
            task.cancel()
        ls.pending.clear()
        ls.checker.shutdown(wait=False, cancel_futures=True)

    return server


def serve(debounce: float = DEFAULT_DEBOUNCE) -> None:
    import sys

    # Standard output carries the protocol: anything else printed goes to standard error.
    protocol_out, sys.stdout = sys.stdout.buffer, sys.stderr
    build(debounce).start_io(sys.stdin.buffer, protocol_out)
