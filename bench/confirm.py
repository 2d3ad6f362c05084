"""Benchmark: `devlint confirm` on a model of about one billion parameters, on the stand-in device.

Writes a model file with one device bug in its forward, runs `devlint confirm` on it as a user
would (a subprocess, process start and torch import included), and prints wall time and the
peak resident memory of the largest process (devlint or its child). Targets: under 10 s and
under 2 GB with no GPU. Usage: python bench/confirm.py [--layers 15] [--width 8192] [--runs 3]

With `--catalog DIR`: runs `devlint confirm` on every `*.py` under DIR, once on the data-less
stand-in (`--values never`) and once on the value stand-in (`--values always`), and prints per
file and in total the wall time and the peak resident memory of the largest process (the child
that imports torch), with the statuses each run gave.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = '''import torch
from torch import nn


class Big(nn.Module):
    def __init__(self, layers={layers}, width={width}):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x + torch.ones(x.shape[-1])
'''


def confirm_once(path: Path, values: str) -> tuple[float, float, float, dict]:
    """Wall time (s), CPU time (s) of devlint and its child, peak memory (MB) of the largest
    process, and status counts of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "devlint", "confirm", "--output-format", "json", "--device", "stand-in",
         "--values", values, path.name],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=path.parent,
    )
    out = proc.stdout.read()
    proc.stdout.close()
    # wait4's usage covers the process and the children it waited for: devlint and its child
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    counts: dict = {}
    try:
        for record in json.loads(out):
            if "confirm" in record:
                counts[record["confirm"]["status"]] = counts.get(record["confirm"]["status"], 0) + 1
    except ValueError:
        counts["no result"] = 1
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, counts


def catalog(root: Path) -> None:
    files = sorted(p for p in root.rglob("*.py") if p.name != "__init__.py")
    width = max([len(str(p.relative_to(root))) for p in files] + [17])
    modes = ("never", "always")
    print(f"{'':<{width}}  {'--values never':^20}  {'--values always':^20}")
    print(f"{'file':<{width}}  " + "  ".join(f"{'wall s':>6} {'cpu s':>6} {'MB':>6}" for _ in modes)
          + "  statuses (never -> always)")
    totals = {values: [0.0, 0.0, 0.0] for values in modes}
    for path in files:
        row = {}
        for values in modes:
            wall, cpu, mb, counts = row[values] = confirm_once(path, values)
            totals[values] = [totals[values][0] + wall, totals[values][1] + cpu, max(totals[values][2], mb)]
        show = lambda counts: ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
        print(f"{str(path.relative_to(root)):<{width}}  "
              + "  ".join(f"{row[v][0]:6.2f} {row[v][1]:6.2f} {row[v][2]:6.0f}" for v in modes)
              + f"  {show(row['never'][3])} -> {show(row['always'][3])}")
    print(f"{'total (MB: peak)':<{width}}  " + "  ".join(f"{totals[v][0]:6.2f} {totals[v][1]:6.2f} {totals[v][2]:6.0f}" for v in modes)
          + f"  {len(files)} files")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=15)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--catalog", type=Path, metavar="DIR",
                        help="compare the data-less and the value stand-in on every *.py under DIR")
    args = parser.parse_args()
    if args.catalog:
        catalog(args.catalog)
        return
    params = args.layers * (args.width * args.width + args.width)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.py"
        path.write_text(MODEL.format(layers=args.layers, width=args.width))
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            result = subprocess.run(
                [sys.executable, "-m", "devlint", "confirm", "--output-format", "json", "--device", "stand-in", str(path)],
                capture_output=True, text=True,
            )
            times.append(time.perf_counter() - start)
            (record,) = json.loads(result.stdout)
            assert record["confirm"]["status"] == "confirmed", record["confirm"]
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"model            {params / 1e9:.2f} B parameters ({params * 4 / 2**30:.1f} GiB in float32 if real)")
    print(f"status           {record['confirm']['status']}: {record['confirm']['message'][:90]}")
    print(f"wall time        median {statistics.median(times):.2f} s over {args.runs} runs (min {min(times):.2f}, max {max(times):.2f})")
    print(f"peak memory      {peak_mb:.0f} MB (largest process)")
    print(f"targets          < 10 s: {'met' if statistics.median(times) < 10 else 'MISSED'}; "
          f"< 2 GB: {'met' if peak_mb < 2048 else 'MISSED'}")


if __name__ == "__main__":
    main()
