"""Which code only runs when CUDA is there (the shared definition of "guarded")."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.api import Analysis
from devlint.core import syntax
from devlint.torchinfo import guards


class CudaGuards(Analysis):
    """Guards by a block's earlier statements (early exits, asserts), by enclosing conditions
    (`if`, `while`, conditional expressions, the right operand of `and`/`or`, names bound to a
    test), by loops over `range(torch.cuda.device_count())` and by skip markers on enclosing
    functions and classes."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._block_guards: list[int] = []  # per open block: guarding statements seen so far
        self._test_kinds: dict[cst.CSTNode, Optional[str]] = {}
        self._decorator_guard: dict[cst.CSTNode, bool] = {}
        # per scope (function node, None for the module): names bound to a CUDA test, and to
        # `torch.cuda.device_count()`
        self._test_names: dict[Optional[cst.CSTNode], set[str]] = {}
        self._count_names: dict[Optional[cst.CSTNode], set[str]] = {}

    def visit_Module(self, node: cst.Module) -> None:
        self._block_guards.append(0)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block_guards.append(0)

    def leave_Module(self, node: cst.Module) -> None:
        self._block_guards.pop()

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block_guards.pop()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._test_names.pop(node, None)
        self._count_names.pop(node, None)

    def leave_If(self, node: cst.If) -> None:
        # `if not args.cuda: return`: what follows runs when the test fails, so not when it fails by default
        if guards.is_early_exit(node, self.test_kind) and self._by_default(node.test) is not False:
            self._block_guards[-1] += 1

    def leave_Expr(self, node: cst.Expr) -> None:
        if guards.is_cuda_check_call(node):
            self._block_guards[-1] += 1

    def leave_Assert(self, node: cst.Assert) -> None:
        if self.test_kind(node.test) is not None and self._by_default(node.test) is not True:
            self._block_guards[-1] += 1

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            if len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    self._bind(t.value, v.value)
            return
        scope = self._scope()
        if isinstance(target, cst.Attribute):  # `self.cpu_only = not torch.cuda.is_available()`
            dotted = syntax.dotted_name(target)
            if dotted is not None and self._records_test(value):
                self._test_names.setdefault(scope, set()).add(dotted)
            return
        if not isinstance(target, cst.Name):
            return
        if self._records_test(value):
            self._test_names.setdefault(scope, set()).add(target.value)
        if self._is_device_count(value):
            self._count_names.setdefault(scope, set()).add(target.value)

    def _records_test(self, value: cst.BaseExpression) -> bool:
        """A CUDA test as a value, or `True`/`False` set in an arm of an `if` on one (`if not
        torch.cuda.is_available(): self.cpu_only = True else: self.cpu_only = False`)."""
        if self._is_test(value):
            return True
        if not (isinstance(value, cst.Name) and value.value in ("True", "False")):
            return False
        chain = self.ctx.ancestors
        return any(isinstance(parent, cst.If) and child is not parent.test and self.test_kind(parent.test) == guards.AVAILABILITY
                   for parent, child in zip(chain, chain[1:]))

    def _is_test(self, value: cst.BaseExpression) -> bool:
        """A CUDA test as a value (`torch.cuda.is_available()`, `args.cuda`, `n_gpu > 0`, an `and`
        holding one), not any expression that mentions CUDA (`torch.device("cuda")`, `x.cuda()`)."""
        if isinstance(value, cst.BooleanOperation):
            return self._is_test(value.left) or self._is_test(value.right)
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Not):
            return self._is_test(value.expression)
        if isinstance(value, cst.Call):
            qualified = self.facts.resolve(value.func) or ""
            return qualified.startswith("torch.cuda.is_") or qualified == "torch.cuda.device_count" or (
                syntax.method_name(value) == "startswith" and guards.cuda_test_kind(value) is not None)
        if isinstance(value, (cst.Comparison, cst.Name, cst.Attribute)):
            # a placement test counts too: a value on CUDA (`self.device == "cuda"`) means CUDA is there
            return guards.cuda_test_kind(value) is not None or self._names_a_test(value)
        return False

    def _scope(self) -> Optional[cst.CSTNode]:
        frame = self.ctx.function
        return frame.node if frame is not None else None

    def _names_a_test(self, expr: cst.BaseExpression) -> bool:
        bound = self._test_names.get(self._scope())
        if not bound:
            return False
        attribute_names = set()
        for node in syntax.walk_expressions(expr):
            if isinstance(node, cst.Attribute):
                if syntax.dotted_name(node) in bound:
                    return True
                attribute_names.add(id(node.attr))
            elif isinstance(node, cst.Name) and id(node) not in attribute_names and node.value in bound:
                return True
        return False

    def _is_device_count(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            return self.facts.resolve(expr.func) == "torch.cuda.device_count"
        return isinstance(expr, cst.Name) and expr.value in self._count_names.get(self._scope(), ())

    def _loops_over_devices(self, loop: cst.For | cst.CompFor) -> bool:
        """`for i in range(torch.cuda.device_count()):` (or `range(n)`, n bound to it): no
        iteration without CUDA."""
        it = loop.iter
        if not (isinstance(it, cst.Call) and syntax.dotted_name(it.func) == "range"):
            return False
        args = syntax.positional(it)
        stop = args[0] if len(args) == 1 else args[1] if len(args) in (2, 3) else None
        return stop is not None and self._is_device_count(stop.value)

    def test_kind(self, test: cst.BaseExpression) -> Optional[str]:
        """guards.AVAILABILITY, guards.PLACEMENT or None for a condition (computed once per node)."""
        if test not in self._test_kinds:
            kind = guards.cuda_test_kind(test)
            if kind != guards.AVAILABILITY and (self._names_a_test(test) or self._calls_torch_cuda(test)):
                kind = guards.AVAILABILITY
            self._test_kinds[test] = kind
        return self._test_kinds[test]

    def _calls_torch_cuda(self, test: cst.BaseExpression) -> bool:
        """A call of a `torch.cuda` function under a name an import gave it
        (`from torch.cuda import is_available`, then `if is_available():`)."""
        return any(isinstance(node, cst.Call) and (self.facts.resolve(node.func) or "").startswith("torch.cuda.")
                   for node in syntax.walk_expressions(test))

    def _runs_by_default(self, parent: cst.CSTNode, child: cst.CSTNode) -> bool:
        """Whether the branch `child` of the condition `parent` runs when the program runs with its
        defaults, whatever the machine: then that condition guards nothing."""
        if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
            return self._by_default(parent.test) is (child is parent.body)
        if isinstance(parent, cst.BooleanOperation):  # the right operand runs when `and`'s left holds
            return self._by_default(parent.left) is isinstance(parent.operator, cst.And)
        return False

    def _by_default(self, test: cst.BaseExpression) -> Optional[bool]:
        """The value of a test when the program runs with its defaults, or None when not known:
        known for flags named for CUDA or GPUs whose default this file sets (see `_flag_default`),
        `len(flag) > 0`, `not`, `and` and `or` of them. A test that also asks for CUDA
        (`args.cuda and torch.cuda.is_available()`) is not known: it guards."""
        if isinstance(test, cst.BooleanOperation):
            left, right = self._by_default(test.left), self._by_default(test.right)
            decisive = isinstance(test.operator, cst.Or)  # `or`: one True decides; `and`: one False
            if left is decisive or right is decisive:
                return decisive
            return None if left is None or right is None else not decisive
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            value = self._by_default(test.expression)
            return None if value is None else not value
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            left, comparison = test.left, test.comparisons[0]
            if isinstance(left, cst.Call) and syntax.dotted_name(left.func) == "len" and len(left.args) == 1:
                left = left.args[0].value  # `len(opt.gpu_ids) > 0`
            zero = isinstance(comparison.comparator, cst.Integer) and comparison.comparator.value == "0"
            if zero and isinstance(comparison.operator, (cst.GreaterThan, cst.NotEqual)):
                return self._flag_default(left)
            return None
        return self._flag_default(test)

    def _flag_default(self, expr: cst.BaseExpression) -> Optional[bool]:
        """True / False for a flag named for CUDA or GPUs (`args.cuda`, `opt.gpu_ids`, `use_gpu`)
        whose default this file sets on / off; None when not known."""
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return None
        name = expr.value if isinstance(expr, cst.Name) else expr.attr.value
        if "cuda" not in name.lower() and "gpu" not in name.lower():
            return None
        defaults = self.facts.memo.get("flag defaults")
        if defaults is None:
            defaults = self.facts.memo["flag defaults"] = _flag_defaults(self.facts.module)
        options, names = defaults
        # an option is read as an attribute (`args.cuda`); a bare name is a variable of the file
        return options.get(name) if isinstance(expr, cst.Attribute) else names.get(name)

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
                if self.test_kind(parent.test) is not None and not self._runs_by_default(parent, child):
                    return True
            elif isinstance(parent, cst.IfExp) and child is not parent.test:
                kind = self.test_kind(parent.test)
                if (kind == guards.AVAILABILITY or (kind == guards.PLACEMENT and placement_expressions_guard)) \
                        and not self._runs_by_default(parent, child):
                    return True
            elif isinstance(parent, cst.BooleanOperation) and child is parent.right:
                kind = self.test_kind(parent.left)
                if (kind == guards.AVAILABILITY or (kind == guards.PLACEMENT and placement_expressions_guard)) \
                        and not self._runs_by_default(parent, child):
                    return True
            elif isinstance(parent, cst.Call) and isinstance(child, cst.Arg) and guards.is_marked_case(parent):
                return True
            elif isinstance(parent, cst.For) and child is parent.body:
                if self._loops_over_devices(parent):
                    return True
            elif isinstance(parent, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)) \
                    and child is not parent.for_in:
                clause = parent.for_in  # `[name(i) for i in range(torch.cuda.device_count())]`
                while clause is not None:
                    if self._loops_over_devices(clause):
                        return True
                    clause = clause.inner_for_in
            elif isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.decorators:
                if parent not in self._decorator_guard:
                    self._decorator_guard[parent] = guards.has_skip_marker(parent)
                if self._decorator_guard[parent]:
                    return True
        return False

    def caught(self, exception: str) -> bool:
        """Whether the current node is in the body of a `try` with a handler catching `exception`."""
        chain = self.ctx.ancestors
        for parent, child in zip(chain, chain[1:]):
            if isinstance(parent, cst.Try) and child is parent.body:
                if any(guards.handler_catches(h, exception) for h in parent.handlers):
                    return True
        return False


