"""What a check reports. No libcst here: a cached run builds these without parsing anything."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# The comment line that starts each cell of a notebook joined into one module (the cell's
# number follows; a notebook holding such a line itself gets a longer marker with this start).
CELL_MARKER = "# devlint: cell"

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


FILE_ERROR = "file-error"


@dataclass(frozen=True)
class Related:
    """A place that decided a finding (where a CPU value was made, where it meets a device
    value), with a clause saying what happens there."""

    message: str  # a clause; "{line}" in it stands for where it is, else " at line N" follows
    row: int
    column: int
    end_row: int
    end_column: int
    cell: Optional[int] = None  # in a notebook: the cell the rows count in

    def clause(self, finding_cell: Optional[int] = None) -> str:
        where = f"line {self.row}" if self.cell is None or self.cell == finding_cell else f"cell {self.cell}, line {self.row}"
        return self.message.replace("{line}", where) if "{line}" in self.message else f"{self.message} at {where}"


@dataclass(frozen=True)
class Finding:
    """A diagnostic: a rule's finding, or (with no code) why a file could not be checked."""

    code: Optional[str]  # None for a file error
    name: str
    message: str
    row: int  # 1-based
    column: int  # 1-based
    end_row: int
    end_column: int
    fix: Optional[Fix] = None
    cell: Optional[int] = None  # in a notebook: the cell (1-based), and rows count inside it
    related: tuple[Related, ...] = ()  # the evidence: where the values that meet came from

    @property
    def text(self) -> str:
        """The message with its evidence, as one line: what the text formats print."""
        if not self.related:
            return self.message
        return f"{self.message} ({'; '.join(r.clause(self.cell) for r in self.related)})"

    @property
    def sort_key(self):
        return (self.row, self.column, self.code or "")

    @property
    def is_file_error(self) -> bool:
        return self.code is None

    def fixable(self, unsafe: bool) -> bool:
        """Whether `--fix` (with `--unsafe-fixes` when `unsafe`) fixes it."""
        return self.fix is not None and self.fix.applies(unsafe)


def file_error(message: str, row: int = 1, column: int = 1) -> Finding:
    """The file could not be read, decoded, parsed or fixed: said where the findings go."""
    return Finding(None, FILE_ERROR, message, row, column, row, column)


class ParseError(Exception):
    """The source is not valid Python (for libcst)."""

    cell: Optional[int] = None  # in a notebook's cells, where set: the cell the row counts in

    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message, self.row, self.column = message, row, column
