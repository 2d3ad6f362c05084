"""`devlint confirm`: run what the static pass flagged and tell, for each finding, whether it breaks.

The parent never imports torch: it runs each file's modules in a child process
(`devlint.confirm.child`) with a timeout and a memory limit, reads the events the child
recorded, and turns them into one status per finding. Within `warm_processes`, each child is a
fresh fork of a warm process that imported torch once (devlint.confirm.zygote). DEV002 needs
no child at all: the checkpoint's storage locations are read without unpickling anything real.
"""
from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from devlint import cuda_api, engine
from devlint.confirm import zygote
from devlint.confirm.checkpoint import CPU_ONLY_ERROR, storage_locations
from devlint.confirm.lines import cpu_seconds

STATUSES = ("confirmed", "benign", "not-reproduced", "not-reached", "inconclusive", "not-run", "not-selected")
# the dtype names an input may have, each the name of a torch dtype: checked before any run, without torch
INPUT_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "long", "int32", "bool")
RUNTIME_RULES = {"DEV001", "DEV003", "DEV004", "DEV005", "DEV007", "DEV008", "DEV009", "DEV010", "DEV011", "DEV012", "DEV013", "DEV014", "DEV015"}
SCENARIO_NAMES = {
    "build": "while building the module",
    "move": "when the module was moved",
    "train": "in a training-mode forward",
    "eval": "in an eval-mode forward",
    "cached": "after a first forward on the CPU, then a move",
    "moved-back": "built for the GPU (device=\"cuda\") and moved back to the CPU",
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
    scopes = Scopes.of(source)
    for i, f in enumerate(findings):
        left_out = scopes.left_out(f.row, options.only_class)
        if left_out is not None:
            verdicts[i] = Verdict("not-selected", left_out)
        elif f.code == "DEV002":
            verdicts[i] = _confirm_load(path, source, f, options)
        elif f.code not in RUNTIME_RULES:
            verdicts[i] = Verdict("not-run", f"{f.code} is not about where tensors live; confirm does not run it")
    runtime = [i for i, f in enumerate(findings) if verdicts[i] is None]
    if runtime:
        result = run_child(path, options, constructions(source, [findings[i] for i in runtime]))
        lines = source.splitlines()
        for i in runtime:
            verdicts[i] = _judge(findings[i], result, lines, scopes)
    return verdicts


# --- before any run: what the command line asks for is there -------------------------------------
def torch_missing() -> Optional[str]:
    """Why the runs cannot import torch (not installed), or None; found without importing it."""
    import importlib.util

    return None if importlib.util.find_spec("torch") is not None else "No module named 'torch'"


def cuda_missing(timeout: float = 300.0) -> Optional[str]:
    """Why `--device cuda` cannot run here, or None: asked of a fresh interpreter (the parent never
    imports torch), in the environment the runs get."""
    probe = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"torch did not answer whether CUDA is there within {timeout:g} s"
    if done.returncode == 3:
        return "no CUDA device here (torch.cuda.is_available() is False)"
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return f"cannot ask torch whether CUDA is there: {tail[0]}"
    return None


def _cuda_may_run(device: str) -> bool:
    """Whether a run may initialize CUDA: `--device cuda`, or `auto` where an NVIDIA driver is
    loaded (asked of the kernel, not of torch, which the parent never imports)."""
    return device == "cuda" or (device == "auto" and os.path.exists("/proc/driver/nvidia/version"))


def selectable_classes(source: str) -> dict[str, bool]:
    """The classes `FILE::Class` can select (at module level, in order), each with whether it may
    be an nn.Module. False where the static pass tells it cannot (no base, or only builtin,
    standard-library, typing or other frameworks' bases, or a torch class outside torch.nn):
    nothing of it can run. A class over a base of unknown kind (imported from the project) may
    be one: the run sees what it is."""
    import libcst as cst

    from devlint.facts import NOT_MODULE, OTHER_FRAMEWORK, FileFacts

    names = [name for _, _, name in Scopes.of(source).top_classes]
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return dict.fromkeys(names, True)
    facts = FileFacts(module)
    cannot = {facts.classes[node].name for node in module.body
              if isinstance(node, cst.ClassDef) and facts.classes[node].kind in (NOT_MODULE, OTHER_FRAMEWORK)}
    return {name: name not in cannot for name in names}


# --- the child ---------------------------------------------------------------------------------
def run_child(path: Path, options: Options, built: Iterable[dict] = ()) -> dict:
    """Run the file's modules in a child process of their own (a fresh interpreter, or a fresh fork
    of a warm one: devlint.confirm.zygote); the result travels on a private pipe. `built`: the
    constructions of DEV014/DEV015 findings to build and call there."""
    classes = dict(options.classes)
    if options.only_class and (options.init_kwargs is not None or options.input_shapes):
        classes[options.only_class] = {
            "init_kwargs": options.init_kwargs,
            "inputs": [{"shape": s, "dtype": options.input_dtype} for s in options.input_shapes] or None,
        }
    job = {"file": str(path.resolve()), "device": options.device, "mode": options.mode,
           "only": options.only_class, "classes": classes, "values": options.values, "constructions": list(built)}
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    if options.device == "stand-in":
        env["CUDA_VISIBLE_DEVICES"] = ""  # hermetic: a CPU-only host, whatever this machine has
    # CUDA reserves far more address space than it uses (its init fails with "out of memory" under
    # an 8 GB RLIMIT_AS): where CUDA may run, the limit is left to the timeout and the GPU's own
    limit = None if _cuda_may_run(options.device) else options.memory_mb * 1024 * 1024

    progress_read, progress_write = os.pipe()
    # forked from the thread's warm process in a `warm_processes` block (torch imported once), else a fresh interpreter
    proc = zygote.spawn(env, path.parent, limit, write_end, progress_write) or subprocess.Popen(
        [sys.executable, "-m", "devlint.confirm.child", str(write_end), str(progress_write)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=(write_end, progress_write), start_new_session=True, env=env, cwd=str(path.parent),
        preexec_fn=lambda: zygote.limit_resources(limit),
    )
    os.close(write_end)
    os.close(progress_write)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(read_end, 1 << 16), b"")))
    reader.start()
    watch = _Watch(progress_read, proc.pid)
    streams: list[bytes] = []
    talker = threading.Thread(target=lambda: streams.extend(proc.communicate(json.dumps(job).encode())))
    talker.start()
    overrun = watch.until_done(proc, talker, options.timeout)
    if overrun:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended as the limit passed
            pass
    talker.join()
    reader.join()
    watch.thread.join()
    os.close(read_end)
    os.close(progress_read)
    if overrun:
        return {"fatal": overrun}
    out, err = streams
    data = b"".join(chunks)
    if proc.returncode is not None and proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return {"fatal": f"the run crashed ({name})", "stderr": err.decode(errors="replace")[-2000:]}
    try:
        result = json.loads(data)
    except ValueError:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        status = "unknown: the warm process that forked it died" if proc.returncode is None else proc.returncode
        return {"fatal": f"the run ended without a result (exit status {status}: {tail[0]})"}
    result["stdout"] = out.decode(errors="replace")[-2000:]
    return result


