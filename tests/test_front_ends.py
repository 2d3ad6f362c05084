"""One engine, every front end: flake8, pre-commit and the CLI agree on every finding."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devlint.rules import NAMES
from helpers import ROOT, devlint, git, run_hook

FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*.py"))


def flake8(*args, cwd):
    return subprocess.run([sys.executable, "-m", "flake8", *args], cwd=cwd, capture_output=True, text=True)


FLAKE8_LINE = re.compile(r"^(?P<path>.+?):(?P<row>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) (?P<message>.*)$")


def flake8_findings(stdout):
    return sorted(
        (int(m["row"]), int(m["col"]), m["code"], m["message"])
        for m in map(FLAKE8_LINE.match, stdout.splitlines()) if m
    )


# --- flake8 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_flake8_reports_exactly_what_the_cli_reports(path, tmp_path):
    r = flake8("--isolated", "--select=DEV", "--disable-noqa", str(path), cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    records = json.loads(devlint("--isolated", "--output-format", "json", str(path), cwd=tmp_path).stdout)
    # flake8 prints one line per finding, as the text format does: the message, then its evidence
    cli = sorted((x["location"]["row"], x["location"]["column"], x["code"], x["message"] + (
        f" ({'; '.join(r['message'] for r in x['related'])})" if x["related"] else "")) for x in records)
    assert cli  # every fixture has findings
    assert flake8_findings(r.stdout) == cli


def test_flake8_owns_noqa_and_extend_select_keeps_the_defaults(tmp_path):
    (tmp_path / "m.py").write_text("import torch\nx = y.cuda()\nz = w.cuda()  # noqa: DEV001\n")
    r = flake8("--isolated", "--extend-select=DEV", "m.py", cwd=tmp_path)
    codes = [(row, code) for row, _, code, _ in flake8_findings(r.stdout)]
    assert (2, "DEV001") in codes and (3, "DEV001") not in codes
    assert (2, "F821") in codes  # flake8's default checks still run
    r = flake8("--isolated", "--select=DEV", "--disable-noqa", "m.py", cwd=tmp_path)
    assert [(row, code) for row, _, code, _ in flake8_findings(r.stdout)] == [(2, "DEV001"), (3, "DEV001")]


def test_flake8_survives_a_file_libcst_cannot_parse(tmp_path):
    (tmp_path / "bad.py").write_text("import torch\nx = (\n")
    (tmp_path / "good.py").write_text("import torch\nx = y.cuda()\n")
    r = flake8("--isolated", "--select=DEV,E999", "bad.py", "good.py", cwd=tmp_path)
    assert "Traceback" not in r.stderr
    assert re.search(r"^bad\.py:\d+:\d+: E999 ", r.stdout, re.M)
    assert "good.py:2:7: DEV001 " in r.stdout


def test_devlint_settings_apply_under_flake8(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.devlint]\nignore = ["DEV005"]\nper-file-ignores = {"tests/*" = ["DEV001"]}\n')
    (tmp_path / "tests").mkdir()
    source = 'import torch\ndevice = "cuda"\nx = y.cuda()\n'
    (tmp_path / "m.py").write_text(source)
    (tmp_path / "tests" / "t.py").write_text(source)
    (tmp_path / "f.py").write_text("# devlint: noqa: DEV001\n" + source)
    r = flake8("--select=DEV", "m.py", "tests/t.py", "f.py", cwd=tmp_path)
    lines = sorted(line.split(" ")[0] + " " + line.split(" ")[1] for line in r.stdout.splitlines())
    assert lines == ["m.py:3:7: DEV001"]


@pytest.mark.parametrize("config, problem", [
    ('[tool.devlint]\nselectt = ["DEV001"]\n', "unknown key(s) in [tool.devlint]: selectt"),
    ('[tool.devlint\nselect = ["DEV001"]\n', "not valid TOML"),
    ('[tool.devlint]\nignore = ["XYZ9"]\n', "unknown rule selector `XYZ9`"),
])
def test_flake8_reports_a_broken_configuration_once_per_file(tmp_path, config, problem):
    (tmp_path / "pyproject.toml").write_text(config)
    (tmp_path / "m.py").write_text('import torch\nx = y.cuda()\ndevice = "cuda"\n')
    (tmp_path / "clean.py").write_text("x = 1\n")
    r = flake8("--select=DEV", "m.py", "clean.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    lines = sorted(r.stdout.splitlines())
    assert [line.split(": ", 1)[0] for line in lines] == ["clean.py:1:1", "m.py:1:1"]
    for line in lines:
        assert line.split(": ", 1)[1].startswith(
            f"DEV000 invalid devlint configuration, file not checked: {tmp_path / 'pyproject.toml'}")
        assert problem in line
    # the command line refuses the same configuration
    assert devlint("m.py", cwd=tmp_path).returncode == 2


# --- pre-commit ----------------------------------------------------------------------------------

BUGGY = "import torch\n\n\ndef load(model, path):\n    model.load_state_dict(torch.load(path))\n"


def test_pre_commit_check_fails_fix_rewrites_then_check_passes(tmp_path, hooks_repo, home):
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / "m.py").write_text(BUGGY)
    (project / "README.md").write_text("# not python\n")
    git(project, "add", "-A")
    checked = run_hook(hooks_repo, "devlint", "--files", "m.py", cwd=project, home=home)
    assert checked.returncode == 1, checked.stdout
    assert "m.py:5:27: DEV002 [*] `torch.load()` without `map_location`" in checked.stdout
    fixed = run_hook(hooks_repo, "devlint-fix", "--files", "m.py", cwd=project, home=home)
    assert fixed.returncode == 1 and "files were modified by this hook" in fixed.stdout
    assert (project / "m.py").read_text() == BUGGY.replace("torch.load(path)", 'torch.load(path, map_location="cpu")')
    again = run_hook(hooks_repo, "devlint", "--files", "m.py", cwd=project, home=home)
    assert again.returncode == 0 and "devlint" in again.stdout and "Passed" in again.stdout
    # nothing for the hook to check: skipped, success
    irrelevant = run_hook(hooks_repo, "devlint", "--files", "README.md", cwd=project, home=home)
    assert irrelevant.returncode == 0 and "no files to check" in irrelevant.stdout


def test_pre_commit_honours_configured_excludes(tmp_path, hooks_repo, home):
    project = tmp_path / "project"
    (project / "vendor").mkdir(parents=True)
    git(project, "init", "-q")
    (project / "vendor" / "m.py").write_text(BUGGY)
    (project / "pyproject.toml").write_text('[tool.devlint]\nexclude = ["vendor"]\n')
    git(project, "add", "-A")
    r = run_hook(hooks_repo, "devlint", "--files", "vendor/m.py", cwd=project, home=home)
    assert r.returncode == 0, r.stdout
    assert devlint("vendor/m.py", cwd=project).returncode == 1  # named without --force-exclude: checked


def test_hook_manifest():
    import yaml

    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"devlint", "devlint-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"] and hook["require_serial"] is True
    assert "--fix" in hooks["devlint-fix"]["entry"] and "--fix" not in hooks["devlint"]["entry"]


# --- output formats ----------------------------------------------------------------------------

MIXED = 'import torch\nx = y.cuda()\nz = torch.load(p)\ndevice = "cuda"\n'


def test_sarif_structure(tmp_path):
    (tmp_path / "m.py").write_text(MIXED)
    r = devlint("--output-format", "sarif", "m.py", cwd=tmp_path)
    assert r.returncode == 1
    log = json.loads(r.stdout)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == list(NAMES)
    assert all(rule["help"]["text"].startswith(f"# {rule['id']} {rule['name']}") for rule in rules)
    results = run["results"]
    assert [(x["ruleId"], x["locations"][0]["physicalLocation"]["region"]["startLine"]) for x in results] == [
        ("DEV001", 2), ("DEV002", 3), ("DEV005", 4)
    ]
    first = results[1]
    assert rules[first["ruleIndex"]]["id"] == first["ruleId"]
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "m.py"
    assert location["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 15}
    (change,) = first["fixes"][0]["artifactChanges"]
    assert change["replacements"] == [{
        "deletedRegion": {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 18},
        "insertedContent": {"text": 'torch.load(p, map_location=None if torch.cuda.is_available() else "cpu")'},
    }]


def test_github_annotations(tmp_path):
    (tmp_path / "m.py").write_text(MIXED)
    lines = devlint("--output-format", "github", "m.py", cwd=tmp_path).stdout.splitlines()
    assert lines[0] == (
        "::error title=devlint (DEV001),file=m.py,line=2,col=7,endLine=2,endColumn=11::"
        "`.cuda()` hardcodes the CUDA device and fails where there is none; use `.to(device)`"
    )
    assert [line.split(",")[0] for line in lines] == [
        "::error title=devlint (DEV001)", "::error title=devlint (DEV002)", "::error title=devlint (DEV005)"
    ]


def test_json_lines_and_output_file(tmp_path):
    (tmp_path / "m.py").write_text(MIXED)
    r = devlint("--output-format", "json-lines", "-o", "report.jsonl", "m.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    lines = (tmp_path / "report.jsonl").read_text().splitlines()
    assert [json.loads(line)["code"] for line in lines] == ["DEV001", "DEV002", "DEV005"]
    assert json.loads(lines[0]) == json.loads(devlint("--output-format", "json", "m.py", cwd=tmp_path).stdout)[0]


# --- suppression -------------------------------------------------------------------------------

def test_file_level_noqa(tmp_path):
    (tmp_path / "some.py").write_text("# devlint: noqa: DEV001, DEV005\n" + MIXED)
    (tmp_path / "all.py").write_text(MIXED + "# devlint: noqa\n")
    (tmp_path / "inline.py").write_text(MIXED.replace("import torch", "import torch  # devlint: noqa"))
    r = devlint("--output-format", "json", "some.py", "all.py", "inline.py", cwd=tmp_path)
    got = sorted((Path(x["filename"]).name, x["code"]) for x in json.loads(r.stdout))
    # a trailing `# devlint: noqa` is not a file-level directive: it must stand on its own line
    assert got == [("inline.py", "DEV001"), ("inline.py", "DEV002"), ("inline.py", "DEV005"), ("some.py", "DEV002")]


def test_add_noqa_silences_everything_and_merges(tmp_path):
    source = MIXED.replace("z = torch.load(p)", "z = torch.load(p)  # noqa: E501") + "a = b.cuda(); c = d.cuda()  # keep\n"
    (tmp_path / "m.py").write_text(source)
    r = devlint("--add-noqa", "m.py", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, "Added 4 noqa directives.\n")
    assert (tmp_path / "m.py").read_text() == (
        "import torch\nx = y.cuda()  # noqa: DEV001\nz = torch.load(p)  # noqa: DEV002, E501\n"
        'device = "cuda"  # noqa: DEV005\na = b.cuda(); c = d.cuda()  # keep  # noqa: DEV001\n'
    )
    assert devlint("m.py", cwd=tmp_path).returncode == 0


def test_add_noqa_leaves_continuation_lines_alone(tmp_path):
    (tmp_path / "m.py").write_text("import torch\nx = y.cuda() + \\\n    1\n")
    assert devlint("--add-noqa", "m.py", cwd=tmp_path).stderr == "Added 0 noqa directives.\n"


# --- editors: standard input -----------------------------------------------------------------

def test_stdin_with_filename(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.devlint]\nper-file-ignores = {"tests/*" = ["DEV001"]}\n')
    r = devlint("-", "--stdin-filename", "pkg/m.py", cwd=tmp_path, input=MIXED)
    assert r.returncode == 1
    assert r.stdout.splitlines()[0].startswith("pkg/m.py:2:7: DEV001 ")
    r = devlint("-", "--stdin-filename", "tests/m.py", "--output-format", "json", cwd=tmp_path, input=MIXED)
    assert [x["code"] for x in json.loads(r.stdout)] == ["DEV002", "DEV005"]


def test_stdin_fix_prints_the_fixed_code(tmp_path):
    r = devlint("-", "--fix", "--stdin-filename", "m.py", cwd=tmp_path, input=BUGGY)
    assert r.stdout == BUGGY.replace("torch.load(path)", 'torch.load(path, map_location="cpu")')
    assert r.stderr.endswith("Fixed 1 finding, 0 remaining.\n")
