"""DEV005 hardcoded-cuda-string: a `"cuda"` literal used as a device. Doc: rules/DEV005.md;
fixture: tests/fixtures/DEV005.py."""
from typing import Optional

import libcst as cst

from devlint.analysis.cuda_guards import CudaGuards
from devlint.analysis.device_contexts import DeviceContexts
from devlint.analysis.device_names import DeviceNames
from devlint.analysis.parameters import assigned_names
from devlint.api import UNSAFE, NodeFix, Rule
from devlint.core import syntax
from devlint.torchinfo import guards

# Calls whose `device` means a device *type* or a backend, where "cuda" is the right word.
DEVICE_TYPE_CALLS = frozenset({"autocast", "GradScaler", "init_process_group", "init_device_mesh"})
# unittest's assertions that compare their arguments (`self.assertEqual(x.device,
# torch.device("cuda"))`): a device given to them is only compared.
COMPARING_CALLS = frozenset({
    "assertEqual", "assertEquals", "assertNotEqual", "assertIs", "assertIsNot", "assertIn", "assertNotIn",
})
# Calls that turn their arguments into text: a device given to them places nothing.
TEXT_CALLS = frozenset({
    "format", "format_map", "substitute", "safe_substitute", "str", "repr", "print",
    "debug", "info", "warning", "warn", "error", "critical", "exception", "log",
})


# Array libraries with devices of their own, named by the same strings ("cuda:0" in JAX and Warp).
OTHER_ARRAY_LIBRARIES = frozenset({"jax", "jaxlib", "warp", "cupy", "tensorflow", "mlx", "paddle", "mxnet"})


def _imported_roots(scope: cst.CSTNode) -> frozenset[str]:
    """The top-level packages that `import` statements anywhere inside scope name."""
    roots = set()
    for node in syntax.walk(scope):
        if isinstance(node, cst.Import):
            roots.update((syntax.dotted_name(a.name) or "").split(".")[0] for a in node.names)
        elif isinstance(node, cst.ImportFrom) and node.module is not None and not node.relative:
            roots.add((syntax.dotted_name(node.module) or "").split(".")[0])
    return frozenset(roots)


