"""The device a module class records for itself: `self.device = device` in `__init__`.

Such an attribute is a plain value, not a tensor: `model.to(other)` moves the parameters and
buffers and leaves it naming the old device. DEV012 flags forward-time code that places tensors
with it; DEV004 leaves alone a tensor attribute made on it, which the class placed by the same
choice as every other tensor it makes there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint.core import syntax
from devlint.torchinfo import names

DEVICE_LITERALS = ("cpu", "cuda", "mps", "xpu", "meta", "npu", "hpu")
# Wrappers that gather outputs on a chosen `output_device` on purpose: their subclasses are left alone.
PARALLEL_WRAPPERS = frozenset({"DataParallel", "DistributedDataParallel"})


@dataclass
class Attribute:
    init_values: list[cst.BaseExpression] = field(default_factory=list)
    init_targets: list[cst.CSTNode] = field(default_factory=list)  # the `self.NAME` targets in `__init__`
    init: Optional[cst.FunctionDef] = None
    elsewhere: bool = False  # assigned in another method too (an override of `to` that updates it, say)


@dataclass
class ClassAttributes:
    attributes: dict[str, Attribute] = field(default_factory=dict)
    properties: set[str] = field(default_factory=set)
    parallel: bool = False  # a subclass of DataParallel / DistributedDataParallel

    def recorded_device(self, name: str, facts) -> Optional[Attribute]:
        """The attribute when `self.NAME` holds a device the class records in `__init__` only (its
        own or a same-file base's) and nowhere else: not a property, which may follow the weights."""
        attribute = self.attributes.get(name)
        if name in self.properties or attribute is None or attribute.elsewhere or attribute.init is None:
            return None
        return attribute if holds_device(name, attribute, facts) else None


def scan_class(facts, node: cst.ClassDef) -> ClassAttributes:
    """The class's attributes, and those its same-file bases set (`self.device` assigned in a base's
    `__init__` is the subclass's too): the farthest base first, so the class's own come last.
    Worked out once per class of the file, for every rule that asks."""
    known = facts.memo.setdefault("device_attributes.classes", {})
    if node not in known:
        found = known[node] = ClassAttributes(parallel=_is_parallel_wrapper(facts, node, set()))
        info = facts.class_info(node)
        for owner in reversed(facts.lineage(info)) if info is not None else ():
            _scan_methods(found, owner.methods)
    return known[node]


def holds_device(name: str, attribute: Attribute, facts) -> bool:
    """`NAME` contains `device`, or every value `__init__` gives it names one; never a dtype."""
    if "dtype" in name.lower():
        return False
    if any(_is_dtype(v, facts) for v in attribute.init_values):
        return False
    if "device" in name.lower():
        return True
    return bool(attribute.init_values) and all(_names_device(v, attribute.init, facts) for v in attribute.init_values)


def _is_dtype(value: cst.BaseExpression, facts) -> bool:
    return facts.resolve(value) in names.DTYPE_NAMES or "dtype" in (syntax.last_name(value) or "").lower()


def _names_device(value: cst.BaseExpression, init: cst.FunctionDef, facts) -> bool:
    """A device literal, `torch.device(...)`, a device choice, a `torch.device` parameter, a
    name or attribute containing `device`."""
    literal = syntax.string_value(value)
    if literal is not None:
        return literal.split(":")[0] in DEVICE_LITERALS
    if isinstance(value, cst.IfExp):
        return _names_device(value.body, init, facts) or _names_device(value.orelse, init, facts)
    if isinstance(value, cst.Call):
        return facts.resolve(value.func) == "torch.device"
    if isinstance(value, (cst.Name, cst.Attribute)):
        if "device" in (syntax.last_name(value) or "").lower():
            return True
        if isinstance(value, cst.Name):
            for param in syntax.all_params(init.params):
                if param.name.value == value.value and param.annotation is not None:
                    annotation = param.annotation.annotation
                    return facts.resolve(annotation) == "torch.device" or syntax.last_name(annotation) == "device"
    return False


def _scan_methods(found: ClassAttributes, methods: dict) -> None:
    for method, definitions in methods.items():
        for definition in definitions:
            decorators = [d or "" for d in syntax.decorator_names(definition)]
            if any(d.split(".")[-1] in ("property", "cached_property") or d.endswith((".setter", ".getter")) for d in decorators):
                found.properties.add(method)
                continue
            params = [*definition.params.posonly_params, *definition.params.params]
            if not params or "staticmethod" in decorators or "classmethod" in decorators:
                continue
            self_name = params[0].name.value
            for target, value, where in _self_assignments(definition, self_name):
                attribute = found.attributes.setdefault(target, Attribute())
                if method == "__init__" and value is not None:
                    attribute.init_values.append(value)
                    attribute.init_targets.append(where)
                    attribute.init = definition
                else:
                    attribute.elsewhere = True


def _self_assignments(definition: cst.FunctionDef, self_name: str):
    """(NAME, value or None, the target or call) for each `self.NAME = value`, `self.NAME += ...`,
    tuple target or `setattr(self, "NAME", ...)` in the method (nested functions included)."""
    for node in syntax.walk(definition.body):
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            plain = isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None
            for target in targets:
                for element in syntax.unpacked_targets(target):
                    name = _self_name(element, self_name)
                    if name is not None:
                        yield name, node.value if plain and element is target else None, element
        elif isinstance(node, cst.Call) and syntax.dotted_name(node.func) == "setattr":
            args = syntax.positional(node)
            if len(args) >= 2 and syntax.dotted_name(args[0].value) == self_name:
                attribute = syntax.string_value(args[1].value)
                if attribute is not None:
                    yield attribute, None, node


def _self_name(expr: cst.BaseExpression, self_name: str) -> Optional[str]:
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == self_name:
        return expr.attr.value
    return None


def _is_parallel_wrapper(facts, node: cst.ClassDef, seen: set) -> bool:
    """A subclass of `DataParallel` / `DistributedDataParallel`, directly or through a same-file base."""
    seen.add(id(node))
    info = facts.class_info(node)
    for base in info.base_names if info is not None else ():
        if base is None:
            continue
        if base.rsplit(".", 1)[-1] in PARALLEL_WRAPPERS:
            return True
        for other in facts.classes.values():
            if other.name == base and id(other.node) not in seen and _is_parallel_wrapper(facts, other.node, seen):
                return True
    return False
