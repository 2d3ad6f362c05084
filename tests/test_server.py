"""`devlint server` driven by a real LSP client (pygls's LanguageClient) over stdio, as an editor would."""
import asyncio
import json
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

from helpers import devlint  # noqa: E402

WAIT = 30  # seconds: a bound on every wait, never a sleep

BUGGY = '''import torch


def load(model, path):
    model.load_state_dict(torch.load(path))


def to_numpy(x, device):
    y = x.to(device)
    return y.numpy()
'''


class Client(LanguageClient):
    exit_status = None

    async def server_exit(self, server) -> None:
        self.exit_status = server.returncode


class Editor:
    """An LSP client session against `python -m devlint server`, with the diagnostics it receives."""

    def __init__(self, root: Path, debounce: float = 0.0, env=None) -> None:
        self.root = root
        self.debounce = debounce
        self.env = env
        self.client = Client("devlint-tests", "1")
        self.published: dict[str, list[types.PublishDiagnosticsParams]] = {}
        self.changed = asyncio.Condition()
        self.registrations: list[types.Registration] = []
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        async def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
            async with self.changed:
                self.published.setdefault(params.uri, []).append(params)
                self.changed.notify_all()

        @self.client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: types.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

    async def __aenter__(self) -> "Editor":
        await self.client.start_io(sys.executable, "-m", "devlint", "server", "--debounce", str(self.debounce),
                                   cwd=str(self.root), env=self.env)
        self.initialize_result = await asyncio.wait_for(self.client.initialize_async(types.InitializeParams(
            process_id=None,
            root_uri=from_fs_path(str(self.root)),
            workspace_folders=[types.WorkspaceFolder(uri=from_fs_path(str(self.root)), name="project")],
            capabilities=types.ClientCapabilities(
                workspace=types.WorkspaceClientCapabilities(
                    workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True),
                    did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True),
                ),
                general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
                notebook_document=types.NotebookDocumentClientCapabilities(
                    synchronization=types.NotebookDocumentSyncClientCapabilities()),
            ),
        )), WAIT)
        self.client.initialized(types.InitializedParams())
        return self

    async def __aexit__(self, *exc) -> None:
        if not self.client.stopped:
            await self.close()

    async def close(self) -> int:
        """shutdown, exit: the server's exit status."""
        await asyncio.wait_for(self.client.shutdown_async(None), WAIT)
        self.client.exit(None)
        await asyncio.wait_for(self.client.stop(), WAIT)  # returns once the server process has exited
        return self.client.exit_status

    def uri(self, name: str) -> str:
        return from_fs_path(str(self.root / name))

    def open(self, name: str, text: str) -> str:
        uri = self.uri(name)
        (self.root / name).write_text(text, encoding="utf-8")
        self.versions[uri], self.texts[uri] = 1, text
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        return uri

    def change(self, uri: str, text: str) -> int:
        self.versions[uri] += 1
        self.texts[uri] = text
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        return self.versions[uri]

    # --- notebooks, as VS Code syncs them: one text document per cell ----------------------------
    def cell_uri(self, name: str, key: str) -> str:
        return f"vscode-notebook-cell:{self.root / name}#{key}"

    def open_notebook(self, name: str, cells: list[tuple[str, str]]) -> tuple[str, list[str]]:
        """Open a notebook of (kind, text) cells, kind "code" or "markdown": its URI and its cells'."""
        uri = self.uri(name)
        uris = [self.cell_uri(name, f"c{i}") for i in range(len(cells))]
        self.versions[uri] = 1
        for cell_uri, (_, text) in zip(uris, cells):
            self.versions[cell_uri], self.texts[cell_uri] = 1, text
        self.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(uri=uri, notebook_type="jupyter-notebook", version=1, cells=[
                types.NotebookCell(kind=_kind(kind), document=cell_uri) for cell_uri, (kind, _) in zip(uris, cells)]),
            cell_text_documents=[
                types.TextDocumentItem(uri=cell_uri, language_id="python" if kind == "code" else "markdown", version=1,
                                       text=text) for cell_uri, (kind, text) in zip(uris, cells)]))
        return uri, uris

    def change_cell(self, uri: str, cell_uri: str, text: str) -> int:
        """Replace a cell's text: the notebook's new version."""
        self.versions[uri] += 1
        self.versions[cell_uri] += 1
        self.texts[cell_uri] = text
        self.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(uri=uri, version=self.versions[uri]),
            change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
                types.NotebookDocumentCellContentChanges(
                    document=types.VersionedTextDocumentIdentifier(uri=cell_uri, version=self.versions[cell_uri]),
                    changes=[types.TextDocumentContentChangeWholeDocument(text=text)])]))))
        return self.versions[uri]

    def insert_cell(self, uri: str, index: int, cell_uri: str, text: str) -> int:
        """Insert a code cell at `index`: the notebook's new version."""
        self.versions[uri] += 1
        self.versions[cell_uri], self.texts[cell_uri] = 1, text
        self.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(uri=uri, version=self.versions[uri]),
            change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
                structure=types.NotebookDocumentCellChangeStructure(
                    array=types.NotebookCellArrayChange(start=index, delete_count=0, cells=[
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=cell_uri)]),
                    did_open=[types.TextDocumentItem(uri=cell_uri, language_id="python", version=1, text=text)])))))
        return self.versions[uri]

    async def diagnostics(self, uri: str, version=None, after: int = 0) -> list[types.Diagnostic]:
        """The first diagnostics published for `uri` after the `after`-th publication (for
        `version`, when given)."""
        def found():
            for p in self.published.get(uri, [])[after:]:
                if version is None or p.version == version:
                    return p
            return None

        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(found), WAIT)
            return list(found().diagnostics)

    async def barrier(self) -> None:
        """Wait until every check scheduled so far has run: a check debounced now, on a new
        buffer, is published after them (their timers started earlier, and one worker runs the
        checks in order)."""
        uri = self.open(f"barrier{len(self.versions)}.py", "import torch\n")
        await self.diagnostics(uri, version=1)
        await self.diagnostics(uri, version=self.change(uri, "import torch\n\n"))

    def count(self, uri: str) -> int:
        return len(self.published.get(uri, []))

    async def actions(self, uri: str, start=(0, 0), end=None, only=None) -> list[types.CodeAction]:
        end = end or start
        return await asyncio.wait_for(self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=start[0], character=start[1]),
                              end=types.Position(line=end[0], character=end[1])),
            context=types.CodeActionContext(diagnostics=[], only=only),
        )), WAIT) or []


