"""Baselines: the findings a project already has, recorded so that only new ones are reported.

A recorded finding is (file, code, the text of its line, stripped) with a count, not a line
number, so it still matches when code moves around it. When a file holds N recorded findings of
one (code, line text) and now holds more, the first N by position are hidden and the rest are
reported. A finding on a changed line is new.

The file is JSON, one entry a line, sorted by file, code and line text:

    {"version": 1, "findings": [
      {"code": "DEV001", "count": 1, "file": "pkg/model.py", "line": "model.cuda()"}
    ]}
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence, Union

VERSION = 1
_NEWLINE = re.compile(r"\r\n?|\n")  # the line breaks that finding rows count (libcst's)

Key = tuple[str, str]  # (code, stripped line text)


class BaselineError(Exception):
    pass


def file_key(path: Path, settings) -> str:
    """A file's name in a baseline: its path from the project root, with `/` separators."""
    relative = settings.relative(path)
    if relative is not None:
        return relative
    try:
        return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(settings.root))).as_posix()
    except ValueError:  # another drive
        return path.as_posix()


def line_keys(findings: Sequence, source: Union[str, dict[int, str]]) -> list[Key]:
    """(code, stripped text of its first line) for each finding. `source`: the text the rows
    count in, or for a notebook the source of each code cell by number (rows count in the cell)."""
    if isinstance(source, dict):
        cells = {number: _NEWLINE.split(text) for number, text in source.items()}
        return [(f.code, _line(cells.get(f.cell, []), f.row)) for f in findings]
    lines = _NEWLINE.split(source)
    return [(f.code, _line(lines, f.row)) for f in findings]


def _line(lines: list[str], row: int) -> str:
    return lines[row - 1].strip() if 0 < row <= len(lines) else ""


def hide(findings: Sequence, source: Union[str, dict[int, str]], recorded: Counter) -> tuple[list, int]:
    """The findings the recorded ones do not account for, and how many were hidden. Findings
    come sorted by position: of N+1 alike, the last is reported."""
    budget = Counter(recorded)
    kept = []
    for finding, key in zip(findings, line_keys(findings, source)):
        if budget[key] > 0:
            budget[key] -= 1
        else:
            kept.append(finding)
    return kept, len(findings) - len(kept)


class Baseline:
    def __init__(self, path: Path, entries: Optional[dict[str, Counter]] = None) -> None:
        self.path = path
        self.entries: dict[str, Counter] = entries if entries is not None else {}

    @classmethod
    def load(cls, path: Path) -> "Baseline":
        """Raises BaselineError: the file is missing, unreadable or not a baseline."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BaselineError(f"baseline file not found: {path} (create it with --update-baseline)") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BaselineError(f"cannot read the baseline file {path}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise BaselineError(f"{path}: not valid JSON: {exc}") from None
        if not isinstance(data, dict) or "version" not in data or not isinstance(data.get("findings"), list):
            raise BaselineError(f"{path}: not a devlint baseline (an object with `version` and `findings`)")
        if data["version"] != VERSION:
            raise BaselineError(f"{path}: baseline version {data['version']!r} is not supported (this devlint writes {VERSION})")
        entries: dict[str, Counter] = {}
        for i, entry in enumerate(data["findings"]):
            fields = entry if isinstance(entry, dict) else {}
            file, code, line, count = (fields.get(k) for k in ("file", "code", "line", "count"))
            if not (isinstance(file, str) and isinstance(code, str) and isinstance(line, str)
                    and isinstance(count, int) and not isinstance(count, bool) and count > 0):
                raise BaselineError(f"{path}: entry {i + 1} needs `file`, `code`, `line` (strings) and `count` (a positive integer)")
            entries.setdefault(file, Counter())[(code, line)] += count
        return cls(path, entries)

    def recorded(self, key: str) -> Optional[Counter]:
        return self.entries.get(key) or None

    def dumps(self) -> str:
        rows = sorted(
            (file, code, line, count)
            for file, counter in self.entries.items() for (code, line), count in counter.items() if count > 0
        )
        body = ",\n".join(
            "  " + json.dumps({"code": code, "count": count, "file": file, "line": line}, sort_keys=True, ensure_ascii=False)
            for file, code, line, count in rows
        )
        return '{"version": %d, "findings": [\n%s\n]}\n' % (VERSION, body) if rows else '{"version": %d, "findings": []}\n' % VERSION

    def write(self) -> None:
        """Through a temporary file and a rename: an interrupted write leaves the old baseline."""
        target = self.path.resolve()
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(self.dumps())
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise

    def count(self) -> tuple[int, int]:
        """(findings, files) recorded."""
        return sum(sum(c.values()) for c in self.entries.values()), sum(1 for c in self.entries.values() if c)


def updated(old: Optional[Baseline], path: Path, checked: dict, root: Path) -> Baseline:
    """The baseline after a run. `checked[key]` is (the file's findings as a Counter, the codes
    the run checked it for), or None for a file that could not be checked, whose old entries
    stay. Old entries also stay for codes the run did not check and for files it did not check
    that still exist."""
    entries: dict[str, Counter] = {}
    for key, counter in (old.entries.items() if old is not None else ()):
        if checked.get(key) is not None:
            codes = checked[key][1]
            kept = Counter({k: n for k, n in counter.items() if k[0] not in codes})
        elif key in checked or (root / key).exists():
            kept = Counter(counter)
        else:
            continue  # the file is gone
        if kept:
            entries[key] = kept
    for key, found in checked.items():
        if found is not None and found[0]:
            entries.setdefault(key, Counter()).update(found[0])
    return Baseline(path, entries)
