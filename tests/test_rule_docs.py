"""The rule docs are the one place a rule's prose and examples live; their examples are tests."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devlint.engine import fixer
from devlint.frontends import docs
from devlint.rules import ALL_RULES
from devlint.workspace.config import Settings
from devlint.workspace.linter import Linter
from expectations import expected_findings, mismatches
from helpers import lint

REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix", "Fixed")
MARKER = re.compile(r"\s*#\s*error:\s*\[[^\]]*\]")
DOC_TARGET = re.compile(r'`target-torch = "(\d+)\.(\d+)"`')  # the target a doc's Fixed example assumes


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_doc_has_title_and_sections(rule):
    doc = docs.rule_doc(rule.code)
    assert doc is not None, f"rules/{rule.code}.md is missing"
    assert doc.splitlines()[0] == f"# {rule.code} {rule.name}"
    sections = docs.sections(doc)
    # a rule with no fix says why in `Fix`, and has no `Fixed` example
    required = REQUIRED_SECTIONS if rule.fixes != "never" else tuple(h for h in REQUIRED_SECTIONS if h != "Fixed")
    for heading in required:
        assert sections.get(heading, "").strip(), f"{rule.code}: section '{heading}' is missing or empty"
    assert ("Fixed" in sections) == (rule.fixes != "never")


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_bad_example_gives_exactly_the_marked_findings(rule):
    (example,) = docs.code_blocks(docs.sections(docs.rule_doc(rule.code))["Example"])
    assert any(code == rule.code for _, code, _ in expected_findings(example))
    problems = mismatches(example, lint(example))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_good_example_is_clean(rule):
    blocks = docs.code_blocks(docs.sections(docs.rule_doc(rule.code))["Use instead"])
    assert blocks
    for block in blocks:
        assert lint(block) == []
        assert not expected_findings(block)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_fixed_example_is_what_the_fix_makes_of_the_bad_one(rule):
    sections = docs.sections(docs.rule_doc(rule.code))
    if rule.fixes == "never":
        (bad,) = docs.code_blocks(sections["Example"])
        assert not [f for f in lint(bad) if f.fix is not None and f.code == rule.code], "a rule with no fix offers one"
        return
    unsafe = "--unsafe-fixes" in sections["Fixed"]
    (bad,) = docs.code_blocks(sections["Example"])
    (fixed,) = docs.code_blocks(sections["Fixed"])
    bad = "\n".join(MARKER.sub("", line) for line in bad.splitlines()) + "\n"
    target = DOC_TARGET.search(sections["Fixed"])
    settings = Settings(root=Path("."), target_torch_setting=(int(target[1]), int(target[2])) if target else None)
    check = Linter(settings, Path("example.py")).check
    result = fixer.fix_text(bad, check, unsafe)
    assert result.problem is None
    assert any(f.code == rule.code for f in result.fixed)
    assert result.text == fixed
    # clean at that fix level: nothing fixable is left, and a second fix changes nothing
    assert not [f for f in check(fixed) if f.fixable(unsafe)]
    assert fixer.fix_text(fixed, check, unsafe).text == fixed


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_fix_line_names_the_applicabilities_the_rule_offers(rule):
    """`**Fix:** sometimes available (safe or unsafe)` must match the fixes made on the fixture."""
    line = docs.rule_doc(rule.code).splitlines()[2]
    assert line == f"**Fix:** {rule.fix_availability()}", "the doc's Fix line must say what the rule class declares"
    folder = Path(__file__).parent / "fixtures"  # the rule's fixture and its own extra ones (`dev002_*.py`)
    paths = [folder / f"{rule.code}.py", *sorted(folder.glob(f"{rule.code.lower()}_*.py"))]
    if rule.fixes == "never":
        assert line == "**Fix:** not available"
        assert not [f for path in paths for f in lint(path.read_text(encoding="utf-8")) if f.code == rule.code and f.fix]
        return
    match = re.fullmatch(r"\*\*Fix:\*\* (always|sometimes) available \((safe|unsafe|safe or unsafe)\)", line)
    assert match, line
    findings = [f for path in paths for f in lint(path.read_text(encoding="utf-8")) if f.code == rule.code]
    offered = {f.fix.applicability for f in findings if f.fix is not None}
    assert offered == set(match.group(2).split(" or "))
    assert (match.group(1) == "always") == all(f.fix is not None for f in findings)


def test_rule_command_prints_the_doc():
    result = subprocess.run(
        [sys.executable, "-m", "devlint", "rule", "DEV003"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout == docs.rule_doc("DEV003") if docs.rule_doc("DEV003").endswith("\n") else docs.rule_doc("DEV003") + "\n"


def test_rule_docs_ship_in_the_wheel(tmp_path):
    """`devlint rule` must work after a plain, non-editable `pip install .`."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(root)],
        check=True, capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("devlint-*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True, capture_output=True,
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); "
         "from devlint.frontends.cli import main; raise SystemExit(main(['rule', 'DEV003']))"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# DEV003 factory-without-device\n")
    assert str(target) in subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); import devlint.frontends.docs as d; print(d._doc_dir())"],
        capture_output=True, text=True, cwd=tmp_path,
    ).stdout
    # A finding's link is the doc in the installed package.
    url = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); "
         "from devlint.frontends.output import rule_url; print(rule_url('DEV003'))"],
        capture_output=True, text=True, cwd=tmp_path,
    ).stdout.strip()
    assert url == (target / "devlint" / "_rules" / "DEV003.md").resolve().as_uri()
    assert (target / "devlint" / "_rules" / "DEV003.md").read_text(encoding="utf-8").startswith("# DEV003 ")
