"""`devlint explain`: from a pasted error or traceback to the line to change.

Names the kind of device error and what usually causes it. A traceback's frames are matched to
files here, by the longest tail of their path that exists (a traceback pasted from another
machine names its own absolute paths); those files are linted and the findings that can cause
this kind of error are listed: first those on the failing line, then those on the lines that
made the values it uses, then the same for each calling frame, then the rest of those files.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from devlint.frontends.error_kinds import ErrorKind, kinds_of
from devlint.workspace.runner import FileReport, check_file


FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?', re.M)
# Installed packages and the standard library (`/usr/lib/python3.11/...`, `C:\Python311\Lib\...`):
# their frames are not looked for here.
LIBRARY_PART = re.compile(r"site-packages|dist-packages|python\d+(\.\d+)?", re.I)
FAILING, CALLING = ("the failing line", "a calling line")


@dataclass(frozen=True)
class Frame:
    filename: str  # as the traceback writes it
    row: int
    function: Optional[str]
    local: Optional[Path]  # the file here it was matched to
    shown: Optional[str]  # that file, as the output shows it
    library: bool  # in installed packages or the standard library: not looked for

    @property
    def status(self) -> str:
        return "library" if self.library else "matched" if self.local else "unmatched"


@dataclass
class Explanation:
    kinds: list[ErrorKind]
    frames: list[Frame]  # innermost first
    findings: list[tuple[FileReport, object, str]]  # (report, finding, place), the line to change first


def explain(text: str, settings, cwd: Path) -> Explanation:
    kinds = kinds_of(text)
    bases = list(dict.fromkeys([cwd, settings.root]))  # where a frame's path is looked for
    frames = [_frame(m["file"], int(m["line"]), m["func"], bases, cwd) for m in FRAME.finditer(text)]
    frames.reverse()  # tracebacks print the innermost frame last
    # The frames of the project, matched here or not: the first one is the failing frame.
    stack = [f for f in frames if not f.library]
    wanted = [code for kind in kinds for code in kind.rules]
    ranked = []
    for path in dict.fromkeys(f.local for f in stack if f.local):
        report = check_file(path, settings, _display(path, cwd))
        lines = _Lines(path, [(i, f.row) for i, f in enumerate(stack) if f.local == path])
        for finding in report.findings:
            if kinds and finding.code not in wanted:  # cannot cause this error
                continue
            rule = wanted.index(finding.code) if finding.code in wanted else len(wanted)
            rank, place = lines.place(finding.row)
            ranked.append(((rank, rule, lines.distance(finding.row), finding.row), report, finding, place))
    ranked.sort(key=lambda item: item[0])
    return Explanation(kinds, frames, [(report, finding, place) for _, report, finding, place in ranked])


def _frame(filename: str, row: int, function: Optional[str], bases: list[Path], cwd: Path) -> Frame:
    parts = [p for p in re.split(r"[\\/]+", filename) if p not in ("", ".")]
    if filename.startswith("<") or not filename.endswith(".py") or any(LIBRARY_PART.fullmatch(p) for p in parts):
        return Frame(filename, row, function, None, None, True)
    local = _find_here(filename, parts, bases)
    return Frame(filename, row, function, local, _display(local, cwd) if local else None, False)


def _find_here(filename: str, parts: list[str], bases: list[Path]) -> Optional[Path]:
    """The file a frame names: the path itself where it exists (a traceback of this machine), else
    the longest tail of it that exists under one of `bases` (a traceback from another machine)."""
    if Path(filename).is_absolute() and _is_file(Path(filename)):
        return Path(filename)
    if ".." in parts:
        parts = parts[len(parts) - parts[::-1].index(".."):]
    for start in range(len(parts)):
        for base in bases:
            candidate = base.joinpath(*parts[start:])
            if _is_file(candidate):
                return candidate
    return None


class _Lines:
    """Where a finding stands in one file, against the frames in it: on a frame's line, on a line
    that makes a value that line uses, in a frame's function, or elsewhere."""

    def __init__(self, path: Path, frames: list[tuple[int, int]]):  # (index in the stack, row)
        self.rows = [row for _, row in frames]
        self.near: dict[int, tuple[int, int]] = {}  # row -> (index in the stack, 0 on the line / 1 feeding it)
        self.functions: list[tuple[int, int, int]] = []  # (index in the stack, first row, last row)
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            tree = None
        for index, row in reversed(frames):  # the innermost frame last, so its claims stay
            statement, scope = _statement_at(tree, row) if tree else (None, None)
            own = set(_rows(statement)) if statement else {row}
            for line in _feeding_rows(tree, scope, statement) if statement else ():
                self.near[line] = (index, 1)
            for line in own:
                self.near[line] = (index, 0)
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([scope.lineno] + [d.lineno for d in scope.decorator_list])
                self.functions.append((index, start, scope.end_lineno or scope.lineno))

    def place(self, row: int) -> tuple[tuple[int, ...], str]:
        if row in self.near:
            index, feeds = self.near[row]
            line = FAILING if index == 0 else CALLING
            return (0, index, feeds), (f"makes a value {line} uses" if feeds else f"on {line}")
        inside = [index for index, start, end in self.functions if start <= row <= end]
        if inside:
            return (1, min(inside)), "in the failing function" if min(inside) == 0 else "in a calling function"
        return (2,), "elsewhere in the file"

    def distance(self, row: int) -> int:
        return min(abs(row - line) for line in self.rows)


