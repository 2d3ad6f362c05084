from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from devlint.base import Context


class Analysis:
    """Facts about one file that rules share. `requires`: the analyses this one asks."""

    requires: ClassVar[tuple[type["Analysis"], ...]] = ()

    def __init__(self, ctx: "Context") -> None:
        self.ctx = ctx
        self.facts = ctx.facts


def in_dependency_order(roots) -> list[type[Analysis]]:
    """Every analysis that `roots` (rules or analyses) require, transitively, each after those it requires."""
    ordered: list[type[Analysis]] = []
    for root in roots:
        for required in root.requires:
            _add(required, ordered)
    return ordered


def _add(analysis: type[Analysis], ordered: list[type[Analysis]]) -> None:
    if analysis in ordered:
        return
    for required in analysis.requires:
        _add(required, ordered)
    ordered.append(analysis)