def _kind(kind: str) -> types.NotebookCellKind:
    return types.NotebookCellKind.Code if kind == "code" else types.NotebookCellKind.Markup


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 4 * WAIT))


def apply(text: str, action: types.CodeAction, uri: str, version: int) -> str:
    """The text after the client applies `action`'s edit (positions in UTF-16 code units)."""
    (change,) = action.edit.document_changes
    assert (change.text_document.uri, change.text_document.version) == (uri, version)
    return apply_edits(text, change)


def apply_edits(text: str, change: types.TextDocumentEdit) -> str:
    lines = text.splitlines(keepends=True) + [""]

    def offset(position: types.Position) -> int:
        line = lines[position.line]
        units = 0
        for i, ch in enumerate(line):
            if units >= position.character:
                return sum(map(len, lines[:position.line])) + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return sum(map(len, lines[:position.line])) + len(line)

    for edit in sorted(change.edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def cli_records(root: Path, name: str) -> list[dict]:
    r = devlint("--no-cache", "--output-format", "json", name, cwd=root)
    return json.loads(r.stdout)


# --- diagnostics ---------------------------------------------------------------------------------

def test_help_lists_the_server():
    r = devlint("--help", cwd=Path.cwd())
    assert re.search(r"^    server +\S", r.stdout, re.M)
    r = devlint("server", "--help", cwd=Path.cwd())
    assert r.returncode == 0 and r.stdout.startswith("usage: devlint server ") and "--debounce SECONDS" in r.stdout
    r = devlint("server", "--debounce", "soon", cwd=Path.cwd())
    assert r.returncode == 2 and "--debounce" in r.stderr


def test_open_publishes_what_the_command_line_reports(tmp_path):
    async def go():
        async with Editor(tmp_path) as editor:
            capabilities = editor.initialize_result.capabilities
            assert set(capabilities.code_action_provider.code_action_kinds) >= {
                "quickfix", "source.fixAll", "source.fixAll.devlint"}
            uri = editor.open("m.py", BUGGY)
            diagnostics = await editor.diagnostics(uri, version=1)
            assert any(r.method == "workspace/didChangeWatchedFiles" for r in editor.registrations)
            return diagnostics

    diagnostics = run(go())
    records = cli_records(tmp_path, "m.py")
    assert [r["code"] for r in records] == ["DEV002", "DEV008"]
    assert len(diagnostics) == len(records)
    for d, r in zip(diagnostics, records):
        assert d.code == r["code"] and d.message == r["message"]
        assert d.source == "devlint" and d.severity == types.DiagnosticSeverity.Error
        assert d.code_description.href == r["url"]
        assert (d.range.start.line + 1, d.range.start.character + 1) == (r["location"]["row"], r["location"]["column"])
        assert (d.range.end.line + 1, d.range.end.character + 1) == (r["end_location"]["row"], r["end_location"]["column"])


def test_columns_are_utf16_code_units(tmp_path):
    text = 'import torch\n\nlabel = "\U0001F600"; state = torch.load("w.pt")\n'

    async def go():
        async with Editor(tmp_path) as editor:
            return await editor.diagnostics(editor.open("m.py", text), version=1)

    (d,) = run(go())
    column = text.splitlines()[2].index("torch.load")  # in code points; the emoji is 2 UTF-16 units
    assert (d.code, d.range.start.line, d.range.start.character) == ("DEV002", 2, column + 1)


def test_syntax_error_and_clean_buffer(tmp_path):
    async def go():
        async with Editor(tmp_path) as editor:
            broken = await editor.diagnostics(editor.open("broken.py", "import torch\nx = torch.load(\n"), version=1)
            clean = await editor.diagnostics(editor.open("clean.py", "import torch\nx = torch.zeros(3)\n"), version=1)
            return broken, clean

    broken, clean = run(go())
    (d,) = broken
    assert d.message.startswith("cannot parse: ") and d.code is None and d.source == "devlint"
    assert clean == []


# --- code actions --------------------------------------------------------------------------------

def test_quick_fix_applies_the_engines_edits_and_the_diagnostic_goes(tmp_path):
    async def go():
        async with Editor(tmp_path) as editor:
            uri = editor.open("m.py", BUGGY)
            diagnostics = await editor.diagnostics(uri, version=1)
            dev002 = next(d for d in diagnostics if d.code == "DEV002")
            actions = await editor.actions(uri, (dev002.range.start.line, dev002.range.start.character + 3))
            quick = [a for a in actions if a.kind == types.CodeActionKind.QuickFix]
            assert [a.title for a in quick] == ['Fix DEV002: Add `map_location="cpu"` (safe)']
            assert quick[0].diagnostics[0].code == "DEV002" and quick[0].is_preferred
            fixed = apply(BUGGY, quick[0], uri, 1)
            nothing = await editor.actions(uri, (0, 0))  # `import torch`: no finding there
            version = editor.change(uri, fixed)
            after = await editor.diagnostics(uri, version=version)
            return quick[0], fixed, nothing, after

    action, fixed, nothing, after = run(go())
    assert fixed == BUGGY.replace("torch.load(path)", 'torch.load(path, map_location="cpu")')
    (record,) = [r for r in cli_records(tmp_path, "m.py") if r["code"] == "DEV002"]
    (edit,) = action.edit.document_changes[0].edits
    (cli_edit,) = record["fix"]["edits"]
    assert edit.new_text == cli_edit["content"]
    assert (edit.range.start.line + 1, edit.range.start.character + 1) == tuple(cli_edit["location"].values())
    assert [a for a in nothing if a.kind == types.CodeActionKind.QuickFix] == []
    assert [d.code for d in after] == ["DEV008"]


def test_unsafe_fixes_are_labelled(tmp_path):
    text = "import torch\n\n\ndef run(model, device):\n    return model.cuda()\n"

    async def go():
        async with Editor(tmp_path) as editor:
            uri = editor.open("m.py", text)
            (d,) = await editor.diagnostics(uri, version=1)
            return d, await editor.actions(uri, (d.range.start.line, d.range.start.character),
                                           (d.range.end.line, d.range.end.character))

    d, actions = run(go())
    assert d.code == "DEV001"
    (action,) = actions  # an unsafe fix only: no fix-all under the default settings
    assert action.title.startswith("Fix DEV001: ") and action.title.endswith(" (unsafe)") and not action.is_preferred


@pytest.mark.parametrize("unsafe", [False, True])
def test_fix_all_is_devlint_fix_on_the_buffer(tmp_path, unsafe):
    text = (BUGGY + "\n\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path))\n"
            "    model.to('cpu')\n    return model.cuda()\n")
    (tmp_path / "pyproject.toml").write_text(f"[tool.devlint]\nunsafe-fixes = {str(unsafe).lower()}\n")

    async def go():
        async with Editor(tmp_path) as editor:
            uri = editor.open("m.py", text)
            await editor.diagnostics(uri, version=1)
            (action,) = await editor.actions(uri, only=[types.CodeActionKind.SourceFixAll])
            assert action.kind == "source.fixAll.devlint"
            assert ("safe and unsafe" in action.title) == unsafe
            quick_only = await editor.actions(uri, (4, 30), only=[types.CodeActionKind.QuickFix])
            assert [a.kind for a in quick_only] == [types.CodeActionKind.QuickFix]
            fixed = apply(text, action, uri, 1)
            version = editor.change(uri, fixed)
            return fixed, await editor.diagnostics(uri, version=version)

    fixed, after = run(go())
    r = devlint("-", "--fix", "--stdin-filename", "m.py", cwd=tmp_path, input=text)
    assert fixed == r.stdout and fixed != text
    assert ("model.cuda()" in fixed) != unsafe
    assert [d.code for d in after] == ([] if unsafe else ["DEV001"])


# --- debounce ------------------------------------------------------------------------------------

def test_a_newer_change_cancels_the_pending_check(tmp_path):
    async def go():
        async with Editor(tmp_path, debounce=1.0) as editor:  # far longer than sending six changes takes
            uri = editor.open("m.py", "import torch\n")
            assert await editor.diagnostics(uri, version=1) == []
            seen = editor.count(uri)
            versions = [editor.change(uri, BUGGY.replace("path))", "path" + ")" * (i % 2) + ")")) for i in range(5)]
            final = editor.change(uri, BUGGY)
            diagnostics = await editor.diagnostics(uri, version=final, after=seen)
            await editor.barrier()
            return versions, [p.version for p in editor.published[uri][seen:]], diagnostics

    versions, published, diagnostics = run(go())
    # checks run in order, so an earlier version's would have arrived before the last one's
    assert published == [versions[-1] + 1]
    assert [d.code for d in diagnostics] == ["DEV002", "DEV008"]


# --- configuration -------------------------------------------------------------------------------

def test_configuration_change_is_picked_up(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.devlint]\nignore = ["DEV002"]\n')

    async def go():
        async with Editor(tmp_path) as editor:
            uri = editor.open("m.py", BUGGY)
            first = await editor.diagnostics(uri, version=1)
            seen = editor.count(uri)
            pyproject.write_text('[tool.devlint]\nselect = ["DEV002"]\n')
            editor.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
                types.FileEvent(uri=from_fs_path(str(pyproject)), type=types.FileChangeType.Changed)]))
            second = await editor.diagnostics(uri, after=seen)
            # no notification this time: a save re-reads a configuration whose file changed
            seen = editor.count(uri)
            pyproject.write_text('[tool.devlint]\nselect = ["DEV"]\nper-file-ignores = {"m.py" = ["DEV008"]}\n')
            editor.client.text_document_did_save(types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=uri)))
            third = await editor.diagnostics(uri, after=seen)
            seen = editor.count(uri)
            pyproject.write_text('[tool.devlint]\nselect = ["NOPE"]\n')
            editor.client.text_document_did_save(types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=uri)))
            broken = await editor.diagnostics(uri, after=seen)
            return first, second, third, broken

    first, second, third, broken = run(go())
    assert [d.code for d in first] == ["DEV008"]
    assert [d.code for d in second] == ["DEV002"]
    assert [d.code for d in third] == ["DEV002"]
    (d,) = broken
    assert d.message.startswith("invalid devlint configuration, file not checked: ") and "NOPE" in d.message


