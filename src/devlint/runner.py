"""Files in, reports out: reading, decoding, discovery, and the suppressions a user configured."""
from __future__ import annotations

import difflib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional, Sequence

from devlint import engine, fixer, noqa
from devlint.config import Settings, _most_specific


@dataclass
class FileReport:
    path: Path
    display: str  # the path as the user should see it
    findings: list[engine.Finding] = field(default_factory=list)  # what remains
    error: Optional[str] = None  # why the file could not be checked (or fixed)
    error_row: int = 1
    error_column: int = 1
    fixed: list[engine.Finding] = field(default_factory=list)
    diff: str = ""


class SourceError(Exception):
    pass


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
        raise SourceError(f"not valid {name}: byte 0x{data[exc.start]:02x} at offset {exc.start}") from None
    except LookupError:
        raise SourceError(f"unknown encoding: {encoding}") from None


def checker(settings: Settings, path: Path) -> fixer.Check:
    """What a run reports for a text of `path`: selected rules, minus noqa and per-file ignores.
    Returns the parsed module with the findings (None when the text was not worth parsing)."""
    rules = settings.rules()
    ignored = settings.ignored_codes_for(path)
    if ignored:
        rules = [r for r in rules if _most_specific(r.code, ignored) is None]

    def check(source: str):
        if not rules or not engine.could_hold_finding(source):
            return None, []
        module = engine.parse(source)
        findings = engine.check_module(module, rules)
        return module, noqa.unsuppressed(findings, source.splitlines()) if findings else []

    return check


def check_text(source: str, settings: Settings, path: Path) -> list[engine.Finding]:
    return checker(settings, path)(source)[1]


def check_file(path: Path, settings: Settings, display: Optional[str] = None, fix: Optional[str] = None) -> FileReport:
    """Check one file. With fix="write" (or "diff"), apply the fixes (or only show them);
    fix="unsafe-write" / "unsafe-diff" include unsafe fixes."""
    report = FileReport(path, display or str(path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        report.error = f"cannot read: {exc.strerror or exc}"
        return report
    try:
        source, encoding = decode(data)
        check = checker(settings, path)
        if fix is None:
            report.findings = check(source)[1]
            return report
        result = fixer.fix_text(source, check, unsafe=fix.startswith("unsafe"))
    except SourceError as exc:
        report.error = str(exc)
        return report
    except engine.ParseError as exc:
        report.error, report.error_row, report.error_column = f"cannot parse: {exc.message}", exc.row, exc.column
        return report
    report.findings = result.remaining
    if result.problem is not None:
        report.error = f"fixes not applied: {result.problem}"
        return report
    if result.text == source:
        return report
    if fix.endswith("diff"):
        report.fixed = result.fixed
        report.diff = "".join(difflib.unified_diff(
            source.splitlines(keepends=True), result.text.splitlines(keepends=True),
            fromfile=f"a/{report.display}", tofile=f"b/{report.display}",
        ))
        return report
    try:
        encoded = result.text.encode(encoding)
    except UnicodeEncodeError as exc:
        report.findings, report.error = check(source)[1], f"fixes not applied: cannot encode the result as {encoding} ({exc.reason})"
        return report
    problem = write_atomically(path, encoded, data)
    if problem is not None:
        report.findings, report.error = check(source)[1], problem
    else:
        report.fixed = result.fixed
    return report


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


def discover(paths: Sequence[Path], settings: Settings) -> Iterator[tuple[Path, Optional[str]]]:
    """(path, problem) for every Python file under `paths`. Paths given explicitly are checked
    even when excluded; excludes apply to what the walk finds, as in ruff."""
    for root in paths:
        if root.is_dir():
            yield from ((p, None) for p in _walk(root, settings))
        elif root.exists() or root.is_symlink():
            yield root, None
        else:
            yield root, "No such file or directory"


def _walk(root: Path, settings: Settings) -> Iterator[Path]:
    found = []
    for directory, dirnames, filenames in os.walk(root):
        here = Path(directory)
        dirnames[:] = sorted(
            d for d in dirnames
            if not settings.is_excluded(here / d) and not (here / d / "pyvenv.cfg").exists()
        )
        for name in filenames:
            if name.endswith(".py") and not settings.is_excluded(here / name):
                found.append(here / name)
    yield from sorted(found)
