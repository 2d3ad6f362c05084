"""Jupyter notebooks (`.ipynb`, nbformat 4): checked and fixed like a `.py` file.

The code cells are joined, in order, into one module (an import in cell 1 resolves a name in
cell 5), each cell after a marker comment line. IPython syntax (magics, shell escapes, `?` help)
is replaced by a placeholder of the same row count, so rows inside a cell stay put and the
engine sees plain Python. Positions are mapped back to (cell, row in cell) after linting; the
engine knows nothing of notebooks.

A fix is written back by editing the `source` of the changed cells in the parsed JSON and
serialising it again with the layout detected from the file; when the untouched notebook does
not serialise back to the same bytes, the fix is refused rather than reformatting the file.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import io
import json
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, Union

from devlint.core.findings import CELL_MARKER, Edit, Finding, Fix, ParseError, file_error

SUFFIX = ".ipynb"
PLACEHOLDER = "pass  # devlint: magic"
_PLACEHOLDER_LINE = re.compile(r"^[ \t]*pass  # devlint: magic$")
_MARKER = CELL_MARKER  # then the cell's number; a line of its own before each cell's code

# At the start of a statement, Python never begins with `%`, `!` or `?`: IPython's magics,
# shell escapes and help. `x = !ls` and `x = %time f()` assign their output.
_ESCAPE = re.compile(r"^[%!?]")
_ASSIGNED = re.compile(r"^[\w\s,.()\[\]*]+=\s*[%!]")
_HELP = re.compile(r"^[\w.*\[\]()]+\?{1,2}$")


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _split_lines(text: str) -> list[str]:
    """Lines with their endings, broken where libcst counts rows (not at form feeds or U+2028,
    as str.splitlines would)."""
    return _LINE.findall(text)


def is_notebook(path: Path) -> bool:
    return path.suffix == SUFFIX


class NotebookError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- IPython syntax ------------------------------------------------------------------------------
def neutralise(source: str) -> tuple[str, list[str]]:
    """`source` (a cell) with every line of IPython syntax replaced by a placeholder at the
    line's indentation, and the replaced lines (without their line endings), in order.

    A cell magic (`%%time` on the first line) takes the whole cell. A line magic, shell escape
    or help line counts only at the start of a statement (not inside brackets or a string), and
    takes its backslash-continued lines with it.
    """
    lines = _split_lines(source)
    if not lines:
        return source, []
    if lines[0].lstrip().startswith("%%"):
        return "".join(_placeholder("", line) for line in lines), [line.rstrip("\r\n") for line in lines]
    out: list[str] = []
    replaced: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        body = line.strip()
        if body and _is_ipython(body) and _at_statement_start("".join(out)):
            indent = line[: len(line) - len(line.lstrip())]
            while True:  # the magic and its continuation lines
                out.append(_placeholder(indent, lines[i]))
                replaced.append(lines[i].rstrip("\r\n"))
                if not lines[i].rstrip("\r\n").endswith("\\") or i + 1 == len(lines):
                    break
                i += 1
        else:
            out.append(line)
        i += 1
    return "".join(out), replaced


def _is_ipython(body: str) -> bool:
    return bool(_ESCAPE.match(body) or _ASSIGNED.match(body) or _HELP.match(body))


def _placeholder(indent: str, line: str) -> str:
    body = line.rstrip("\r\n")
    return indent + PLACEHOLDER + line[len(body):]


def _at_statement_start(prefix: str) -> bool:
    """Whether code that follows `prefix` starts a statement: not inside brackets, a string or
    a backslash continuation."""
    if not prefix.strip():
        return True
    if prefix.rstrip("\r\n").endswith("\\"):
        return False
    try:
        for _ in tokenize.generate_tokens(io.StringIO(prefix).readline):
            pass
    except tokenize.TokenError:  # EOF in a multi-line statement or string
        return False
    except (SyntaxError, ValueError):  # broken code before it: the parser will say so
        return True
    return True


# --- reading -------------------------------------------------------------------------------------
@dataclass
class Cell:
    number: int  # 1-based, among all the notebook's cells (as Jupyter and ruff count them)
    source: str
    as_list: bool  # `source` stored as a list of lines (else one string)
    magics: list[str]  # the lines `neutralise` replaced
    placeholders: list[str]  # what stands in for them, in order
    added_newline: bool  # a line break appended to join the next cell


@dataclass
class Notebook:
    data: bytes
    raw: dict  # the parsed JSON, keys in the file's order
    cells: list[Cell] = field(default_factory=list)
    module: str = ""
    python: bool = True
    marker: str = _MARKER  # made unique should a cell hold a line like it

    def row_map(self, module: str) -> list[tuple[int, int]]:
        return row_map(module, self.marker)


def read(data: bytes) -> Notebook:
    """Parse and validate a notebook. Raises NotebookError."""
    import nbformat

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not valid UTF-8: byte 0x{data[exc.start]:02x} (offset {exc.start})") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise NotebookError(f"not a notebook: invalid JSON ({exc})") from None
    if not isinstance(raw, dict) or "cells" not in raw and "worksheets" not in raw:
        raise NotebookError("not a notebook: no cells")
    version = raw.get("nbformat")
    if version != 4:
        raise NotebookError(f"not an nbformat 4 notebook (nbformat {version}); upgrade it with `jupyter nbconvert --to notebook`")
    try:
        with warnings.catch_warnings():  # missing or duplicate cell ids: nbformat repairs its copy, and so can we
            warnings.simplefilter("ignore")
            nbformat.validate(nbformat.from_dict(raw), version=4)
    except nbformat.ValidationError as exc:
        raise NotebookError(f"not a valid notebook: {exc.message}") from None
    language = raw.get("metadata", {}).get("language_info", {}).get("name")
    code = [(number, cell["source"]) for number, cell in enumerate(raw["cells"], 1) if cell["cell_type"] == "code"]
    nb = join(code, data, raw)
    nb.python = language in (None, "python")
    return nb


def join(cells: Sequence[tuple[int, Union[str, list[str]]]], data: bytes = b"", raw: Optional[dict] = None) -> Notebook:
    """The notebook of the code cells `cells`, (number among all cells, source as a string or a
    list of lines), joined into one module: what `read` does once the JSON is parsed, and what an
    editor's open notebook is checked as."""
    nb = Notebook(data, raw if raw is not None else {})
    sources = [(number, "".join(stored) if isinstance(stored, list) else stored, isinstance(stored, list))
               for number, stored in cells]
    if any(_MARKER in source for _, source, _ in sources):
        digest = hashlib.sha256(data or "\0".join(source for _, source, _ in sources).encode("utf-8", "surrogatepass"))
        nb.marker = f"{_MARKER} {digest.hexdigest()[:16]}"
    parts = []
    for number, source, as_list in sources:
        neutral, magics = neutralise(source)
        added = bool(neutral) and not neutral.endswith(("\n", "\r"))
        placeholders = [line.rstrip("\r\n") for line in _split_lines(neutral) if _PLACEHOLDER_LINE.match(line.rstrip("\r\n"))]
        nb.cells.append(Cell(number, source, as_list, magics, placeholders, added))
        parts.append(f"{nb.marker} {number}\n" + neutral + ("\n" if added else ""))
    nb.module = "".join(parts)
    return nb