def test_excluded_files_get_no_diagnostics(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.devlint]\nexclude = ["generated"]\n')
    (tmp_path / "generated").mkdir()

    async def go():
        async with Editor(tmp_path) as editor:
            excluded = await editor.diagnostics(editor.open("generated/m.py", BUGGY), version=1)
            checked = await editor.diagnostics(editor.open("m.py", BUGGY), version=1)
            return excluded, checked

    excluded, checked = run(go())
    assert excluded == [] and [d.code for d in checked] == ["DEV002", "DEV008"]


# --- lifecycle -----------------------------------------------------------------------------------

def test_close_clears_and_shutdown_exits_cleanly(tmp_path):
    async def go():
        async with Editor(tmp_path, debounce=0.25) as editor:
            uri = editor.open("m.py", BUGGY)
            assert len(await editor.diagnostics(uri, version=1)) == 2
            seen = editor.count(uri)
            editor.change(uri, BUGGY + "\n")  # pending when the document closes
            editor.client.text_document_did_close(types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=uri)))
            cleared = await editor.diagnostics(uri, after=seen)
            await editor.barrier()
            code = await editor.close()
            return cleared, code, editor.published[uri][seen:]

    cleared, code, later = run(go())
    assert cleared == [] and code == 0
    assert [list(p.diagnostics) for p in later] == [[]]  # the cancelled check published nothing


