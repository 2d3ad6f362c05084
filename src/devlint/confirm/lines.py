"""What the child tells besides its events: which lines of the user's file ran, and how far the
run has got. Imports nothing but Python (the parent reads the same progress protocol).

Lines: `sys.settrace` with a global tracer that answers None for every frame outside the
user's file, so torch's own Python code pays one cheap call per function call and no line
events. (Python 3.12+ has `sys.monitoring`, which could disable the events per code object.)
Each line keeps the clock reading of its first execution; every recorded event takes a tick of
the same clock, so "this line ran before that CUDA request" is a comparison of two numbers.

Progress: one line of text per phase on a pipe to the parent (`ready` once torch is imported,
then what the user's code is doing), so the parent's timeout can count the user's code alone.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Optional


class Clock:
    """A counter shared by events and line first-executions."""

    def __init__(self) -> None:
        self.now = 0

    def tick(self) -> int:
        self.now += 1
        return self.now


CLOCK = Clock()


class LineTracer:
    """Rows of one file that executed, each with the clock at its first execution, per sink."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.sink: dict[int, int] = {}

    def _call(self, frame, event, arg):
        return self._line if frame.f_code.co_filename == self.filename else None

    def _line(self, frame, event, arg):
        if event == "line":
            row = frame.f_lineno
            if row not in self.sink:
                self.sink[row] = CLOCK.now
        return self._line

    def start(self) -> None:
        sys.settrace(self._call)
        threading.settrace(self._call)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]


class Progress:
    """The child's side of the progress pipe; silent when the parent gave none."""

    def __init__(self, fd: Optional[int]) -> None:
        self.fd = fd

    def send(self, phase: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, (phase.replace("\n", " ") + "\n").encode())
        except OSError:
            self.fd = None


def cpu_seconds(pid: int) -> Optional[float]:
    """CPU time (user + system) a live process has used, from /proc; None where unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None
