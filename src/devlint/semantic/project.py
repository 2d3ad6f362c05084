"""What a file's classes inherit from the rest of its project: which classes set their tensor
attributes as buffers through a `__setattr__` of their own or of a base, or move them through an
`_apply` that walks their `__dict__`, wherever in the project
that base is defined (`class Operator(TensorAttributeMixin, nn.Module)` in one file,
`class FiniteDifferenceOp(LinearOperator)` in another); and which are plain classes, no
module whatever their subclasses define (`class Transform:` in one file, `class
RadialGraph(Transform)` with a `forward` in another).

The project is the tree above the file up to the nearest folder with `pyproject.toml`,
`setup.py`, `setup.cfg` or `.git` (else the folder above its top package, else its own folder).
It is read only when a rule asks, once per process and root, with the standard library's `ast`
(no libcst parse): the files that mention `__setattr__` or `_apply`, then those that mention a class found;
for a plain class, the files of the package it is imported from that define a class of that
name (one pass finds every file's `class` statements).
Bases are matched by name, the way the project's code names them.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import os
import re
from pathlib import Path
from typing import Iterator, Optional

# Folders no project keeps its own code in.
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})
_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# A project larger than this is not read: its classes' bases count as unknown, as before.
MAX_FILES = 10_000
# Calls in a `__setattr__` that keep the value as a buffer or a parameter of the module.
REGISTERING_NAMES = frozenset({"register_buffer", "register_parameter", "_buffers"})

# Bases of a plain class that are no module: builtins (`object`) and these, by their last name.
PLAIN_BASES = frozenset({"ABC", "Generic", "Protocol"})
PLAIN_PREFIX = "plain "  # `asked` key of "is this class plain?", beside the bare names of movers

_CLASS_STATEMENT = re.compile(rb"^[ \t]*class[ \t]+(\w+)", re.MULTILINE)

_by_root: dict[Path, "_Project"] = {}
_stamps: dict[Path, Optional[str]] = {}


class ProjectView:
    """A file's view of its project; what it asked is kept in `asked` (name -> answer), so a
    cached result can be checked against the project as it is now."""

    def __init__(self, path: Optional[Path]) -> None:
        self.path = path
        self.asked: dict[str, bool] = {}
        self.stamp: Optional[str] = None  # the project's files when the answers were read (`stamp`)
        self._root: Optional[Path] = None

    def moves_tensor_attributes(self, class_name: str) -> bool:
        """Whether a class of this name in the project, or one of its bases there, defines a
        `__setattr__` that registers what it is given as a buffer or a parameter, or an `_apply`
        that walks its `__dict__`: either way `model.to()` takes its tensor attributes along."""
        if class_name not in self.asked:
            self.asked[class_name] = self.path is not None and class_name in self._project().movers()
        return self.asked[class_name]

    def is_plain_class(self, package: str, class_name: str) -> bool:
        """Whether the project's package `package` (a folder or a module of the project; `.`
        for a relative import: anywhere in the project) defines a class of this name, and every
        one it defines there is plain: its bases are builtins (`object`), `ABC`, `Generic`,
        `Protocol` or plain classes of that package, so no `torch.nn.Module` is among them."""
        key = f"{PLAIN_PREFIX}{package} {class_name}"
        if key not in self.asked:
            self.asked[key] = self.path is not None and self._project().is_plain(package, class_name)
        return self.asked[key]

    def answer(self, key: str) -> bool:
        """The answer now to a question recorded in `asked`."""
        if key.startswith(PLAIN_PREFIX):
            return self.is_plain_class(*key[len(PLAIN_PREFIX):].split(" ", 1))
        return self.moves_tensor_attributes(key)

    def unchanged_since(self, stamp: Optional[str]) -> bool:
        """Whether the project's files are as they were when `stamp` was taken: then every
        answer read then still holds, and none need be read again."""
        return stamp is not None and self.path is not None and current_stamp(root_of(self.path)) == stamp

    def _project(self) -> "_Project":
        if self._root is None:
            self._root = root_of(self.path)  # one walk up the folders per file, whatever it asks
        if self._root not in _by_root:
            _by_root[self._root] = _Project(self._root)
        self.stamp = _by_root[self._root].stamp
        return _by_root[self._root]


def forget() -> None:
    """Drop what was read of every project (a long-running server calls it when files change)."""
    _by_root.clear()
    _stamps.clear()


def current_stamp(root: Path) -> Optional[str]:
    """The stamp of the project's files (see `_python_sources`), taken once per process."""
    if root not in _stamps:
        _stamps[root] = _python_sources(root, read=False)[1]
    return _stamps[root]


def root_of(path: Path) -> Path:
    folder = path.resolve().parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in _ROOT_MARKERS):
            return candidate
    top = folder
    while (top / "__init__.py").exists() and top.parent != top:
        top = top.parent
    return top