# --- the docs' editor snippets ------------------------------------------------------------------

def test_docs_editor_snippets_start_this_server():
    from devlint.workspace.config import tomllib
    from helpers import ROOT

    section = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    blocks = {kind: re.findall(rf"```{kind}\n(.*?)```", section, re.S) for kind in ("json", "lua", "toml")}
    vscode, jupyter = (json.loads(b) for b in blocks["json"])
    assert [vscode["glspc.server.command"], *vscode["glspc.server.commandArguments"]] == ["devlint", "server"]
    assert vscode["glspc.server.languageId"] == ["python"]
    spec = jupyter["LanguageServerManager"]["language_servers"]["devlint"]
    assert spec["argv"] == ["devlint", "server"] and spec["languages"] == ["python"]
    (helix,) = (tomllib.loads(b) for b in blocks["toml"])
    assert [helix["language-server"]["devlint"]["command"], *helix["language-server"]["devlint"]["args"]] == [
        "devlint", "server"]
    assert "devlint" in helix["language"][0]["language-servers"]
    assert all('cmd = { "devlint", "server" }' in b for b in blocks["lua"]) and len(blocks["lua"]) == 2


def test_deeply_nested_code_is_checked_as_the_command_line_does(tmp_path):
    text = "import torch\nx = " + "(" * 400 + "torch.load(p)" + ")" * 400 + "\n"

    async def go():
        async with Editor(tmp_path) as editor:
            return await editor.diagnostics(editor.open("deep.py", text), version=1)

    diagnostics = run(go())
    records = cli_records(tmp_path, "deep.py")
    assert [(d.code, d.message) for d in diagnostics] == [(r["code"], r["message"]) for r in records]


