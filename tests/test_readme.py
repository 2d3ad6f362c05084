"""The README's promises: its commands are the ones CI runs, they run as shown, its sample output
is real, and its links lead somewhere. The pages under docs/ are tested in test_docs.py."""
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def first_block(language: str) -> str:
    return re.search(rf"```{language}\n(.*?)```", README, re.S).group(1)


def heading_anchors(markdown: str) -> set:
    """The anchors MkDocs (and GitHub) give a page's headings: `## CUDA guards` -> `cuda-guards`."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", markdown, flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-") for h in headings}


def test_readme_is_short():
    assert len(README.splitlines()) <= 250


def test_readme_opens_with_the_two_setup_commands_and_ci_runs_the_test_one():
    commands = [line for line in first_block("bash").splitlines() if line and not line.startswith("#")]
    assert commands == [
        "python -m pip install . && devlint examples --exit-zero",
        'python -m pip install torch==2.13.0 && python -m pip install -e ".[test]" && python -m pytest -q',
    ]
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_readme_sample_output_is_what_devlint_prints():
    result = subprocess.run(
        [sys.executable, "-m", "devlint", "examples", "--exit-zero"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout == first_block("text")


def _shown_commands() -> list:
    """Every `devlint ...` command the README shows: in its code blocks (comments stripped) and in
    its text."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            commands += [part.strip() for part in command.split("&&") if part.strip().startswith("devlint ")]
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    commands += re.findall(r"`(devlint [^`\s]+ [^`]+)`", prose)  # `devlint explain` alone names a command
    return list(dict.fromkeys(commands))


def test_every_devlint_command_the_readme_shows_runs(tmp_path):
    commands = _shown_commands()
    assert {"devlint examples --exit-zero", "devlint .", "devlint --fix .", "devlint --diff .",
            "devlint rule DEV003", "devlint rule --all"} <= set(commands)
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__", ".devlint_cache"))
    # One copy of the examples for all of them (the cache saves re-checking it); fixes go last.
    for command in sorted(commands, key=lambda c: "--fix" in c):
        cwd = tmp_path if command == "devlint examples --exit-zero" else tmp_path / "examples"
        before = {p: p.read_bytes() for p in cwd.rglob("*.py")}
        r = subprocess.run([sys.executable, "-m", *shlex.split(command)], cwd=cwd, capture_output=True, text=True)
        assert r.stdout and "error" not in r.stderr and "Traceback" not in r.stderr, command
        changed = [p for p, data in before.items() if p.read_bytes() != data]
        if command.startswith("devlint rule") or command == "devlint examples --exit-zero":
            assert r.returncode == 0, command
        else:
            assert r.returncode == 1, command  # the examples' bugs are found, and some have no safe fix
        assert bool(changed) == ("--fix" in command), command
    rule = subprocess.run([sys.executable, "-m", "devlint", "rule", "DEV003"], cwd=ROOT, capture_output=True, text=True)
    assert rule.stdout.rstrip("\n") == (ROOT / "rules" / "DEV003.md").read_text(encoding="utf-8").rstrip("\n")


def test_readme_links_lead_to_files_and_headings_that_exist():
    links = [link for link in LINK.findall(README) if not link.startswith(("http://", "https://"))]
    assert "docs/index.md" in links and "rules/DEV001.md" in links
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), link
        if anchor:
            assert anchor in heading_anchors(target.read_text(encoding="utf-8")), link
    for page in ("command-line", "configuration", "fixes", "notebooks", "editors", "pre-commit-and-ci",
                 "confirm", "explain", "export", "baselines"):
        assert f"docs/{page}.md" in links, page
