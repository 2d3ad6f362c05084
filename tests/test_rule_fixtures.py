from pathlib import Path

import pytest

from expectations import expected_findings, mismatches
from helpers import lint

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.py"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_findings_match_markers(path):
    source = path.read_text(encoding="utf-8")
    problems = mismatches(source, lint(source))
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_every_rule_has_a_fixture_with_findings():
    from devlint.rules import ALL_RULES

    for rule in ALL_RULES:
        source = (Path(__file__).parent / "fixtures" / f"{rule.code}.py").read_text(encoding="utf-8")
        assert any(code == rule.code for _, code, _ in expected_findings(source)), rule.code
