"""Which methods of an nn.Module class run at forward time: `forward` and what it calls as
`self.name(...)` (or `type(self).name(...)`, `ClassName.name(...)`), transitively, methods
inherited from a base class in the same file included. Known when the class ends; for a base
class that others in the file derive from, when the file ends."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import libcst as cst

from devlint.api import Analysis
from devlint.api import ClassFrame, FrameState, FunctionFrame
from devlint.core import syntax
from devlint.semantic.facts import ClassInfo


@dataclass
class _ClassCalls:
    self_calls: dict[str, set[str]] = field(default_factory=dict)  # method -> names called as self.NAME(...)
    waiting: list[tuple[str, Callable[[bool], None]]] = field(default_factory=list)


@dataclass
class _BaseClass:
    """An ended class that a later class of the file may derive from."""

    info: ClassInfo
    calls: _ClassCalls  # its waiting: methods its own forward does not reach, decided by a subclass's or at the end
    ancestors: list  # where the traversal was at its end: its findings are reported from there


class ForwardTime(Analysis):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._classes: FrameState[_ClassCalls] = FrameState(_ClassCalls)
        self._bases: dict[str, _BaseClass] = {}  # by class name, the last one ended
        self._base_names: Optional[set[str]] = None
        self._sites: dict[str, dict[str, list[tuple[str, cst.Call]]]] = {}  # class -> method -> (called, call)

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        called = _method_of_own_class(frame, node.func) if frame is not None else None
        if called is not None:
            self._classes[frame.klass].self_calls.setdefault(frame.method, set()).add(called)
            sites = self._sites.setdefault(frame.klass.node.name.value, {}).setdefault(frame.method, [])
            sites.append((called, node))

    def call_path(self, frame: FunctionFrame) -> Optional[list[tuple[cst.Call, str]]]:
        """How `forward` reaches the method of `frame`: each call site with the method it is in,
        from `forward` down (empty for `forward` itself); None when no path is known. Looked up
        in the method's class first, then across the file's classes (a base's method reached
        from a subclass's `forward`)."""
        if frame.klass is None or frame.method is None:
            return None
        if frame.method == "forward":
            return []
        own = self._sites.get(frame.klass.node.name.value, {})
        merged: dict[str, list[tuple[str, cst.Call]]] = {}
        for methods in self._sites.values():
            for method, sites in methods.items():
                merged.setdefault(method, []).extend(sites)
        for graph in (own, merged):
            found = _path(graph, frame.method)
            if found is not None:
                return found
        return None

    def when_known(self, frame: Optional[FunctionFrame], callback: Callable[[bool], None]) -> None:
        """Call back once it is known whether `frame` runs at forward time (at its class's end)."""
        if frame is None or frame.klass is None or not (frame.klass.is_module or self._is_base(frame.klass)):
            callback(False)
        else:
            self._classes[frame.klass].waiting.append((frame.method, callback))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        klass: ClassFrame = self.ctx.klass
        calls = self._classes.pop(klass) or _ClassCalls()
        info = self.facts.class_info(node)
        lineage = [(info, calls), *self._same_file_bases(info)] if info is not None else [(info, calls)]
        reached = self._reached(lineage) if klass.is_module else set()
        for base_info, base_calls in lineage[1:]:
            base = self._bases[base_info.name]
            now = [(m, c) for m, c in base_calls.waiting if (id(base_info), m) in reached]
            base_calls.waiting = [(m, c) for m, c in base_calls.waiting if (id(base_info), m) not in reached]
            self._decide(now, True, base.ancestors)
        if info is not None and self._is_base(klass):
            now = [(m, c) for m, c in calls.waiting if (id(info), m) in reached]
            calls.waiting = [(m, c) for m, c in calls.waiting if (id(info), m) not in reached]
            self._bases[info.name] = _BaseClass(info, calls, list(self.ctx.ancestors))
            self._decide(now, True, None)
        else:
            for method, callback in calls.waiting:
                callback((id(info), method) in reached)

    def leave_Module(self, node: cst.Module) -> None:
        for base in self._bases.values():
            self._decide(base.calls.waiting, False, base.ancestors)
        self._bases.clear()

    def _decide(self, waiting, forward_time: bool, ancestors: Optional[list]) -> None:
        """Call the callbacks back as if the traversal were at `ancestors` (where their class ended)."""
        if not waiting:
            return
        current = self.ctx.ancestors
        if ancestors is not None:
            self.ctx.ancestors = ancestors
        try:
            for _, callback in waiting:
                callback(forward_time)
        finally:
            self.ctx.ancestors = current

    def _reached(self, lineage) -> set[tuple[int, str]]:
        """(id of the class info defining it, method) for what `forward` reaches, each name
        looked up in the class first, then in its same-file bases."""
        reached: set[tuple[int, str]] = set()
        pending = ["forward"]
        while pending:
            method = pending.pop()
            owner_info, owner_calls = next(
                ((i, c) for i, c in lineage if i is not None and method in i.methods), lineage[0]
            )
            key = (id(owner_info), method)
            if key not in reached:
                reached.add(key)
                pending.extend(owner_calls.self_calls.get(method, ()))
        return reached

    def _same_file_bases(self, info: ClassInfo) -> list[tuple[ClassInfo, _ClassCalls]]:
        """The ended same-file classes `info` derives from, nearest first (depth first)."""
        out, seen = [], {id(info)}
        pending = list(reversed(info.base_names))
        while pending:
            base = self._bases.get(pending.pop() or "")
            if base is not None and id(base.info) not in seen:
                seen.add(id(base.info))
                out.append((base.info, base.calls))
                pending.extend(reversed(base.info.base_names))
        return out

    def _is_base(self, klass: ClassFrame) -> bool:
        """Whether another class of the file names this one's name as a base."""
        if self._base_names is None:
            self._base_names = {b for info in self.facts.classes.values() for b in info.base_names if b}
        return klass.node.name.value in self._base_names


def _method_of_own_class(frame: FunctionFrame, func: cst.BaseExpression) -> Optional[str]:
    """NAME when func is `self.NAME`, `type(self).NAME`, `self.__class__.NAME` or
    `ClassName.NAME` inside a method of ClassName."""
    called = frame.self_attribute(func)
    if called is not None or frame.klass is None or not isinstance(func, cst.Attribute):
        return called
    owner = func.value
    if isinstance(owner, cst.Call) and syntax.dotted_name(owner.func) == "type" and len(owner.args) == 1:
        owner = owner.args[0].value
        return func.attr.value if isinstance(owner, cst.Name) and owner.value == frame.self_name else None
    if frame.self_attribute(owner) == "__class__":
        return func.attr.value
    if isinstance(owner, cst.Name) and owner.value == frame.klass.node.name.value:
        return func.attr.value
    return None


def _path(graph: dict[str, list[tuple[str, cst.Call]]], target: str) -> Optional[list[tuple[cst.Call, str]]]:
    """The shortest chain of call sites from `forward` to `target` (breadth first)."""
    previous: dict[str, tuple[str, cst.Call]] = {}
    pending, seen = ["forward"], {"forward"}
    while pending:
        method = pending.pop(0)
        if method == target:
            chain = []
            while method != "forward":
                caller, call = previous[method]
                chain.append((call, caller))
                method = caller
            return chain[::-1]
        for called, call in graph.get(method, ()):
            if called not in seen:
                seen.add(called)
                previous[called] = (method, call)
                pending.append(called)
    return None


class ForwardTimeSites:
    """Sites a rule collects in the methods of one class (reads of `self.NAME`, by key), each
    known, once `ForwardTime` decides its method, to run at forward time or not: the evidence a
    finding reported at the class's end names ("read in `forward`"). `leave_function(frame)` at
    the end of each method hands it to `ForwardTime`; `when_all_known(callback)` calls back once
    every method with a site is decided (at once where none waits)."""

    def __init__(self, forward_time: ForwardTime) -> None:
        self._forward_time = forward_time
        self._sites: dict[str, list[tuple[cst.CSTNode, FunctionFrame]]] = {}
        self._open: dict[int, FunctionFrame] = {}  # frames with sites not yet handed to ForwardTime
        self._decided: dict[int, bool] = {}  # id of a frame -> at forward time
        self._pending = 0
        self._callback: Optional[Callable[[], None]] = None

    def add(self, key: str, node: cst.CSTNode, frame: FunctionFrame) -> None:
        self._sites.setdefault(key, []).append((node, frame))
        self._open[id(frame)] = frame

    def leave_function(self, frame: Optional[FunctionFrame]) -> None:
        if frame is None or self._open.pop(id(frame), None) is None:
            return
        self._pending += 1
        self._forward_time.when_known(frame, lambda forward_time: self._decide(frame, forward_time))

    def _decide(self, frame: FunctionFrame, forward_time: bool) -> None:
        self._decided[id(frame)] = forward_time
        self._pending -= 1
        if not self._pending and self._callback is not None:
            callback, self._callback = self._callback, None
            callback()

    def any(self, key: str) -> bool:
        """Whether any site of `key` was added, at forward time or not."""
        return key in self._sites

    def at_forward_time(self, key: str) -> list[tuple[cst.CSTNode, str]]:
        """(site, method) for the sites of `key` in methods that run at forward time, in source order."""
        return [(node, frame.method) for node, frame in self._sites.get(key, ()) if self._decided.get(id(frame))]

    def when_all_known(self, callback: Callable[[], None]) -> None:
        if self._pending:
            self._callback = callback
        else:
            callback()
