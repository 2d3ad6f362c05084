"""Speed benchmark: devlint against TorchFix and against the cost of parsing, in one run.

Every figure is a whole process run side by side on the same files with the same job count
(this machine may be noisy: compare the ratios, which share its mood). Peak memory is the
largest resident set of the process and its children (os.wait4). Python may write its
bytecode caches, as on any installation (PYTHONDONTWRITEBYTECODE is dropped), and the cold
and warm runs must report the same findings.

    python bench/bench.py --corpus DIR [--quick] [--jobs N] [--torchfix PATH] [--runs 3]
                          [--baseline SRC]

DIR is the unpacked corpus (the last line printed by the corpus fetch script); --quick keeps
the timm package only. TorchFix runs from PATH (default: `torchfix` on PATH); it is skipped if
absent. TorchFix pins an older libcst, so give it a virtual environment of its own.

--baseline SRC runs another devlint (the `src` folder of a checkout of an earlier version)
beside this one: cold, warm and `--select DEV002` runs alternate between the two, and the
table gives this version's time over the baseline's, with whether their findings agree.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARSE = """
import sys, pathlib, {module}
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    try:
        {call}(path.read_text(encoding="utf-8", errors="replace"))
    except Exception:
        pass
"""


THIS_SOURCE = Path(__file__).resolve().parents[1] / "src"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(THIS_SOURCE)}


def run(command: list[str], cwd: Path | None = None, output: Path | None = None, source: Path | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak MB, exit status) of one whole process; its stdout goes to `output`.
    `source`: the devlint source folder it imports."""
    env = {**ENV, "PYTHONPATH": str(source)} if source is not None else ENV
    with open(output or os.devnull, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    return seconds, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def median_run(command: list[str], runs: int, cwd: Path | None = None, output: Path | None = None) -> tuple[float, float]:
    results = [run(command, cwd, output) for _ in range(runs)]
    return statistics.median(r[0] for r in results), max(r[1] for r in results)


def side_by_side(commands: dict[str, list[str]], baseline: Path, runs: int, tmp: Path) -> list[tuple]:
    """(name, this version's median seconds, the baseline's, same output, this version's peak MB,
    the baseline's) per command; the two versions alternate run by run, so both see the same
    moods of the machine."""
    rows = []
    for name, command in commands.items():
        times: dict[str, list[float]] = {"this": [], "baseline": []}
        peaks: dict[str, float] = {"this": 0.0, "baseline": 0.0}
        outputs = {}
        for _ in range(runs):
            for version, source in (("this", THIS_SOURCE), ("baseline", baseline)):
                cache = tmp / f"cache-{version}"
                full = [c.replace("{cache}", str(cache)) for c in command]
                if "{cache}" in command and not cache.exists():
                    run(full, source=source)  # fill the cache
                outputs[version] = tmp / f"{version}.json"
                seconds, peak, _ = run(full, output=outputs[version], source=source)
                times[version].append(seconds)
                peaks[version] = max(peaks[version], peak)
        same = _findings(outputs["this"]) == _findings(outputs["baseline"])
        rows.append((name, statistics.median(times["this"]), statistics.median(times["baseline"]), same,
                     peaks["this"], peaks["baseline"]))
    return rows


def _findings(output: Path):
    """A run's JSON findings, without each one's `url`, which names the rule doc of the checkout
    that ran (two checkouts' same findings differ there); other output as it is."""
    text = output.read_text(encoding="utf-8")
    try:
        findings = json.loads(text)
    except ValueError:
        return text
    return [{k: v for k, v in f.items() if k != "url"} if isinstance(f, dict) else f for f in findings]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="the timm package only")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--torchfix", default=shutil.which("torchfix"))
    parser.add_argument("--runs", type=int, default=3, help="runs of each command but TorchFix (the median is shown)")
    parser.add_argument("--baseline", type=Path, metavar="SRC", help="the src folder of another devlint to run beside this one")
    args = parser.parse_args()
    if args.baseline and not (args.baseline / "devlint" / "__init__.py").is_file():
        # a missing folder on PYTHONPATH would run this version against itself, unnoticed
        parser.error(f"--baseline {args.baseline}: no devlint package there (give a checkout's `src` folder)")
    corpus = args.corpus
    if args.quick:
        corpus = next(p for p in corpus.iterdir() if p.name.startswith("timm-"))
    files = sorted(corpus.rglob("*.py"))
    py = sys.executable
    devlint = [py, "-m", "devlint", "--isolated", "--output-format", "json", "-j", str(args.jobs)]
    rows: dict[str, tuple[float, float]] = {}

    with tempfile.TemporaryDirectory() as tmp:
        cache, cold_out, warm_out = Path(tmp) / "cache", Path(tmp) / "cold.json", Path(tmp) / "warm.json"
        run([py, "-m", "devlint", "--version"])  # bytecode caches written, as after any install
        rows["devlint, cold (no cache)"] = median_run([*devlint, "--no-cache", str(corpus)], args.runs, output=cold_out)
        run([*devlint, "--cache-dir", str(cache), str(corpus)])  # fill the cache
        rows["devlint, warm (cache, nothing changed)"] = median_run(
            [*devlint, "--cache-dir", str(cache), str(corpus)], args.runs, output=warm_out)
        same_findings = cold_out.read_bytes() == warm_out.read_bytes()
        small = Path(tmp) / "small.py"
        small.write_text("import torch\n\n\ndef load(model, path):\n    model.load_state_dict(torch.load(path))\n")
        rows["devlint --select DEV002, cold"] = median_run([*devlint, "--no-cache", "--select", "DEV002", str(corpus)], args.runs)
        rows["devlint, one small file"] = median_run([py, "-m", "devlint", "--isolated", "--no-cache", str(small)], args.runs)
        rows["flake8 --version"] = median_run([py, "-m", "flake8", "--version"], args.runs)
        rows["serial libcst.parse_module (parse floor)"] = median_run(
            [py, "-c", PARSE.format(module="libcst", call="libcst.parse_module"), str(corpus)], args.runs)
        rows["serial ast.parse"] = median_run([py, "-c", PARSE.format(module="ast", call="ast.parse"), str(corpus)], args.runs)
        if args.torchfix:
            rows[f"TorchFix --select ALL -j {args.jobs}"] = median_run(
                [args.torchfix, "--select", "ALL", "-j", str(args.jobs), str(corpus)], 1, cwd=Path(tmp))
        if args.baseline:
            compared = side_by_side({
                "cold (no cache)": [*devlint, "--no-cache", str(corpus)],
                "warm (cache, nothing changed)": [*devlint, "--cache-dir", "{cache}", str(corpus)],
                "--select DEV002, cold": [*devlint, "--no-cache", "--select", "DEV002", str(corpus)],
            }, args.baseline.resolve(), args.runs, Path(tmp))

    cold = rows["devlint, cold (no cache)"][0]
    print(f"{len(files)} files in {corpus.name}; jobs: {args.jobs}; {os.cpu_count()} cores; Python {sys.version.split()[0]}")
    print(f"{'command':<44} {'seconds':>9} {'cold / this':>12} {'peak MB':>9}")
    for name, (seconds, peak) in rows.items():
        print(f"{name:<44} {seconds:>9.2f} {cold / seconds:>12.3f} {peak:>9.0f}")
    print()
    parse = rows["serial libcst.parse_module (parse floor)"][0]
    ast_parse = rows["serial ast.parse"][0]
    warm = rows["devlint, warm (cache, nothing changed)"][0]
    small = rows["devlint, one small file"][0]
    flake8 = rows["flake8 --version"][0]
    targets = [
        ("cold <= 0.6 x serial libcst parse", cold / parse, 0.6),
        ("cold <= 2 x serial ast.parse (goal)", cold / ast_parse, 2.0),
        ("warm <= 1/50 of cold", warm / cold, 1 / 50),
        ("one small file <= 0.3 s", small, 0.3),
        ("one small file <= 2 x flake8 --version", small / flake8, 2.0),
        ("devlint's peak memory <= 500 MB", max(rows["devlint, cold (no cache)"][1], rows["devlint, warm (cache, nothing changed)"][1]), 500.0),
    ]
    torchfix = next((v[0] for k, v in rows.items() if k.startswith("TorchFix")), None)
    if torchfix is not None:
        targets.insert(0, ("cold <= 1/30 of TorchFix", cold / torchfix, 1 / 30))
    for name, value, limit in targets:
        print(f"{name:<44} {value:>9.3f}  {'met' if value <= limit else 'NOT MET'}")
    print(f"{'cold and warm findings identical':<44} {'yes' if same_findings else 'NO'}")
    print(f"{'--select DEV002 / all rules (cold)':<44} {rows['devlint --select DEV002, cold'][0] / cold:>9.3f}")
    if args.baseline:
        print(f"\nbeside the baseline ({args.baseline}), medians of {args.runs} alternating runs:")
        print(f"{'command':<32} {'this':>8} {'baseline':>9} {'this/base':>10} {'peak MB':>8} {'base MB':>8}  same findings")
        for name, this, base, same, peak, base_peak in compared:
            print(f"{name:<32} {this:>8.2f} {base:>9.2f} {this / base:>10.3f} {peak:>8.0f} {base_peak:>8.0f}  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
