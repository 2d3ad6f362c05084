"""What a check reports. No libcst here: a cached run builds these without parsing anything."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

SAFE, UNSAFE = "safe", "unsafe"


@dataclass(frozen=True)
class Edit:
    content: str
    row: int
    column: int
    end_row: int
    end_column: int


@dataclass(frozen=True)
class Fix:
    applicability: str
    message: str
    edits: tuple[Edit, ...]

    def applies(self, unsafe: bool) -> bool:
        return self.applicability == SAFE or unsafe


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    row: int  # 1-based
    column: int  # 1-based
    end_row: int
    end_column: int
    fix: Optional[Fix] = None

    @property
    def sort_key(self):
        return (self.row, self.column, self.code)


class ParseError(Exception):
    """The source is not valid Python (for libcst)."""

    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message, self.row, self.column = message, row, column
