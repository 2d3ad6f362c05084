"""`devlint export`: whether each nn.Module class of a file exports for a CUDA device, and
which lines stop it. The run happens in a child process (devlint.confirm.export_child), the
only one that imports torch; this side starts it, reads its records, and names the static
finding at each line the run points at."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

STATUSES = ("ready", "fails", "not-run")
# The rules whose findings make a CPU tensor that export keeps, most telling first.
_CAUSES = ("DEV003", "DEV004", "DEV013", "DEV012", "DEV007", "DEV005", "DEV009")


@dataclass
class ExportOptions:
    device: str = "auto"  # auto: the GPU when there is one, fake CUDA otherwise; cuda; fake
    timeout: float = 300.0  # per file
    classes: Optional[dict] = None  # by name: init_kwargs, inputs (`[tool.devlint.confirm.classes.NAME]`)


def export_file(path: Path, display: str, source: str, findings: list, only: Optional[str],
                options: ExportOptions) -> list[dict]:
    """One record per class the file defines (or `only`): {filename, class, status, message,
    device, locations: [{row, column, code, message}]}."""
    job = {"file": str(path), "only": only, "classes": options.classes or {}}
    env = dict(os.environ)
    if options.device == "fake":
        env["CUDA_VISIBLE_DEVICES"] = ""  # torch sees no GPU: the run uses fake CUDA
    with tempfile.TemporaryDirectory(prefix="devlint-export-") as folder:
        out = Path(folder) / "records.jsonl"
        try:
            done = subprocess.run(
                [sys.executable, "-m", "devlint.confirm.export_child", json.dumps(job), str(out)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                env=env, timeout=options.timeout, check=False,
            )
            problem = None if done.returncode == 0 else f"the run stopped with exit status {done.returncode}" + (
                f": {_last_line(done.stderr)}" if _last_line(done.stderr) else "")
        except subprocess.TimeoutExpired:
            problem = f"the run took longer than {options.timeout:g} s (--timeout)"
        lines = _read_records(out)
    header = lines[0] if lines else {}
    if "fatal" in header or not lines:
        message = header.get("fatal") or problem or "the run wrote nothing"
        return [_record(display, only, "not-run", message)]
    records = [_with_codes(record, display, source, findings) for record in lines[1:]]
    decided = {record["class"] for record in records}
    for name in header.get("classes", []):
        if name not in decided:
            records.append(_record(display, name, "not-run", problem or "the run ended before this class"))
    return records


def _read_records(out: Path) -> list[dict]:
    records = []
    try:
        text = out.read_text(encoding="utf-8")
    except OSError:
        return records
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line the run was writing when it stopped
    return records


def _last_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _record(display: str, name: Optional[str], status: str, message: str) -> dict:
    return {"filename": display, "class": name, "status": status, "message": message, "device": "", "locations": []}


def _with_codes(record: dict, display: str, source: str, findings: list) -> dict:
    """The child's record with the file's name, and each location with its column and the code
    of the static finding on its line (which the export confirms), when there is one."""
    lines = source.splitlines()
    locations = []
    for location in record.get("locations", []):
        row = location["row"]
        here = sorted((f for f in findings if f.row == row and location.get("role") == "made"),
                      key=lambda f: _CAUSES.index(f.code) if f.code in _CAUSES else len(_CAUSES))
        text = lines[row - 1] if 0 < row <= len(lines) else ""
        column = here[0].column if here else len(text) - len(text.lstrip()) + 1
        code = here[0].code if here else None
        # a module built there: its weights are what the factories inside torch made
        message = "the module built here makes its weights on the CPU" if code == "DEV013" else location.get("message", "")
        found = {"row": row, "column": column, "code": code, "role": location.get("role", "made"), "message": message}
        if found not in locations:
            locations.append(found)
    return {"filename": display, "class": record.get("class"), "status": record.get("status", "not-run"),
            "message": record.get("message", ""), "device": record.get("device", ""), "locations": locations}


def text_lines(record: dict) -> list[str]:
    """A class's line, then one indented line per location."""
    device = f" ({record['device']})" if record.get("device") else ""
    where = f"{record['filename']}::{record['class']}" if record.get("class") else record["filename"]
    out = [f"{where}: {record['status']}{device}: {record['message']}"]
    for location in record["locations"]:
        code = f"{location['code']} [confirmed] " if location["code"] else ""
        out.append(f"    {record['filename']}:{location['row']}:{location['column']}: {code}{location['message']}")
    return out


def confirmed_by_export(findings: list, verdicts: list, records: list[dict]) -> list:
    """`confirm`'s verdicts, with each finding on a line where an export failed because a CPU
    tensor was made there (a `made` location carrying its code) confirmed by that export."""
    from devlint.confirm import Verdict

    stops = {}  # (row, code) -> why the export failed there
    for record in records:
        if record["status"] != "fails":
            continue
        meets = next((l["row"] for l in record["locations"] if l["role"] == "meets"), None)
        for location in record["locations"]:
            if location["code"] and location["role"] == "made":
                said = f"by export: {record['class']} does not export for {record['device'] or 'CUDA'}: {location['message']}"
                stops.setdefault((location["row"], location["code"]), (said, meets, record["device"] or None))
    out = []
    for finding, verdict in zip(findings, verdicts):
        stop = stops.get((finding.row, finding.code))
        if stop is None:
            out.append(verdict)
        elif verdict.status == "confirmed":
            out.append(Verdict("confirmed", f"{verdict.message}; {stop[0]}", verdict.use_row, verdict.origin_row,
                               verdict.device))
        else:
            out.append(Verdict("confirmed", stop[0], stop[1], finding.row, stop[2]))
    return out
