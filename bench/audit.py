"""The noise audit: devlint's findings on script-heavy code, joined with verdicts read in context.

For each `bench/audit/<package>.csv` (header `file,line,column,code,verdict,reason`), runs
`python -m devlint --isolated --no-cache --output-format json` on `<scripts>/<package>` with this
interpreter and environment, so another devlint can be audited side by side:

    PYTHONPATH=/path/to/other/src python bench/audit.py

joins findings with verdicts on (file, line, column, code) and prints markdown: a table per rule,
totals per package, every unjudged finding, and with `--gone` the verdicts whose finding no
longer appears. `--json PATH` writes the joined rows. Exits 1 with `--strict` when a finding is
unjudged. Standard library only. Usage: python bench/audit.py [--scripts DIR] [PACKAGE ...]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

AUDIT_DIR = Path(__file__).resolve().parent / "audit"
DEFAULT_SCRIPTS = Path("~/.cache/devlint-scripts/src").expanduser()
HEADER = ["file", "line", "column", "code", "verdict", "reason"]
# An optional last column judges the fix the finding offered (when it offered one): `good`, or
# `wrong` (the fixed code breaks, or the fix changes nothing), with the reason saying why.
FIX_COLUMN = "fix"
FIX_VERDICTS = ("", "good", "wrong")
VERDICTS = ("real", "harmless", "false")
COLUMNS = ("findings", *VERDICTS, "unjudged", "fixes", "wrong fixes")


def read_verdicts(path: Path) -> dict[tuple, dict]:
    """The verdicts of one package, keyed by (file, line, column, code)."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames not in (HEADER, HEADER + [FIX_COLUMN]):
            sys.exit(f"{path}: the header must be {','.join(HEADER)}[,{FIX_COLUMN}]")
        verdicts = {}
        for number, row in enumerate(reader, start=2):
            if row["verdict"] not in VERDICTS:
                sys.exit(f"{path}:{number}: verdict {row['verdict']!r} is not one of {VERDICTS}")
            if row.get(FIX_COLUMN, "") not in FIX_VERDICTS:
                sys.exit(f"{path}:{number}: fix verdict {row[FIX_COLUMN]!r} is not one of {FIX_VERDICTS}")
            key = (row["file"], int(row["line"]), int(row["column"]), row["code"])
            if key in verdicts:
                sys.exit(f"{path}:{number}: a second verdict for {key}")
            verdicts[key] = row
    return verdicts


def run_devlint(package_dir: Path) -> list[dict]:
    """devlint's findings on one package, with paths relative to it."""
    command = [sys.executable, "-m", "devlint", "--isolated", "--no-cache",
               "--output-format", "json", str(package_dir)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):  # 1: there are findings
        sys.exit(f"devlint failed on {package_dir} (exit {done.returncode}):\n{done.stderr}")
    findings = []
    for finding in json.loads(done.stdout):
        finding["file"] = Path(os.path.relpath(finding["filename"], package_dir)).as_posix()
        if finding.get("code"):
            findings.append(finding)
        else:  # a file devlint could not check (it does not parse): no finding to judge
            print(f"not checked: {package_dir.name}/{finding['file']}: {finding.get('message')}", file=sys.stderr)
    return findings


def join(package: str, findings: list[dict], verdicts: dict[tuple, dict]) -> list[dict]:
    """One row per finding (judged or not), then one per verdict whose finding is gone."""
    rows, seen = [], set()
    for finding in findings:
        key = (finding["file"], finding["location"]["row"], finding["location"]["column"],
               finding["code"])
        seen.add(key)
        verdict = verdicts.get(key)
        rows.append(row_of(package, key, finding["message"], verdict,
                           "judged" if verdict else "unjudged", finding.get("fix")))
    for key, verdict in verdicts.items():
        if key not in seen:
            rows.append(row_of(package, key, None, verdict, "gone"))
    return rows


def row_of(package, key, message, verdict, status, fix=None) -> dict:
    file, line, column, code = key
    return {"package": package, "file": file, "line": line, "column": column, "code": code,
            "message": message, "status": status,
            "verdict": verdict["verdict"] if verdict else None,
            "reason": verdict["reason"] if verdict else None,
            "fix": fix["message"] if fix else None,
            # a fix judged `wrong` counts while a fix is still offered
            "fix_verdict": (verdict.get(FIX_COLUMN) or None) if verdict and fix else None}


