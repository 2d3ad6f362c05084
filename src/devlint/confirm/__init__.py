"""`devlint confirm`: run what the static pass flagged and tell, for each finding, whether it breaks.

The parent never imports torch: it runs each file's modules in a child process
(`devlint.confirm.child`) with a timeout and a memory limit, reads the events the child
recorded, and turns them into one status per finding. DEV002 needs no child at all: the
checkpoint's storage locations are read without unpickling anything real.
"""
from __future__ import annotations

import ast
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from devlint import engine
from devlint.confirm.checkpoint import CPU_ONLY_ERROR, storage_locations

STATUSES = ("confirmed", "benign", "not-reproduced", "not-reached", "inconclusive", "not-run")
RUNTIME_RULES = {"DEV001", "DEV003", "DEV004", "DEV005", "DEV008"}
SCENARIO_NAMES = {
    "build": "while building the module",
    "move": "when the module was moved",
    "train": "in a training-mode forward",
    "eval": "in an eval-mode forward",
    "cached": "after a first forward on the CPU, then a move",
}


@dataclass
class Options:
    device: str = "auto"  # auto | cuda | stand-in
    mode: str = "both"  # train | eval | both
    only_class: Optional[str] = None
    init_kwargs: Optional[dict] = None
    input_shapes: list[list[int]] = field(default_factory=list)
    input_dtype: str = "float32"
    checkpoint: Optional[Path] = None
    timeout: float = 120.0
    memory_mb: int = 8192
    values: str = "auto"  # auto | always | never: whether the stand-in holds real data (see child.py)
    classes: dict = field(default_factory=dict)  # [tool.devlint.confirm.classes]


@dataclass
class Verdict:
    status: str
    message: str
    use_row: Optional[int] = None
    origin_row: Optional[int] = None
    device: Optional[str] = None

    def record(self) -> dict:
        return {
            "status": self.status,
            "message": self.message,
            "use": {"row": self.use_row},
            "origin": {"row": self.origin_row},
            "device": self.device,
        }


def confirm_findings(path: Path, source: str, findings: list[engine.Finding], options: Options) -> list[Verdict]:
    """One verdict per finding of `path`, in the same order."""
    verdicts: list[Optional[Verdict]] = [None] * len(findings)
    for i, f in enumerate(findings):
        if f.code == "DEV002":
            verdicts[i] = _confirm_load(path, source, f, options)
        elif f.code not in RUNTIME_RULES:
            verdicts[i] = Verdict("not-run", f"{f.code} is not about where tensors live; confirm does not run it")
    runtime = [i for i, f in enumerate(findings) if verdicts[i] is None]
    if runtime:
        result = run_child(path, options)
        spans = _function_spans(source)
        for i in runtime:
            verdicts[i] = _judge(findings[i], result, spans)
    return verdicts


