"""The engine: source text in, findings out. Pure: no I/O, no printing.

One libcst parse per file and one traversal, which calls the handlers of the analyses the
selected rules require and of the rules themselves. The engine keeps only where the traversal
is (ancestors, class and function frames) and what the rules report.
"""
from __future__ import annotations

import ast
import bisect
import os
import re
import warnings
from collections import Counter
from typing import Callable, Iterable, Optional, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint.api import in_dependency_order
from devlint.api import ClassFrame, Context, FunctionFrame, NodeFix, Reported, Rule  # noqa: F401 (NodeFix, Rule re-exported)
from devlint.core import syntax
from devlint.core.findings import SAFE, UNSAFE, Edit, Finding, Fix, ParseError, Related  # noqa: F401 (re-exported)
from devlint.core.positions import statement_first_lines, statement_positions
from devlint.semantic.facts import FileFacts
from devlint.semantic.project import ProjectView

# A file that holds none of these words cannot hold a finding and is never parsed.
PREFILTER = re.compile(r"cuda|torch|map_location")


class _Traversal:
    """Calls the handlers over the tree, in source order: the analyses' before the rules' on
    the way down, after them on the way up. libcst's own `visit` rebuilds every node it passes
    and visits whitespace; this walk does neither."""

    def __init__(self, ctx: Context, analyses: Sequence[object], rules: Sequence[Rule]) -> None:
        self.ctx = ctx
        self.visitors: dict[str, list[Callable]] = {}
        self.leavers: dict[str, list[Callable]] = {}
        for handler_owner in (*analyses, *rules):
            for attr in dir(type(handler_owner)):
                if attr.startswith("visit_"):
                    self.visitors.setdefault(attr[6:], []).append(getattr(handler_owner, attr))
        for handler_owner in (*rules, *reversed(analyses)):
            for attr in dir(type(handler_owner)):
                if attr.startswith("leave_"):
                    self.leavers.setdefault(attr[6:], []).append(getattr(handler_owner, attr))

    def run(self, root: cst.CSTNode) -> None:
        stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
        while stack:  # not recursive: nesting as deep as the parser takes is fine
            node, leaving = stack.pop()
            if leaving:
                self.on_leave(node)
            else:
                self.on_visit(node)
                stack.append((node, True))
                stack.extend((child, False) for child in reversed(syntax.children(node)))

    def on_visit(self, node: cst.CSTNode) -> None:
        ctx = self.ctx
        ctx.ancestors.append(node)
        kind = type(node).__name__
        if kind == "ClassDef":
            ctx.classes.append(ClassFrame(node, ctx.facts.class_info(node)))
        elif kind == "FunctionDef":
            parent_fn = ctx.function
            direct_method = ctx.klass is not None and (parent_fn is None or ctx.klass.node is ctx.ancestors[-3])
            ctx.functions.append(FunctionFrame(node, parent_fn, ctx.klass if direct_method else None))
        elif kind in ("Import", "ImportFrom") and ctx.functions:
            ctx.facts.add_import(node)  # module-level imports were read by the facts' scan
        for handler in self.visitors.get(kind, ()):
            handler(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        ctx = self.ctx
        kind = type(original_node).__name__
        for handler in self.leavers.get(kind, ()):
            handler(original_node)
        if kind == "ClassDef":
            ctx.classes.pop()
        elif kind == "FunctionDef":
            ctx.functions.pop()
        ctx.ancestors.pop()


def parse(source: str) -> cst.Module:
    """The libcst module of `source`. Raises ParseError, with Python's own message and position
    when Python rejects the code too (they say more than libcst's list of expected tokens)."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        error = ParseError(exc.message.strip() or "invalid syntax", exc.raw_line, exc.raw_column + 1)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # libcst surfaces a few errors this way
        error = ParseError(str(exc).strip() or type(exc).__name__)
    raise python_error(source) or error


def python_error(source: str) -> Optional[ParseError]:
    """Why the running Python's own parser rejects `source` (a NUL byte, a syntax error), or None."""
    nul = source.find("\0")
    if nul >= 0:
        line_start = source.rfind("\n", 0, nul) + 1
        return ParseError("source code cannot contain null bytes", source.count("\n", 0, nul) + 1, nul - line_start + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "<file>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return ParseError(exc.msg, exc.lineno or 1, max(exc.offset or 1, 1))
    except (ValueError, RecursionError, MemoryError):
        return None
    return None  # Python takes it: the message is libcst's


def could_hold_finding(source: str) -> bool:
    return PREFILTER.search(source) is not None


def check_module(
    module: cst.Module, rule_classes: Iterable[type[Rule]], source: Optional[str] = None,
    target_torch: tuple[int, int] = (2, 1), project: Optional[ProjectView] = None,
) -> list[Finding]:
    """Findings in a parsed module. With the `source` it was parsed from, positions cost a
    fraction of libcst's (see `positions.py`). `target_torch` picks fixes and advice; `project`
    answers what the file's classes inherit from the rest of the project."""
    rule_classes = list(rule_classes)
    ctx = Context(FileFacts(module, project, source), target_torch, project)
    for analysis in in_dependency_order(rule_classes):  # only what the selected rules need
        ctx.analyses[analysis] = analysis(ctx)
    rules = [cls(ctx) for cls in rule_classes]
    if rules:
        _Traversal(ctx, list(ctx.analyses.values()), rules).run(module)
    # Analyses and rules point back at the context (and analyses call rules back): dropping
    # them here leaves no reference cycle, so reference counting frees the tree at once.
    ctx.analyses.clear()
    del rules
    if not ctx.findings:
        return []
    statements = {id(f.statement): f.statement for f in ctx.findings}
    evidence = {id(node): node for f in ctx.findings for node, _ in f.related}
    if evidence:
        statements.update(_holders(module, statements, evidence))
    statements = list(statements.values())
    first_lines = statement_first_lines(module, source) if source is not None else None
    positions = statement_positions(module, source, statements, first_lines) if first_lines else None
    if positions:
        try:
            return _findings(module, ctx.findings, positions, first_lines, source)
        except KeyError:  # a fix reaching outside its finding's statement
            pass
    return _findings(module, ctx.findings, MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider), None, source)


def _findings(
    module: cst.Module, reported: list[Reported], positions, first_lines: Optional[dict[int, int]], source: Optional[str]
) -> list[Finding]:
    """Positioned findings. A fix is rendered where its target stands, or else inside its
    module-level statement (which starts on its `first_lines` line), or inside the module."""
    findings = {}
    line_starts = _line_starts(source) if source is not None else None
    for r in reported:
        if _never_runs(r.ancestors):
            continue
        where = positions[r.node]
        fix = None
        if r.fix is not None and _keeps_comments(r.fix):
            span = positions[r.fix.target]
            edit = line_starts is not None and _rendered_in_place(module, source, line_starts, span, r)
            if not edit:
                if first_lines is None:
                    edit = text_edit(module, module, 1, span, r.fix)
                else:
                    edit = text_edit(module, r.statement, first_lines[id(r.statement)], span, r.fix)
            fix = Fix(r.fix.applicability, r.fix.message, (edit,))
        related = tuple(
            Related(clause, at.start.line, at.start.column + 1, at.end.line, at.end.column + 1)
            for node, clause in r.related if (at := positions.get(node)) is not None
        )
        finding = Finding(
            r.code, r.name, r.message, where.start.line, where.start.column + 1, where.end.line, where.end.column + 1, fix,
            related=related,
        )
        findings.setdefault((finding.row, finding.column, r.code), finding)  # one per place and code
    return sorted(findings.values(), key=lambda f: f.sort_key)


def _never_runs(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether the code at ancestors[-1] sits in the body of `if False:` (or `if 0:`, `while
    False:`): a branch switched off by hand, which never runs, so nothing in it is reported."""
    for node, child in zip(ancestors, ancestors[1:]):
        if isinstance(node, (cst.If, cst.While)) and child is node.body and _constant_false(node.test):
            return True
    return False


def _constant_false(test: cst.BaseExpression) -> bool:
    return (isinstance(test, cst.Name) and test.value == "False") or (
        isinstance(test, cst.Integer) and test.value == "0")


def _holders(module: cst.Module, found: dict, nodes: dict) -> dict:
    """The module-level statements holding `nodes` that are not already in `found` (the
    statements of the findings, searched first: the evidence is nearly always in them)."""
    missing, extra = set(nodes), {}
    for statements in (found.values(), (s for s in module.body if id(s) not in found)):
        for statement in statements:
            stack, holds = [statement], False
            while stack and missing:
                node = stack.pop()
                if id(node) in missing:
                    missing.discard(id(node))
                    holds = True
                stack.extend(node.children)
            if holds and id(statement) not in found:
                extra[id(statement)] = statement
            if not missing:
                return extra
    return extra


def _rendered_in_place(module: cst.Module, source: str, line_starts: list[int], span, r: Reported) -> Optional[Edit]:
    """The replacement rendered at its target's indentation: cheap, where the target is the
    reported node or one of its ancestors (so the indented blocks above it are known) and the
    target rendered there gives exactly its text in the file. None otherwise."""
    target = r.fix.target
    depth = next((i for i, node in enumerate(r.ancestors) if node is target), None)
    if depth is not None:
        blocks = [b for b in r.ancestors[:depth] if isinstance(b, cst.IndentedBlock)]
    else:  # reported from an enclosing scope (at its end): look below where the traversal was
        below = _blocks_down_to(r.ancestors[-1], target)
        if below is None:
            return None
        blocks = [b for b in r.ancestors if isinstance(b, cst.IndentedBlock)] + below
    indents = [b.indent if b.indent is not None else module.default_indent for b in blocks]

    def render(node: cst.CSTNode) -> str:
        state = CodegenState(module.default_indent, module.default_newline, indent_tokens=list(indents))
        node._codegen(state)
        return "".join(state.tokens)

    start = line_starts[span.start.line - 1] + span.start.column
    end = line_starts[span.end.line - 1] + span.end.column
    if render(target) != source[start:end]:
        return None
    return Edit(render(r.fix.replacement), span.start.line, span.start.column + 1, span.end.line, span.end.column + 1)


def _blocks_down_to(root: cst.CSTNode, target: cst.CSTNode) -> Optional[list[cst.IndentedBlock]]:
    """The indented blocks from `root` (excluded) down to `target`, or None if it is not below."""
    stack: list[tuple[cst.CSTNode, tuple]] = [(root, ())]
    while stack:
        node, blocks = stack.pop()
        if node is target:
            return list(blocks)
        if node is not root and isinstance(node, cst.IndentedBlock):
            blocks = (*blocks, node)
        stack.extend((child, blocks) for child in syntax.children(node))
    return None


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in _NEWLINE.finditer(text)]


def text_edit(module: cst.Module, scope: cst.CSTNode, first_line: int, span, node_fix: NodeFix) -> Edit:
    """The text that replacing `node_fix.target` inside `scope` (a module-level statement whose
    code starts on `first_line`, or the module) writes into the file, as one edit over the
    target's span: rendered in the file's real context, so the indentation of a multi-line
    replacement is the one `--fix` writes."""
    old = module.code_for_node(scope)
    new = module.code_for_node(scope.deep_replace(node_fix.target, node_fix.replacement))
    if new == old and scope is not module:
        raise KeyError(node_fix.target)  # the target is outside this statement
    line_starts = _line_starts(old)
    start = line_starts[span.start.line - first_line] + span.start.column
    end = line_starts[span.end.line - first_line] + span.end.column
    # Only the target's text differs; should its code reach past its span, widen the edit.
    start = min(start, _common_prefix(old, new))
    end = max(end, len(old) - _common_suffix(old, new, limit=min(len(old), len(new)) - start))
    row, column = _row_column(line_starts, start, first_line)
    end_row, end_column = _row_column(line_starts, end, first_line)
    return Edit(new[start:len(new) - (len(old) - end)], row, column, end_row, end_column)


_NEWLINE = re.compile(r"\r\n?|\n")  # what libcst counts as a line break


def _common_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix((a, b)))


def _common_suffix(a: str, b: str, limit: int) -> int:
    n = 0
    while n < limit and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _row_column(line_starts: list[int], offset: int, first_line: int) -> tuple[int, int]:
    """1-based row and column of an offset into code whose first line is `first_line`."""
    index = bisect.bisect_right(line_starts, offset) - 1
    return first_line + index, offset - line_starts[index] + 1


def _keeps_comments(node_fix: NodeFix) -> bool:
    """A fix whose replacement would lose a comment of the code it replaces is not offered."""
    def comments(node):
        found, stack = Counter(), [node]
        while stack:  # libcst's own children: comments live in the layout syntax.walk skips
            current = stack.pop()
            if isinstance(current, cst.Comment):
                found[current.value] += 1
            stack.extend(current.children)
        return found

    return not comments(node_fix.target) - comments(node_fix.replacement)
