"""Derive DEV011's table: which public `torch.cuda` callables raise on a machine without CUDA.

Calls every public callable of `torch.cuda` and of the submodules users call directly, with
plausible arguments, on the CPU wheel of torch, and writes what happened to
`src/devlint/torchinfo/cuda_api.py` (plain data, no torch import). Each call runs in a process forked
for it alone, under a timeout, so that no call can hang the run or leave state behind for the
next one. Usage: python bench/cuda_only_api.py [--check] [--output FILE]

--check compares the derived table with the pinned module instead of writing it (exit 1 when
they differ). The table must come from a build without CUDA (`torch.version.cuda` is None): on
a CUDA build the same calls fail differently, or work. It is also derived without nvidia-ml-py,
which changes how the NVML readers (`torch.cuda.utilization`, ...) fail.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "src" / "devlint" / "torchinfo" / "cuda_api.py"

SUBMODULES = (
    "torch.cuda", "torch.cuda.memory", "torch.cuda.random", "torch.cuda.amp", "torch.cuda.profiler",
    "torch.cuda.nvtx", "torch.cuda.graphs", "torch.cuda.streams", "torch.cuda.tunable", "torch.cuda.nccl",
    "torch.cuda.gds", "torch.cuda.green_contexts", "torch.cuda.sparse",
)

# Not called, and why: each of these touches files or loads code. Calls that only set process
# state (seeds, `init`, `set_sync_debug_mode`, tunable switches) are made: the forked process
# they run in is thrown away.
NOT_CALLED = {
    "torch.cuda.CUDAPluggableAllocator": "loads a shared library",
    "torch.cuda.memory.CUDAPluggableAllocator": "loads a shared library",
    "torch.cuda.gds.GdsFile": "opens a file",
    "torch.cuda.tunable.set_filename": "names a file that tuning results are written to",
    "torch.cuda.tunable.read_file": "reads a file",
    "torch.cuda.tunable.tune_gemm_in_file": "reads a file",
    "torch.cuda.tunable.mgpu_tune_gemm_in_file": "reads files and starts processes",
    "torch.cuda.tunable.write_file": "writes a file",
    "torch.cuda.profiler.init": "writes a file",
}

TIMEOUT = 10.0  # seconds per call


# --- the probe: runs in its own process, with torch imported ------------------------------------
def _arguments(torch):
    """Plausible values for required parameters, by parameter name. Each is a thunk: some of
    them (a CUDA stream, a CUDA graph) cannot be made without CUDA, and then a stand-in is used."""

    def first(*makers):
        for make in makers:
            try:
                return make()
            except Exception:
                continue
        return None

    return {
        "device": lambda: 0, "device_id": lambda: 0, "peer_device": lambda: 0,
        "size": lambda: 16, "mem_ptr": lambda: 0, "res": lambda: 0, "fraction": lambda: 0.5,
        "seed": lambda: 0, "debug_mode": lambda: 0, "stream_ptr": lambda: 0, "data_ptr": lambda: 0,
        "range_id": lambda: 0, "msg": lambda: "devlint", "val": lambda: True, "enable": lambda: True,
        "duration": lambda: 1, "iterations": lambda: 1, "buffer_size": lambda: 1,
        "new_state": lambda: torch.get_rng_state(), "new_states": lambda: [torch.get_rng_state()],
        "obj": lambda: torch.zeros(1),
        "stream": lambda: first(torch.cuda.Stream, lambda: torch.Stream("cpu")),
        "cuda_graph": lambda: first(torch.cuda.CUDAGraph),
        "pool": lambda: first(torch.cuda.MemPool),
        "allocator": lambda: None,
        "callables": lambda: torch.nn.Linear(2, 2), "sample_args": lambda: (torch.randn(1, 2),),
        "fwd": lambda: (lambda x: x), "bwd": lambda: (lambda x: x),
        "inputs": lambda: [torch.zeros(1)], "outputs": lambda: [torch.zeros(1)], "output": lambda: torch.zeros(1),
        "s": lambda: torch.zeros(1).untyped_storage(),
    }


def _public(torch, module_name):
    """(qualified name, object) for each public callable of the module that calls can raise from:
    not submodules, not exception classes, not names the module imports from outside torch.cuda."""
    import importlib
    import types

    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    out = []
    for name in names:
        obj = getattr(module, name, None)
        if obj is None or isinstance(obj, types.ModuleType) or not callable(obj):
            continue
        if isinstance(obj, type) and issubclass(obj, BaseException):
            continue  # caught, not called
        if _is_legacy_type(torch, obj):
            out.append((f"{module_name}.{name}", obj))
            continue
        defined_in = getattr(obj, "__module__", None) or ""
        if module_name != "torch.cuda" and not defined_in.startswith("torch.cuda"):
            continue  # e.g. typing helpers a submodule imports
        out.append((f"{module_name}.{name}", obj))
    return out


def _is_legacy_type(torch, obj) -> bool:
    return type(obj) is type(torch.FloatTensor)  # torch.tensortype: FloatTensor, LongTensor, ...


def _calls(torch, qualified, obj, arguments):
    """The calls to try: with the required parameters only, and, where there is an optional
    `device` parameter, again with device 0. Raises LookupError when a required parameter has
    no plausible value."""
    import inspect

    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return [((), {})]
    args, kwargs, has_device = [], {}, False
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is not p.empty:
            has_device = has_device or p.name == "device"
            continue
        if p.name not in arguments:
            raise LookupError(f"no plausible value for parameter `{p.name}`")
        value = arguments[p.name]()
        if p.kind == p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    calls = [(tuple(args), kwargs)]
    if has_device:
        calls.append((tuple(args), {**kwargs, "device": 0}))
    return calls


def _normalise(message: str) -> str:
    line = (message.strip().splitlines() or [""])[0]
    return re.sub(r"0x[0-9a-fA-F]+", "0x...", line)[:200]


def _run_one(torch, qualified, obj, arguments) -> dict:
    """Called in the forked child: what calling (and entering) `obj` does."""
    import warnings

    warnings.simplefilter("ignore")
    try:
        calls = _calls(torch, qualified, obj, arguments)
    except LookupError as exc:
        return {"outcome": "not-called", "reason": str(exc)}
    for args, kwargs in calls:
        try:
            result = obj(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 (any failure is the answer)
            return {"outcome": "raises", "type": type(exc).__name__, "message": _normalise(str(exc))}
        if hasattr(result, "__enter__") and hasattr(result, "__exit__") and not isinstance(result, torch.Tensor):
            try:
                result.__enter__()
            except BaseException as exc:  # noqa: BLE001
                return {"outcome": "raises-on-entry", "type": type(exc).__name__, "message": _normalise(str(exc))}
            try:
                result.__exit__(None, None, None)
            except BaseException:  # noqa: BLE001 (leaving is not what is asked)
                pass
    return {"outcome": "works"}


def _in_child(torch, qualified, obj, arguments) -> dict:
    """Fork, call in the child, read its answer through a pipe; kill it after TIMEOUT."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read_end)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            answer = _run_one(torch, qualified, obj, arguments)
            os.write(write_end, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + TIMEOUT
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([read_end], [], [], max(left, 0))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            chunks = [json.dumps({"outcome": "timeout"}).encode()]
            break
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks)
    if not data:
        return {"outcome": "crashes", "status": status}
    return json.loads(data)


