"""Which files devlint checks: the one place that says so, for the directory walk and for the
paths named on the command line."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Optional

# What a directory walk picks up, and what a path named on the command line may be.
CHECKED_SUFFIXES = (".py", ".pyi", ".ipynb")


def is_checked_name(name: str) -> bool:
    """Whether a file of this name is checked (by its suffix)."""
    return name.endswith(CHECKED_SUFFIXES)


def read_problem(path: Path, exc: OSError) -> str:
    """Why `path` could not be read, in words."""
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno == errno.ENOENT and path.is_symlink():
        return f"broken symbolic link (to {os.readlink(path)})"
    return exc.strerror or str(exc)


def named_file_problem(path: Path) -> Optional[str]:
    """Why a file named on the command line cannot be checked, or None. A file without a suffix
    is taken when its first line is a Python shebang (pre-commit's `types: [python]` names such
    scripts)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return "not a regular file"
        with open(path, "rb") as handle:
            head = handle.readline(256)
    except OSError as exc:
        return f"cannot read: {read_problem(path, exc)}"
    if is_checked_name(path.name) or (not path.suffix and head.startswith(b"#!") and b"python" in head):
        return None
    accepted = ", ".join(f"*{s}" for s in CHECKED_SUFFIXES)
    return f"not a file devlint checks (it checks {accepted}, and scripts with a Python shebang)"
