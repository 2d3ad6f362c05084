"""The rule docs are the one place a rule's prose and examples live; their examples are tests."""
import subprocess
import sys

import pytest

from devlint import docs
from devlint.engine import check_source
from devlint.rules import ALL_RULES
from expectations import expected_findings, mismatches

REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix")


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_doc_has_title_and_sections(rule):
    doc = docs.rule_doc(rule.code)
    assert doc is not None, f"rules/{rule.code}.md is missing"
    assert doc.splitlines()[0] == f"# {rule.code} {rule.name}"
    sections = docs.sections(doc)
    for heading in REQUIRED_SECTIONS:
        assert sections.get(heading, "").strip(), f"{rule.code}: section '{heading}' is missing or empty"


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_bad_example_gives_exactly_the_marked_findings(rule):
    (example,) = docs.code_blocks(docs.sections(docs.rule_doc(rule.code))["Example"])
    assert any(code == rule.code for _, code, _ in expected_findings(example))
    problems = mismatches(example, check_source(example))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_good_example_is_clean(rule):
    blocks = docs.code_blocks(docs.sections(docs.rule_doc(rule.code))["Use instead"])
    assert blocks
    for block in blocks:
        assert check_source(block) == []
        assert not expected_findings(block)


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
         "from devlint.cli import main; raise SystemExit(main(['rule', 'DEV003']))"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# DEV003 factory-without-device\n")
    assert str(target) in subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); import devlint.docs as d; print(d._doc_dir())"],
        capture_output=True, text=True, cwd=tmp_path,
    ).stdout