class _Project:
    """One project's sources, read once, and what was worked out from them."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._sources, self.stamp = _python_sources(root)  # None: too large to read
        self._trees: dict[Path, Optional[ast.Module]] = {}
        self._movers: Optional[frozenset[str]] = None
        self._plain: dict[tuple[str, str], bool] = {}  # (package, class name) -> plain
        self._defined_in: Optional[dict[str, list[Path]]] = None  # class name -> files that define it

    def _classes(self, path: Path) -> list[ast.ClassDef]:
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(self._sources[path])
            except (SyntaxError, ValueError):
                self._trees[path] = None
        tree = self._trees[path]
        return [] if tree is None else [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]

    def movers(self) -> frozenset[str]:
        if self._movers is None:
            self._movers = self._attribute_movers()
        return self._movers

    def _attribute_movers(self) -> frozenset[str]:
        sources = self._sources
        if sources is None:
            return frozenset()
        found = {
            node.name for path, data in sources.items() if b"__setattr__" in data or b"def _apply" in data
            for node in self._classes(path) if any(_registering_setattr(item) or _moving_apply(item) for item in node.body)
        }
        frontier = set(found)
        while frontier:
            mentioned = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in sorted(frontier)) + rb")\b")
            subclasses = {
                node.name for path, data in sources.items() if b"class " in data and mentioned.search(data)
                for node in self._classes(path) if node.name not in found and frontier & {_last_name(b) for b in node.bases}
            }
            found |= subclasses
            frontier = subclasses
        return frozenset(found)

    def is_plain(self, package: str, name: str) -> bool:
        if (package, name) not in self._plain:
            self._plain[package, name] = False  # a class among its own bases is no plain class
            self._plain[package, name] = self._all_plain(package, name)
        return self._plain[package, name]

    def _all_plain(self, package: str, name: str) -> bool:
        if self._sources is None:
            return False
        if self._defined_in is None:  # one pass over the sources, whatever is asked
            self._defined_in = {}
            for path, data in self._sources.items():
                for found in set(_CLASS_STATEMENT.findall(data)):
                    self._defined_in.setdefault(found.decode(), []).append(path)
        definitions = [node for path in self._defined_in.get(name, ()) if self._in_package(path, package)
                       for node in self._classes(path) if node.name == name]
        return bool(definitions) and all(self._plain_base(package, base) for node in definitions for base in node.bases)

    def _in_package(self, path: Path, package: str) -> bool:
        """`path` is in the project's folder or module named `package` (`.`: anywhere)."""
        if package == ".":
            return True
        parts = path.relative_to(self._root).parts
        return package in parts[:-1] or parts[-1] == package + ".py"

    def _plain_base(self, package: str, base: ast.expr) -> bool:
        if isinstance(base, ast.Subscript):  # `Generic[T]`
            base = base.value
        name = _last_name(base)
        if name is None:
            return False
        if name in PLAIN_BASES or isinstance(base, ast.Name) and hasattr(builtins, name):
            return True
        return self.is_plain(package, name)  # a base of the same package, matched by name


def _registering_setattr(item: ast.stmt) -> bool:
    return isinstance(item, ast.FunctionDef) and item.name == "__setattr__" and any(
        isinstance(n, ast.Attribute) and n.attr in REGISTERING_NAMES for n in ast.walk(item))


def _moving_apply(item: ast.stmt) -> bool:
    """An `_apply` that walks the object's own `__dict__` (`self.__dict__.items()`,
    `vars(self)`; not `vars(feature)` of another object): `model.to()` calls it, and it moves
    the plain tensor attributes too."""
    if not isinstance(item, ast.FunctionDef) or item.name != "_apply" or not item.args.args:
        return False
    self_name = item.args.args[0].arg

    def is_self(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == self_name
    return any(
        isinstance(n, ast.Attribute) and n.attr == "__dict__" and is_self(n.value)
        or isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "vars"
        and len(n.args) == 1 and is_self(n.args[0])
        for n in ast.walk(item))


def _last_name(base: ast.expr) -> Optional[str]:
    if isinstance(base, ast.Subscript):  # `Operator[Tin, Tout]`, `Generic[T]`
        base = base.value
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return None


def _python_files(root: Path) -> Iterator[Path]:
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(s for s in subfolders if not s.startswith(".") and s not in _SKIPPED_FOLDERS
                               and not os.path.exists(os.path.join(folder, s, "pyvenv.cfg")))
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder, name)


def _python_sources(root: Path, read: bool = True) -> tuple[Optional[dict[Path, bytes]], Optional[str]]:
    """The bytes of the project's `.py` files (None without `read`), and their stamp: a digest of
    each one's name, size and modification time, taken before it is read. (None, None) for a
    tree too large to read."""
    sources: dict[Path, bytes] = {}
    entries = []
    for path in _python_files(root):
        if len(entries) >= MAX_FILES:
            return None, None
        try:
            info = path.stat()
            entries.append(f"{path}:{info.st_size}:{info.st_mtime_ns}")
            if read:
                sources[path] = path.read_bytes()
        except OSError:
            continue
    return (sources if read else None), hashlib.sha256("\n".join(entries).encode()).hexdigest()[:16]