def test_the_server_never_imports_torch(tmp_path):
    import os

    poisoned = tmp_path / "poisoned"
    (poisoned / "torch").mkdir(parents=True)
    (poisoned / "torch" / "__init__.py").write_text("raise ImportError('devlint server imported torch')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(poisoned), os.environ.get("PYTHONPATH", "")])}
    project = tmp_path / "project"
    project.mkdir()

    async def go():
        async with Editor(project, env=env) as editor:
            uri = editor.open("m.py", BUGGY)
            diagnostics = await editor.diagnostics(uri, version=1)
            actions = await editor.actions(uri, (4, 30))
            return diagnostics, actions, await editor.close()

    diagnostics, actions, code = run(go())
    assert [d.code for d in diagnostics] == ["DEV002", "DEV008"]
    assert {a.kind for a in actions} == {"quickfix", "source.fixAll.devlint"} and code == 0


# --- notebooks -----------------------------------------------------------------------------------

NB_CELLS = [
    ("code", "import torch\nfrom torch import load as restore\n%matplotlib inline"),
    ("markdown", "# Training"),
    ("code", "state = torch.load(path)"),
    ("code", "def run(model):\n    return model.cuda()\n\nweights = restore(path)"),
]


def write_notebook(path: Path, cells) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(text) if kind == "code" else nbformat.v4.new_markdown_cell(text)
                for kind, text in cells]
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")


