"""Rule docs: `rules/DEV00N.md`, the one place a rule's prose and examples live.

Installed wheels carry them as `devlint/_rules/`; a source checkout reads `rules/` directly.
"""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Optional

HEADING = re.compile(r"^## (.+)$", re.M)
CODE_BLOCK = re.compile(r"```python[^\n]*\n(.*?)```", re.S)


def _doc_dir():
    packaged = resources.files("devlint") / "_rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "rules"


def doc_path(code: str):
    """Where a rule's doc is: a file of the installed package, or of the checkout's `rules/`."""
    return _doc_dir() / f"{code}.md"


def rule_doc(code: str) -> Optional[str]:
    path = doc_path(code)
    return path.read_text(encoding="utf-8") if path.is_file() else None


def sections(doc: str) -> dict[str, str]:
    """`## Heading` -> its text, in order; the title and preamble are under ''."""
    parts = HEADING.split(doc)
    out = {"": parts[0]}
    for heading, body in zip(parts[1::2], parts[2::2]):
        out[heading.strip()] = body
    return out


def code_blocks(section_text: str) -> list[str]:
    return CODE_BLOCK.findall(section_text)


def title(doc: str) -> str:
    return doc.splitlines()[0].lstrip("# ").strip() if doc else ""


def fix_availability(code: str) -> str:
    """`sometimes available (unsafe)`: what the rule class declares (its doc's `**Fix:**` line
    is tested against it)."""
    from devlint.rules import BY_CODE

    rule = BY_CODE.get(code)
    return rule.fix_availability() if rule is not None else "not available"
