"""`devlint confirm`: run what the static pass flagged and tell, for each finding, whether it breaks.

The parent never imports torch: it runs each file's modules in a child process
(`devlint.confirm.child`) with a timeout and a memory limit, reads the events the child
recorded, and turns them into one status per finding. Within `warm_processes`, each child is a
fresh fork of a warm process that imported torch once (devlint.confirm.zygote). DEV002 needs
no child at all: the checkpoint's storage locations are read without unpickling anything real.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Optional

from devlint import engine
from devlint.confirm import zygote
from devlint.confirm.checkpoint import CPU_ONLY_ERROR, storage_locations
from devlint.confirm.judges import _judge, constructions
from devlint.confirm.lines import cpu_seconds
from devlint.confirm.options import INPUT_DTYPES, RUNTIME_RULES, SCENARIO_NAMES, STATUSES, Options, Verdict  # noqa: F401 (the package's names)
from devlint.confirm.scopes import Scopes


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
        result = run_child(path, options, constructions(scopes.tree, source, [findings[i] for i in runtime]))
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

    from devlint.semantic.facts import NOT_MODULE, OTHER_FRAMEWORK, FileFacts

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
