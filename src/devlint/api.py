"""What a rule and an analysis are and what they see: `Rule`, the fix it proposes (`NodeFix`),
`Analysis` (what several rules need to know about a file, computed once), and the traversal
`Context` (where the traversal is, the file's facts, the analyses the rules asked for). The
contract between the engine, which walks a file, and the analyses and rules, which it runs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Generic, NamedTuple, Optional, Sequence, TypeVar

import libcst as cst

from devlint.core import syntax
from devlint.core.findings import SAFE, UNSAFE
from devlint.semantic.facts import ClassInfo, FileFacts
from devlint.semantic.project import ProjectView

__all__ = ["SAFE", "UNSAFE", "NodeFix", "ClassFrame", "FunctionFrame", "Context", "Rule", "FrameState", "Analysis",
           "in_dependency_order"]

A = TypeVar("A", bound="Analysis")
S = TypeVar("S")


@dataclass(frozen=True)
class NodeFix:
    """A fix as a rule proposes it: replace `target` (a node of the parsed module) by `replacement`."""

    applicability: str  # SAFE or UNSAFE
    message: str
    target: cst.CSTNode
    replacement: cst.CSTNode


class ClassFrame:
    def __init__(self, node: cst.ClassDef, info: Optional[ClassInfo]) -> None:
        self.node = node
        self.is_module = bool(info and info.is_module)


class FunctionFrame:
    def __init__(self, node: cst.FunctionDef, parent: "Optional[FunctionFrame]", klass: Optional[ClassFrame]):
        self.node = node
        if klass is not None:  # a method: `self` is its first parameter
            self.klass, self.method = klass, node.name.value
            self.self_name = syntax.instance_self(node)
        elif parent is not None:  # a function nested in a function: belongs to the same method
            self.klass, self.method, self.self_name = parent.klass, parent.method, parent.self_name
        else:
            self.klass, self.method, self.self_name = None, None, None

    @property
    def in_module_class(self) -> bool:
        return self.klass is not None and self.klass.is_module

    def self_attribute(self, expr: cst.BaseExpression) -> Optional[str]:
        """NAME when expr is `self.NAME` in a method (or a function nested in one)."""
        if (
            self.klass is not None
            and self.self_name is not None
            and isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == self.self_name
        ):
            return expr.attr.value
        return None


class Reported(NamedTuple):
    """A finding as a rule reports it, with where the traversal was."""

    code: str
    name: str
    message: str
    node: cst.CSTNode
    fix: Optional[NodeFix]
    ancestors: tuple[cst.CSTNode, ...]  # from the module down to `node`
    related: tuple[tuple[cst.CSTNode, str], ...] = ()  # (node, clause): the finding's evidence

    @property
    def statement(self) -> cst.CSTNode:
        """The module-level statement holding the finding."""
        return self.ancestors[1] if len(self.ancestors) > 1 else self.node


class Context:
    """What a rule may ask about the place the traversal is at."""

    def __init__(self, facts: FileFacts, target_torch: tuple[int, int] = (2, 1),
                 project: Optional[ProjectView] = None) -> None:
        self.facts = facts
        self.target_torch = target_torch  # the oldest torch the code must run on: picks fixes and advice
        self.project = project or ProjectView(None)  # what the file's classes inherit from other files
        self.ancestors: list[cst.CSTNode] = []  # the current node is ancestors[-1]
        self.classes: list[ClassFrame] = []
        self.functions: list[FunctionFrame] = []
        self.analyses: dict[type[Analysis], Analysis] = {}
        self.findings: list[Reported] = []

    def __getitem__(self, analysis: type[A]) -> A:
        """The file's instance of an analysis that the asking rule declared in `requires`."""
        return self.analyses[analysis]  # type: ignore[return-value]

    @property
    def function(self) -> Optional[FunctionFrame]:
        return self.functions[-1] if self.functions else None

    @property
    def klass(self) -> Optional[ClassFrame]:
        return self.classes[-1] if self.classes else None

    def torch_at_least(self, major: int, minor: int = 0) -> bool:
        return self.target_torch >= (major, minor)

    def report(self, code: str, name: str, node: cst.CSTNode, message: str, fix: Optional[NodeFix] = None,
               related: Sequence[tuple[cst.CSTNode, str]] = ()) -> None:
        """`related`: (node, clause) pairs, the places that decided the finding (see `Related`)."""
        self.findings.append(Reported(code, name, message, node, fix, tuple(self.ancestors), tuple(related)))


class FrameState(Generic[S]):
    """State a rule or an analysis keeps per class or function frame (or per scope, the key
    None standing for the module level): made on first use, dropped with `pop`."""

    def __init__(self, make: Callable[[], S]) -> None:
        self._make = make
        self._states: dict = {}

    def __getitem__(self, frame) -> S:
        state = self._states.get(frame)
        if state is None:
            state = self._states[frame] = self._make()
        return state

    def get(self, frame) -> Optional[S]:
        return self._states.get(frame)

    def pop(self, frame) -> Optional[S]:
        return self._states.pop(frame, None)


class Rule:
    """A rule: its identity, the analyses it requires, and `visit_<Node>` / `leave_<Node>`
    handlers over the traversal. `fixes` says whether a finding comes with a fix ("always",
    "sometimes" or "never") and `applicabilities` which ones (SAFE, UNSAFE)."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    fixes: ClassVar[str] = "never"
    applicabilities: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[type[Analysis], ...]] = ()

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.facts = ctx.facts

    def report(self, node: cst.CSTNode, message: str, fix: Optional[NodeFix] = None,
               related: Sequence[tuple[cst.CSTNode, str]] = ()) -> None:
        self.ctx.report(self.code, self.name, node, message, fix, related)

    @classmethod
    def fix_availability(cls) -> str:
        """`sometimes available (safe or unsafe)`, as the rule's doc and `devlint rule` say it."""
        if cls.fixes == "never":
            return "not available"
        return f"{cls.fixes} available ({' or '.join(cls.applicabilities)})"


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