class HardcodedCudaString(Rule):
    """`"cuda"` / `"cuda:N"` where a device goes (`torch.device(...)`, `.to(...)`, `device=`,
    `map_location=`, a `device` default or assignment), and `"cuda" if x.is_cuda else "cpu"`,
    outside a CUDA guard; the fix writes `device` where that name is in scope."""

    code = "DEV005"
    name = "hardcoded-cuda-string"
    summary = 'hardcoded `"cuda"` device string'
    fixes, applicabilities = "sometimes", (UNSAFE,)
    requires = (CudaGuards, DeviceNames, DeviceContexts)
    _read_names: Optional[set[str]] = None  # see `_option_read`: computed once a file, on first need

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if syntax.is_cuda_literal(node):
            self._check(node, f'"{syntax.string_value(node)}"')

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if syntax.fstring_starts_with_cuda(node):
            self._check(node, cst.Module([]).code_for_node(node))

    def visit_Integer(self, node: cst.Integer) -> None:
        if isinstance(self.ctx.ancestors[-2], cst.Arg):  # only an argument: `.to(0)`, `device=0`
            self._check(node, None)

    def _check(self, node: cst.BaseExpression, shown: Optional[str]) -> None:
        """`shown`: the string as written, None for an integer ordinal."""
        path = self.ctx.ancestors
        i = len(path) - 1
        placement_branch = False
        while i > 0 and isinstance(path[i - 1], cst.IfExp) and path[i - 1].test is not path[i]:
            placement_branch |= self.ctx[CudaGuards].test_kind(path[i - 1].test) == guards.PLACEMENT
            i -= 1
        if placement_branch and (shown is None or any(isinstance(n, cst.FormattedStringExpression) for n in path)):
            return  # f"{'cuda' if is_cuda else 'cpu'}_time": text, not a device
        value, parent = path[i], path[i - 1] if i > 0 else None
        if not (placement_branch or self._used_as_device(path, i)):
            return
        if shown is None and _counts_devices(path, i):
            return  # `add_argument("--devices", default=1)`: how many devices (Lightning's `devices=1`)
        if _places_nothing(path, _device_value(self.facts, path, i)):
            return  # `device == torch.device("cuda")`, `MSG.format(device="cuda:0")`
        if self._in_default_device():
            return  # `torch.set_default_device("cuda")`: DEV011 reports it
        frame = self.ctx.function
        if frame is not None and frame.node.name.value == "cuda":
            return  # implementing `.cuda()` (as DEV001 and DEV011 spare it): the caller asked for CUDA
        if _name_places_nothing(path, _device_value(self.facts, path, i)):
            return  # `def f(device="cuda")` never reading `device`; a name only formatted into text
        if self.ctx[DeviceContexts].fake:
            return  # under `with FakeTensorMode():` a "cuda" tensor is fake: no GPU is touched
        if self._in_function_patching_cuda(path):
            return  # a test that replaces `torch.cuda` functions hands its code a pretend GPU
        if self._another_library_scope(path):
            return  # `self._device = "cuda:0"` in a class whose methods import jax, not torch: a JAX device
        cuda_guards = self.ctx[CudaGuards]
        raised = self._raised_without_cuda(path, i, ordinal=shown is None)
        if cuda_guards.is_guarded(placement_expressions_guard=False) or (raised and cuda_guards.caught(raised)):
            return
        fix = None
        as_argument = isinstance(parent, cst.Arg) and (parent.keyword is None or parent.keyword.value != "default")
        if as_argument and _device_type_with_index(path, i, self.facts):
            as_argument = False  # `torch.device("cuda", k)`: a `device` object there raises TypeError
        # `f"cuda:{local_rank}"` picks its GPU when the code runs (one per process), which no
        # `device` name carries; `f"cuda:{device}"` with an ordinal `device` names the same device
        chosen_index = isinstance(node, cst.FormattedString)
        if value is node and as_argument and self.ctx[DeviceNames].device_in_scope() and not chosen_index:
            choose = " (chosen with `torch.accelerator.current_accelerator()`)" if self.ctx.torch_at_least(2, 6) else ""
            fix = NodeFix(UNSAFE, f"Replace {shown or node.value} with `device`{choose}", node, cst.Name("device"))
        if shown is None:
            what = f"Device ordinal {node.value} names the CUDA device cuda:{node.value} and fails on machines without CUDA"
        else:
            what = f"Hardcoded device {shown} fails on machines without CUDA"
        self.report(node, f"{what}; {self.advice()}", fix)

    def advice(self) -> str:
        if self.ctx.torch_at_least(2, 6):
            return ("take the device from the data, a parameter, or `torch.accelerator.current_accelerator()` "
                    "(when `torch.accelerator.is_available()`)")
        return "take the device from the data, a parameter, or `torch.cuda.is_available()`"

    def _raised_without_cuda(self, path, i: int, ordinal: bool) -> Optional[str]:
        """What the call taking the device path[i] raises on a CPU build of torch, so that a
        `try` catching it guards the literal: `.to("cuda")` and `device="cuda"` raise
        AssertionError ("Torch not compiled with CUDA enabled"), an ordinal and `map_location=`
        RuntimeError. None where nothing raises: `torch.device("cuda")` alone, a default, an
        assignment."""
        parent, grand = (path[i - 1], path[i - 2]) if i > 1 else (None, None)
        if not (isinstance(parent, cst.Arg) and isinstance(grand, cst.Call)):
            return None
        keyword = parent.keyword.value if parent.keyword is not None else None
        if keyword is None and self.facts.resolve(grand.func) == "torch.device":
            return self._raised_without_cuda(path, i - 2, ordinal)  # `.to(torch.device("cuda"))`: the move raises
        if keyword == "map_location":
            return "RuntimeError"
        if keyword == "device" or (keyword is None and syntax.method_name(grand) == "to"):
            return "RuntimeError" if ordinal else "AssertionError"
        return None

    def _another_library_scope(self, path) -> bool:
        """Whether the innermost class or function around the literal that imports an array
        library (in its own body or its methods) imports another one than torch (`jax`, `warp`,
        `cupy`, ...) and not torch: its device strings are that library's devices."""
        known = self.facts.memo.setdefault("dev005.imports", {})
        for scope in reversed(path):
            if not isinstance(scope, (cst.ClassDef, cst.FunctionDef)):
                continue
            if id(scope) not in known:
                known[id(scope)] = _imported_roots(scope)
            roots = known[id(scope)]
            if "torch" in roots:
                return False
            if roots & OTHER_ARRAY_LIBRARIES:
                return True
        return False

    def _in_default_device(self) -> bool:
        return any(
            isinstance(n, cst.Call) and self.facts.resolve(n.func) == "torch.set_default_device"
            for n in self.ctx.ancestors
        )

    def _used_as_device(self, path, i: int) -> bool:
        value, parent = path[i], path[i - 1] if i > 0 else None
        grand = path[i - 2] if i > 1 else None
        if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
            return self._device_argument(parent, grand, path[:i - 1])
        if isinstance(parent, cst.Param) and parent.default is value:
            name = parent.name.value.lower()
            return _is_device_name(name) or name == "map_location"
        if isinstance(parent, cst.Assign) and parent.value is value:
            return any(_names_device(t.target) for t in parent.targets)
        if isinstance(parent, cst.AnnAssign) and parent.value is value:
            return _names_device(parent.target)
        return False

    def _device_argument(self, arg: cst.Arg, call: cst.Call, call_path) -> bool:
        """call_path: the path down to `call`."""
        callee = syntax.last_name(call.func)
        if callee in DEVICE_TYPE_CALLS or callee in TEXT_CALLS:
            return False
        if arg.keyword is not None:
            kw = arg.keyword.value
            if kw in ("device", "map_location"):
                return True
            if kw == "default" and callee == "add_argument":
                return any(_is_device_name((syntax.string_value(a.value) or "").lower()) for a in syntax.positional(call)) \
                    and self._option_read(call, call_path)
            return False
        first = syntax.positional(call)[:1] == [arg]
        if not first:
            return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to":
            # `utils.to("cuda")` calls a function of an imported module
            return self.facts.receiver_may_be_torch_object(call.func.value, call_path)
        return self.facts.resolve(call.func) == "torch.device"


    def _in_function_patching_cuda(self, path) -> bool:
        """Whether a function around the literal replaces functions of `torch.cuda` with stand-ins
        (`mock.patch("torch.cuda.mem_get_info", ...)`, `mock.patch.object(torch.cuda, ...)`,
        `monkeypatch.setattr(torch.cuda, "is_available", ...)`, in its body or decorators)."""
        memo = self.facts.memo.setdefault("patches torch.cuda", {})
        for node in path:
            if isinstance(node, cst.FunctionDef):
                if id(node) not in memo:
                    memo[id(node)] = any(isinstance(n, cst.Call) and self._patches_cuda(n) for n in syntax.walk(node))
                if memo[id(node)]:
                    return True
        return False

    def _patches_cuda(self, call: cst.Call) -> bool:
        method = syntax.last_name(call.func)
        if method not in ("patch", "object", "setattr") or not call.args:
            return False
        if method == "object" and syntax.last_name(getattr(call.func, "value", None) or call.func) != "patch":
            return False
        first = call.args[0].value
        text = syntax.string_value(first)
        return (text or "").startswith("torch.cuda.") or (text is None and self.facts.resolve(first) == "torch.cuda")

    def _option_read(self, call: cst.Call, call_path) -> bool:
        """Whether the file may read the option `add_argument(...)` declares: its destination
        (`dest=`, or the first long flag, `--device_id` -> `device_id`) is read as an attribute
        (`args.device_id`) or by `getattr`, or the whole namespace is handed on (`vars(args)`,
        `args.__dict__`, `**vars(...)`). An option nothing reads places nothing."""
        name = syntax.option_destination(call)
        if not name:
            return True
        if self._read_names is None:
            self._read_names = _read_attribute_names(call_path[0])
        return name in self._read_names or _WHOLE_NAMESPACE in self._read_names