STARTUP_LIMIT = 300.0  # seconds for the interpreter to start and import torch, before the user's code


def warm_processes():
    """A block within which each thread's runs fork from one warm process that imported torch
    once, instead of starting an interpreter per file; the warm processes end with the block."""
    return zygote.warm_processes(STARTUP_LIMIT)


class _Watch:
    """Reads the child's progress lines; the timeout counts the user's code alone.

    The clock starts when the child starts importing the user's file (process start and the
    torch import have their own, generous bound). The user's code has run past the timeout when
    both its wall time and its CPU time have: wall time alone grows when the machine is busy,
    CPU time alone grows with every thread torch computes on. Code that waits without computing
    (a sleep, a lock) is stopped at a wall-time bound of three times the timeout plus 10 s.
    """

    def __init__(self, fd: int, pid: int) -> None:
        self.phase = ""
        self.started: Optional[tuple[float, Optional[float]]] = None  # wall clock, child's CPU time
        self.pid = pid
        self.thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self.thread.start()

    def _read(self, fd: int) -> None:
        buffer = b""
        while True:
            data = os.read(fd, 4096)
            if not data:
                return
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                phase = line.decode(errors="replace")
                if phase != "ready" and self.started is None:
                    self.started = (time.monotonic(), cpu_seconds(self.pid))
                self.phase = phase

    def until_done(self, proc: subprocess.Popen, talker: threading.Thread, timeout: float) -> Optional[str]:
        """None when the child finished in time; else what ran past the limit."""
        launched = time.monotonic()
        while talker.is_alive():
            talker.join(0.1)
            now = time.monotonic()
            if self.phase == "done":
                if now - launched > STARTUP_LIMIT + 3 * timeout + 10:
                    return "timed out: the child did not exit after its run (the process group was killed)"
                continue
            if self.started is None:
                if now - launched > STARTUP_LIMIT:
                    return (f"timed out: the child did not start the file within {STARTUP_LIMIT:g} s "
                            f"(process start and the torch import; the process group was killed)")
                continue
            wall = now - self.started[0]
            cpu_now = cpu_seconds(proc.pid)
            cpu = cpu_now - self.started[1] if cpu_now is not None and self.started[1] is not None else wall
            if min(wall, cpu) > timeout or wall > 3 * timeout + 10:
                return (f"timed out after {timeout:g} s of the file's own code: {self.phase or 'the file'} ran past "
                        f"the limit ({wall:.1f} s of wall time, {cpu:.1f} s of CPU time; process start and the "
                        f"torch import are not counted; the process group was killed)")
        return None