def probe() -> dict:
    """Every name's outcome, as a JSON-able dict (run in a process of its own: it imports torch)."""
    import importlib.util

    import torch

    arguments = _arguments(torch)
    results = {}
    for module_name in SUBMODULES:
        for qualified, obj in _public(torch, module_name):
            if qualified in NOT_CALLED:
                results[qualified] = {"outcome": "not-called", "reason": NOT_CALLED[qualified]}
                continue
            results[qualified] = _in_child(torch, qualified, obj, arguments)
            results[qualified]["legacy_type"] = _is_legacy_type(torch, obj)
    return {
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None,
        "cuda_available": torch.cuda.is_available(),
        "nvml": importlib.util.find_spec("pynvml") is not None,
        "results": results,
    }


# --- the table ------------------------------------------------------------------------------------
def derive(python: str = sys.executable, timeout: float = 600) -> dict:
    """Run the probe in a fresh interpreter and turn its answers into the table's fields."""
    done = subprocess.run([python, str(Path(__file__).resolve()), "--probe"], capture_output=True, text=True,
                          timeout=timeout, check=True)
    found = json.loads(done.stdout)
    results = found["results"]
    return {
        "TORCH_VERSION": found["torch"],
        "CUDA_BUILD": found["cuda_build"],
        "CUDA_AVAILABLE": found["cuda_available"],
        "NVML": found["nvml"],
        "RAISES_WITHOUT_CUDA": {n: r["type"] for n, r in sorted(results.items()) if r["outcome"] == "raises"},
        "CONTEXT_MANAGERS": {n: r["type"] for n, r in sorted(results.items()) if r["outcome"] == "raises-on-entry"},
        "MESSAGES": {n: r["message"] for n, r in sorted(results.items()) if "message" in r},
        "WORKS_WITHOUT_CUDA": frozenset(n for n, r in results.items() if r["outcome"] == "works"),
        "LEGACY_TENSOR_TYPES": frozenset(n for n, r in results.items() if r.get("legacy_type")),
        "NOT_CALLED": {n: r.get("reason", r["outcome"]) for n, r in sorted(results.items())
                       if r["outcome"] not in ("raises", "raises-on-entry", "works")},
    }