def _read_attribute_names(module: cst.CSTNode) -> set[str]:
    """Attribute names read in the module, `getattr(ns, "name")` strings, and _WHOLE_NAMESPACE
    unless the module parses its options itself (a name bound to `parse_args()`) and uses that
    namespace only for its attributes (`args.lr`): handed on whole (`train(args)`, `vars(args)`,
    `getattr(args, key)`, `return args`), or parsed in another file, any option may be read."""
    namespaces = set()
    parents = {}
    nodes = list(syntax.walk(module))  # every scope, nested functions included
    for node in nodes:
        for child in syntax.children(node):
            parents[id(child)] = node
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) \
                and syntax.last_name(node.value.func) in ("parse_args", "parse_known_args"):
            for target in node.targets:
                first = target.target.elements[0].value if isinstance(target.target, cst.Tuple) else target.target
                if isinstance(first, cst.Name):
                    namespaces.add(first.value)
    found = set() if namespaces else {_WHOLE_NAMESPACE}
    for node in nodes:
        if isinstance(node, cst.Attribute):
            found.add(node.attr.value)
        elif _getattr_with_name(node):
            found.add(syntax.string_value(node.args[1].value))
        elif isinstance(node, cst.Name) and node.value in namespaces:
            parent = parents.get(id(node))
            read_for_attribute = isinstance(parent, cst.Attribute) and parent.value is node
            bound = isinstance(parent, (cst.AssignTarget, cst.Element))
            named_string = isinstance(parent, cst.Arg) and _getattr_with_name(parents.get(id(parent)))
            if not (read_for_attribute or bound or named_string):
                found.add(_WHOLE_NAMESPACE)  # handed on whole
    return found


