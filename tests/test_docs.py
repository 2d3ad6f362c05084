"""The pages under docs/: they build with `mkdocs build --strict` (so every link and anchor
resolves), their snippets work and their sample outputs are what devlint prints; and every link a
finding carries leads to a rule doc that exists."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from devlint.rules import NAMES
from helpers import ROOT, devlint, git, pre_commit

DOCS = ROOT / "docs"
BUGGY = "import torch\n\n\ndef load(model, path):\n    model.load_state_dict(torch.load(path))\n"


def page(name: str) -> str:
    return (DOCS / f"{name}.md").read_text(encoding="utf-8")


def block_after(text: str, marker: str, language: str) -> str:
    """The first `language` block after the text `marker`."""
    return re.search(rf"```{language}\n(.*?)```", text[text.index(marker):], re.S).group(1)


def url_path(url: str) -> Path:
    parsed = urlparse(url)
    assert parsed.scheme == "file", url
    return Path(url2pathname(parsed.path))


# --- the site ------------------------------------------------------------------------------------

def test_the_site_builds_with_every_link_resolved(tmp_path):
    site = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # The rule pages are the rule docs themselves, listed with their names on the Rules page.
    rules = (site / "rules" / "index.html").read_text(encoding="utf-8")
    for code, name in NAMES.items():
        assert (site / "rules" / code / "index.html").is_file(), code
        assert f'href="{code}/"' in rules and name in rules, code
    assert "the rule table" not in rules
    # Offline: the theme asks for no web fonts.
    assert not any("fonts.googleapis.com" in p.read_text(encoding="utf-8") for p in site.rglob("*.html"))


def test_every_page_is_linked_from_the_docs_index():
    index = page("index")
    for doc in DOCS.glob("*.md"):
        if doc.stem != "index":
            assert f"]({doc.name})" in index, doc.name


# --- rule links ----------------------------------------------------------------------------------

def test_finding_links_are_rule_docs_that_exist(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY + 'x = y.cuda()\n')
    records = json.loads(devlint("--output-format", "json", "m.py", cwd=tmp_path).stdout)
    assert [r["code"] for r in records] == ["DEV002", "DEV001"]
    for record in records:
        doc = url_path(record["url"])
        assert doc.is_file() and doc.name == f"{record['code']}.md"
        rule = devlint("rule", record["code"], cwd=tmp_path).stdout
        assert rule.rstrip("\n") == doc.read_text(encoding="utf-8").rstrip("\n")
    for rule in json.loads(devlint("rule", "--all", "--output-format", "json", cwd=tmp_path).stdout):
        assert url_path(rule["url"]).read_text(encoding="utf-8") == rule["explanation"]


def test_sarif_carries_each_rules_doc_and_a_help_uri_that_exists(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    r = devlint("--output-format", "sarif", "m.py", cwd=tmp_path)
    log = json.loads(r.stdout)
    assert "github.com/devlint" not in r.stdout  # an address that does not exist
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == list(NAMES)
    for rule in rules:
        doc = url_path(rule["helpUri"]).read_text(encoding="utf-8")
        assert rule["help"]["markdown"] == rule["help"]["text"] == doc
        assert doc.startswith(f"# {rule['id']} {rule['name']}\n") and "## What it does" in doc


# --- pre-commit and CI ---------------------------------------------------------------------------

def test_pre_commit_snippet(tmp_path, hooks_repo, home):
    """The .pre-commit-config.yaml shown, pointed at a committed copy of this working tree."""
    import yaml

    config = yaml.safe_load(block_after(page("pre-commit-and-ci"), "## pre-commit", "yaml"))
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


def test_pre_commit_snippet_pins_a_commit_of_this_history():
    import yaml

    (repo,) = yaml.safe_load(block_after(page("pre-commit-and-ci"), "## pre-commit", "yaml"))["repos"]
    assert re.fullmatch(r"[0-9a-f]{40}", repo["rev"])
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist)")
    assert git(ROOT, "cat-file", "-t", repo["rev"]).stdout.strip() == "commit"
    git(ROOT, "merge-base", "--is-ancestor", repo["rev"], "HEAD")  # raises unless it is in HEAD's history


def test_flake8_snippet(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    (command,) = block_after(page("pre-commit-and-ci"), "## flake8", "bash").strip().splitlines()
    r = subprocess.run([sys.executable, "-m", *shlex.split(command)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stdout.startswith("./m.py:5:27: DEV002 ")


def test_github_actions_snippet(tmp_path):
    import yaml

    steps = yaml.safe_load(block_after(page("pre-commit-and-ci"), "## GitHub Actions", "yaml"))
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
    assert results[1].returncode == 1  # and the job fails on the finding
    assert results[1].stdout.startswith("::error title=devlint (DEV002),file=m.py,line=5,col=27,")


@pytest.mark.parametrize("with_snippet", [True, False])
def test_ruff_snippet(tmp_path, with_snippet):
    """ruff's unused-noqa fix drops `DEV001` from `# noqa: E501, DEV001` unless DEV is external."""
    if with_snippet:
        (tmp_path / "pyproject.toml").write_text(block_after(page("pre-commit-and-ci"), "## Next to ruff", "toml"))
    (tmp_path / "m.py").write_text("x = 1  # noqa: E501, DEV001\n")
    subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "RUF100,E501", "--fix", "m.py"],
                   cwd=tmp_path, capture_output=True)
    kept = (tmp_path / "m.py").read_text()
    assert kept == ("x = 1  # noqa: DEV001\n" if with_snippet else "x = 1\n")