def cell_sources(data: bytes) -> dict[int, str]:
    """The source of each code cell of a notebook's bytes, by cell number. Raises NotebookError."""
    return {cell.number: cell.source for cell in read(data).cells}


def _marker_line(marker: str) -> re.Pattern:
    return re.compile(rf"^{re.escape(marker)} (\d+)$")


def row_map(module: str, marker: str = _MARKER) -> list[tuple[int, int]]:
    """(cell, row in cell) for each row of a joined module; a marker row is (cell, 0)."""
    rows, cell, row = [], 0, 0
    marker_line = _marker_line(marker)
    for line in _split_lines(module):
        match = marker_line.match(line.rstrip("\r\n"))
        if match:
            cell, row = int(match.group(1)), 0
        else:
            row += 1
        rows.append((cell, row))
    return rows


def locate(finding: Finding, rows: list[tuple[int, int]]) -> Finding:
    """`finding` with its positions (and its fix's) inside its cell."""
    def where(row: int) -> tuple[int, int]:
        cell, in_cell = rows[min(row, len(rows)) - 1] if rows else (0, 1)
        return cell, max(in_cell, 1)

    cell, row = where(finding.row)
    end_cell, end_row = where(finding.end_row)
    end_column = finding.end_column
    if end_cell != cell:  # cannot happen for a finding of one cell's code; keep it inside
        end_row, end_column = row, finding.column
    fix = finding.fix
    if fix is not None:
        fix = Fix(fix.applicability, fix.message, tuple(
            Edit(e.content, where(e.row)[1], e.column, where(e.end_row)[1], e.end_column) for e in fix.edits))
    related = []
    for r in finding.related:
        r_cell, r_row = where(r.row)
        r_end_cell, r_end_row = where(r.end_row)
        end = (r_end_row, r.end_column) if r_end_cell == r_cell else (r_row, r.column)
        related.append(dataclasses.replace(r, row=r_row, end_row=end[0], end_column=end[1], cell=r_cell or None))
    return dataclasses.replace(finding, row=row, end_row=end_row, end_column=end_column, fix=fix, cell=cell or None,
                               related=tuple(related))


