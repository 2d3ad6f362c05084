"""`devlint confirm` measured against the catalog of public device bugs (tests/catalog).

Each catalog file reproduces one public report: the buggy module(s), a `*Fixed` variant, and
beside every line devlint flags, the status real CUDA gives that finding:
`# cuda: confirmed - why` (or `# cuda: DEV003 confirmed, DEV004 benign - why` when several
findings share a line). The expectations follow torch's placement rules on a GPU, not what
devlint reports today, so the agreement measured here is the confirm mode's accuracy.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from conftest import once_per_run
from helpers import ROOT

torch = pytest.importorskip("torch")

CATALOG = Path(__file__).parent / "catalog"
FILES = sorted(CATALOG.glob("*.py"))
STATUSES = {"confirmed", "benign", "not-reproduced", "not-reached", "not-run"}
EXPECTATION = re.compile(r"#\s*cuda:\s*(?P<statuses>[^#]+?)\s+-\s+(?P<reason>\S.*)$")
REPORT_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+")
AGREEMENT = 0.9


@dataclass(frozen=True)
class Expected:
    file: str
    row: int
    code: Optional[str]  # None: every finding on the line
    status: str
    reason: str


def expectations(path: Path) -> list[Expected]:
    out = []
    for row, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = EXPECTATION.search(line)
        if not match:
            continue
        for item in match.group("statuses").split(","):
            words = item.split()
            code, status = (words[0], words[1]) if len(words) == 2 else (None, words[0])
            out.append(Expected(path.name, row, code, status, match.group("reason")))
    return out


def fixed_spans(path: Path) -> list[tuple[int, int]]:
    """Line spans of the fixed variants: classes and functions whose name ends in Fixed/_fixed."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.end_lineno) for node in tree.body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name.lower().endswith(("fixed", "_fixed"))]


def in_fixed(path: Path, row: int) -> bool:
    return any(start <= row <= end for start, end in fixed_spans(path))