def count_table(title: str, rows: list[dict], group) -> list[str]:
    """A markdown table of findings by verdict, one line per group and a total."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        if row["status"] == "gone":
            continue
        for name in (group(row), "total"):
            counts[name]["findings"] += 1
            counts[name][row["verdict"] or "unjudged"] += 1
            counts[name]["fixes"] += row.get("fix") is not None
            counts[name]["wrong fixes"] += row.get("fix_verdict") == "wrong"
    lines = [f"| {title} | " + " | ".join(COLUMNS) + " | real / judged | false / judged |",
             "|---|" + "---:|" * (len(COLUMNS) + 2)]
    for name in sorted(counts, key=lambda name: (name == "total", name)):
        count = counts[name]
        judged = sum(count[verdict] for verdict in VERDICTS)
        share = f"{count['real'] / judged:.0%}" if judged else "-"
        false = f"{count['false'] / judged:.0%}" if judged else "-"
        label = f"**{name}**" if name == "total" else name
        lines.append(f"| {label} | " + " | ".join(str(count[c]) for c in COLUMNS)
                     + f" | {share} | {false} |")
    return lines


def location(row: dict) -> str:
    return f"{row['package']}/{row['file']}:{row['line']}:{row['column']} {row['code']}"


def report(rows: list[dict], show_gone: bool) -> list[str]:
    lines = ["## Findings by rule", "", *count_table("rule", rows, lambda row: row["code"]),
             "", "## Findings by package", "",
             *count_table("package", rows, lambda row: row["package"])]
    unjudged = [row for row in rows if row["status"] == "unjudged"]
    lines += ["", f"## Unjudged findings ({len(unjudged)})", ""]
    lines += [f"- {location(row)} {row['message']}" + (f" [fix: {row['fix']}]" if row["fix"] else "")
              for row in unjudged] or ["None."]
    if show_gone:
        gone = [row for row in rows if row["status"] == "gone"]
        lines += ["", f"## Verdicts whose finding is gone ({len(gone)})"]
        for verdict in VERDICTS:
            of_verdict = [row for row in gone if row["verdict"] == verdict]
            if of_verdict:
                lines += ["", f"### {verdict} ({len(of_verdict)})", ""]
                lines += [f"- {location(row)}: {row['reason']}" for row in of_verdict]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*",
                        help="audit only these packages (names of bench/audit/*.csv, no suffix)")
    parser.add_argument("--scripts", type=Path, default=DEFAULT_SCRIPTS,
                        help="the unpacked tree printed by bench/fetch_scripts.sh")
    parser.add_argument("--verdicts", type=Path, default=AUDIT_DIR,
                        help="the folder of <package>.csv verdicts (default: bench/audit); for the "
                             "held-out corpus: bench/heldout/tuning or bench/heldout/held-out, with "
                             "--scripts ~/.cache/devlint-heldout/tuning (or held-out)")
    parser.add_argument("--gone", action="store_true",
                        help="list verdicts whose finding no longer appears")
    parser.add_argument("--json", type=Path, help="write the joined rows to this file")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a finding is unjudged")
    args = parser.parse_args()

    if not args.scripts.is_dir():
        sys.exit(f"{args.scripts} does not exist: run `bash bench/fetch_scripts.sh` first")
    csv_files = sorted(args.verdicts.glob("*.csv"))
    if args.packages:
        csv_files = [path for path in csv_files if path.stem in args.packages]
        missing = set(args.packages) - {path.stem for path in csv_files}
        if missing:
            sys.exit(f"no verdicts in {args.verdicts} for: {', '.join(sorted(missing))}")
    rows = []
    for path in csv_files:
        package_dir = args.scripts / path.stem
        if not package_dir.is_dir():
            sys.exit(f"{package_dir} does not exist: run `bash bench/fetch_scripts.sh` first")
        rows += join(path.stem, run_devlint(package_dir), read_verdicts(path))

    print("\n".join(report(rows, args.gone)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    unjudged = any(row["status"] == "unjudged" for row in rows)
    return 1 if args.strict and unjudged else 0


if __name__ == "__main__":
    sys.exit(main())