# --- writing back --------------------------------------------------------------------------------
def split(nb: Notebook, module: str) -> dict[int, str]:
    """The new source of each cell a change to the joined module touched, by cell number, with
    the IPython lines put back. Raises NotebookError."""
    segments: dict[int, list[str]] = {}
    current: Optional[list[str]] = None
    before: list[str] = []  # text a fix put above the first marker: it belongs to the first cell
    marker_line = _marker_line(nb.marker)
    for line in _split_lines(module):
        match = marker_line.match(line.rstrip("\r\n"))
        if match:
            current = segments.setdefault(int(match.group(1)), [])
            if len(segments) == 1:
                current.extend(before)
        elif current is None:
            before.append(line)
        else:
            current.append(line)
    if list(segments) != [c.number for c in nb.cells]:
        raise NotebookError("a fix would move code across cells")
    changed = {}
    for cell in nb.cells:
        lines = segments[cell.number]
        magics = iter(cell.magics)
        placeholders = [i for i, line in enumerate(lines) if _PLACEHOLDER_LINE.match(line.rstrip("\r\n"))]
        if [lines[i].rstrip("\r\n") for i in placeholders] != cell.placeholders:  # moved, re-indented or gone
            raise NotebookError(f"a fix would change an IPython line in cell {cell.number}")
        for i in placeholders:
            body = lines[i].rstrip("\r\n")
            lines[i] = next(magics) + lines[i][len(body):]
        source = "".join(lines)
        if cell.added_newline and source.endswith("\n"):
            source = source[:-1]
        if source != cell.source:
            changed[cell.number] = source
    return changed


def _dump(raw: dict, indent: Optional[int], ascii_only: bool, newline: bool, crlf: bool) -> bytes:
    separators = (",", ": ") if indent is not None else (",", ":")
    text = json.dumps(raw, indent=indent, ensure_ascii=ascii_only, separators=separators) + ("\n" if newline else "")
    if crlf:  # checked out on Windows: JSON escapes the line breaks in strings, so every "\n" left is layout
        text = text.replace("\n", "\r\n")
    return text.encode("utf-8")


def write(nb: Notebook, changed: dict[int, str]) -> bytes:
    """The notebook's bytes with the `source` of the changed cells replaced; everything else
    (outputs, execution counts, ids, metadata, key order, indentation) as it was.
    Raises NotebookError when the file's JSON layout cannot be reproduced."""
    text = nb.data.decode("utf-8")
    match = re.match(r"\{\r?\n( *)\S", text)
    indent = len(match.group(1)) if match else None
    newline, crlf = text.endswith("\n"), "\r\n" in text
    layout = next((ascii_only for ascii_only in (False, True)
                   if _dump(nb.raw, indent, ascii_only, newline, crlf) == nb.data), None)
    if layout is None:
        raise NotebookError("fixes not applied: the notebook's JSON layout is not the one Jupyter writes, "
                            "and devlint does not reformat notebooks (save it from Jupyter first)")
    raw = json.loads(text)
    for cell_number, source in changed.items():
        cell = raw["cells"][cell_number - 1]
        as_list = isinstance(cell["source"], list)
        cell["source"] = source.splitlines(keepends=True) if as_list else source
    return _dump(raw, indent, layout, newline, crlf)


