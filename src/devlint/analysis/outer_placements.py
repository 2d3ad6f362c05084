"""The modules other scopes of the file place, for a function's scan: those the module level leaves
on an accelerator (read as globals by the file's functions), and those a class's methods place as
`self.NAME` (for its other methods). Each worked out once, from statements only."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from devlint.analysis import values
from devlint.analysis.scope_scan import ScopeScan
from devlint.analysis.values import Placement, ValueModel
from devlint.core import syntax


def module_placements(facts) -> dict[str, Placement]:
    """The modules the file's module-level code leaves on an accelerator, by name: a script's
    `model = Net().to(device)`, read as a global by the file's functions."""
    return _module_level(facts)[0]


def module_moved_loaders(facts) -> frozenset:
    """The loaders the file's module-level code builds to yield their batches on a device (over
    moved tensors, wrapped with a device, prepared by a framework), by name: a notebook's
    `test_loader = DataLoader(TensorDataset(test_x, test_y))` after `test_x = test_x.cuda()`,
    read as a global by the file's functions, yields moved batches there too."""
    return _module_level(facts)[1]


def _module_level(facts) -> tuple[dict[str, Placement], frozenset]:
    """The module level's placed modules and moved loaders. Worked out once a file."""
    found = facts.memo.get("module_level")
    if found is None:
        module = facts.module
        events = [("for", n) if isinstance(n, cst.For) else ("expr", n) if isinstance(n, cst.Expr) else ("bind", n)
                  for n in _statements(module.body) if isinstance(n, (cst.For, cst.Expr, cst.Assign, cst.AnnAssign))]
        scan = ScopeScan(facts).replay(module, events, [])
        loaders = frozenset(name for name, cpu in scan.loaders.items() if not cpu)
        if any(name not in scan.modules for name in scan.placed):
            # a moved name the module level calls is a module (`model = model.to(d)`, then `model(x)`):
            # only then are the module level's expressions walked for calls
            calls = [("call", n) for kind, statement in events for n in syntax.walk_expressions(statement)
                     if isinstance(n, cst.Call)]
            scan = ScopeScan(facts).replay(module, calls + events, [])
        modules = {n: p for n, p in scan.placed.items() if n in scan.modules}
        found = facts.memo["module_level"] = (modules, loaders)
    return found


def _statements(body) -> Iterator[cst.CSTNode]:
    """The small statements of a block, and its loops (before their bodies), in order, through
    `if`/`for`/`while`/`with`/`try` blocks but not into functions or classes."""
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            yield from statement.body
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        else:
            if isinstance(statement, cst.For):
                yield statement
            for suite in syntax.suites(statement):
                yield from _statements(suite)


def attribute_placements(facts, info) -> dict[str, Placement]:
    """The attributes a class's methods set to a module placed on an accelerator
    (`self.model = Net().to(device)`) or move there in place (`self.model.cuda()`), by name; an
    attribute any method moves back to the CPU is not counted. Worked out once a class."""
    memo = facts.memo.setdefault("attribute_placements", {})
    found = memo.get(id(info.node))
    if found is not None:
        return found
    placed: dict[str, Placement] = {}
    to_cpu: set = set()
    model = ValueModel(facts)
    for methods in info.methods.values():
        for method in methods:
            me = syntax.instance_self(method)
            if me is None:
                continue
            for node in _statements(syntax.block_statements(method.body)):
                if isinstance(node, cst.Assign):
                    value = node.value
                    names_ = [_own_attribute(t.target, me) for t in node.targets]
                elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
                    value, receiver = node.value, node.value
                    while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
                        receiver = receiver.func.value  # `self.model.to(device).eval()`: moves in place
                    names_ = [_own_attribute(receiver, me)]
                else:
                    continue
                names_ = [n for n in names_ if n is not None]
                if not names_:
                    continue
                placement = model.placement_of(value)
                cpu = _moves_to_cpu(value, facts)
                for name in names_:
                    if cpu:
                        to_cpu.add(name)
                    elif placement is not None and placement.at is not None and name not in placed:
                        placed[name] = placement
    found = memo[id(info.node)] = {n: p for n, p in placed.items() if n not in to_cpu}
    return found


def _own_attribute(target: cst.BaseExpression, me: str) -> Optional[str]:
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == me:
        return target.attr.value
    return None


def _moves_to_cpu(value: cst.BaseExpression, facts) -> bool:
    """A chain whose outermost move is to the CPU (`.cpu()`, `.to("cpu")`)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        method = value.func.attr.value
        if method == "cpu" or (method == "to" and values.to_cpu(facts, value)):
            return True
        if method in ("to", "cuda"):
            return False
        value = value.func.value
    return False
