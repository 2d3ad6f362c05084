"""The child process of `devlint confirm`: imports one user file, builds its modules, moves them
to the target device and runs them, recording every device event. Only this module (and the
warm process that forks it, devlint.confirm.zygote) imports torch.

Protocol: the job arrives as JSON on standard input; the result leaves as JSON on the file
descriptor named in argv[1], never on stdout (which belongs to the user's code).

The stand-in device (no GPU): tensors that should live on the accelerator live on torch's
`meta` device, which allocates nothing. torch's own meta kernels are lenient about mixing
devices in places where CUDA is not, so they decide nothing: a dispatch-level recorder sees
every operation, applies CUDA's rule (devlint's table below) to the devices of its tensor
arguments, records the verdict with the user's line and where the odd tensor was made, and
lets the run go on so that one run finds every mismatch a forward pass reaches.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import torch

from devlint.confirm import recorders
from devlint.confirm.inputs import import_user_file, module_classes, user_frame_row
from devlint.confirm.lines import LineTracer, Progress
from devlint.confirm.recorders import STAND_IN, DispatchRecorder, FunctionRecorder, Recorder, watch_cuda_api
from devlint.confirm.scenarios import STAND_IN_VALUES, run_construction, run_with_values_policy, _span


def self_test() -> Optional[str]:
    """Refuse a torch whose stand-in does not behave: one mismatch must be seen, one scalar tolerated."""
    rec = Recorder(__file__, STAND_IN)
    try:
        with FunctionRecorder(rec, False), DispatchRecorder(rec):
            x = torch.ones(4, device=STAND_IN)
            _ = x + torch.ones(4)
            _ = x * torch.tensor(2.0)
            _ = x[0]
    except BaseException as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    verdicts = [e["verdict"] for e in rec.events if e["kind"] == "mix"]
    if verdicts[:2] != ["confirmed", "benign"]:
        return f"expected one confirmed and one benign device mix, saw {verdicts}"
    return None


def play_the_gpu() -> None:
    """On the stand-in, torch.cuda's housekeeping calls act as on a GPU host, so a module that
    synchronizes or asks for the current device still runs (placement is what is checked), and
    code that picks `"cuda" if torch.cuda.is_available() else "cpu"` takes the GPU's branch."""
    for name, value in (("is_available", True), ("synchronize", None), ("empty_cache", None), ("current_device", 0),
                        ("device_count", 1), ("set_device", None)):
        setattr(torch.cuda, name, lambda *args, _value=value, **kwargs: _value)


def run(job: dict) -> dict:
    device = job.get("device", "auto")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "stand-in"
    target = STAND_IN if device == "stand-in" else "cuda"
    if target == STAND_IN:
        play_the_gpu()
    watch_cuda_api()
    if target == STAND_IN:
        problem = self_test()
        if problem:
            return {"fatal": f"torch {torch.__version__}: the stand-in device failed its self-test ({problem}); "
                             "run `devlint confirm --device cuda` on a GPU machine, or another torch version"}
    path = Path(job["file"]).resolve()
    user_file = str(path)
    import_lines = start_tracing(user_file)
    recorders.PROGRESS.send(f"importing {path.name}")
    try:
        user_module = import_user_file(path)
    except BaseException as exc:  # noqa: BLE001 - user code
        return {"fatal": f"cannot import {path.name}: {type(exc).__name__}: {exc}", "row": user_frame_row(exc, user_file),
                "import_lines": _pairs(import_lines)}
    classes = module_classes(user_module)
    wanted = job.get("classes") or {}
    if job.get("only"):
        classes = [c for c in classes if c.__name__ == job["only"]]
        if not classes:
            return {"fatal": f"no nn.Module class named {job['only']} in {path.name}"}
    results = []
    values = job.get("values", "auto") if target == STAND_IN else "never"
    for cls in classes:
        rec = Recorder(user_file, target)
        rec.owner = cls.__name__
        outcome, rec = run_with_values_policy(cls, wanted.get(cls.__name__, {}), job, user_module, rec, values)
        outcome["span"] = _span(cls)
        outcome["lines"] = {scenario: _pairs(rows) for scenario, rows in rec.lines.items()}
        results.append(outcome)
    built = []
    for item in job.get("constructions", []):
        rec = Recorder(user_file, target)
        built.append(run_construction(item, user_module, rec))
    stop_tracing()
    stand_in = STAND_IN_VALUES if values == "always" else "stand-in (meta)"
    return {"classes": results, "constructions": built, "device": stand_in if target == STAND_IN else f"cuda ({torch.cuda.get_device_name()})",
            "import_lines": _pairs(import_lines)}


def start_tracing(user_file: str) -> dict[int, int]:
    """Record the user's lines from here on; returns the sink of the import's own lines."""
    recorders.TRACER = LineTracer(user_file)  # the recorders point it at each scenario's lines
    recorders.TRACER.start()
    return recorders.TRACER.sink


def stop_tracing() -> None:
    if recorders.TRACER is not None:
        recorders.TRACER.stop()


def _pairs(rows: dict[int, int]) -> list[list[int]]:
    return sorted([row, seq] for row, seq in rows.items())


def main() -> None:
    os._exit(work(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None))


def work(channel: int, progress: Optional[int]) -> int:
    """Read the job on stdin, run it, write the result on `channel`; the exit status (0). The
    caller exits with it at once (`os._exit`): in a fresh interpreter (`main`) or a fork of a
    warm one (devlint.confirm.zygote)."""
    recorders.PROGRESS = Progress(progress)
    recorders.PROGRESS.send("ready")  # torch is imported: the user's time starts with the import of the file
    job = json.load(sys.stdin)
    try:
        result = run(job)
    except BaseException as exc:  # noqa: BLE001
        result = {"fatal": f"{type(exc).__name__}: {exc}"}
    stop_tracing()
    recorders.PROGRESS.send("done")  # what follows (the result, the interpreter's exit) is not the file's time
    with os.fdopen(channel, "w") as out:
        json.dump(result, out)
    # the caller skips the interpreter's teardown (seconds with torch loaded): flush the user's output
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return 0


if __name__ == "__main__":
    main()