# --- events to verdicts ------------------------------------------------------------------------
def _judge(finding: engine.Finding, result: dict, lines: list[str], scopes: "Scopes") -> Verdict:
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
        span = scopes.function_span(row) if finding.code == "DEV005" else (row, row)
        hit = next((e for e in events if e["kind"] in ("cuda-request", "cuda-failure")
                    and e.get("row") is not None and span[0] <= e["row"] <= span[1]), None)
        if hit is not None:
            pinned = re.fullmatch(r"cuda:(\d+)", hit.get("device") or "")
            other = f"; it also pins {pinned.group(0)}, so a model placed on cuda:{int(pinned.group(1)) + 1} meets it there" if pinned else ""
            return verdict("confirmed", f"{_scenario(hit)}: asked for {hit.get('device', 'cuda')}; on a CPU-only host "
                           f"this raises AssertionError: Torch not compiled with CUDA enabled{other}", hit["row"], row)
        later = _request_after_literal(finding, result, events, lines)
        if later is not None:
            hit, literal = later
            return verdict("confirmed", f"line {row} made {literal}; {VIA.get(hit.get('via'), VIA['tensor'])} at line "
                           f"{hit['row']} ({_scenario(hit)}): on a CPU-only host this raises AssertionError: "
                           "Torch not compiled with CUDA enabled", hit["row"], row)
    if finding.code in BUILT_BY_SCRIPTS:
        found = _judge_construction(finding, result, verdict)
        if found is not None:
            return found
    # a run that stopped early leaves what it did not reach undecided (the owning class's runs,
    # or any class's for code outside classes)
    stopped = [r for c in ([owner] if owner else classes) for r in c["runs"] if r["status"] in ("inconclusive", "error")]
    judge = RULE_JUDGES.get(finding.code)
    if judge is not None:
        found = judge(Case(finding, events, stopped, verdict, scopes))
        if found is not None:
            return found
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
        behind, mixes = _left_behind(name, row, owner, classes)
        if behind:
            if mixes:
                hit = _worst(mixes)
                return verdict(hit["verdict"], f"self.{name} stayed on cpu when the module moved; {_scenario(hit)}: "
                               f"{hit['message']}", hit["row"], behind[0]["origin_row"] or row)
            if not stopped:
                return verdict(
                    "not-reproduced", f"self.{name} stayed on cpu when the module moved "
                    f"({_scenario(behind[0])}), but never met a tensor on another device",
                    None, behind[0]["origin_row"] or row)
        # a lazy cache shows only in the scenario with a first forward on the CPU: if that run
        # stopped, the finding is undecided
        cached = [c["cached"] for c in ([owner] if owner else classes) if c.get("cached", {}).get("status") in ("error", "inconclusive")]
        lazy = (scopes).method_at(row) != "__init__"
        if cached and lazy and not stopped and not behind:
            return verdict("inconclusive", cached[0]["reason"], cached[0].get("row"))
    if owner is not None and stopped:
        return verdict("inconclusive", stopped[0]["reason"], stopped[0].get("row"))
    ran = _ran(result)
    outside = scopes.outside_classes(finding, events, ran)
    if outside:
        return verdict("not-run", outside)
    if not classes:
        return verdict("not-run", "the file defines no nn.Module class to run")
    if row in ran:
        return verdict("not-reproduced", f"line {row} ran, but what it made never reached a CUDA device "
                       "(no CUDA request, no tensor on another device)", None, row)
    copies = _host_copies(owner, scopes.function_span(row))
    if copies:
        return verdict("inconclusive", f"line {row} did not run, but on the stand-in the copies to the host at line "
                       f"{copies} hold zeros, so a branch on their values may have gone another way", None)
    return verdict("not-reached", f"line {row} did not run when the file's modules were built, moved and run")