def by_cell(diagnostics: list[types.Diagnostic]) -> list[tuple]:
    return [(d.code, d.range.start.line + 1, d.range.start.character + 1, d.range.end.line + 1,
             d.range.end.character + 1, d.message) for d in diagnostics]


def test_notebook_cells_are_checked_as_one_module_and_published_per_cell(tmp_path):
    async def go():
        async with Editor(tmp_path) as editor:
            sync = editor.initialize_result.capabilities.notebook_document_sync
            assert [(f.notebook, [c.language for c in f.cells]) for f in sync.notebook_selector] == [
                ("jupyter-notebook", ["python"])]
            uri, cells = editor.open_notebook("nb.ipynb", NB_CELLS)
            return cells, [await editor.diagnostics(cell, version=1) for cell in cells if "c1" not in cell], editor

    cells, published, editor = run(go())
    assert cells[1] not in editor.published  # the markdown cell
    write_notebook(tmp_path / "nb.ipynb", NB_CELLS)
    records = cli_records(tmp_path, "nb.ipynb")
    # the import in cell 1 resolves `restore` in cell 4
    assert [(r["cell"], r["code"]) for r in records] == [(3, "DEV002"), (4, "DEV001"), (4, "DEV002")]
    for cell_number, diagnostics in zip((1, 3, 4), published):
        expected = [(r["code"], r["location"]["row"], r["location"]["column"], r["end_location"]["row"],
                     r["end_location"]["column"], r["message"]) for r in records if r["cell"] == cell_number]
        assert by_cell(diagnostics) == expected


def test_notebook_changes_are_debounced_and_rows_follow_the_cells(tmp_path):
    async def go():
        async with Editor(tmp_path, debounce=1.0) as editor:  # far longer than sending the changes takes
            uri, cells = editor.open_notebook("nb.ipynb", NB_CELLS)
            assert len(await editor.diagnostics(cells[3], version=1)) == 2
            seen = {cell: editor.count(cell) for cell in cells}
            for i in range(4):
                editor.change_cell(uri, cells[2], "state = torch.load(path" + ")" * (i % 2))
            new = editor.cell_uri("nb.ipynb", "new")
            editor.insert_cell(uri, 0, new, "import numpy as np\n\nx = np.zeros(3).cuda()")
            final = editor.change_cell(uri, cells[3], "\n\nweights = restore(path)")
            inserted = await editor.diagnostics(new, version=1)
            await editor.barrier()
            code = [cells[0], cells[2], cells[3]]
            later = {cell: [p.version for p in editor.published[cell][seen[cell]:]] for cell in code}
            return final, inserted, later, [list(editor.published[c][-1].diagnostics) for c in code], cells[1] in editor.published

    final, inserted, later, last, markdown_published = run(go())
    assert not markdown_published
    assert final == 7
    assert [(d.code, d.range.start.line) for d in inserted] == [("DEV001", 2)]
    # one check for the six changes: each code cell published once more, with its version then
    assert later == {
        f"vscode-notebook-cell:{tmp_path / 'nb.ipynb'}#c0": [1],
        f"vscode-notebook-cell:{tmp_path / 'nb.ipynb'}#c2": [5],
        f"vscode-notebook-cell:{tmp_path / 'nb.ipynb'}#c3": [2],
    }
    assert [[(d.code, d.range.start.line) for d in cell] for cell in last] == [
        [], [("DEV002", 0)], [("DEV002", 2)]]


