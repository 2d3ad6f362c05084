"""What fixes write: every fixture's fixed text is pinned beside it, the edits a report shows are
the edits `--fix` writes, and fixed code reads as a person would write it.

The pins are diffs from the fixture to its fixed text: `tests/fixtures/fixed/NAME.diff` (safe
fixes) and `NAME.unsafe.diff` (unsafe ones too). After a deliberate change to a fix, rewrite
them with `DEVLINT_PIN_FIXES=1 python -m pytest tests/test_fix_outputs.py` and review them.
"""
import difflib
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from devlint.frontends import output
from devlint.workspace.config import Settings
from devlint.workspace.runner import check_data
from helpers import ROOT, devlint, fixture_target

FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*.py"))
PINNED = ROOT / "tests" / "fixtures" / "fixed"
EXAMPLES = sorted((ROOT / "examples").rglob("*.py"))
MODES = {"safe": "write", "unsafe": "unsafe-write"}


def fixed_text(path: Path, mode: str) -> str:
    settings = Settings(root=path.parent, target_torch_setting=fixture_target(path.read_text(encoding="utf-8")))
    report = check_data(path.read_bytes(), path, settings, fix=MODES[mode])
    assert report.error is None, report.error
    return report.new_data.decode() if report.new_data is not None else path.read_text(encoding="utf-8")


def pinned_path(path: Path, mode: str) -> Path:
    return PINNED / (f"{path.stem}.diff" if mode == "safe" else f"{path.stem}.unsafe.diff")


def fix_diff(path: Path, mode: str) -> str:
    source = path.read_text(encoding="utf-8")
    return "".join(difflib.unified_diff(
        source.splitlines(keepends=True), fixed_text(path, mode).splitlines(keepends=True),
        fromfile=path.name, tofile=f"{path.name} ({mode} fixes)",
    ))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixed_fixture_is_pinned(path, mode):
    diff, pin = fix_diff(path, mode), pinned_path(path, mode)
    if os.environ.get("DEVLINT_PIN_FIXES"):
        pin.parent.mkdir(exist_ok=True)
        pin.write_text(diff, encoding="utf-8")
    assert pin.exists(), f"{pin.name} is missing: run with DEVLINT_PIN_FIXES=1"
    assert diff == pin.read_text(encoding="utf-8")


def test_no_pinned_diff_without_a_fixture():
    fixtures = {p.stem for p in FIXTURES}
    for pin in PINNED.iterdir():
        assert pin.name.split(".")[0] in fixtures and pin.suffix == ".diff", pin.name


# --- the report's edits are the written fix ------------------------------------------------------
def _offset(text: str, row: int, column: int) -> int:
    """Rows count \\n, \\r\\n and \\r line breaks; columns count characters (both 1-based)."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n?|\n", text)]
    return starts[row - 1] + column - 1


def _apply_record_edits(text: str, records: list[dict], unsafe: bool) -> str:
    """What a consumer of the JSON report does: take the applicable fixes, outer ones first,
    skip those overlapping one already taken, apply their edits from the end."""
    spans = []
    for record in records:
        fix = record["fix"]
        if fix is None or (fix["applicability"] == "unsafe" and not unsafe):
            continue
        for edit in fix["edits"]:
            start = _offset(text, edit["location"]["row"], edit["location"]["column"])
            end = _offset(text, edit["end_location"]["row"], edit["end_location"]["column"])
            spans.append((start, end, edit["content"]))
    taken = []
    for start, end, content in sorted(spans, key=lambda s: (s[0], -s[1])):
        if all(end <= s or start >= e for s, e, _ in taken):
            taken.append((start, end, content))
    for start, end, content in sorted(taken, reverse=True):
        text = text[:start] + content + text[end:]
    return text


def _fixed_by_applying_reports(path: Path, unsafe: bool) -> str:
    """Apply the reported edits, check the result again, until no applicable fix is left."""
    text = path.read_text(encoding="utf-8")
    settings = Settings(root=path.parent, target_torch_setting=fixture_target(text))
    for _ in range(10):
        report = check_data(text.encode(), path, settings)
        new_text = _apply_record_edits(text, output.records([report]), unsafe)
        if new_text == text:
            return text
        text = new_text
    raise AssertionError("reported fixes did not settle")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", FIXTURES + EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_reported_edits_are_the_written_fix(path, mode):
    assert _fixed_by_applying_reports(path, unsafe=mode == "unsafe") == fixed_text(path, mode)


def test_reported_multiline_edit_is_indented_as_written(tmp_path):
    source = (
        "import torch\n\n\n"
        "def restore(model, path):\n"
        "    if path:\n"
        "        model.load_state_dict(torch.load(\n"
        "            path,\n"
        "            weights_only=True,\n"
        "        ))\n"
    )
    (tmp_path / "m.py").write_text(source)
    records = json.loads(devlint("--isolated", "--no-cache", "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    (edit,) = records[0]["fix"]["edits"]
    assert edit["content"] == (
        "torch.load(\n"
        "            path,\n"
        "            weights_only=True,\n"
        '            map_location="cpu",\n'
        "        )"
    )
    devlint("--isolated", "--no-cache", "--fix", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_text() == _apply_record_edits(source, records, unsafe=False)


# --- layout: fixed code reads as a person would write it -----------------------------------------
CLOSING_LINE = re.compile(r"^\s*[)\]}]")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", FIXTURES + EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fixed_code_layout(path, mode):
    source, text = path.read_text(encoding="utf-8"), fixed_text(path, mode)
    old_lines = set(source.splitlines())
    added = [line for line in text.splitlines() if line not in old_lines]
    assert not [line for line in added if line != line.rstrip()], "a fix left trailing whitespace"
    # a call closed on a line of its own stays so: no argument is crammed before its bracket
    def closing_lines(text):
        return Counter(line.strip() for line in text.splitlines() if CLOSING_LINE.match(line))

    lost = closing_lines(source) - closing_lines(text)
    crammed = [line for line in added if not CLOSING_LINE.match(line) and any(line.endswith(end) for end in lost)]
    assert not crammed, f"an argument was crammed before a closing bracket: {crammed}"


@pytest.mark.parametrize("call, fixed", [
    ("f(a, b)", "f(a, b, device=d)"),
    ("f(a, b,)", "f(a, b, device=d,)"),
    ("f(\n    a,\n    b,\n)", "f(\n    a,\n    b,\n    device=d,\n)"),
    ("f(\n    a,\n    b\n)", "f(\n    a,\n    b,\n    device=d\n)"),
    ("f(a,\n  b)", "f(a,\n  b,\n  device=d)"),
    ("f(\n    a, b\n)", "f(\n    a, b, device=d\n)"),
    ("f(\n    a,  # one\n    b  # two\n)", "f(\n    a,  # one\n    b,  # two\n    device=d\n)"),
    ("f(\n    a,  # one\n    b,  # two\n)", "f(\n    a,  # one\n    b,  # two\n    device=d,\n)"),
    ("f(a, b  # c\n)", "f(a, b, device=d  # c\n)"),
    ("f(\n    a\n)", "f(\n    a,\n    device=d\n)"),
    ("f(\n    a,\n\n    b,\n)", "f(\n    a,\n\n    b,\n    device=d,\n)"),
    ("f()", "f(device=d)"),
], ids=repr)
def test_added_argument_layout(call, fixed):
    import libcst as cst

    from devlint.core import edits

    new = edits.add_arg(cst.parse_expression(call), edits.keyword_arg("device", cst.Name("d")))
    assert cst.Module([]).code_for_node(new) == fixed