def cell_diff(nb: Notebook, changed: dict[int, str], display: str) -> str:
    """A unified diff per changed cell, headed `a/PATH:cell N`."""
    out = []
    for cell in nb.cells:
        if cell.number in changed:
            old, new = cell.source, changed[cell.number]
            out.extend(difflib.unified_diff(
                _lines(old), _lines(new), fromfile=f"a/{display}:cell {cell.number}", tofile=f"b/{display}:cell {cell.number}"))
    return "".join(out)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines


# --- the front end's view: a FileReport ----------------------------------------------------------
def check_data(data: bytes, path: Path, settings, display: str, fix: Optional[str], baseline=None):
    """runner.check_data for a notebook. `baseline` as for a `.py` file: the recorded findings,
    which fixing leaves alone (a recorded line's text is the same in the joined module)."""
    from devlint.workspace.files import FileReport
    from devlint.workspace.linter import Linter

    report = FileReport(path, display)
    try:
        nb = read(data)
    except NotebookError as exc:
        return report.fail(exc.message)
    if not nb.python or not nb.cells:
        return report
    rows = nb.row_map(nb.module)
    linter = Linter(settings, path)
    report.project = linter.project
    try:
        if fix is None:
            report.findings = [locate(f, rows) for f in linter.check(nb.module)]
            return report
        result = linter.fix(nb.module, unsafe=fix.startswith("unsafe"), baseline=baseline)
    except ParseError as exc:
        cell, row = rows[exc.row - 1] if 0 < exc.row <= len(rows) else (0, exc.row)
        report.error = dataclasses.replace(
            file_error(f"cannot parse: {exc.message}", max(row, 1), exc.column), cell=cell or None)
        return report
    before = [locate(f, rows) for f in result.before]
    report.findings = [locate(f, nb.row_map(result.text)) for f in result.remaining]
    report.baselined, report.unfixed_baselined = result.baselined, result.baselined_before
    if result.problem is not None:
        return report.fail(f"fixes not applied: {result.problem}")
    if result.text == nb.module:
        return report
    try:
        changed = split(nb, result.text)
        new_data = write(nb, changed)
    except NotebookError as exc:
        report.findings = before
        report.baselined = result.baselined_before
        return report.fail(exc.message if exc.message.startswith("fixes not") else f"fixes not applied: {exc.message}")
    report.new_data = new_data
    report.fixed = [locate(f, rows) for f in result.fixed]
    report.unfixed = before
    report.diff = cell_diff(nb, changed, display)
    return report


def check_cells(nb: Notebook, linter) -> list[Finding]:
    """The findings in a notebook's joined code cells, each placed in its cell (`Finding.cell`),
    for a client that shows them per cell. A fix with an edit outside its finding's cell is
    dropped: an edit on one cell's text cannot carry it. Raises ParseError, with the row in the
    cell and the cell in `.cell`."""
    rows = nb.row_map(nb.module)
    try:
        findings = linter.check(nb.module)
    except ParseError as exc:
        cell, row = rows[exc.row - 1] if 0 < exc.row <= len(rows) else (0, exc.row)
        error = ParseError(exc.message, max(row, 1), exc.column)
        error.cell = cell or None
        raise error from None
    located = []
    for finding in findings:
        cell = rows[min(finding.row, len(rows)) - 1][0] if rows else 0
        if finding.fix is not None and any(
                rows[min(r, len(rows)) - 1][0] != cell for e in finding.fix.edits for r in (e.row, e.end_row)):
            finding = dataclasses.replace(finding, fix=None)
        located.append(locate(finding, rows))
    return located


def add_noqa(data: bytes, path: Path, settings, baseline=None) -> tuple[Optional[bytes], int, Optional[str]]:
    """(new bytes or None, lines changed, problem) for `--add-noqa` on a notebook, but for the
    findings `baseline` records."""
    from devlint.workspace import noqa
    from devlint.workspace.linter import Linter

    try:
        nb = read(data)
        if not nb.python or not nb.cells:
            return None, 0, None
        findings = Linter(settings, path).check(nb.module)
        if baseline:
            from devlint.workspace.baseline import hide

            findings = hide(findings, nb.module, baseline)[0]
        module, count = noqa.add_noqa(nb.module, findings)
        if not count:
            return None, 0, None
        return write(nb, split(nb, module)), count, None
    except NotebookError as exc:
        return None, 0, exc.message
    except ParseError as exc:
        return None, 0, f"cannot parse: {exc.message}"
