"""The language server's documents: the settings for each (re-read when a pyproject.toml
changes), their checks (debounced, on one worker thread, a result dropped when the text changed
since), notebooks' Python cells joined into one module, and the last result of each."""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Union

from lsprotocol import types
from pygls.uris import to_fs_path

from devlint.core.findings import Finding, ParseError, file_error
from devlint.engine.incremental import ChunkParser
from devlint.workspace.config import ConfigError, Settings, find_config, load_settings

PYTHON_SUFFIXES = (".py", ".pyi")
log = logging.getLogger("devlint.frontends.server")


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


class DocumentStore:
    """The documents' side of `DevlintServer` (a mixin: the server holds the state)."""

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
            path = path_of(uri)
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

        parse = self.parsers.setdefault(uri, ChunkParser()).parse if uri in self.workspace.text_documents else None
        findings, error = _run_check(path, Linter(settings, lint_path, parse=parse).check,
                                     Linter(settings, lint_path).check, source)
        return Result(version, source, findings, error, settings)

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
            self.checker, self.check_notebook, path_of(uri), cells, version, uri)

    def check_notebook(self, path: Optional[Path], cells: list[NotebookCellText], version: Optional[int],
                       uri: Optional[str] = None) -> NotebookResult:
        """Lint a notebook's cells as one module, as `devlint check` does a `.ipynb` file (on the
        worker thread); with the `uri` of an open notebook, reparse only the statements that
        changed since its last check."""
        from devlint.workspace import notebook
        from devlint.workspace.linter import Linter

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
        findings, error = _run_check(path, lambda cells_: notebook.check_cells(cells_, linter),
                                     lambda cells_: notebook.check_cells(cells_, Linter(settings, lint_path)), nb)
        return NotebookResult(version, cells, findings, error, settings)

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

    async def current_result(self, uri: str) -> Optional[Result]:
        """The findings for the document as it is now: the last check's, or a fresh check."""
        document = self.workspace.text_documents.get(uri)
        if document is None or not _is_python(document):
            return None
        result = self.results.get(uri)
        if result is not None and result.version == document.version and result.source == document.source:
            return result
        return await asyncio.get_running_loop().run_in_executor(
            self.checker, self.check, path_of(uri), document.source, document.version, uri)

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


def path_of(uri: str) -> Optional[Path]:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


def _is_python(document) -> bool:
    return document.language_id == "python" or str(document.path).endswith(PYTHON_SUFFIXES)


def _run_check(path: Optional[Path], check, fresh_check, source) -> tuple[list[Finding], Optional[Finding]]:
    """`check(source)`, as the command line runs it (on a deeper stack for deeply nested code, with
    `fresh_check`, a linter that reuses nothing): its findings, or the error that stopped it."""
    from devlint.workspace.runner import _on_a_deep_stack, recursion_problem

    try:
        try:
            return check(source), None
        except RecursionError:
            return _on_a_deep_stack(fresh_check, source), None
    except ParseError as exc:
        return [], replace(file_error(f"cannot parse: {exc.message}", exc.row, exc.column), cell=exc.cell)
    except RecursionError:
        return [], file_error(recursion_problem(source))
    except Exception as exc:  # noqa: BLE001 - a bug in devlint must not take the server down
        log.exception("checking %s", path)
        return [], file_error(f"internal error: {type(exc).__name__}: {exc} (a devlint bug: please report it with this file)")