# --- confirm, explain and the export example -----------------------------------------------------

def test_confirm_sample_output_is_what_devlint_prints():
    pytest.importorskip("torch")
    command, expected = block_after(page("confirm"), "# devlint confirm", "text").split("\n", 1)
    assert command == "$ devlint confirm examples/tinyseg/model.py"
    result = subprocess.run([sys.executable, "-m", "devlint", "confirm", "examples/tinyseg/model.py"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.stdout == expected


def test_the_stand_in_is_a_gpu_host_as_the_page_says(tmp_path):
    """On the stand-in, `torch.cuda.is_available()` is true: code under it runs, and a mix there
    is confirmed. The page says so, and never the opposite."""
    pytest.importorskip("torch")
    from helpers import confirm_run, statuses

    text = " ".join(page("confirm").split())
    assert "`torch.cuda.is_available()` is True" in text and "is_available()` is False" not in text
    results, _ = confirm_run(tmp_path, """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, x):
                if torch.cuda.is_available():
                    return self.proj(x) + torch.ones(4)
                return self.proj(x)
    """, "--device", "stand-in")
    assert statuses(results) == [("DEV003", 9, "confirmed")]


def test_explain_sample_is_what_devlint_prints():
    text = page("explain")
    command, expected = block_after(text, "saved as `traceback.txt`", "text").split("\n", 1)
    assert command == "$ devlint explain traceback.txt"
    result = subprocess.run([sys.executable, "-m", "devlint", "explain", "--isolated", "tests/tracebacks/examples_export.txt"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.stdout == expected
    traceback = (ROOT / "tests" / "tracebacks" / "examples_export.txt").read_text()
    shown = block_after(text, "It fails like this", "text").splitlines()
    assert [line for line in shown if line.strip() != "..."] == [
        line for line in traceback.splitlines() if line in shown]


def test_the_export_example_runs_as_written(tmp_path):
    """The commands shown, run as shown: they make the weights, and the export then fails on the
    hardcoded `.cuda()` with the traceback the page shows."""
    torch = pytest.importorskip("torch")
    text = page("explain")
    commands = block_after(text, "## An example", "bash").strip().splitlines()
    assert commands[0] == "cd examples" and commands[-1] == "python export.py --weights tinyseg.pt"
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    cwd = tmp_path / "examples"
    made = subprocess.run([sys.executable, *shlex.split(commands[1])[1:]], cwd=cwd, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert (cwd / "tinyseg.pt").is_file()
    if torch.cuda.is_available():
        pytest.skip("the example shows the failure on a machine without CUDA")
    export = subprocess.run([sys.executable, *shlex.split(commands[2])[1:]], cwd=cwd, capture_output=True, text=True)
    assert export.returncode == 1
    printed = export.stderr[export.stderr.index("Traceback (most recent call last):"):].splitlines()
    shown = block_after(text, "It fails like this", "text").splitlines()
    assert shown[0] == printed[0] and shown[-1] == printed[-1]
    for line in shown[1:-1]:
        if line.strip().startswith('File "'):  # shown relative to the repository, printed as the path ran
            path_and_line = line.strip()[len('File "'):]
            assert any(p.strip().endswith(path_and_line) and p.strip().startswith('File "') for p in printed), line
        elif line.strip() != "...":
            assert line in printed, line


# --- baselines -----------------------------------------------------------------------------------

def _run_session(block: str, cwd: Path) -> None:
    """Run each `$ devlint ...` line of a block in `cwd` and compare what it prints (standard
    output, then standard error) with the lines that follow it."""
    steps = re.split(r"^\$ ", block, flags=re.M)[1:]
    assert steps
    for step in steps:
        command, expected = step.split("\n", 1)
        argv = shlex.split(command)
        assert argv[0] == "devlint"
        r = subprocess.run([sys.executable, "-m", "devlint", "--no-cache", *argv[1:]], cwd=cwd, capture_output=True, text=True)
        assert r.stdout + r.stderr == expected, command


def test_baseline_sample_is_what_devlint_prints(tmp_path):
    text = page("baselines")
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns("__pycache__", ".devlint_cache"))
    _run_session(block_after(text, "## Baselines", "text"), examples)
    head = block_after(text, "## Baselines", "json").replace("\n  ", "\n").lstrip()
    assert (examples / "devlint-baseline.json").read_text().startswith(head)
    train = examples / "train.py"
    added = block_after(text, "Then add a function above `parse_args`", "python")
    train.write_text(train.read_text().replace("def parse_args", added + "\n\ndef parse_args", 1))
    _run_session(block_after(text, "Only the new finding is reported", "text"), examples)
    assert 'torch.load(path, map_location="cpu")' in train.read_text()
    assert "    images.to(device)\n" in (examples / "finetune.py").read_text()  # recorded: not fixed
