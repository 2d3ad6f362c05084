"""The engine: source text in, findings out. Pure: no I/O, no printing.

One libcst parse per file, one traversal running every selected rule. Rules see the
shared facts (`FileFacts`) and the traversal context (`Context`): where we are, whether
the code is under a CUDA guard, and which methods run at forward time.
"""
from __future__ import annotations

import ast
import bisect
import os
import re
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint import guards, syntax
from devlint.facts import ClassInfo, FileFacts
from devlint.findings import SAFE, UNSAFE, Edit, Finding, Fix, ParseError  # noqa: F401 (re-exported)
from devlint.positions import statement_first_lines, statement_positions

# A file that holds none of these words cannot hold a finding and is never parsed.
PREFILTER = re.compile(r"cuda|torch|map_location")


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
        self.self_calls: dict[str, set[str]] = {}  # method -> names called as self.NAME(...)
        self.on_forward_time_known: list[tuple[str, Callable[[bool], None]]] = []
        self.data: dict = {}


class FunctionFrame:
    def __init__(self, node: cst.FunctionDef, parent: "Optional[FunctionFrame]", klass: Optional[ClassFrame]):
        self.node = node
        self.data: dict = {}
        self.device_bound = False  # an assignment to `device` was seen in this function
        if klass is not None:  # a method: `self` is its first parameter
            self.klass, self.method = klass, node.name.value
            params = [*node.params.posonly_params, *node.params.params]
            decorators = syntax.decorator_names(node)
            is_instance_method = "staticmethod" not in decorators and "classmethod" not in decorators
            self.self_name = params[0].name.value if params and is_instance_method else None
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


class Context:
    """What a rule may ask about the place the traversal is at."""

    def __init__(self, facts: FileFacts) -> None:
        self.facts = facts
        self.ancestors: list[cst.CSTNode] = []  # the current node is ancestors[-1]
        self.classes: list[ClassFrame] = []
        self.functions: list[FunctionFrame] = []
        self._block_guards: list[int] = []
        self._test_kinds: dict[cst.CSTNode, Optional[str]] = {}
        self._decorator_guard: dict[cst.CSTNode, bool] = {}
        self._device_contexts = 0
        self.findings: list[tuple[str, str, str, cst.CSTNode, Optional[NodeFix], cst.CSTNode]] = []
        self.module_data: dict = {}  # what rules keep about module-level code, like FunctionFrame.data
        self._module_device_bound = False

    @property
    def function(self) -> Optional[FunctionFrame]:
        return self.functions[-1] if self.functions else None

    @property
    def klass(self) -> Optional[ClassFrame]:
        return self.classes[-1] if self.classes else None

    def report(self, code: str, name: str, node: cst.CSTNode, message: str, fix: Optional[NodeFix] = None) -> None:
        statement = self.ancestors[1] if len(self.ancestors) > 1 else node  # the module-level statement
        self.findings.append((code, name, message, node, fix, statement))

    # --- names in scope -----------------------------------------------------------------
    def device_in_scope(self) -> bool:
        """Whether a `device` name bound here can stand for the current node's hardcoded device:
        bound by a parameter or an earlier assignment, and not the fallback of `device` itself
        (`device = device or torch.device("cuda")`)."""
        for node in reversed(self.ancestors):
            if isinstance(node, (cst.Assign, cst.AnnAssign, cst.BooleanOperation, cst.IfExp)):
                if any(isinstance(n, cst.Name) and n.value == "device" for n in syntax.walk(node)):
                    return False
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                break
        for frame in reversed(self.functions):
            if frame.device_bound or "device" in syntax.param_names(frame.node.params):
                return True
        return self._module_device_bound or (bool(self.functions) and self.facts.module_device_bound)

    def note_device_binding(self) -> None:
        if self.functions:
            self.functions[-1].device_bound = True
        else:
            self._module_device_bound = True

    # --- forward time ----------------------------------------------------------------
    def when_forward_time_known(self, frame: Optional[FunctionFrame], callback: Callable[[bool], None]) -> None:
        """Call back once it is known whether `frame` runs at forward time (at its class's end)."""
        if frame is None or frame.klass is None or not frame.klass.is_module:
            callback(False)
        else:
            frame.klass.on_forward_time_known.append((frame.method, callback))

    # --- guards -----------------------------------------------------------------------
    def test_kind(self, test: cst.BaseExpression) -> Optional[str]:
        if test not in self._test_kinds:
            self._test_kinds[test] = guards.cuda_test_kind(test)
        return self._test_kinds[test]

    def is_guarded(self, placement_expressions_guard: bool = True, upto: Optional[int] = None) -> bool:
        """Whether the current node only runs when CUDA is there (or a device was chosen).

        With placement_expressions_guard=False, a conditional expression testing a tensor's
        own placement (`"cuda" if x.is_cuda else "cpu"`) does not count.
        """
        if self.facts.file_guarded or any(self._block_guards):
            return True
        chain = self.ancestors if upto is None else self.ancestors[:upto]
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

    @property
    def in_device_context(self) -> bool:
        """Inside `with torch.device(...):`, where factories default to that device."""
        return self._device_contexts > 0


