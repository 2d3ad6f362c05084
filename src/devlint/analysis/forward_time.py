"""Which methods of an nn.Module class run at forward time: `forward` and what it calls as
`self.name(...)`, transitively. Known when the class ends."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import libcst as cst

from devlint.analysis.base import Analysis
from devlint.base import ClassFrame, FrameState, FunctionFrame


@dataclass
class _ClassCalls:
    self_calls: dict[str, set[str]] = field(default_factory=dict)  # method -> names called as self.NAME(...)
    waiting: list[tuple[str, Callable[[bool], None]]] = field(default_factory=list)


class ForwardTime(Analysis):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._classes: FrameState[_ClassCalls] = FrameState(_ClassCalls)

    def visit_Call(self, node: cst.Call) -> None:
        frame = self.ctx.function
        called = frame.self_attribute(node.func) if frame is not None else None
        if called is not None:
            self._classes[frame.klass].self_calls.setdefault(frame.method, set()).add(called)

    def when_known(self, frame: Optional[FunctionFrame], callback: Callable[[bool], None]) -> None:
        """Call back once it is known whether `frame` runs at forward time (at its class's end)."""
        if frame is None or frame.klass is None or not frame.klass.is_module:
            callback(False)
        else:
            self._classes[frame.klass].waiting.append((frame.method, callback))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        klass: ClassFrame = self.ctx.klass
        calls = self._classes.pop(klass)
        if calls is None:
            return
        forward_time: set[str] = set()
        pending = ["forward"] if klass.is_module else []
        while pending:
            method = pending.pop()
            if method not in forward_time:
                forward_time.add(method)
                pending.extend(calls.self_calls.get(method, ()))
        for method, callback in calls.waiting:
            callback(method in forward_time)
