"""`devlint export` on real CUDA beside the fake CUDA device, on the same modules: the scenarios
of tests/test_export.py and the example project. Needs a GPU for the `cuda` column (without
one it says so and prints the fake run alone).

    python bench/export_devices.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def export(device: str, target: str, cwd: Path) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "devlint", "export", "--device", device, "--output-format", "json",
                           target], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        sys.exit(f"devlint export --device {device} {target} exited {done.returncode}:\n{done.stderr}")
    return json.loads(done.stdout)


def summary(record: dict) -> str:
    rows = ", ".join(f"{loc['row']}{'/' + loc['code'] if loc['code'] else ''}" for loc in record["locations"])
    return f"{record['status']} ({rows})" if rows else record["status"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write both runs' records here")
    args = parser.parse_args()
    from test_export import MODELS  # the scenarios the tests pin on the fake device

    import torch

    has_gpu = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "models.py").write_text(MODELS)
        targets = [("models.py", Path(folder)), ("examples", ROOT)]
        runs = {device: [r for target, cwd in targets for r in export(device, target, cwd)]
                for device in (["fake", "cuda"] if has_gpu else ["fake"])}
    print(f"torch {torch.__version__}; GPU: {torch.cuda.get_device_name() if has_gpu else 'none (cuda column not run)'}")
    print("| class | fake cuda:0 | cuda |")
    print("|---|---|---|")
    for i, record in enumerate(runs["fake"]):
        real = runs["cuda"][i] if "cuda" in runs else None
        print(f"| {record['filename']}::{record['class']} | {summary(record)} | {summary(real) if real else '-'} |")
    if "cuda" in runs:
        same = sum(summary(a) == summary(b) for a, b in zip(runs["fake"], runs["cuda"]))
        print(f"\n{same} of {len(runs['fake'])} classes get the same status and lines on both devices")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