# --- the child ---------------------------------------------------------------------------------
def run_child(path: Path, options: Options) -> dict:
    """Run the file's modules in a fresh interpreter; the result travels on a private pipe."""
    classes = dict(options.classes)
    if options.only_class and (options.init_kwargs is not None or options.input_shapes):
        classes[options.only_class] = {
            "init_kwargs": options.init_kwargs,
            "inputs": [{"shape": s, "dtype": options.input_dtype} for s in options.input_shapes] or None,
        }
    job = {"file": str(path.resolve()), "device": options.device, "mode": options.mode,
           "only": options.only_class, "classes": classes, "values": options.values}
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    if options.device == "stand-in":
        env["CUDA_VISIBLE_DEVICES"] = ""  # hermetic: a CPU-only host, whatever this machine has
    limit = options.memory_mb * 1024 * 1024

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    proc = subprocess.Popen(
        [sys.executable, "-m", "devlint.confirm.child", str(write_end)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=(write_end,), start_new_session=True, preexec_fn=limit_memory, env=env, cwd=str(path.parent),
    )
    os.close(write_end)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(read_end, 1 << 16), b"")))
    reader.start()
    try:
        out, err = proc.communicate(json.dumps(job).encode(), timeout=options.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        reader.join()
        os.close(read_end)
        return {"fatal": f"timed out after {options.timeout:g} s (the process group was killed)"}
    reader.join()
    os.close(read_end)
    data = b"".join(chunks)
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return {"fatal": f"the run crashed ({name})", "stderr": err.decode(errors="replace")[-2000:]}
    try:
        result = json.loads(data)
    except ValueError:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return {"fatal": f"the run ended without a result (exit status {proc.returncode}: {tail[0]})"}
    result["stdout"] = out.decode(errors="replace")[-2000:]
    return result


# --- events to verdicts ------------------------------------------------------------------------
def _judge(finding: engine.Finding, result: dict, spans: list[tuple[int, int]]) -> Verdict:
    if "fatal" in result:
        return Verdict("not-run", result["fatal"], use_row=result.get("row"))
    device = result.get("device")
    row = finding.row
    classes = result.get("classes", [])
    events = [e for c in classes for e in c["events"]]
    owner = next((c for c in classes if c["span"][0] <= row <= c["span"][1]), None)
    if owner is not None:
        device = owner.get("device", device)  # a class re-run with values names that stand-in

    def verdict(status, message, use=None, origin=None):
        return Verdict(status, message, use, origin, device)

    if finding.code in ("DEV001", "DEV005"):
        span = _span_of(row, spans) if finding.code == "DEV005" else (row, row)
        hit = next((e for e in events if e["kind"] in ("cuda-request", "cuda-failure")
                    and e.get("row") is not None and span[0] <= e["row"] <= span[1]), None)
        if hit is not None:
            pinned = re.fullmatch(r"cuda:(\d+)", hit.get("device") or "")
            other = f"; it also pins {pinned.group(0)}, so a model placed on cuda:{int(pinned.group(1)) + 1} meets it there" if pinned else ""
            return verdict("confirmed", f"{_scenario(hit)}: asked for {hit.get('device', 'cuda')}; on a CPU-only host "
                           f"this raises AssertionError: Torch not compiled with CUDA enabled{other}", hit["row"], row)
    # a run that stopped early leaves what it did not reach undecided (the owning class's runs,
    # or any class's for code outside classes)
    stopped = [r for c in ([owner] if owner else classes) for r in c["runs"] if r["status"] in ("inconclusive", "error")]
    if owner is not None and owner["status"] == "not-run":
        return verdict("not-run", owner["reason"])
    if finding.code == "DEV003":
        mixes = [e for e in events if e["kind"] == "mix" and row in e["origin_rows"]]
        if mixes:
            hit = _worst(mixes)
            return verdict(hit["verdict"], f"{_scenario(hit)}: {hit['message']}", hit["row"], row)
        made = [e for e in events if e["kind"] == "factory" and e["row"] == row]
        if made and all(e.get("device") != "cpu" for e in made):
            return verdict("not-reproduced", f"the tensor made at line {row} was already on the device "
                           f"({made[0].get('device')}): its data was a tensor there", None, row)
        if not stopped and made:
            return verdict("not-reproduced", f"the tensor made at line {row} never met a tensor on another device", None, row)
    elif finding.code == "DEV004":
        name = _attribute(finding)
        behind = [e for e in events if e["kind"] == "left-behind" and e["attr"] == name]
        if behind:
            origins = {e["origin_row"] for e in behind} | {row}
            mixes = [e for e in events if e["kind"] == "mix" and (name in e["attrs"] or origins & set(e["origin_rows"]))]
            if mixes:
                hit = _worst(mixes)
                return verdict(hit["verdict"], f"self.{name} stayed on cpu when the module moved; {_scenario(hit)}: "
                               f"{hit['message']}", hit["row"], behind[0]["origin_row"] or row)
            if not stopped:
                return verdict(
                    "not-reproduced", f"self.{name} stayed on cpu when the module moved "
                    f"({_scenario(behind[0])}), but never met a tensor on another device",
                    None, behind[0]["origin_row"] or row)
    elif finding.code == "DEV008":
        judged = _judge_numpy(row, events, stopped)
        if judged is not None:
            return verdict(*judged)
    if owner is not None and stopped:
        return verdict("inconclusive", stopped[0]["reason"], stopped[0].get("row"))
    if not classes:
        return verdict("not-run", "the file defines no nn.Module class to run")
    return verdict("not-reached", f"line {row} did not run when the file's modules were built, moved and run")


def _judge_numpy(row: int, events: list[dict], stopped: list) -> Optional[tuple]:
    """DEV008: the value stand-in records every `.numpy()` with the device of its tensor (the
    data-less stand-in cannot run `.numpy()` on a device tensor, and stops there)."""
    calls = [e for e in events if e["kind"] == "numpy" and e.get("row") == row]
    refused = [e for e in events if e["kind"] == "mix" and e.get("row") == row and e.get("op", "").startswith("Tensor.")]
    if refused:
        return "confirmed", f"{_scenario(refused[0])}: {refused[0]['message']}", row, row
    if calls and not stopped:
        return "not-reproduced", f"the tensor was on the {calls[0]['device']} when line {row} ran `.numpy()`", row, row
    return None


def _worst(events: list[dict]) -> dict:
    return next((e for e in events if e["verdict"] == "confirmed"), events[0])


def _scenario(event: dict) -> str:
    return SCENARIO_NAMES.get(event.get("scenario"), event.get("scenario", "during the run"))


def _attribute(finding: engine.Finding) -> str:
    match = re.search(r"`self\.(\w+)`", finding.message)
    return match.group(1) if match else ""


def _function_spans(source: str) -> list[tuple[int, int]]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _span_of(row: int, spans: list[tuple[int, int]]) -> tuple[int, int]:
    inside = [s for s in spans if s[0] <= row <= s[1]]
    return min(inside, key=lambda s: s[1] - s[0]) if inside else (row, row)


# --- DEV002 ------------------------------------------------------------------------------------
def _confirm_load(path: Path, source: str, finding: engine.Finding, options: Options) -> Verdict:
    checkpoint = options.checkpoint or _literal_path(path, source, finding)
    if checkpoint is None:
        return Verdict("not-run", "the checkpoint path is not a literal that exists here: give it with --checkpoint")
    try:
        locations = storage_locations(checkpoint)
    except Exception as exc:  # noqa: BLE001 - any unreadable or foreign file
        return Verdict("not-run", f"cannot read {checkpoint}: {type(exc).__name__}: {exc}")
    devices = ", ".join(f"{loc} x{n}" for loc, n in sorted(locations.items()))
    if any(loc.startswith("cuda") for loc in locations):
        return Verdict("confirmed", f"{checkpoint.name} holds storages saved on {devices}; on a CPU-only machine "
                       f"torch.load raises {CPU_ONLY_ERROR}", finding.row, finding.row, "checkpoint")
    return Verdict("not-reproduced", f"{checkpoint.name} holds only {devices or 'no'} storages", finding.row, finding.row, "checkpoint")


def _literal_path(path: Path, source: str, finding: engine.Finding) -> Optional[Path]:
    line = source.splitlines()[finding.row - 1] if finding.row <= len(source.splitlines()) else ""
    match = re.match(r"""\s*\(\s*(['"])([^'"]+)\1""", line[finding.end_column - 1:])
    if not match:
        return None
    for base in (path.parent, Path.cwd()):
        candidate = (base / match.group(2))
        if candidate.is_file():
            return candidate
    return None
