"""The README's promises: its commands are the ones CI runs, and its sample output is real."""
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def first_block(language: str) -> str:
    return re.search(rf"```{language}\n(.*?)```", README, re.S).group(1)


def block_after(marker: str, language: str) -> str:
    """The first `language` block after the text `marker`."""
    return re.search(rf"```{language}\n(.*?)```", README[README.index(marker):], re.S).group(1)


BUGGY = "import torch\n\n\ndef load(model, path):\n    model.load_state_dict(torch.load(path))\n"


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


def test_pre_commit_snippet(tmp_path, hooks_repo, home):
    """The README's .pre-commit-config.yaml, pointed at this working tree instead of the published repo."""
    import yaml

    from helpers import git, pre_commit

    config = yaml.safe_load(block_after("**pre-commit**", "yaml"))
    config["repos"][0]["repo"] = str(hooks_repo)
    config["repos"][0]["rev"] = git(hooks_repo, "rev-parse", "HEAD").stdout.strip()
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (project / "m.py").write_text(BUGGY)
    git(project, "add", "-A")
    r = pre_commit("run", "--all-files", cwd=project, home=home)
    assert r.returncode == 1
    assert re.search(r"^devlint\.+Failed$", r.stdout, re.M) and re.search(r"^devlint \(fix\)\.+Failed$", r.stdout, re.M)
    assert 'map_location="cpu"' in (project / "m.py").read_text()


def test_flake8_snippet(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    (command,) = block_after("**flake8**", "bash").strip().splitlines()
    r = subprocess.run([sys.executable, "-m", *shlex.split(command)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stdout.startswith("./m.py:5:27: DEV002 ")


def test_github_actions_snippet(tmp_path):
    import yaml

    steps = yaml.safe_load(block_after("**GitHub Actions**", "yaml"))
    commands = [line for line in steps[0]["run"].splitlines() if line and not line.startswith("pip install")]
    assert steps[1]["uses"].startswith("github/codeql-action/upload-sarif@")
    (tmp_path / "m.py").write_text(BUGGY)
    results = [
        subprocess.run([sys.executable, "-m", *shlex.split(c)], cwd=tmp_path, capture_output=True, text=True)
        for c in commands
    ]
    assert results[0].returncode == 0  # the report must reach the upload step
    log = json.loads((tmp_path / steps[1]["with"]["sarif_file"]).read_text())
    assert log["runs"][0]["results"][0]["ruleId"] == "DEV002"
    assert results[1].stdout.startswith("::error title=devlint (DEV002),file=m.py,line=5,col=27,")


@pytest.mark.parametrize("with_snippet", [True, False])
def test_ruff_snippet(tmp_path, with_snippet):
    """ruff's unused-noqa fix drops `DEV001` from `# noqa: E501, DEV001` unless DEV is external."""
    if with_snippet:
        (tmp_path / "pyproject.toml").write_text(block_after("**Next to ruff**", "toml"))
    (tmp_path / "m.py").write_text("x = 1  # noqa: E501, DEV001\n")
    subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "RUF100,E501", "--fix", "m.py"],
                   cwd=tmp_path, capture_output=True)
    kept = (tmp_path / "m.py").read_text()
    assert kept == ("x = 1  # noqa: DEV001\n" if with_snippet else "x = 1\n")


def test_confirm_sample_output_is_what_devlint_prints():
    pytest.importorskip("torch")
    block = block_after("## Proving a finding", "text")
    command, expected = block.split("\n", 1)
    assert command == "$ devlint confirm examples/tinyseg/model.py"
    result = subprocess.run([sys.executable, "-m", "devlint", "confirm", "examples/tinyseg/model.py"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.stdout == expected


def test_explain_sample_is_what_devlint_prints():
    block = block_after("lands on the line to change", "text")
    command, expected = block.split("\n", 1)
    assert command == "$ devlint explain traceback.txt"
    result = subprocess.run([sys.executable, "-m", "devlint", "explain", "--isolated", "tests/tracebacks/examples_export.txt"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.stdout == expected
    traceback = (ROOT / "tests" / "tracebacks" / "examples_export.txt").read_text()
    assert block_after("fails like this", "text").splitlines()[-1] == traceback.splitlines()[-1]


def _run_session(block: str, cwd: Path) -> None:
    """Run each `$ devlint ...` line of a README block in `cwd` and compare what it prints
    (standard output, then standard error) with the lines that follow it."""
    steps = re.split(r"^\$ ", block, flags=re.M)[1:]
    assert steps
    for step in steps:
        command, expected = step.split("\n", 1)
        argv = shlex.split(command)
        assert argv[0] == "devlint"
        r = subprocess.run([sys.executable, "-m", "devlint", "--no-cache", *argv[1:]], cwd=cwd, capture_output=True, text=True)
        assert r.stdout + r.stderr == expected, command


def test_baseline_sample_is_what_devlint_prints(tmp_path):
    import shutil

    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns("__pycache__", ".devlint_cache"))
    _run_session(block_after("## Baselines", "text"), examples)
    head = block_after("## Baselines", "json").replace("\n  ", "\n").lstrip()
    assert (examples / "devlint-baseline.json").read_text().startswith(head)
    train = examples / "train.py"
    added = block_after("Then add a function above `parse_args`", "python")
    train.write_text(train.read_text().replace("def parse_args", added + "\n\ndef parse_args", 1))
    _run_session(block_after("Only the new finding is reported", "text"), examples)
    assert 'torch.load(path, map_location="cpu")' in train.read_text()
    assert "    images.to(device)\n" in (examples / "finetune.py").read_text()  # recorded: not fixed