class Rule:
    """A rule: its identity, and `visit_<Node>` / `leave_<Node>` handlers over the traversal."""

    code: str = ""
    name: str = ""
    summary: str = ""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.facts = ctx.facts

    def report(self, node: cst.CSTNode, message: str, fix: Optional[NodeFix] = None) -> None:
        self.ctx.report(self.code, self.name, node, message, fix)


class _Traversal:
    """Calls the rules' handlers over the tree, in source order. libcst's own `visit` rebuilds
    every node it passes and visits whitespace; this walk does neither."""

    def __init__(self, ctx: Context, rules: Sequence[Rule]) -> None:
        self.ctx = ctx
        self.visitors: dict[str, list[Callable]] = {}
        self.leavers: dict[str, list[Callable]] = {}
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_"):
                    self.visitors.setdefault(attr[6:], []).append(getattr(rule, attr))
                elif attr.startswith("leave_"):
                    self.leavers.setdefault(attr[6:], []).append(getattr(rule, attr))

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
        if kind in ("IndentedBlock", "Module"):
            ctx._block_guards.append(0)
        elif kind == "ClassDef":
            ctx.classes.append(ClassFrame(node, ctx.facts.class_info(node)))
        elif kind == "FunctionDef":
            parent_fn = ctx.function
            direct_method = ctx.klass is not None and (parent_fn is None or ctx.klass.node is ctx.ancestors[-3])
            ctx.functions.append(FunctionFrame(node, parent_fn, ctx.klass if direct_method else None))
        elif kind == "With" and any(self._is_device_context(item.item) for item in node.items):
            ctx._device_contexts += 1
        elif kind == "Call":
            self._note_self_call(node)
        elif kind in ("Import", "ImportFrom") and ctx.functions:
            ctx.facts.add_import(node)  # module-level imports were read by the scan
        elif kind == "Assign" and any(
            isinstance(t.target, cst.Name) and t.target.value == "device" for t in node.targets
        ):
            ctx.note_device_binding()
        for handler in self.visitors.get(kind, ()):
            handler(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        ctx = self.ctx
        kind = type(original_node).__name__
        for handler in self.leavers.get(kind, ()):
            handler(original_node)
        if kind in ("IndentedBlock", "Module"):
            ctx._block_guards.pop()
        elif kind == "If" and guards.is_early_exit(original_node):
            ctx._block_guards[-1] += 1
        elif kind == "Assert" and ctx.test_kind(original_node.test) is not None:
            ctx._block_guards[-1] += 1
        elif kind == "ClassDef":
            self._resolve_forward_time(ctx.classes.pop())
        elif kind == "FunctionDef":
            ctx.functions.pop()
        elif kind == "With" and any(self._is_device_context(item.item) for item in original_node.items):
            ctx._device_contexts -= 1
        ctx.ancestors.pop()

    def _is_device_context(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and self.ctx.facts.resolve(expr.func) == "torch.device"

    def _note_self_call(self, call: cst.Call) -> None:
        frame = self.ctx.function
        called = frame.self_attribute(call.func) if frame is not None else None
        if called is not None:
            frame.klass.self_calls.setdefault(frame.method, set()).add(called)

    @staticmethod
    def _resolve_forward_time(klass: ClassFrame) -> None:
        forward_time: set[str] = set()
        pending = ["forward"] if klass.is_module else []
        while pending:
            method = pending.pop()
            if method not in forward_time:
                forward_time.add(method)
                pending.extend(klass.self_calls.get(method, ()))
        for method, callback in klass.on_forward_time_known:
            callback(method in forward_time)


def parse(source: str) -> cst.Module:
    """The libcst module of `source`. Raises ParseError, with Python's own message and position
    when Python rejects the code too (they say more than libcst's list of expected tokens)."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        error = ParseError(exc.message.strip() or "invalid syntax", exc.raw_line, exc.raw_column + 1)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # libcst surfaces a few errors this way
        error = ParseError(str(exc).strip() or type(exc).__name__)
    raise _python_error(source) or error


def _python_error(source: str) -> Optional[ParseError]:
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


def check_module(module: cst.Module, rule_classes: Iterable[type[Rule]], source: Optional[str] = None) -> list[Finding]:
    """Findings in a parsed module. With the `source` it was parsed from, positions cost a
    fraction of libcst's (see `positions.py`)."""
    ctx = Context(FileFacts(module))
    rules = [cls(ctx) for cls in rule_classes]
    if rules:
        _Traversal(ctx, rules).run(module)
    if not ctx.findings:
        return []
    statements = list({id(f[5]): f[5] for f in ctx.findings}.values())
    first_lines = statement_first_lines(module, source) if source is not None else None
    positions = statement_positions(module, source, statements, first_lines) if first_lines else None
    if positions:
        try:
            return _findings(module, ctx.findings, positions, first_lines)
        except KeyError:  # a fix reaching outside its finding's statement
            pass
    return _findings(module, ctx.findings, MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider), None)


def _findings(module: cst.Module, reported, positions, first_lines: Optional[dict[int, int]]) -> list[Finding]:
    """Positioned findings. With `first_lines`, each fix is rendered inside its module-level
    statement (which starts on that line); without, inside the whole module."""
    findings = {}
    for code, name, message, node, node_fix, statement in reported:
        where = positions[node]
        fix = None
        if node_fix is not None and _keeps_comments(node_fix):
            if first_lines is None:
                edit = text_edit(module, module, 1, positions[node_fix.target], node_fix)
            else:
                edit = text_edit(module, statement, first_lines[id(statement)], positions[node_fix.target], node_fix)
            fix = Fix(node_fix.applicability, node_fix.message, (edit,))
        finding = Finding(
            code, name, message, where.start.line, where.start.column + 1, where.end.line, where.end.column + 1, fix,
        )
        findings.setdefault((finding.row, finding.column, code), finding)  # one per place and code
    return sorted(findings.values(), key=lambda f: f.sort_key)


def text_edit(module: cst.Module, scope: cst.CSTNode, first_line: int, span, node_fix: NodeFix) -> Edit:
    """The text that replacing `node_fix.target` inside `scope` (a module-level statement whose
    code starts on `first_line`, or the module) writes into the file, as one edit over the
    target's span: rendered in the file's real context, so the indentation of a multi-line
    replacement is the one `--fix` writes."""
    old = module.code_for_node(scope)
    new = module.code_for_node(scope.deep_replace(node_fix.target, node_fix.replacement))
    if new == old and scope is not module:
        raise KeyError(node_fix.target)  # the target is outside this statement
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer(old)]
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


def check_source(source: str, rule_classes: Optional[Iterable[type[Rule]]] = None) -> list[Finding]:
    """Findings in `source`, sorted by position. Raises ParseError when it does not parse."""
    from devlint.rules import ALL_RULES

    if not could_hold_finding(source):
        return []
    return check_module(parse(source), ALL_RULES if rule_classes is None else rule_classes, source)
