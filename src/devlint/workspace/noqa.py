"""Suppressions: `# noqa` / `# noqa: DEV001, DEV002` on a finding's line (flake8's syntax), and
`# devlint: noqa` / `# devlint: noqa: DEV004` on a line of its own for the whole file."""
from __future__ import annotations

import re
from typing import Optional, Sequence

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
FILE_NOQA = re.compile(
    r"^\s*#\s*devlint:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?\s*$", re.IGNORECASE | re.MULTILINE
)
ALL = "ALL"
# Rows as Python counts them: a form feed or U+2028 in a string is no line break.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_BREAK_KEPT = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _codes(text: Optional[str]) -> set[str]:
    return {c.upper() for c in re.split(r"[,\s]+", text or "") if c}


def is_suppressed(code: str, line: str) -> bool:
    match = NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    return codes is None or code in _codes(codes)


def file_suppressions(source: str) -> set[str]:
    """Codes silenced for the whole file ({'ALL'} for a bare `# devlint: noqa`)."""
    out: set[str] = set()
    for match in FILE_NOQA.finditer(source):
        out |= _codes(match.group("codes")) if match.group("codes") else {ALL}
    return out


def unsuppressed(findings: Sequence, source: str, line_noqa: bool = True) -> list:
    silenced = file_suppressions(source) if "devlint" in source else set()
    if ALL in silenced:
        return []
    lines = _LINE_BREAK.split(source) if line_noqa else []
    return [
        f for f in findings
        if f.code not in silenced and not (line_noqa and f.row <= len(lines) and is_suppressed(f.code, lines[f.row - 1]))
    ]


def add_noqa(source: str, findings: Sequence) -> tuple[str, int]:
    """Write `# noqa: CODE` on each finding's line (merged into an existing `# noqa: ...`).
    Returns the new source and how many lines were changed."""
    wanted: dict[int, set[str]] = {}
    for f in findings:
        wanted.setdefault(f.row, set()).add(f.code)
    lines = _LINE_BREAK_KEPT.findall(source)
    changed = 0
    for row, codes in wanted.items():
        line = lines[row - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        if body.endswith("\\"):
            continue  # a comment cannot follow a line continuation
        match = NOQA.search(body)
        if match is not None:
            if match.group("codes") is None:
                continue  # a bare noqa already silences everything
            merged = ", ".join(sorted(_codes(match.group("codes")) | codes))
            body = body[: match.start()] + f"# noqa: {merged}" + body[match.end():]
        else:
            body = body.rstrip() + f"  # noqa: {', '.join(sorted(codes))}"
        lines[row - 1] = body + ending
        changed += 1
    return "".join(lines), changed