def run_confirm(files: list[Path], device: str) -> list[dict]:
    """`devlint confirm` over the catalog, the files split between two processes (one per core)."""
    halves = [files[0::2], files[1::2]]
    procs = [subprocess.Popen([sys.executable, "-m", "devlint", "confirm", "--isolated", "--device", device,
                               "--output-format", "json", *map(str, half)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for half in halves if half]
    records = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode in (0, 1), err
        records += json.loads(out)
    assert not [r for r in records if r["code"] is None], "a catalog file could not be read"
    return records


def compare(records: list[dict]) -> list[tuple[str, int, str, str, str, bool]]:
    """(file, row, code, expected, got, in a fixed variant) for every finding."""
    rows = []
    wanted = {path.name: expectations(path) for path in FILES}
    for record in records:
        name = Path(record["filename"]).name
        row, code = record["location"]["row"], record["code"]
        match = next((e for e in wanted[name] if e.row == row and e.code in (None, code)), None)
        rows.append((name, row, code, match.status if match else "(none)", record["confirm"]["status"],
                     in_fixed(CATALOG / name, row)))
    return sorted(rows)


def table(rows) -> str:
    lines = [f"{'file':46} {'line':>4} {'code':6} {'expected':15} {'got':15}"]
    for name, row, code, expected, got, fixed in rows:
        mark = "" if expected == got else "  <- differs"
        lines.append(f"{name:46} {row:>4} {code:6} {expected:15} {got:15}{' (fixed)' if fixed else ''}{mark}")
    return "\n".join(lines)


# --- the catalog itself (static: no child runs) ----------------------------------------------------
def test_catalog_has_thirty_reports_with_fixed_variants_and_inputs():
    assert len(FILES) >= 30
    for path in FILES:
        source = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(source)) or ""
        assert REPORT_URL.search(doc), f"{path.name}: the docstring cites no public report"
        assert fixed_spans(path), f"{path.name}: no fixed variant"
        assert "def devlint_example_inputs(cls)" in source, f"{path.name}: no inputs hook"


def test_every_finding_has_exactly_one_expectation():
    from devlint.workspace.config import Settings
    from devlint.workspace.linter import Linter

    problems = []
    for path in FILES:
        source = path.read_text(encoding="utf-8")
        found = Linter(Settings(root=ROOT), path).check(source)
        wanted = expectations(path)
        for e in wanted:
            if e.status not in STATUSES:
                problems.append(f"{path.name}:{e.row}: unknown status {e.status!r}")
            if not [f for f in found if f.row == e.row and e.code in (None, f.code)]:
                problems.append(f"{path.name}:{e.row}: an expectation ({e.status}) without a finding")
            if e.status == "confirmed" and in_fixed(path, e.row):
                problems.append(f"{path.name}:{e.row}: a fixed variant expected to break")
        for f in found:
            matches = [e for e in wanted if e.row == f.row and e.code in (None, f.code)]
            if len(matches) != 1:
                problems.append(f"{path.name}:{f.row}: {f.code} has {len(matches)} expectations")
    assert not problems, "\n".join(problems)


def test_every_module_runs_on_the_cpu_with_its_inputs():
    """The reproductions are runnable: each module builds and runs its forward on the CPU with the
    inputs its hook gives, or stops only where it asks for CUDA (which this host may lack)."""
    import importlib.util
    import inspect

    problems = []
    for path in FILES:
        spec = importlib.util.spec_from_file_location(f"catalog_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        classes = [c for c in vars(module).values()
                   if inspect.isclass(c) and issubclass(c, torch.nn.Module) and c.__module__ == module.__name__]
        for cls in classes:
            try:
                model = cls()
                with torch.no_grad():
                    for training in (True, False):
                        model.train(training)
                        model(*module.devlint_example_inputs(cls))
            except AssertionError as exc:
                if "Torch not compiled with CUDA enabled" not in str(exc) or cls.__name__.endswith("Fixed"):
                    problems.append(f"{path.name}::{cls.__name__}: {exc}")
            except Exception as exc:  # noqa: BLE001 - any failure is a broken reproduction
                problems.append(f"{path.name}::{cls.__name__}: {type(exc).__name__}: {exc}")
    assert not problems, "\n".join(problems)


def test_catalog_spans_every_confirmable_rule_and_both_sides():
    statuses = [e for path in FILES for e in expectations(path)]
    assert {"confirmed", "benign", "not-reproduced"} <= {e.status for e in statuses}
    from devlint.workspace.config import Settings
    from devlint.workspace.linter import Linter

    codes = {f.code for path in FILES for f in Linter(Settings(root=ROOT), path).check(path.read_text(encoding="utf-8"))}
    assert {"DEV001", "DEV003", "DEV004", "DEV005", "DEV007", "DEV009", "DEV010", "DEV011", "DEV012"} <= codes


# --- confirm against the expectations ------------------------------------------------------------
@pytest.fixture(scope="session")
def stand_in_rows(tmp_path_factory):
    records = once_per_run(tmp_path_factory, "catalog-stand-in", lambda _: run_confirm(FILES, "stand-in"))
    return compare(records)


def check_agreement(rows) -> None:
    print("\n" + table(rows))
    agree = sum(expected == got for _, _, _, expected, got, _ in rows)
    real = [(expected, got) for _, _, _, expected, got, _ in rows if expected == "confirmed"]
    caught = sum(got == "confirmed" for _, got in real)
    print(f"\nagreement {agree}/{len(rows)} ({agree / len(rows):.0%}); "
          f"real bugs confirmed {caught}/{len(real)} ({caught / len(real):.0%})")
    assert "(none)" not in {expected for _, _, _, expected, _, _ in rows}
    assert agree >= AGREEMENT * len(rows), "agreement with real CUDA below 90%"
    assert caught >= AGREEMENT * len(real), "fewer than 90% of the real bugs confirmed"


def test_fixed_variants_are_never_confirmed(stand_in_rows):
    wrong = [r for r in stand_in_rows if r[5] and r[4] == "confirmed"]
    assert not wrong, table(wrong)


def test_stand_in_agrees_with_real_cuda(stand_in_rows):
    check_agreement(stand_in_rows)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_cuda_agrees_with_the_catalog():
    rows = compare(run_confirm(FILES, "cuda"))
    assert not [r for r in rows if r[5] and r[4] == "confirmed"], table(rows)
    check_agreement(rows)