# --- what made the values a line uses: a def-use walk back, with `ast` ------------------------------
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _statement_at(tree: ast.Module, row: int):
    """The innermost statement whose own lines (a compound statement's header) hold `row`, and the
    function around it (or the module)."""
    found, scope = None, tree
    nodes = [(tree, tree)]
    while nodes:
        node, in_scope = nodes.pop()
        for child in _blocks(node):
            if hasattr(child, "lineno") and not child.lineno <= row <= (child.end_lineno or child.lineno):
                continue
            if isinstance(child, ast.stmt) and row in _rows(child):
                found, scope = child, in_scope
            nodes.append((child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else in_scope))
    return found, scope


_BLOCKS = (ast.stmt, ast.excepthandler, *([ast.match_case] if hasattr(ast, "match_case") else []))  # 3.10+


def _blocks(node) -> list:
    """The statements in a node's bodies, and its `except` and `case` clauses."""
    return [c for c in ast.iter_child_nodes(node) if isinstance(c, _BLOCKS)]


def _header(statement: ast.stmt) -> list[ast.AST]:
    """What a statement evaluates itself: not the statements in its bodies."""
    return [c for c in ast.iter_child_nodes(statement) if not isinstance(c, _BLOCKS)]


def _rows(statement: ast.stmt) -> range:
    """A statement's own lines: all of a simple one, the header of a compound one."""
    if not _blocks(statement):
        return range(statement.lineno, (statement.end_lineno or statement.lineno) + 1)
    header = [c.end_lineno for c in _header(statement) if getattr(c, "end_lineno", None)]
    return range(statement.lineno, max([statement.lineno] + header) + 1)


def _feeding_rows(tree: ast.Module, scope, statement: ast.stmt) -> set[int]:
    """The lines that made the values `statement` uses: earlier assignments in its function to the
    names it reads (and, for `self.NAME`, assignments to it in any method of the class), then to
    the names those read, and so on."""
    classes = {id(f): c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
               for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    writers: dict[int, dict[str, list[ast.stmt]]] = {}  # per scope: name -> the statements that write it
    rows: set[int] = set()
    seen = set()
    work = [(scope, name, statement.lineno) for name in _reads(_header(statement))]
    while work:
        scope, name, before = work.pop()
        if (id(scope), name, before) in seen:
            continue
        seen.add((id(scope), name, before))
        places = [(scope, before)]
        this = _self_name(scope)
        if this and name.startswith(this + ".") and id(scope) in classes:  # an attribute of the module
            places += [(method, None) for method in classes[id(scope)].body
                       if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method is not scope]
        for where, limit in places:
            if id(where) not in writers:
                writers[id(where)] = {}
                for made in _statements(where):
                    for written in _writes(made):
                        writers[id(where)].setdefault(written, []).append(made)
            target = name if where is scope else name.replace(this, _self_name(where) or this, 1)
            for made in writers[id(where)].get(target, ()):
                if limit is None or made.lineno < limit:
                    rows.update(_rows(made))
                    work += [(where, read, made.lineno) for read in _reads(_header(made))]
    return rows


def _self_name(scope) -> Optional[str]:
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.args.args:
        return scope.args.args[0].arg
    return None


def _statements(scope):
    """The statements of a function (or the module), not those of the functions and classes in it."""
    nodes = list(scope.body)
    while nodes:
        node = nodes.pop()
        yield node
        if not isinstance(node, _SCOPES):
            nodes += _blocks(node)


def _dotted(node) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _reads(nodes) -> set[str]:
    """The names and `name.attribute`s read."""
    return {name for node in nodes for n in ast.walk(node)
            if isinstance(getattr(n, "ctx", None), ast.Load) and (name := _dotted(n))}


def _writes(statement: ast.stmt) -> set[str]:
    """The names (and `name.attribute`s) a statement assigns or changes: `x = ...`, `x[i] = ...`,
    `x += ...`, `for x in ...`, `with ... as x`, and `x.method(...)` as a statement of its own."""
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [statement.target]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in statement.items if item.optional_vars]
    elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) \
            and isinstance(statement.value.func, ast.Attribute):
        targets = [statement.value.func.value]
    else:
        return set()
    names = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets += target.elts
        elif isinstance(target, (ast.Starred, ast.Subscript)):
            targets.append(target.value)
        elif (name := _dotted(target)) is not None:
            names.add(name)
    return names


def _display(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


class InputError(Exception):
    pass


# An argument with no white space that holds a path separator or ends in a file extension.
LOOKS_LIKE_A_PATH = re.compile(r"\S*[/\\]\S*|\S*\.[A-Za-z0-9]{1,5}")


def read_input(argument: Optional[str], stdin) -> str:
    """`-` or nothing reads standard input; an argument that names a file, or looks like a path,
    is read (InputError when it cannot be); anything else is the text itself."""
    if argument in (None, "-"):
        return stdin.read()
    if LOOKS_LIKE_A_PATH.fullmatch(argument) or ("\n" not in argument and _is_file(Path(argument))):
        try:
            return Path(argument).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(f"cannot read {argument}: {exc.strerror or exc}") from None
    return argument


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # not a name the system takes (too long, a NUL)
        return False
