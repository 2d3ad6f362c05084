"""What a file's classes inherit from the rest of its project: which classes set their tensor
attributes as buffers through a `__setattr__` of their own or of a base, wherever in the project
that base is defined (`class Operator(TensorAttributeMixin, nn.Module)` in one file,
`class FiniteDifferenceOp(LinearOperator)` in another).

The project is the tree above the file up to the nearest folder with `pyproject.toml`,
`setup.py`, `setup.cfg` or `.git` (else the folder above its top package, else its own folder).
It is read only when a rule asks, once per process and root, with the standard library's `ast`
(no libcst parse): the files that mention `__setattr__`, then those that mention a class found.
Bases are matched by name, the way the project's code names them.
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Optional

# Folders no project keeps its own code in.
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})
_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# A project larger than this is not read: its classes' bases count as unknown, as before.
MAX_FILES = 10_000
# Calls in a `__setattr__` that keep the value as a buffer or a parameter of the module.
REGISTERING_NAMES = frozenset({"register_buffer", "register_parameter", "_buffers"})

_by_root: dict[Path, frozenset[str]] = {}


class ProjectView:
    """A file's view of its project; what it asked is kept in `asked` (name -> answer), so a
    cached result can be checked against the project as it is now."""

    def __init__(self, path: Optional[Path]) -> None:
        self.path = path
        self.asked: dict[str, bool] = {}
        self._root: Optional[Path] = None

    def sets_tensor_attributes(self, class_name: str) -> bool:
        """Whether a class of this name in the project, or one of its bases there, defines a
        `__setattr__` that registers what it is given as a buffer or a parameter."""
        if class_name not in self.asked:
            self.asked[class_name] = self.path is not None and class_name in self._setters()
        return self.asked[class_name]

    def _setters(self) -> frozenset[str]:
        if self._root is None:
            self._root = root_of(self.path)  # one walk up the folders per file, whatever it asks
        return attribute_setters(self._root)


def forget() -> None:
    """Drop what was read of every project (a long-running server calls it when files change)."""
    _by_root.clear()


def root_of(path: Path) -> Path:
    folder = path.resolve().parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in _ROOT_MARKERS):
            return candidate
    top = folder
    while (top / "__init__.py").exists() and top.parent != top:
        top = top.parent
    return top


def attribute_setters(root: Path) -> frozenset[str]:
    if root not in _by_root:
        _by_root[root] = _attribute_setters(root)
    return _by_root[root]


def _attribute_setters(root: Path) -> frozenset[str]:
    sources = _python_sources(root)
    if sources is None:
        return frozenset()
    trees: dict[Path, Optional[ast.Module]] = {}

    def classes(path: Path) -> list[ast.ClassDef]:
        if path not in trees:
            try:
                trees[path] = ast.parse(sources[path])
            except (SyntaxError, ValueError):
                trees[path] = None
        tree = trees[path]
        return [] if tree is None else [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]

    found = {
        node.name for path, data in sources.items() if b"__setattr__" in data
        for node in classes(path) if any(_registering_setattr(item) for item in node.body)
    }
    frontier = set(found)
    while frontier:
        mentioned = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in sorted(frontier)) + rb")\b")
        subclasses = {
            node.name for path, data in sources.items() if b"class " in data and mentioned.search(data)
            for node in classes(path) if node.name not in found and frontier & {_last_name(b) for b in node.bases}
        }
        found |= subclasses
        frontier = subclasses
    return frozenset(found)


def _registering_setattr(item: ast.stmt) -> bool:
    return isinstance(item, ast.FunctionDef) and item.name == "__setattr__" and any(
        isinstance(n, ast.Attribute) and n.attr in REGISTERING_NAMES for n in ast.walk(item))


def _last_name(base: ast.expr) -> Optional[str]:
    if isinstance(base, ast.Subscript):  # `Operator[Tin, Tout]`, `Generic[T]`
        base = base.value
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return None


def _python_sources(root: Path) -> Optional[dict[Path, bytes]]:
    """The bytes of the project's `.py` files; None for a tree too large to read."""
    sources: dict[Path, bytes] = {}
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [s for s in subfolders if not s.startswith(".") and s not in _SKIPPED_FOLDERS
                         and not os.path.exists(os.path.join(folder, s, "pyvenv.cfg"))]
        for name in files:
            if not name.endswith(".py"):
                continue
            if len(sources) >= MAX_FILES:
                return None
            path = Path(folder, name)
            try:
                sources[path] = path.read_bytes()
            except OSError:
                continue
    return sources
