"""Which code only runs when CUDA is there (the shared definition of "guarded")."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint import guards
from devlint.analysis.base import Analysis


class CudaGuards(Analysis):
    """Guards by a block's earlier statements (early exits, asserts), by enclosing conditions
    and by skip markers on enclosing functions and classes."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._block_guards: list[int] = []  # per open block: guarding statements seen so far
        self._test_kinds: dict[cst.CSTNode, Optional[str]] = {}
        self._decorator_guard: dict[cst.CSTNode, bool] = {}

    def visit_Module(self, node: cst.Module) -> None:
        self._block_guards.append(0)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block_guards.append(0)

    def leave_Module(self, node: cst.Module) -> None:
        self._block_guards.pop()

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block_guards.pop()

    def leave_If(self, node: cst.If) -> None:
        if guards.is_early_exit(node):
            self._block_guards[-1] += 1

    def leave_Assert(self, node: cst.Assert) -> None:
        if self.test_kind(node.test) is not None:
            self._block_guards[-1] += 1

    def test_kind(self, test: cst.BaseExpression) -> Optional[str]:
        """guards.AVAILABILITY, guards.PLACEMENT or None for a condition (computed once per node)."""
        if test not in self._test_kinds:
            self._test_kinds[test] = guards.cuda_test_kind(test)
        return self._test_kinds[test]

    def is_guarded(self, placement_expressions_guard: bool = True) -> bool:
        """Whether the current node only runs when CUDA is there (or a device was chosen).

        With placement_expressions_guard=False, a conditional expression testing a tensor's
        own placement (`"cuda" if x.is_cuda else "cpu"`) does not count.
        """
        if self.facts.file_guarded or any(self._block_guards):
            return True
        chain = self.ctx.ancestors
        for parent, child in zip(chain, chain[1:]):
            if isinstance(parent, (cst.If, cst.While)) and child is not parent.test:
                if self.test_kind(parent.test) is not None:
                    return True
            elif isinstance(parent, cst.IfExp) and child is not parent.test:
                kind = self.test_kind(parent.test)
                if kind == guards.AVAILABILITY or (kind == guards.PLACEMENT and placement_expressions_guard):
                    return True
            elif isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.decorators:
                if parent not in self._decorator_guard:
                    self._decorator_guard[parent] = guards.has_skip_marker(parent)
                if self._decorator_guard[parent]:
                    return True
        return False
