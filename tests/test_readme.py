"""The README's promises: its commands are the ones CI runs, and its sample output is real."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def first_block(language: str) -> str:
    return re.search(rf"```{language}\n(.*?)```", README, re.S).group(1)


def test_readme_opens_with_the_two_setup_commands_and_ci_runs_the_test_one():
    commands = [line for line in first_block("bash").splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert "devlint examples" in commands[0]
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_readme_sample_output_is_what_devlint_prints():
    result = subprocess.run(
        [sys.executable, "-m", "devlint", "examples", "--exit-zero"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout == first_block("text")
