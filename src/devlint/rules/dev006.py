"""DEV006 map-location-on-wrong-call: `map_location=` given to a call that does not take it.
Doc: rules/DEV006.md; fixture: tests/fixtures/DEV006.py."""
import libcst as cst

from devlint.api import SAFE, NodeFix, Rule
from devlint.core import edits, syntax
from devlint.torchinfo import names

# Decorators that keep the signature of the function they wrap.
SIGNATURE_KEEPING_DECORATORS = frozenset(
    {"staticmethod", "classmethod", "torch.no_grad", "torch.inference_mode", "torch.enable_grad",
     "functools.lru_cache", "functools.cache", "lru_cache", "cache", "torch.jit.unused",
     "torch.jit.ignore", "torch.jit.export"}
)


class MapLocationOnWrongCall(Rule):
    """`map_location=` passed to `load_state_dict(...)`, `torch.save(...)` or a same-file
    function whose signature has neither `map_location` nor `**kwargs`; the fix moves it into
    the inner `torch.load(...)`."""

    code = "DEV006"
    name = "map-location-on-wrong-call"
    summary = "`map_location=` passed to a call that does not take it"
    fixes, applicabilities = "sometimes", (SAFE,)

    def visit_Call(self, node: cst.Call) -> None:
        arg = syntax.keyword(node, "map_location")
        if arg is None or self.facts.resolve(node.func) in names.LOADERS:
            return
        callee = self._rejecting_callee(node)
        if callee is not None:
            self.report(
                arg.keyword,
                f"`map_location=` passed to `{callee}()`, which does not take it (a TypeError at run time); "
                "pass it to `torch.load()`",
                self._move_into_load(node, arg),
            )

    def _move_into_load(self, node: cst.Call, arg: cst.Arg):
        """`m.load_state_dict(torch.load(p), map_location=d)` -> `m.load_state_dict(torch.load(p, map_location=d))`."""
        first = syntax.positional(node)[:1]
        inner = first[0].value if first else None
        while isinstance(inner, cst.Subscript):
            inner = inner.value
        if not isinstance(inner, cst.Call) or self.facts.resolve(inner.func) not in names.LOADERS:
            return None
        slot = names.LOADERS[self.facts.resolve(inner.func)]
        has_own = syntax.keyword(inner, "map_location") is not None or len(syntax.positional(inner)) > slot
        new_inner = inner if has_own else edits.add_arg(inner, edits.keyword_arg("map_location", arg.value))
        replacement = edits.remove_arg(node, arg).deep_replace(inner, new_inner)
        return NodeFix(SAFE, "Move `map_location=` into the inner `torch.load()`", node, replacement)

    def _rejecting_callee(self, node: cst.Call):
        """The name of the callee when it is known not to take map_location, else None."""
        func = node.func
        facts = self.facts
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
            if not facts.receiver_may_be_torch_object(func.value, self.ctx.ancestors):
                return None  # `dist_util.load_state_dict(...)`: a function of an imported module
            overrides = [
                method for info in facts.classes.values() for method in info.methods.get("load_state_dict", [])
            ] + facts.module_functions("load_state_dict")
            return None if any(takes_map_location(f) for f in overrides) else "load_state_dict"
        if facts.resolve(func) == "torch.save":
            return "torch.save"
        if isinstance(func, cst.Name) and func.value not in facts.aliases:
            defs = facts.module_functions(func.value)
        elif self.ctx.function is not None and self.ctx.function.self_attribute(func) is not None:
            klass = facts.class_info(self.ctx.function.klass.node)
            defs = klass.methods.get(func.attr.value, []) if klass else []
        else:
            return None
        if defs and all(signature_known(d) and not takes_map_location(d) for d in defs):
            return syntax.dotted_name(func)
        return None


def takes_map_location(function: cst.FunctionDef) -> bool:
    """It declares `map_location` or `**kwargs`."""
    params = function.params
    return params.star_kwarg is not None or "map_location" in syntax.param_names(params)


def signature_known(function: cst.FunctionDef) -> bool:
    """No decorator that could change what it accepts."""
    return all(name in SIGNATURE_KEEPING_DECORATORS for name in syntax.decorator_names(function))