VIA = {"module": "the module was moved there", "tensor": "a tensor was moved there", "factory": "a tensor was made there"}


def _ran(result: dict) -> dict[int, int]:
    """Rows of the user's file that executed, each with the clock at its first execution."""
    first: dict[int, int] = {}
    sinks = [result.get("import_lines", [])] + [rows for c in result.get("classes", []) for rows in c.get("lines", {}).values()]
    for rows in sinks:
        for row, seq in rows:
            first[row] = min(seq, first.get(row, seq))
    return first


def _literal(finding: engine.Finding, lines: list[str]) -> Optional[str]:
    """The device string a DEV001/DEV005 finding points at ("cuda", "cuda:0"), if it is a literal."""
    line = lines[finding.row - 1] if 0 < finding.row <= len(lines) else ""
    match = re.match(r"""\s*(['"])(cuda(?::\d+)?)\1""", line[finding.column - 1:])
    if match is None:
        match = re.search(r'device "(cuda(?::\d+)?)"', finding.message)
    return match.group(2 if match.lastindex == 2 else 1) if match else None


def _request_after_literal(finding: engine.Finding, result: dict, events: list[dict],
                           lines: list[str]) -> Optional[tuple[dict, str]]:
    """A CUDA request for the very device a literal names, made after the literal's line ran
    (a helper that returns the device, a module later moved there)."""
    literal = _literal(finding, lines)
    first = _ran(result).get(finding.row)
    if literal is None or first is None:
        return None
    for event in events:
        if (event["kind"] == "cuda-request" and event.get("device") == literal and event.get("row") is not None
                and event.get("seq", -1) >= first):
            return event, literal
    return None


def _left_behind(name: str, row: int, owner: Optional[dict], classes: list[dict]) -> tuple[list[dict], list[dict]]:
    """Where `self.NAME` of the finding's class stayed on the CPU, and the mixes it took part in,
    from each class run alone: another class's `self.NAME` is another tensor."""
    behind: list[dict] = []
    mixes: list[dict] = []
    for run in classes:
        mine = [e for e in run["events"] if e["kind"] == "left-behind" and e["attr"] == name
                and (owner is None or owner["class"] in (e["module"], run["class"]))]
        if not mine:
            continue
        origins = {e["origin_row"] for e in mine} | {row}
        behind += mine
        mixes += [e for e in run["events"] if e["kind"] == "mix" and (name in e["attrs"] or origins & set(e["origin_rows"]))]
    return behind, mixes


def _worst(events: list[dict]) -> dict:
    return next((e for e in events if e["verdict"] == "confirmed"), events[0])


def _scenario(event: dict) -> str:
    return SCENARIO_NAMES.get(event.get("scenario"), event.get("scenario", "during the run"))


def _attribute(finding: engine.Finding) -> str:
    match = re.search(r"`self\.(\w+)`", finding.message)
    return match.group(1) if match else ""


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
    held = f"only {devices} storages" if devices else "no tensor storages"
    return Verdict("not-reproduced", f"{checkpoint.name} holds {held}", finding.row, finding.row, "checkpoint")


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


