"""DEV002 load-without-map-location: `torch.load(...)` without `map_location`. Doc:
rules/DEV002.md; fixture: tests/fixtures/DEV002.py."""
from typing import Optional

import libcst as cst

from devlint.analysis import round_trips
from devlint.analysis.cuda_guards import CudaGuards
from devlint.api import SAFE, UNSAFE, NodeFix, Rule
from devlint.core import edits, syntax
from devlint.semantic.bindings import name_bound_at
from devlint.torchinfo import guards, names


CUDA_AVAILABLE = frozenset({"torch.cuda.is_available"})


class LoadWithoutMapLocation(Rule):
    """A loader of `names.LOADERS` called without `map_location` (keyword or positional slot)
    or `**kwargs`; the fix adds `map_location="cpu"`, safe straight into `load_state_dict`
    (or through a local name used only there), and elsewhere, unsafe,
    `map_location=None if torch.cuda.is_available() else "cpu"`."""

    code = "DEV002"
    name = "load-without-map-location"
    summary = "`torch.load` without `map_location`"
    fixes, applicabilities = "sometimes", (SAFE, UNSAFE)
    requires = (CudaGuards,)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.facts.resolve(node.func)
        slot = names.LOADERS.get(qualified)
        if slot is None:
            return
        if _passes_map_location(node, slot) or syntax.has_star_args(node):
            return
        # In the arm of a test of CUDA's availability the error this rule is about cannot happen;
        # where a handler of that error loads again with `map_location`, the code handles it.
        if self._in_arm_with_cuda() or self._retried_with_map_location():
            return
        # A file or buffer this process wrote (a test's round trip, a cache in a temporary folder,
        # a deep copy through memory): its tensors come back where they were saved.
        frame = self.ctx.function
        if round_trips.round_trip(node, frame.node if frame is not None else self.ctx.ancestors[0]):
            return
        if self._data_set_cache(node):
            return
        # Into load_state_dict, the module copies the tensors onto its own device: mapping
        # them to the CPU changes nothing else. Elsewhere the loaded tensors (or a whole model)
        # land where they were saved, and the program may rely on that: the fix maps them to
        # the CPU only where CUDA is missing, where the load used to fail.
        safe = not self._in_setstate() and (
            self._loaded_into_load_state_dict(self.ctx.ancestors) or self._loaded_through_name()
        )
        fix = self._fix(node, safe)
        self.report(
            node.func,
            f"`{qualified}()` without `map_location`: a checkpoint saved on a GPU fails to load on a machine without one",
            fix,
        )

    def _fix(self, node: cst.Call, safe: bool) -> Optional[NodeFix]:
        if safe:
            return NodeFix(SAFE, 'Add `map_location="cpu"`', node,
                           edits.add_arg(node, edits.keyword_arg("map_location", edits.string("cpu"))))
        if self.ctx[CudaGuards].is_guarded():
            return None  # it runs only where CUDA is: `None if ... else "cpu"` would always be None
        available = self.facts.spelling("torch.cuda.is_available", bound=lambda n: name_bound_at(n, self.ctx.ancestors))
        if available is None:
            return None  # no name of the file reaches `torch.cuda` where the load runs
        value = cst.parse_expression(f'None if {available}() else "cpu"')
        return NodeFix(UNSAFE, f'Add `map_location=None if {available}() else "cpu"`', node,
                       edits.add_arg(node, edits.keyword_arg("map_location", value)))

    def _data_set_cache(self, load: cst.Call) -> bool:
        """A data set's own cache: the load runs in a method of a data-set class (a base named
        `*Dataset`, directly or through the file's own classes), of a path that another method
        of the class or of a same-file base saves to, in a file that never names a device. The
        class wrote the file from what it made, and nothing in the file places anything off the
        host: its tensors are CPU tensors."""
        frame = self.ctx.function
        info = self.facts.class_info(frame.klass.node) if frame is not None and frame.klass is not None else None
        if info is None or not self.facts.names_no_device:
            return False
        lineage = self.facts.lineage(info)
        if not any((base or "").rsplit(".", 1)[-1].endswith("Dataset") for owner in lineage for base in owner.base_names):
            return False
        if frame.node not in info.methods.get(frame.method, ()):
            return False  # in a function nested in a method
        methods = [d for owner in lineage for definitions in owner.methods.values() for d in definitions]
        return round_trips.saved_by_its_class(load, frame.node, methods)

    def _in_arm_with_cuda(self) -> bool:
        """Whether the load is in the arm of an `if` (or a conditional expression) taken only where
        CUDA is: the body of `if torch.cuda.is_available():` (or `torch.cuda.device_count() > 0`,
        also as a part of an `and`), the `else` of `if not torch.cuda.is_available():`. Only a
        test of availability itself counts: a device name compared with "cpu", a flag, or a
        checker that may require CUDA only sometimes leaves the load where a CPU box runs it."""
        chain = self.ctx.ancestors
        for parent, child in zip(chain, chain[1:]):
            if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
                holds = self._availability(parent.test)
                if holds is not None and (child is parent.body) == holds:
                    return True
        return False

    def _availability(self, test: cst.BaseExpression) -> Optional[bool]:
        """True for a test that holds only where CUDA is, False for one that holds only where it
        is not, None for any other."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._availability(test.expression)
            return None if inner is None else not inner
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return True if True in (self._availability(test.left), self._availability(test.right)) else None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and self._counts_devices(test.left):
            bound = test.comparisons[0].comparator
            operator = test.comparisons[0].operator
            if isinstance(bound, cst.Integer) and (
                    isinstance(operator, cst.GreaterThan) and bound.value == "0"
                    or isinstance(operator, cst.GreaterThanEqual) and bound.value == "1"):
                return True
            return None
        if isinstance(test, cst.Call) and self.facts.resolve(test.func) in CUDA_AVAILABLE:
            return True
        return None

    def _counts_devices(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and self.facts.resolve(expr.func) == "torch.cuda.device_count"

    def _retried_with_map_location(self) -> bool:
        """Whether the load is in the body of a `try` whose handler of `RuntimeError` (the error a
        CUDA checkpoint raises on a machine without CUDA) loads again with `map_location`."""
        chain = self.ctx.ancestors
        for parent, child in zip(chain, chain[1:]):
            if isinstance(parent, cst.Try) and child is parent.body:
                for handler in parent.handlers:
                    if guards.handler_catches(handler, "RuntimeError") and any(
                            self._maps(call) for call in syntax.walk(handler.body) if isinstance(call, cst.Call)):
                        return True
        return False

    def _maps(self, call: cst.Call) -> bool:
        """A loader called with `map_location`."""
        slot = names.LOADERS.get(self.facts.resolve(call.func))
        return slot is not None and _passes_map_location(call, slot)

    def _loaded_through_name(self) -> bool:
        """`state = torch.load(p)` (or `torch.load(p)["model"]`) whose name the scope uses once,
        as `x.load_state_dict(state)` (or `state["model"]`): nothing else sees the loaded
        tensors. A second use, a rebinding, a use in a nested function, `global` or
        `nonlocal` keep it unsafe."""
        path = self.ctx.ancestors
        i = _climb_subscripts(path)
        assign = path[i - 1] if i > 0 else None
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            target = assign.targets[0].target
        elif isinstance(assign, cst.AnnAssign):
            target = assign.target  # `state: dict = torch.load(p)`
        else:
            return False
        if assign.value is not path[i] or not isinstance(target, cst.Name):
            return False
        frame = self.ctx.function
        scope = frame.node if frame is not None else path[0]
        use_path = _only_use(scope, target)
        if use_path is None or any(isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) for n in use_path[1:]):
            return False
        above = list(path[:next(i for i, n in enumerate(path) if n is scope)])
        return self._loaded_into_load_state_dict(above + use_path)

    def _loaded_into_load_state_dict(self, path) -> bool:
        """`x.load_state_dict(<path[-1]>)` (see `loaded_into_load_state_dict`) where x may be a
        torch object: not a module bound by an import (`dist_util.load_state_dict(...)`)."""
        call = loaded_into_load_state_dict(path, copies=True)
        return call is not None and self.facts.receiver_may_be_torch_object(call.func.value, path[:next(i for i, n in enumerate(path) if n is call) + 1])

    def _in_setstate(self) -> bool:
        frame = self.ctx.function
        return frame is not None and frame.method == "__setstate__"


def _passes_map_location(call: cst.Call, slot: int) -> bool:
    """`map_location` given as a keyword or in its positional slot (`torch.load(f, "cpu")`)."""
    return syntax.keyword(call, "map_location") is not None or len(syntax.positional(call)) > slot


def _only_use(scope: cst.CSTNode, target: cst.Name) -> Optional[list[cst.CSTNode]]:
    """The path from scope down to the one mention of target's name in it besides target
    itself (nested functions, `global` and `nonlocal` included); None when there are more, or none."""
    parents: dict[int, cst.CSTNode] = {}
    use = None
    stack = [scope]
    while stack:
        node = stack.pop()
        for child in syntax.children(node):
            parents[id(child)] = node
            stack.append(child)
        if isinstance(node, cst.Name) and node.value == target.value and node is not target:
            parent = parents.get(id(node))
            if (isinstance(parent, cst.Attribute) and parent.attr is node) or (
                    isinstance(parent, cst.Arg) and parent.keyword is node):
                continue  # `x.state`, `f(state=...)`: not the name
            if use is not None:
                return None
            use = node
    if use is None:
        return None
    use_path = [use]
    while use_path[-1] is not scope:
        use_path.append(parents[id(use_path[-1])])
    return use_path[::-1]


def _climb_subscripts(path) -> int:
    """The index in path of the outermost subscript of path[-1] (`torch.load(p)["model"]`)."""
    i = len(path) - 1
    while i > 0 and isinstance(path[i - 1], cst.Subscript) and path[i - 1].value is path[i]:
        i -= 1
    return i


def loaded_into_load_state_dict(path, copies: bool = False) -> Optional[cst.Call]:
    """The `<x>.load_state_dict(...)` call that the value made by path[-1] goes straight into,
    possibly through constant subscripts (`torch.load(p)["model"]`), or None. With copies=True,
    only where the module copies the tensors onto its own device (not `assign=True`)."""
    i = _climb_subscripts(path)
    if i < 2:
        return None
    arg, call = path[i - 1], path[i - 2]
    into = (
        isinstance(arg, cst.Arg)
        and arg.keyword is None
        and isinstance(call, cst.Call)
        and syntax.method_name(call) == "load_state_dict"
        and syntax.positional(call)[:1] == [arg]
        and not (copies and _assigns(call))
    )
    return call if into else None


def _assigns(call: cst.Call) -> bool:
    """`load_state_dict(sd, assign=...)` with anything but a literal False (or a star-argument)."""
    if syntax.has_star_args(call) or len(syntax.positional(call)) > 2:
        return True
    assign = syntax.keyword(call, "assign")
    return assign is not None and syntax.dotted_name(assign.value) != "False"
