"""DEV011 cuda-only-api: a `torch.cuda` API that raises without CUDA, outside a CUDA guard.
Doc: rules/DEV011.md; fixture: tests/fixtures/DEV011.py. What raises, and how, is the table
derived from the CPU build of torch (`devlint.torchinfo.cuda_api`)."""
from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.analysis.cuda_guards import CudaGuards
from devlint.api import UNSAFE, NodeFix, Rule
from devlint.core import syntax
from devlint.torchinfo import cuda_api

# `torch.cuda` functions and their `torch.accelerator` equivalents (torch 2.6). Those raise
# without an accelerator too, so the fix calls them under `torch.accelerator.is_available()`,
# which only a statement of its own can be.
ACCELERATOR_EQUIVALENTS = {
    "torch.cuda.synchronize": "synchronize",
    "torch.cuda.current_device": "current_device_index",
    "torch.cuda.set_device": "set_device_index",
    "torch.cuda.current_stream": "current_stream",
    "torch.cuda.set_stream": "set_stream",
}
STATEMENT_FIXES = frozenset({"torch.cuda.synchronize", "torch.cuda.set_device"})
TYPE_TESTS = frozenset({"isinstance", "issubclass"})


class CudaOnlyApi(Rule):
    """A call of a `torch.cuda` function that raises without CUDA, a CUDA-only context manager
    entered, a legacy `torch.cuda.*Tensor` type used as a type, and a CUDA default tensor type
    or device, outside a CUDA guard (or a `try` catching the failure)."""

    code = "DEV011"
    name = "cuda-only-api"
    summary = "`torch.cuda` API that raises without CUDA"
    fixes, applicabilities = "sometimes", (UNSAFE,)
    requires = (CudaGuards,)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.facts.resolve(node.func)
        if qualified is None or not qualified.startswith("torch."):
            return
        if qualified in cuda_api.RAISES_WITHOUT_CUDA:
            self._api(node, qualified, cuda_api.RAISES_WITHOUT_CUDA[qualified], called=True)
        elif qualified in cuda_api.CONTEXT_MANAGERS and self._entered(node):
            self._api(node, qualified, cuda_api.CONTEXT_MANAGERS[qualified], called=False)
        elif qualified == "torch.set_default_device":
            self._default_device(node)
        # legacy types given as arguments are judged where they stand (visit_Attribute, visit_SimpleString)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        qualified = self.facts.resolve(node)
        if qualified not in cuda_api.LEGACY_TENSOR_TYPES:
            return
        parent = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        if isinstance(parent, cst.Call) and parent.func is node:
            return  # called: visit_Call reports it
        if self._used_as_type(node) and not self._guarded(cuda_api.RAISES_WITHOUT_CUDA.get(qualified, "TypeError")):
            self.report(node, self._legacy_message(qualified))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = syntax.string_value(node)
        if value not in cuda_api.LEGACY_TENSOR_TYPES:
            return
        if self._type_argument(node) and not self._guarded("TypeError"):
            self.report(node, self._legacy_message(value))

    # --- what is flagged ---------------------------------------------------------------------
    def _entered(self, call: cst.Call) -> bool:
        parent = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        return isinstance(parent, cst.WithItem) and parent.item is call

    def _used_as_type(self, node: cst.Attribute) -> bool:
        """Assigned to a name, or given to `.type(...)` / `torch.set_default_tensor_type(...)`;
        not tested against (`isinstance`, `issubclass`, comparisons)."""
        path = self.ctx.ancestors
        i = len(path) - 1
        while i > 0 and isinstance(path[i - 1], cst.IfExp) and path[i - 1].test is not path[i]:
            i -= 1  # `T = torch.cuda.FloatTensor if cond else torch.FloatTensor`
        value, parent = path[i], path[i - 1] if i > 0 else None
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is value:
            return True
        return self._type_argument(node)

    def _type_argument(self, node: cst.CSTNode) -> bool:
        path = self.ctx.ancestors
        if len(path) < 3 or not isinstance(path[-2], cst.Arg) or not isinstance(path[-3], cst.Call):
            return False
        arg, call = path[-2], path[-3]
        if arg.keyword is not None or syntax.positional(call)[:1] != [arg]:
            return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "type":
            return True
        return self.facts.resolve(call.func) == "torch.set_default_tensor_type"

    def _default_device(self, call: cst.Call) -> None:
        args = syntax.positional(call)
        if not args or not _names_cuda(args[0].value, self.facts):
            return
        if self._guarded(None):
            return
        self.report(
            call.func,
            "`torch.set_default_device(\"cuda\")` makes every later tensor factory fail without CUDA "
            "(`AssertionError: Torch not compiled with CUDA enabled`); " + self._choose_device_advice(),
        )

    def _guarded(self, exception: Optional[str]) -> bool:
        guards = self.ctx[CudaGuards]
        return guards.is_guarded() or (exception is not None and guards.caught(exception))

    # --- reports -----------------------------------------------------------------------------
    def _api(self, call: cst.Call, qualified: str, exception: str, called: bool) -> None:
        frame = self.ctx.function
        if frame is not None and (frame.node.name.value == "cuda" or _implements(frame.node.name.value, qualified)):
            return  # implementing this API (`def nvtx_range(self, msg):` around `torch.cuda.nvtx.range`), or `.cuda()`
        if self._guarded(exception):
            return
        if qualified in cuda_api.LEGACY_TENSOR_TYPES:
            self.report(call.func, self._legacy_message(qualified))
            return
        error = f"{exception}: {cuda_api.MESSAGES.get(qualified, '')}".rstrip(": ")
        shown = f"with {qualified}(...)" if not called else f"{qualified}()"
        message = f"`{shown}` raises without CUDA (`{error}`); "
        equivalent = ACCELERATOR_EQUIVALENTS.get(qualified)
        if equivalent is not None and self.ctx.torch_at_least(2, 6):
            message += (f"call `torch.accelerator.{equivalent}()` under `if torch.accelerator.is_available():` "
                        "(it runs on CUDA, MPS and XPU alike)")
        else:
            message += "call it only under `if torch.cuda.is_available():`"
        self.report(call.func, message, self._fix(call, qualified))

    def _fix(self, call: cst.Call, qualified: str) -> Optional[NodeFix]:
        """`torch.cuda.synchronize()` as a statement of its own ->
        `if torch.accelerator.is_available():` / `torch.accelerator.synchronize()` (torch 2.6)."""
        if qualified not in STATEMENT_FIXES or not self.ctx.torch_at_least(2, 6):
            return None
        torch_name = next((alias for alias, target in self.facts.aliases.items() if target == "torch"), None)
        path = self.ctx.ancestors
        if torch_name is None or len(path) < 4:
            return None
        expr, line = path[-2], path[-3]
        if not (isinstance(expr, cst.Expr) and expr.value is call and isinstance(line, cst.SimpleStatementLine)
                and len(line.body) == 1 and isinstance(path[-4], (cst.IndentedBlock, cst.Module))):
            return None
        accelerator = cst.Attribute(cst.Name(torch_name), cst.Name("accelerator"))
        function = cst.Attribute(accelerator, cst.Name(ACCELERATOR_EQUIVALENTS[qualified]))
        new_call = call.with_changes(func=function)
        test = cst.Call(cst.Attribute(accelerator, cst.Name("is_available")))
        body = cst.IndentedBlock([line.with_changes(body=[expr.with_changes(value=new_call)], leading_lines=[])])
        replacement = cst.If(test=test, body=body, leading_lines=line.leading_lines)
        return NodeFix(UNSAFE, f"Call `torch.accelerator.{ACCELERATOR_EQUIVALENTS[qualified]}()` when an accelerator "
                       "is available", line, replacement)

    def _legacy_message(self, qualified: str) -> str:
        return (f"`{qualified}` is a CUDA-only legacy type (`TypeError: {cuda_api.MESSAGES.get(qualified, '')}`): "
                "use a dtype and a device (`x.to(device, torch.float32)`); " + self._choose_device_advice())

    def _choose_device_advice(self) -> str:
        if self.ctx.torch_at_least(2, 6):
            return "pick the device with `torch.accelerator.current_accelerator()` when `torch.accelerator.is_available()`"
        return 'pick the device with `torch.device("cuda" if torch.cuda.is_available() else "cpu")`'


def _names_cuda(value: cst.BaseExpression, facts) -> bool:
    """`"cuda"`, `"cuda:0"`, `f"cuda:{rank}"` or `torch.device("cuda")`."""
    if syntax.is_cuda_literal(value):
        return True
    if isinstance(value, cst.FormattedString):
        return syntax.fstring_starts_with_cuda(value)
    if isinstance(value, cst.Call) and facts.resolve(value.func) == "torch.device":
        args = syntax.positional(value)
        return bool(args) and _names_cuda(args[0].value, facts)
    return False


def _implements(method: str, qualified: str) -> bool:
    """A method named for the API it wraps: the API's last name (`synchronize`), or its last
    names after `torch.cuda.` joined by `_` (`nvtx_range` for `torch.cuda.nvtx.range`)."""
    parts = qualified.removeprefix("torch.cuda.").split(".")
    return any(method == "_".join(parts[k:]) for k in range(len(parts)))
