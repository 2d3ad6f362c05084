"""Reading and writing the files a run checks: their bytes to text (`decode`, honouring a BOM and
a coding cookie), a fixed text back in place (`write_atomically`), and what a run reports for one
file (`FileReport`)."""
from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from devlint.core.findings import Finding, file_error
from devlint.semantic.project import ProjectView


@dataclass
class FileReport:
    path: Path
    display: str  # the path as the user should see it
    findings: list[Finding] = field(default_factory=list)  # what remains
    error: Optional[Finding] = None  # why the file could not be checked (or fixed): a file error
    fixed: list[Finding] = field(default_factory=list)
    diff: str = ""
    new_data: Optional[bytes] = None  # the fixed file, when fixes changed it
    unfixed: list[Finding] = field(default_factory=list)  # the findings before the fixes
    baselined: int = 0  # findings a baseline hid
    unfixed_baselined: int = 0  # and before the fixes
    project: Optional[ProjectView] = None  # what the check asked of the rest of the project, answered

    @property
    def diagnostics(self) -> list[Finding]:
        """What to show for the file: its file error first, then its findings."""
        return [self.error, *self.findings] if self.error is not None else self.findings

    def fail(self, message: str, row: int = 1, column: int = 1) -> "FileReport":
        self.error = file_error(message, row, column)
        return self


class SourceError(Exception):
    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.row, self.column = row, column


def decode(data: bytes) -> tuple[str, str]:
    """Source bytes to (text, encoding), honouring a BOM and a PEP 263 coding cookie."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" in str(exc):
            encoding = "utf-8"  # no cookie, and the first lines are not UTF-8: say where
        else:
            raise SourceError(str(exc)) from None
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.startswith("utf-8") else encoding
        row = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)  # in bytes, 1-based
        raise SourceError(f"not valid {name}: byte 0x{data[exc.start]:02x} (offset {exc.start})", row, column) from None
    except LookupError:
        raise SourceError(f"unknown encoding: {encoding}") from None


def write_atomically(path: Path, data: bytes, original: bytes) -> Optional[str]:
    """Replace `path` by `data` through a temporary file and a rename, keeping its mode bits.

    Refuses when the file is read-only or changed on disk since it was read.
    """
    target = path.resolve()  # write through a symlink, do not replace it
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
        if not mode & stat.S_IWUSR:
            return "fixes not applied: the file is read-only"
        if target.read_bytes() != original:
            return "fixes not applied: the file changed on disk while devlint was fixing it"
    except OSError as exc:
        return f"fixes not applied: {exc.strerror or exc}"
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".devlint")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return f"fixes not applied: cannot write ({exc.strerror or exc})"
    return None