# --- DEV007-DEV012: per-rule judges --------------------------------------------------------------
@dataclass
class Scopes:
    """Where a finding stands in its file: the classes and plain functions, and each call's lines."""
    classes: list[tuple[int, int]] = field(default_factory=list)
    top_classes: list[tuple[int, int, str]] = field(default_factory=list)  # at module level, with names
    functions: list[tuple[int, int, str]] = field(default_factory=list)  # outside classes
    methods: list[tuple[int, int, str]] = field(default_factory=list)  # every function, in a class or not
    calls: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def of(cls, source: str) -> "Scopes":
        scopes = cls()
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return scopes
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                scopes.classes.append((node.lineno, node.end_lineno or node.lineno))
            elif isinstance(node, ast.Call):
                scopes.calls.append((node.lineno, node.end_lineno or node.lineno))
        scopes.methods = [(n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        scopes.functions = [m for m in scopes.methods if not any(a <= m[0] <= b for a, b in scopes.classes)]
        scopes.top_classes = list(_module_level_classes(tree.body))
        return scopes

    def left_out(self, row: int, only: Optional[str]) -> Optional[str]:
        """Why `FILE::ONLY` leaves the finding at `row` out, or None when it is in the selection
        (or outside every class: the selected class's run may reach it)."""
        if only is None:
            return None
        if only not in {name for _, _, name in self.top_classes}:
            return f"not selected: the file has no class {only}, the one selected, so nothing in it was run"
        owner = next((name for first, last, name in self.top_classes if first <= row <= last), None)
        if owner is None or owner == only:
            return None
        return f"not selected: line {row} is in class {owner}, and only {only} was run"

    def _innermost(self, row: int) -> Optional[tuple[int, int, str]]:
        """The innermost function around `row`, in a class or not: (first row, last row, name)."""
        around = [m for m in self.methods if m[0] <= row <= m[1]]
        return min(around, key=lambda m: m[1] - m[0]) if around else None

    def method_at(self, row: int) -> Optional[str]:
        function = self._innermost(row)
        return function[2] if function else None

    def function_span(self, row: int) -> tuple[int, int]:
        """The rows of the innermost function around `row` (just `row` outside functions)."""
        function = self._innermost(row)
        return (function[0], function[1]) if function else (row, row)

    def call_rows(self, row: int) -> set[int]:
        """The lines of the smallest call around `row`: a tensor is made on the line its call starts."""
        around = [c for c in self.calls if c[0] <= row <= c[1]]
        first, last = min(around, key=lambda c: c[1] - c[0]) if around else (row, row)
        return set(range(first, last + 1))

    def outside_classes(self, finding: engine.Finding, events: list[dict], ran: Iterable[int] = ()) -> Optional[str]:
        """Why a finding outside every class is not run, or None for one inside a class, or inside a
        function that a module's run reached (a line of it ran, or its events name one)."""
        row = finding.row
        if not self.calls and not self.classes and not self.functions or any(a <= row <= b for a, b in self.classes):
            return None
        where = [f for f in self.functions if f[0] <= row <= f[1]]
        rows = set(ran) | {e.get("row") or 0 for e in events}
        if where and any(f[0] < r <= f[1] for f in where for r in rows):  # the def line runs at import
            return None
        place = f"the function {min(where, key=lambda f: f[1] - f[0])[2]}(), which no module run reached" if where \
            else "script code that confirm does not run"
        return f"{finding.code} at line {row} is in {place}; only nn.Module classes are built and run"


def _module_level_classes(body: list) -> Iterable[tuple[int, int, str]]:
    """(first row, last row, name) of the classes in `body`, looking into if/try/with/for blocks
    (they run at import) but not into functions or classes."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            yield first, node.end_lineno or node.lineno, node.name
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for name in ("body", "orelse", "finalbody", "handlers"):
                yield from _module_level_classes([n for n in getattr(node, name, []) if isinstance(n, ast.AST)])


@dataclass
class Case:
    finding: engine.Finding
    events: list[dict]
    stopped: list[dict]  # the runs of the owning class (or of every class) that stopped early
    verdict: object  # (status, message, use=None, origin=None) -> Verdict
    scopes: Scopes

    def of_kind(self, kind: str, rows: Optional[set[int]] = None) -> list[dict]:
        return [e for e in self.events if e["kind"] == kind and (rows is None or e.get("row") in rows)]

    def mixes_from(self, rows: set) -> list[dict]:
        return [e for e in self.events if e["kind"] == "mix" and rows & set(e["origin_rows"])]


def _judge_input(case: Case) -> Optional[Verdict]:
    """DEV007: a CPU value (made here, or used here) that meets a placed one."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    mixes = case.mixes_from(rows) or [e for e in case.of_kind("mix") if e["row"] == row]
    if mixes:
        hit = _worst(mixes)
        return case.verdict(hit["verdict"], f"{_scenario(hit)}: {hit['message']}", hit["row"], row)
    made = case.of_kind("factory", rows)
    if made and all(e.get("device") != "cpu" for e in made):
        return case.verdict("not-reproduced", f"the tensor made at line {row} was already on the device ({made[0].get('device')})", None, row)
    if made and not case.stopped:
        return case.verdict("not-reproduced", f"the tensor made at line {row} never met a tensor on another device", None, row)
    return None


NUMPY_ERROR = ("TypeError: can't convert {device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
               "memory first.")


def _judge_numpy(case: Case) -> Optional[Verdict]:
    """DEV008: `.numpy()` called on a tensor on the device."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    calls = case.of_kind("numpy", rows)
    on_device = [e for e in calls if not e["device"].startswith("cpu")]
    if on_device:
        hit = on_device[0]
        return case.verdict("confirmed", f"{_scenario(hit)}: .numpy() got a tensor on {hit['device']}; on CUDA this raises "
                            + NUMPY_ERROR.format(device=hit["device"]), hit["row"], row)
    failed = [e for e in case.of_kind("cuda-failure", rows) if "numpy" in e.get("message", "")]
    if failed:
        return case.verdict("confirmed", f"{_scenario(failed[0])}: {failed[0]['message']}", failed[0]["row"], row)
    if calls:
        return case.verdict("not-reproduced", f"the .numpy() at line {row} got a tensor on the CPU", calls[0]["row"], row)
    return None


def _judge_hidden(case: Case) -> Optional[Verdict]:
    """DEV009: modules in a plain container that the move and `parameters()` do not see."""
    row = case.finding.row
    name = _attribute(case.finding)
    hidden = [e for e in case.of_kind("hidden") if e["attr"] == name]
    if not hidden:
        return None
    left = [e for e in hidden if "cpu" in e["devices"]]
    if left:
        h = left[0]
        held = ", ".join(h["items"])
        said = (f"{_scenario(h)}, the {_count(h['tensors'], 'tensor')} ({_count(h['numel'], 'value')}) of the {held} in self.{name} "
                f"stayed on cpu, and model.parameters() does not list them")
        mixes = [e for e in case.of_kind("mix") if name in e["attrs"]]
        if mixes:
            hit = _worst(mixes)
            return case.verdict("confirmed", f"{said}; {_scenario(hit)}: {hit['message']}", hit["row"], row)
        return case.verdict("confirmed", said, None, row)
    h = hidden[0]
    if h["tensors"]:
        return case.verdict("not-reproduced", f"the {_count(h['tensors'], 'tensor')} in self.{name} were on {', '.join(h['devices'])} "
                            f"already, though model.parameters() does not list them", None, row)
    return case.verdict("not-reproduced", f"the {', '.join(h['items'])} in self.{name} hold no parameters or buffers: the "
                        f"move has nothing to leave behind (.train()/.eval() still skip them)", None, row)


def _host_copies(owner: Optional[dict], function: tuple[int, int]) -> str:
    """The lines where the stand-in served a copy to the host (zeros: meta tensors hold no data),
    when the function around the unreached line ran: its other lines left events."""
    events = (owner or {}).get("events", [])
    if not any(function[0] <= (e.get("row") or 0) <= function[1] for e in events):
        return ""
    return ", ".join(str(r) for r in sorted({e["row"] for e in events if e["kind"] == "host-copy"}))


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _judge_discarded(case: Case) -> Optional[Verdict]:
    """DEV010: a move whose copy is dropped, so the tensor stays where it was."""
    row = case.finding.row
    moves = case.of_kind("tensor-move", case.scopes.call_rows(row))
    copies = [e for e in moves if e["copied"]]
    if copies:
        c = copies[0]
        said = f".{c['method']}() at line {c['row']} returned a copy on {c['to']}, and the tensor itself stayed on {c['stayed']}"
        mixes = case.mixes_from({c["origin_row"]}) if c["origin_row"] is not None else []
        if mixes:
            hit = _worst(mixes)
            return case.verdict(hit["verdict"], f"{said}; {_scenario(hit)}: {hit['message']}", hit["row"], c["origin_row"])
        return case.verdict("confirmed", f"{_scenario(c)}: {said}", c["row"], c["origin_row"])
    if moves:
        m = moves[0]
        return case.verdict("not-reproduced", f"the tensor was on {m['stayed']} already: .{m['method']}() returned it as it "
                            "was, so the dropped result changed nothing", m["row"], row)
    return None


def _judge_cuda_api(case: Case) -> Optional[Verdict]:
    """DEV011: a torch.cuda call that raises on a host without CUDA."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    calls = case.of_kind("cuda-api", rows)
    if calls:
        hit = calls[0]
        name = hit["name"]
        error = f"{cuda_api.RAISES_WITHOUT_CUDA.get(name, 'an error')}: {cuda_api.MESSAGES.get(name, '')}".rstrip(": ")
        return case.verdict("confirmed", f"{_scenario(hit)}: {name}() was called; on a CPU-only host (the CPU build of "
                            f"torch) it raises {error}", hit["row"], row)
    failed = case.of_kind("cuda-failure", rows)
    if failed:
        return case.verdict("confirmed", f"{_scenario(failed[0])}: {failed[0]['message']}", failed[0]["row"], row)
    return None


def _judge_stale_device(case: Case) -> Optional[Verdict]:
    """DEV012: `self.NAME` still names the device of `__init__` after the module moved."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    name = _attribute(case.finding)
    mixes = [e for e in case.mixes_from(rows) if e["scenario"] != "moved-back"]
    if mixes:
        hit = _worst(mixes)
        return case.verdict(hit["verdict"], f"the tensor placed with self.{name} at line {row} was made on cpu, where the "
                            f"module was built, after the module moved; {_scenario(hit)}: {hit['message']}", hit["row"], row)
    for i, made in enumerate(case.events):
        placed = made.get("device") if made["kind"] == "factory" else made.get("to") if made["kind"] == "tensor-move" else None
        if placed not in (None, "cpu") and made["scenario"] == "moved-back" and made["row"] in rows:
            after = [e for e in case.events[i:] if e["kind"] == "mix" and e["scenario"] == "moved-back"]
            if after:
                hit = _worst(after)
                return case.verdict(hit["verdict"], f"{_scenario(hit)}: the tensor placed with self.{name} at line {row} was "
                                    f"made on the GPU while the weights were on cpu: {hit['message']}", hit["row"], row)
    made = [e for e in case.of_kind("factory", rows) if e["scenario"] != "moved-back"]
    if made and not case.stopped:
        return case.verdict("not-reproduced", f"the tensor placed with self.{name} at line {row} never met a tensor on "
                            "another device", None, row)
    # an op that checks devices itself (`meshgrid expects all tensors to have the same device`)
    # stopped the run in this method, after the line made a CPU tensor there
    if any(e.get("device") == "cpu" for e in made):
        start, end = case.scopes.function_span(row)
        for run in case.stopped:
            if _DEVICE_ERROR.search(run.get("reason") or "") and row <= (run.get("row") or 0) <= end:
                return case.verdict("confirmed", f"the tensor placed with self.{name} at line {row} was made on cpu, "
                                    f"where the module was built, after the module moved; {run['reason']}", run["row"], row)
    return None


# The words of torch's own device checks: "Expected all tensors to be on the same device", "meshgrid
# expects all tensors to have the same device", "found at least two devices".
_DEVICE_ERROR = re.compile(r"(on|have) the same device|at least two devices")


def _judge_built_in_forward(case: Case) -> Optional[Verdict]:
    """DEV013: the weights a module built at forward time makes, on the CPU, meeting the input. A
    parameter loses the record of the line that made it, so a mix later in the function that no
    other line made counts too."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    made = case.of_kind("factory", rows)
    on_cpu = [e for e in made if e.get("device") == "cpu"]
    first, last = case.scopes.function_span(row)
    mixes = case.mixes_from(rows) or ([e for e in case.of_kind("mix") if not e["origin_rows"] and row <= e["row"] <= last]
                                      if on_cpu else [])
    if mixes:
        hit = _worst(mixes)
        return case.verdict(hit["verdict"], f"the module built at line {row} made its weights on cpu; {_scenario(hit)}: "
                            f"{hit['message']}", hit["row"], row)
    if made and not on_cpu:
        return case.verdict("not-reproduced", f"the module built at line {row} made its weights on {made[0].get('device')}",
                            None, row)
    if made and not case.stopped:
        return case.verdict("not-reproduced", f"the weights made at line {row} never met a tensor on another device", None, row)
    return None


# --- DEV014, DEV015: a module a script builds ------------------------------------------------------
BUILT_BY_SCRIPTS = ("DEV014", "DEV015")


def constructions(source: str, findings: Iterable[engine.Finding]) -> list[dict]:
    """The construction each DEV014/DEV015 finding reports, as the text of its expression (the
    value set as the new attribute, or the module built and never moved), for the child to build."""
    wanted = [f for f in findings if f.code in BUILT_BY_SCRIPTS]
    if not wanted:
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    at: dict[tuple[int, int], list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Call, ast.Assign)):
            at.setdefault((node.lineno, node.col_offset), []).append(node)
    found = []
    for f in wanted:
        built = _construction(at.get((f.row, f.column - 1), []))
        text = ast.get_source_segment(source, built) if built is not None else None
        if text:
            found.append({"row": built.lineno, "finding_row": f.row, "source": text})
    return found


def _construction(nodes: list) -> Optional[ast.AST]:
    """The module built at a finding's position: an assignment's value (`model.fc = nn.Linear(...)`),
    the module given to `setattr`/`add_module`, or the call itself (not a `DataParallel` wrapper:
    what it wraps is built elsewhere)."""
    assign = next((n for n in nodes if isinstance(n, ast.Assign)), None)
    if assign is not None:
        return assign.value
    calls = sorted((n for n in nodes if isinstance(n, ast.Call)), key=lambda n: (n.end_lineno, n.end_col_offset))
    call = calls[0] if calls else None  # the innermost of those starting here: `nn.Linear(...)` of `nn.Linear(...).double()`
    if call is None:
        return None
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name in ("setattr", "add_module") and call.args:
        return call.args[-1]
    return None if name.endswith("DataParallel") else call


def _judge_construction(finding: engine.Finding, result: dict, verdict) -> Optional[Verdict]:
    built = next((c for c in result.get("constructions", []) if c["finding_row"] == finding.row), None)
    if built is None:
        return None
    row = built["row"]
    if built["status"] in ("confirmed", "benign"):
        on_cpu = ", ".join(built["on_cpu"][:4]) + (", ..." if len(built["on_cpu"]) > 4 else "")
        return verdict(built["status"], f"the module built at line {row} holds {on_cpu} on cpu; called on inputs on the "
                       f"device ({built['source']}: {_shapes(built['inputs'])}): {built['message']}", row, row)
    return verdict(built["status"], built["reason"], None, row)


def _shapes(inputs: list) -> str:
    return ", ".join("x".join(map(str, i["shape"])) + (f" {i['dtype']}" if i.get("dtype") not in (None, "float32") else "")
                     if isinstance(i, dict) and "shape" in i else str(i) for i in inputs)


RULE_JUDGES = {
    "DEV007": _judge_input,
    "DEV008": _judge_numpy,
    "DEV009": _judge_hidden,
    "DEV010": _judge_discarded,
    "DEV011": _judge_cuda_api,
    "DEV012": _judge_stale_device,
    "DEV013": _judge_built_in_forward,
}
