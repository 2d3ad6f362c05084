"""Benchmark: `devlint confirm` on a model of about one billion parameters, on the stand-in device.

Writes a model file with one device bug in its forward, runs `devlint confirm` on it as a user
would (a subprocess, process start and torch import included), and prints wall time and the
peak resident memory of the largest process (devlint or its child). Targets: under 10 s and
under 2 GB with no GPU. Usage: python bench/confirm.py [--layers 15] [--width 8192] [--runs 3]
"""
from __future__ import annotations

import argparse
import json
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=15)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
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
