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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional, Union

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from devlint import __version__
from devlint.engine.incremental import ChunkParser
from devlint.frontends.server.actions import FIX_ALL, Actions
from devlint.frontends.server.documents import DocumentStore, NotebookResult, Result
from devlint.frontends.server.publishing import Publishing
from devlint.semantic import project
from devlint.workspace.config import ConfigError, Settings

DEFAULT_DEBOUNCE = 0.25  # seconds after the last change

# Notebooks of Jupyter's type, their Python cells. pygls declares it only to clients that sync notebooks.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(notebook_selector=[types.NotebookDocumentFilterWithNotebook(
    notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")])], save=True)

log = logging.getLogger(__name__)


class DevlintServer(DocumentStore, Publishing, Actions, LanguageServer):
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
        project.forget()  # a saved file may change what other files' classes inherit
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