TABLE_FIELDS = ("RAISES_WITHOUT_CUDA", "CONTEXT_MANAGERS", "MESSAGES", "WORKS_WITHOUT_CUDA",
                "LEGACY_TENSOR_TYPES", "NOT_CALLED")

HEADER = '''"""What each public `torch.cuda` callable does on a machine without CUDA (the CPU build of torch).

Generated by `python bench/cuda_only_api.py`; do not edit by hand. Every public callable of
`torch.cuda` and of the submodules users call was called with plausible arguments (and, for a
context manager, entered) on the CPU build of the torch named below, without nvidia-ml-py.
Arguments that cannot be made without CUDA were given stand-ins: a CPU `torch.Stream` for a
stream, None for a CUDA graph or a memory pool. The NVML readers (`utilization`, `temperature`,
...) raise ModuleNotFoundError without nvidia-ml-py, and an NVML error with it.
"""
'''

COMMENTS = {
    "RAISES_WITHOUT_CUDA": "Raise when called: the exception's type.",
    "CONTEXT_MANAGERS": "Context managers made without error that raise when entered (`with ...:`): the exception's type.",
    "MESSAGES": "The first line of each exception's message.",
    "WORKS_WITHOUT_CUDA": "Called (and entered, for a context manager) without an exception.",
    "LEGACY_TENSOR_TYPES": "The legacy `torch.cuda.*Tensor` types (also in RAISES_WITHOUT_CUDA when calling them raises).",
    "NOT_CALLED": "Not called, and why.",
}


def render(table: dict) -> str:
    out = [HEADER, f"TORCH_VERSION = {json.dumps(table['TORCH_VERSION'])}\n"]
    for name in TABLE_FIELDS:
        value = table[name]
        out.append(f"\n# {COMMENTS[name]}\n")
        if isinstance(value, frozenset):
            items = "".join(f"    {json.dumps(n)},\n" for n in sorted(value))
            out.append(f"{name}: frozenset[str] = frozenset({{\n{items}}})\n" if value else f"{name}: frozenset[str] = frozenset()\n")
        else:
            items = "".join(f"    {json.dumps(k)}: {json.dumps(v)},\n" for k, v in sorted(value.items()))
            out.append(f"{name}: dict[str, str] = {{\n{items}}}\n" if value else f"{name}: dict[str, str] = {{}}\n")
    return "".join(out)


def pinned() -> dict:
    """The table in the pinned module, read without importing devlint."""
    namespace: dict = {}
    exec(compile(MODULE.read_text(encoding="utf-8"), str(MODULE), "exec"), namespace)
    return {name: namespace[name] for name in ("TORCH_VERSION", *TABLE_FIELDS)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help="compare with the pinned module; write nothing")
    parser.add_argument("--output", type=Path, default=MODULE)
    args = parser.parse_args()
    if args.probe:
        json.dump(probe(), sys.stdout)
        return 0
    table = derive()
    if table["CUDA_BUILD"] or table["CUDA_AVAILABLE"]:
        print(f"error: torch {table['TORCH_VERSION']} is a CUDA build; the table is derived on the CPU build",
              file=sys.stderr)
        return 2
    if table["NVML"]:
        print("error: nvidia-ml-py is installed; the table is derived without it", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for kind in table["RAISES_WITHOUT_CUDA"].values():
        counts[kind] = counts.get(kind, 0) + 1
    print(f"torch {table['TORCH_VERSION']}: {len(table['RAISES_WITHOUT_CUDA'])} raise "
          f"({', '.join(f'{k} {n}' for k, n in sorted(counts.items()))}), "
          f"{len(table['CONTEXT_MANAGERS'])} raise on entry, {len(table['WORKS_WITHOUT_CUDA'])} work, "
          f"{len(table['NOT_CALLED'])} not called", file=sys.stderr)
    if args.check:
        old = pinned()
        same = all(old[name] == table[name] for name in TABLE_FIELDS)
        print("the pinned table matches" if same else "the pinned table differs: run python bench/cuda_only_api.py",
              file=sys.stderr)
        return 0 if same else 1
    args.output.write_text(render(table), encoding="utf-8")
    print(args.output, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
