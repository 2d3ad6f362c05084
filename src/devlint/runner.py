"""Files in, reports out: reading, decoding, discovery, and the suppressions a user configured."""
from __future__ import annotations

import io
import os
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional, Sequence

from devlint import engine, noqa
from devlint.config import Settings, _most_specific


@dataclass
class FileReport:
    path: Path
    display: str  # the path as the user should see it
    findings: list[engine.Finding] = field(default_factory=list)
    error: Optional[str] = None  # why the file could not be checked
    error_row: int = 1
    error_column: int = 1


class SourceError(Exception):
    pass


def decode(data: bytes) -> str:
    """Source bytes to text, honouring a BOM and a PEP 263 coding cookie."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" in str(exc):
            encoding = "utf-8"  # no cookie, and the first lines are not UTF-8: say where
        else:
            raise SourceError(str(exc)) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.startswith("utf-8") else encoding
        raise SourceError(f"not valid {name}: byte 0x{data[exc.start]:02x} at offset {exc.start}") from None
    except LookupError:
        raise SourceError(f"unknown encoding: {encoding}") from None


def check_text(source: str, settings: Settings, path: Path) -> list[engine.Finding]:
    """The findings a user sees for `source`: selected rules, minus noqa and per-file ignores."""
    rules = settings.rules()
    ignored = settings.ignored_codes_for(path)
    if ignored:
        rules = [r for r in rules if _most_specific(r.code, ignored) is None]
    if not rules or not engine.could_hold_finding(source):
        return []
    findings = engine.check_module(engine.parse(source), rules)
    return noqa.unsuppressed(findings, source.splitlines()) if findings else []


def check_file(path: Path, settings: Settings, display: Optional[str] = None) -> FileReport:
    report = FileReport(path, display or str(path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        report.error = f"cannot read: {exc.strerror or exc}"
        return report
    try:
        report.findings = check_text(decode(data), settings, path)
    except SourceError as exc:
        report.error = str(exc)
    except engine.ParseError as exc:
        report.error, report.error_row, report.error_column = f"cannot parse: {exc.message}", exc.row, exc.column
    return report


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
