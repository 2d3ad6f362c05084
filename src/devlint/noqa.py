"""`# noqa` and `# noqa: DEV001, DEV002` on a finding's line silence it (flake8's syntax)."""
from __future__ import annotations

import re
from typing import Sequence

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


def is_suppressed(code: str, line: str) -> bool:
    match = NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    if codes is None:
        return True
    return code in {c.upper() for c in re.split(r"[,\s]+", codes) if c}


def unsuppressed(findings: Sequence, lines: Sequence[str]) -> list:
    return [f for f in findings if not (f.row <= len(lines) and is_suppressed(f.code, lines[f.row - 1]))]