def _getattr_with_name(call) -> bool:
    """`getattr(args, "name")`: a read of one attribute, written out."""
    return (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in ("getattr", "hasattr")
            and len(call.args) > 1 and syntax.string_value(call.args[1].value) is not None)


_WHOLE_NAMESPACE = "<namespace>"


def _device_value(facts, path, i: int) -> int:
    """The index in path of the device that the literal path[i] makes: the literal, or the
    `torch.device(...)` call it is the first argument of."""
    if i > 1 and isinstance(path[i - 1], cst.Arg) and isinstance(path[i - 2], cst.Call):
        call = path[i - 2]
        if syntax.positional(call)[:1] == [path[i - 1]] and facts.resolve(call.func) == "torch.device":
            return i - 2
    return i


def _places_nothing(path, j: int) -> bool:
    """Whether the device path[j] is only compared (`dev == torch.device("cuda")`, `dev is ...`,
    `in`, `self.assertEqual(dev, ...)`; also its `.type` or `.index`), a dictionary key, or formatted into text (an f-string, `%`, `str(...)`, `print`, a
    logging call, `MSG.format(device=...)`): nothing is placed there."""
    j = _display_holding(path, j)  # an element of a tuple, list or set: where the display goes decides
    node, parent = path[j], path[j - 1] if j > 0 else None
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.FormattedStringExpression)):
        return True
    if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in ("type", "index"):
        return _places_nothing(path, j - 1)  # `torch.device("cuda").type == ...`: where the string goes decides
    if isinstance(parent, cst.DictElement):
        return parent.key is node
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Modulo):
        return parent.right is node and isinstance(parent.left, (cst.SimpleString, cst.ConcatenatedString))
    if isinstance(parent, cst.Arg) and j > 1 and isinstance(path[j - 2], cst.Call):
        # text, a comparison, or the kind of device `autocast` and its kin take (`autocast("cuda" if x.is_cuda else "cpu")`)
        return syntax.last_name(path[j - 2].func) in TEXT_CALLS | DEVICE_TYPE_CALLS | COMPARING_CALLS
    return False


def _name_places_nothing(path, i: int) -> bool:
    """Whether path[i] is a parameter's default or the value of a local name (in a function)
    whose reads all place nothing: there are none (`def __init__(self, device="cuda")` that never
    reads `device`), or each is compared or formatted into text (`f"self_{device_str}_memory"`).
    A `global`/`nonlocal` name, or a function calling `locals()` / `vars()`, keeps the finding."""
    i = _display_holding(path, i)  # an element of a display: the name it is bound to decides
    value, parent = path[i], path[i - 1] if i > 0 else None
    if isinstance(parent, cst.Param) and parent.default is value:
        if not (i > 2 and isinstance(path[i - 2], cst.Parameters) and isinstance(path[i - 3], cst.FunctionDef)):
            return False  # a lambda's parameter
        function, name = path[i - 3], parent.name.value
    elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is value:
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        function = next((n for n in reversed(path[:i]) if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
        if len(targets) != 1 or not isinstance(targets[0], cst.Name) or not isinstance(function, cst.FunctionDef):
            return False
        name = targets[0].value
    else:
        return False
    if _reads_all_global(function.body, name):
        return False
    for read in _reads_of_value(function, name, parent):
        if not _places_nothing(read, len(read) - 1):
            return False
    return True


def _reads_all_global(body: cst.CSTNode, name: str) -> bool:
    """Whether a `global`/`nonlocal` statement names `name`, or the function calls `locals()`."""
    return any(read is None for read in _reads(body, name))


def _reads_of_value(function: cst.FunctionDef, name: str, binding: cst.CSTNode):
    """The reads of `name` that may see the value `binding` gives it (a parameter, or an
    assignment): the reads from the statement that holds the binding on, up to a statement of
    the function's own that binds `name` again unconditionally (`device = platform.name()`):
    later reads see the new value."""
    statements = list(syntax.block_statements(function.body))
    holder = None  # the function's own statement that holds an assignment (none for a parameter)
    if not isinstance(binding, cst.Param):
        holder = next((s for s in statements if any(node is binding for node in syntax.walk(s))), None)
        if holder is None:
            yield from (read for read in _reads(function.body, name) if read is not None)
            return
    for statement in statements[statements.index(holder) if holder is not None else 0:]:
        yield from (read for read in _reads(statement, name) if read is not None)
        if statement is not holder and _binds_plainly(statement, name):
            return


def _binds_plainly(statement: cst.CSTNode, name: str) -> bool:
    """`name = ...` as a simple statement of its own."""
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Assign, cst.AnnAssign)) and any(t.value == name for t in assigned_names(small))
        for small in statement.body)