def test_notebook_syntax_error_is_shown_on_its_cell(tmp_path):
    cells = [("code", "import torch"), ("code", "x = 1\ny = torch.load(\n")]

    async def go():
        async with Editor(tmp_path) as editor:
            uri, uris = editor.open_notebook("nb.ipynb", cells)
            return [await editor.diagnostics(u, version=1) for u in uris]

    first, second = run(go())
    (d,) = second
    assert first == [] and d.message.startswith("cannot parse: ") and d.code is None and d.range.start.line < 3


def test_quick_fix_and_fix_all_on_notebook_cells(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\nunsafe-fixes = true\n")

    async def go():
        async with Editor(tmp_path) as editor:
            uri, cells = editor.open_notebook("nb.ipynb", NB_CELLS)
            (d,) = await editor.diagnostics(cells[2], version=1)
            quick = await editor.actions(cells[2], (0, d.range.start.character + 2), only=[types.CodeActionKind.QuickFix])
            (action,) = await editor.actions(cells[3], only=[types.CodeActionKind.SourceFixAll])
            nothing = await editor.actions(cells[0], (0, 0), only=[types.CodeActionKind.QuickFix])
            return cells, quick, action, nothing

    cells, quick, action, nothing = run(go())
    (fix,) = quick
    assert fix.title == 'Fix DEV002: Add `map_location=None if torch.cuda.is_available() else "cpu"` (unsafe)'
    assert apply(NB_CELLS[2][1], fix, cells[2], 1) == 'state = torch.load(path, map_location=None if torch.cuda.is_available() else "cpu")'
    assert nothing == []
    assert action.kind == "source.fixAll.devlint" and "safe and unsafe" in action.title
    changed = {change.text_document.uri: apply_edits(NB_CELLS[cells.index(change.text_document.uri)][1], change)
               for change in action.edit.document_changes}
    assert all(change.text_document.version == 1 for change in action.edit.document_changes)
    # the same cells as `devlint --fix` on the notebook file
    write_notebook(tmp_path / "nb.ipynb", NB_CELLS)
    r = devlint("--no-cache", "--fix", "nb.ipynb", cwd=tmp_path)
    import nbformat
    fixed = [c.source for c in nbformat.read(tmp_path / "nb.ipynb", as_version=4).cells]
    assert fixed != [text for _, text in NB_CELLS], r.stderr
    assert {cells[i]: fixed[i] for i in range(len(cells)) if fixed[i] != NB_CELLS[i][1]} == changed


def test_closing_a_notebook_clears_its_cells(tmp_path):
    async def go():
        async with Editor(tmp_path) as editor:
            uri, cells = editor.open_notebook("nb.ipynb", NB_CELLS)
            assert await editor.diagnostics(cells[3], version=1)
            seen = {c: editor.count(c) for c in (cells[2], cells[3])}
            editor.client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
                notebook_document=types.NotebookDocumentIdentifier(uri=uri),
                cell_text_documents=[types.TextDocumentIdentifier(uri=c) for c in cells]))
            return [await editor.diagnostics(c, after=seen[c]) for c in seen], await editor.close()

    cleared, code = run(go())
    assert cleared == [[], []] and code == 0