def _flag_defaults(module: cst.Module) -> tuple[dict[str, bool], dict[str, bool]]:
    """What the file's flags named for CUDA or GPUs default to, as (options, names): each
    `add_argument(...)`'s destination, on when its action is `store_false` or its default is True
    or a non-empty string or list that does not start with "-" ("-1" means the CPU), off when its
    action is `store_true` or its default is False, None or empty or missing; and each name the
    module level binds only to True (on) or only to False (off). A flag set both ways, or to anything
    else, is not known."""
    options: dict[str, set] = {}
    names: dict[str, set] = {}
    for node in syntax.walk(module):
        if isinstance(node, cst.Call) and syntax.method_name(node) == "add_argument":
            name = syntax.option_destination(node)
            if name:
                options.setdefault(name, set()).add(_argument_default(node))
    for statement in module.body:  # the names the module level binds (a script's settings)
        for small in syntax.small_statements(statement):
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                value = small.value
                known = value.value == "True" if isinstance(value, cst.Name) and value.value in ("True", "False") else None
                names.setdefault(small.targets[0].target.value, set()).add(known)
    return _known(options), _known(names)


def _known(found: dict[str, set]) -> dict[str, bool]:
    return {name: next(iter(values)) for name, values in found.items()
            if len(values) == 1 and None not in values and ("cuda" in name.lower() or "gpu" in name.lower())}


def _argument_default(call: cst.Call) -> Optional[bool]:
    action = syntax.keyword(call, "action")
    action = syntax.string_value(action.value) if action is not None else None
    if action == "store_false":
        return True
    if action == "store_true":
        default = syntax.keyword(call, "default")
        return None if default is not None else False
    default = syntax.keyword(call, "default")
    if default is None:
        return False if action is None else None  # argparse's default: None
    value = default.value
    if isinstance(value, cst.Name) and value.value in ("True", "False", "None"):
        return value.value == "True"
    text = syntax.string_value(value)
    if text is not None:
        return bool(text) and not text.startswith("-")
    if isinstance(value, (cst.List, cst.Tuple)):
        return bool(value.elements)
    return None