def _reads(body: cst.CSTNode, name: str):
    """The paths (from body down) to each read of `name` in body, nested functions included;
    None for a `global`/`nonlocal` statement naming it or a call of `locals()` / `vars()`."""
    stack = [[body]]
    while stack:
        path = stack.pop()
        node = path[-1]
        parent = path[-2] if len(path) > 1 else None
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == name for n in node.names):
            yield None
        elif isinstance(node, cst.Call) and syntax.dotted_name(node.func) in ("locals", "vars") and not node.args:
            yield None
        elif isinstance(node, cst.Name) and node.value == name and not _not_a_read(node, parent) \
                and not _unpacked_store(path):
            yield path
        for child in reversed(syntax.children(node)):
            stack.append(path + [child])


def _display_holding(path, j: int) -> int:
    """The index in path of the outermost tuple, list or set display that holds path[j] as an
    element (through nested displays), or j when none does."""
    while j > 1 and isinstance(path[j - 1], (cst.Element, cst.StarredElement)) \
            and isinstance(path[j - 2], (cst.Tuple, cst.List, cst.Set)):
        j -= 2
    return j


def _unpacked_store(path) -> bool:
    """The name at path[-1] is one of the targets of `a, b = ...` (or of a `for`)."""
    j = _display_holding(path, len(path) - 1)
    if j == len(path) - 1 or j < 1:
        return False
    parent = path[j - 1]
    return isinstance(parent, cst.AssignTarget) or (isinstance(parent, (cst.For, cst.CompFor)) and parent.target is path[j])


def _not_a_read(node: cst.Name, parent) -> bool:
    """A binding, an attribute's name or a keyword: not a read of the name."""
    return (
        (isinstance(parent, cst.AssignTarget) and parent.target is node)
        or (isinstance(parent, cst.AnnAssign) and parent.target is node)
        or (isinstance(parent, cst.Attribute) and parent.attr is node)
        or (isinstance(parent, cst.Arg) and parent.keyword is node)
        or (isinstance(parent, cst.Param) and parent.name is node)
        or isinstance(parent, (cst.FunctionDef, cst.ClassDef))
    )


def _counts_devices(path, i: int) -> bool:
    """The default of an option named in the plural (`add_argument("--devices", default=1)`):
    an integer there is a number of devices (or the list of them), as Lightning's `Trainer(devices=1)`
    and Accelerate read it, not an ordinal."""
    parent, call = (path[i - 1], path[i - 2]) if i > 1 else (None, None)
    if not (isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "default"
            and isinstance(call, cst.Call) and syntax.last_name(call.func) == "add_argument"):
        return False
    options = [(syntax.string_value(a.value) or "").lower() for a in syntax.positional(call)]
    return any(o.endswith("devices") for o in options) and not any(_is_device_name(o) and not o.endswith("devices") for o in options)


def _names_device(target: cst.BaseExpression) -> bool:
    name = syntax.last_name(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
    return name is not None and _is_device_name(name.lower())


# Words that make a name with "device" in it a number: `per_device_batch_size`, `num_devices`.
NUMBER_WORDS = ("size", "num", "count", "per_device", "batch", "steps")


def _is_device_name(name: str) -> bool:
    """`device`, `eval_device`, not `device_type` (a kind of device for autocast, not a device)
    nor a number of or per device (`per_device_batch_size`, `num_devices`)."""
    return "device" in name and "device_type" not in name and not any(word in name for word in NUMBER_WORDS)


def _device_type_with_index(path, i: int, facts) -> bool:
    """The literal is the type of `torch.device(type, index)`, which takes a string there, not a
    device: `torch.device(torch.device("cuda"), 0)` raises TypeError."""
    call = path[i - 2] if i >= 2 else None
    return isinstance(call, cst.Call) and facts.resolve(call.func) == "torch.device" and len(call.args) >= 2 \
        and call.args[0] is path[i - 1]
