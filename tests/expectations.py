"""Inline expectations in fixture code: `x.cuda()  # error: [DEV001]`, `# error: [DEV001:13, DEV005]`.

Matched exhaustively both ways: every marked finding must be reported, and nothing else.
"""
from __future__ import annotations

import re

MARKER = re.compile(r"#\s*error:\s*\[([^\]]*)\]")


def expected_findings(source: str) -> list[tuple[int, str, int | None]]:
    out = []
    for row, line in enumerate(source.splitlines(), start=1):
        match = MARKER.search(line)
        if not match:
            continue
        for item in filter(None, (part.strip() for part in match.group(1).split(","))):
            code, _, column = item.partition(":")
            out.append((row, code, int(column) if column else None))
    return out


def mismatches(source: str, findings) -> list[str]:
    """Human-readable differences between the markers in `source` and `findings`."""
    actual = [(f.row, f.code, f.column) for f in findings]
    expected = expected_findings(source)
    missing = []
    # Markers with a column first, so a bare marker cannot take the finding a precise one names.
    for row, code, column in sorted(expected, key=lambda e: e[2] is None):
        match = next((a for a in actual if a[0] == row and a[1] == code and column in (None, a[2])), None)
        if match is None:
            missing.append(f"line {row}: expected {code}" + (f" at column {column}" if column else ""))
        else:
            actual.remove(match)
    lines = source.splitlines()
    unexpected = [f"line {row}: unexpected {code} at column {column}: {lines[row - 1].strip()}" for row, code, column in actual]
    return sorted(missing + unexpected, key=lambda s: int(s.split(":")[0].split()[1]))