def test_a_fix_reaching_into_another_cell_is_not_offered_on_a_cell(tmp_path):
    # a call left open in one cell and closed in the next is one statement of the joined module:
    # the finding starts in cell 1, its fix's edit lands in cell 2
    cells = [("code", "import torch\nstate = torch.load("), ("code", "path)\nother = torch.load(path)")]

    async def go():
        async with Editor(tmp_path) as editor:
            uri, uris = editor.open_notebook("nb.ipynb", cells)
            first, second = [await editor.diagnostics(u, version=1) for u in uris]
            quick = [await editor.actions(u, (d.range.start.line, d.range.start.character + 2),
                                          only=[types.CodeActionKind.QuickFix])
                     for u, (d,) in zip(uris, (first, second))]
            return first, second, quick

    first, second, (across, within) = run(go())
    assert [(d.code, d.range.start.line) for d in first] == [("DEV002", 1)]
    assert [(d.code, d.range.start.line) for d in second] == [("DEV002", 1)]
    assert across == [] and [a.title for a in within] == ['Fix DEV002: Add `map_location=None if torch.cuda.is_available() else "cpu"` (unsafe)']


def test_a_configuration_change_checks_open_notebooks_again_as_notebooks(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.devlint]\nignore = ["DEV001"]\n')

    async def go():
        async with Editor(tmp_path) as editor:
            uri, cells = editor.open_notebook("nb.ipynb", NB_CELLS)
            first = await editor.diagnostics(cells[3], version=1)
            seen = editor.count(cells[3])
            pyproject.write_text("[tool.devlint]\n")
            editor.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
                types.FileEvent(uri=from_fs_path(str(pyproject)), type=types.FileChangeType.Changed)]))
            await editor.diagnostics(cells[3], after=seen)
            await editor.barrier()
            return first, [[d.code for d in p.diagnostics] for p in editor.published[cells[3]][seen:]]

    first, later = run(go())
    assert [d.code for d in first] == ["DEV002"]
    # only ever checked with cell 1's import: alone, cell 4's `restore(path)` is no torch.load
    assert later == [["DEV001", "DEV002"]]


# --- evidence: relatedInformation ------------------------------------------------------------------

EVIDENCE_CELLS = [
    ("code", "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n"
             "loader = DataLoader(dataset, batch_size=8)"),
    ("code", "device = torch.device('cuda')\nmodel = nn.Linear(3, 2).to(device)"),
    ("code", "for x, y in loader:\n    out = model(x)"),
]


def test_diagnostics_carry_the_evidence_as_related_information(tmp_path):
    text = "\n\n".join(cell for _, cell in EVIDENCE_CELLS) + "\n"

    async def go():
        async with Editor(tmp_path) as editor:
            uri = editor.open("m.py", text)
            return uri, await editor.diagnostics(uri, version=1)

    uri, diagnostics = run(go())
    records = [r for r in cli_records(tmp_path, "m.py") if r["related"]]
    assert records, "the source has findings with evidence"
    for r in records:
        d = next(d for d in diagnostics if d.code == r["code"] and d.range.start.line + 1 == r["location"]["row"])
        assert [(i.location.uri, i.location.range.start.line + 1, i.location.range.start.character + 1, i.message)
                for i in d.related_information] == [
            (uri, p["location"]["row"], p["location"]["column"], p["message"]) for p in r["related"]]


def test_notebook_evidence_points_into_the_cell_it_is_in(tmp_path):
    async def go():
        async with Editor(tmp_path) as editor:
            _, cells = editor.open_notebook("nb.ipynb", EVIDENCE_CELLS)
            return cells, await editor.diagnostics(cells[2], version=1)

    cells, diagnostics = run(go())
    dev007 = next(d for d in diagnostics if d.code == "DEV007")
    # the batch is drawn in the finding's own cell, the model is moved in the second cell
    assert [(i.location.uri, i.location.range.start.line + 1) for i in dev007.related_information] == [
        (cells[2], 1), (cells[1], 2)]
    assert dev007.related_information[1].message.endswith("at cell 2, line 2")
