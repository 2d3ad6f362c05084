"""Baselines: `--update-baseline` records a project's findings, `--baseline` then reports only new
ones. Run as a user would: the CLI as a subprocess, in temporary projects."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

LOAD = "x = torch.load(p)"  # DEV002 (an unsafe fix)
CUDA = "m = model.cuda()"  # DEV001 (no fix)
HEADER = "import torch\n"
FINDING = re.compile(r"^(?P<path>[^:\s]+):(?P<row>\d+):(?P<col>\d+): (?P<code>DEV\d{3}) ", re.M)


def devlint(*args, cwd: Path, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "devlint", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, input=input)


def findings(stdout: str) -> list[tuple[str, int, str]]:
    return [(m["path"], int(m["row"]), m["code"]) for m in FINDING.finditer(stdout)]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.fixture
def project(tmp_path):
    """A project with a pyproject.toml, four findings in two files, and a baseline of them."""
    write(tmp_path, {
        "pyproject.toml": "[tool.devlint]\n",
        "a.py": HEADER + f"{CUDA}\n{LOAD}\n",
        "pkg/b.py": HEADER + f"{CUDA}\n{CUDA}\n",
    })
    r = devlint("--baseline", "base.json", "--update-baseline", ".", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "")
    assert r.stderr == "Recorded 4 findings in 2 files in base.json.\n"
    return tmp_path


def check(project: Path, *args, input=None) -> subprocess.CompletedProcess:
    return devlint("--baseline", "base.json", "--no-cache", *args, cwd=project, input=input)


def test_the_baseline_file(project):
    text = (project / "base.json").read_text()
    assert text == (
        '{"version": 1, "findings": [\n'
        f'  {{"code": "DEV001", "count": 1, "file": "a.py", "line": "{CUDA}"}},\n'
        f'  {{"code": "DEV002", "count": 1, "file": "a.py", "line": "{LOAD}"}},\n'
        f'  {{"code": "DEV001", "count": 2, "file": "pkg/b.py", "line": "{CUDA}"}}\n'
        ']}\n'
    )
    assert json.loads(text)["version"] == 1


def test_only_known_findings_pass(project):
    r = check(project)
    assert (r.returncode, r.stdout, r.stderr) == (0, "All checks passed!\n4 findings hidden by the baseline.\n", "")


def test_code_moving_around_known_findings_and_one_new_bug(project):
    # Lines inserted above the known findings move them all; a new bug goes in between.
    write(project, {
        "a.py": HEADER + "\n\nimport os\n\n" + f"def f():\n    {CUDA}\n\n{LOAD}\ny = torch.load(q)\n",
        "pkg/b.py": '"""Docs."""\n' + HEADER + f"{CUDA}\n\n\n{CUDA}\n",
    })
    r = check(project)
    assert findings(r.stdout) == [("a.py", 10, "DEV002")]
    assert r.stdout.endswith("Found 1 finding.\n1 fixable with --fix --unsafe-fixes.\n4 findings hidden by the baseline.\n")
    assert r.returncode == 1


def test_a_changed_line_is_new(project):
    write(project, {"a.py": HEADER + f"{CUDA}\nx = torch.load(path)\n"})
    r = check(project)
    assert findings(r.stdout) == [("a.py", 3, "DEV002")]
    assert r.stdout.endswith("3 findings hidden by the baseline.\n")
    assert r.returncode == 1


def test_indentation_alone_does_not_make_a_finding_new(project):
    write(project, {"a.py": HEADER + f"if True:\n    {CUDA}\n    {LOAD}\n"})
    assert check(project).returncode == 0


@pytest.mark.parametrize("copies, reported_rows", [
    (1, []),  # one of the two recorded is gone: nothing to report
    (2, []),
    (3, [4]),  # one more than recorded: the last one is reported
    (4, [4, 5]),
])
def test_counts(project, copies, reported_rows):
    write(project, {"pkg/b.py": HEADER + f"{CUDA}\n" * copies})
    r = check(project)
    assert findings(r.stdout) == [("pkg/b.py", row, "DEV001") for row in reported_rows]
    assert r.returncode == (1 if reported_rows else 0)
    assert f"{2 + min(copies, 2)} findings hidden by the baseline." in r.stdout


def test_a_finding_in_another_file_is_new(project):
    write(project, {"pkg/c.py": HEADER + f"{CUDA}\n"})  # same code, same line text, another file
    r = check(project)
    assert findings(r.stdout) == [("pkg/c.py", 2, "DEV001")]


def test_a_second_update_writes_the_same_bytes(project):
    first = (project / "base.json").read_bytes()
    write(project, {"a.py": "# moved\n" + (project / "a.py").read_text()})
    r = devlint("--baseline", "base.json", "--update-baseline", "--no-cache", ".", cwd=project)
    assert r.returncode == 0
    assert (project / "base.json").read_bytes() == first


def test_update_records_new_findings_and_drops_fixed_ones(project):
    write(project, {"a.py": HEADER + f"{LOAD}\n{LOAD}\n", "pkg/b.py": HEADER})
    r = devlint("--baseline", "base.json", "--update-baseline", "--no-cache", ".", cwd=project)
    assert (r.returncode, r.stderr) == (0, "Recorded 2 findings in 1 file in base.json.\n")
    data = json.loads((project / "base.json").read_text())
    assert data["findings"] == [{"code": "DEV002", "count": 2, "file": "a.py", "line": LOAD}]
    assert check(project).returncode == 0


def test_update_on_part_of_the_project_keeps_the_rest(project):
    write(project, {"pkg/b.py": HEADER + f"{CUDA}\n"})
    (project / "gone.py").write_text("")
    r = devlint("--baseline", "base.json", "--update-baseline", "--no-cache", "pkg", cwd=project)
    assert r.returncode == 0
    files = {(e["file"], e["code"]): e["count"] for e in json.loads((project / "base.json").read_text())["findings"]}
    assert files == {("a.py", "DEV001"): 1, ("a.py", "DEV002"): 1, ("pkg/b.py", "DEV001"): 1}
    (project / "a.py").unlink()  # a deleted file's entries go at the next update
    devlint("--baseline", "base.json", "--update-baseline", "--no-cache", "pkg", cwd=project)
    assert [e["file"] for e in json.loads((project / "base.json").read_text())["findings"]] == ["pkg/b.py"]


def test_update_with_a_narrower_selection_keeps_the_other_codes(project):
    write(project, {"a.py": HEADER + f"{LOAD}\n"})
    devlint("--baseline", "base.json", "--update-baseline", "--select", "DEV001", "--no-cache", ".", cwd=project)
    entries = json.loads((project / "base.json").read_text())["findings"]
    assert [(e["file"], e["code"]) for e in entries] == [("a.py", "DEV002"), ("pkg/b.py", "DEV001")]


def test_update_keeps_the_entries_of_a_file_that_does_not_parse(project):
    before = (project / "base.json").read_bytes()
    write(project, {"a.py": HEADER + f"{CUDA}\n{LOAD}\nbroken = (\n"})
    r = devlint("--baseline", "base.json", "--update-baseline", "--no-cache", ".", cwd=project)
    assert r.returncode == 0
    assert r.stderr.startswith("a.py:4:")
    assert "1 file could not be checked: their recorded findings were kept." in r.stderr
    assert (project / "base.json").read_bytes() == before


def test_config_key_is_relative_to_the_pyproject(project):
    (project / "ci").mkdir()
    (project / "base.json").rename(project / "ci" / "devlint-baseline.json")
    (project / "pyproject.toml").write_text('[tool.devlint]\nbaseline = "ci/devlint-baseline.json"\n')
    write(project, {"a.py": HEADER + f"{CUDA}\n{LOAD}\n{CUDA}\n"})
    r = devlint("--no-cache", "../a.py", cwd=project / "pkg")  # from a subdirectory: the pyproject's directory counts
    assert r.returncode == 1
    assert findings(r.stdout) == [("../a.py", 4, "DEV001")]
    r = devlint("--no-cache", ".", cwd=project / "pkg")
    assert (r.returncode, r.stdout) == (0, "All checks passed!\n2 findings hidden by the baseline.\n")
    r = devlint("--show-settings", cwd=project)
    assert f"baseline: {project / 'ci' / 'devlint-baseline.json'}\n" in r.stdout
    # --update-baseline writes where the configuration says; --isolated ignores it
    write(project, {"pkg/b.py": HEADER})
    assert devlint("--update-baseline", "--no-cache", ".", cwd=project).returncode == 0
    assert "pkg/b.py" not in (project / "ci" / "devlint-baseline.json").read_text()
    assert devlint("--isolated", "--no-cache", ".", cwd=project).returncode == 1


def test_command_line_wins_over_the_config_key(project):
    (project / "pyproject.toml").write_text('[tool.devlint]\nbaseline = "missing.json"\n')
    assert check(project).returncode == 0


def test_missing_baseline_file_is_an_error(project):
    r = devlint("--baseline", "nope.json", ".", cwd=project)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "devlint: error: baseline file not found: nope.json (create it with --update-baseline)\n"
    (project / "pyproject.toml").write_text('[tool.devlint]\nbaseline = "gone.json"\n')
    r = devlint(".", cwd=project)
    assert r.returncode == 2
    assert f"baseline file not found: {project / 'gone.json'}" in r.stderr


@pytest.mark.parametrize("text, error", [
    ("{", "not valid JSON"),
    ("[]", "not a devlint baseline"),
    ('{"version": 9, "findings": []}', "baseline version 9 is not supported"),
    ('{"version": 1, "findings": [{"file": "a.py", "code": "DEV001", "line": "x"}]}', "entry 1 needs"),
])
def test_a_broken_baseline_is_an_error_and_update_does_not_overwrite_it(project, text, error):
    (project / "base.json").write_text(text)
    for extra in ([], ["--update-baseline"]):
        r = check(project, *extra, ".")
        assert (r.returncode, r.stdout) == (2, "")
        assert r.stderr.startswith("devlint: error: base.json: ") and error in r.stderr
        assert (project / "base.json").read_text() == text


@pytest.mark.parametrize("args, error", [
    (["--update-baseline"], "--update-baseline needs a baseline file"),
    (["--baseline", "base.json", "--update-baseline", "--fix"], "takes no --fix"),
    (["--baseline", "sub/dir/base.json", "--update-baseline"], "no directory sub/dir"),
])
def test_update_usage_errors(project, args, error):
    before = (project / "base.json").read_bytes()
    r = devlint(*args, ".", cwd=project)
    assert r.returncode == 2 and error in r.stderr
    assert (project / "base.json").read_bytes() == before


def test_update_with_a_missing_path_writes_nothing(project):
    before = (project / "base.json").read_bytes()
    write(project, {"a.py": HEADER})
    r = check(project, "--update-baseline", "a.py", "nope.py")
    assert r.returncode == 2
    assert "nope.py:1:1: error: No such file or directory" in r.stderr
    assert (project / "base.json").read_bytes() == before


def test_json_output(project):
    write(project, {"a.py": HEADER + f"{CUDA}\n{LOAD}\n{CUDA}\n"})
    r = check(project, "--output-format", "json")
    assert r.returncode == 1
    (record,) = json.loads(r.stdout)
    assert (record["code"], record["location"]["row"]) == ("DEV001", 4)
    assert record["filename"] == str((project / "a.py").resolve())
    assert r.stderr == "4 findings hidden by the baseline.\n"


@pytest.mark.parametrize("fmt", ["json-lines", "sarif", "github"])
def test_other_formats(project, fmt):
    write(project, {"a.py": HEADER + f"{CUDA}\n{LOAD}\n{CUDA}\n"})
    r = check(project, "--output-format", fmt)
    assert r.returncode == 1
    if fmt == "json-lines":
        rows = [json.loads(line)["location"]["row"] for line in r.stdout.splitlines()]
    elif fmt == "sarif":
        rows = [res["locations"][0]["physicalLocation"]["region"]["startLine"] for res in json.loads(r.stdout)["runs"][0]["results"]]
    else:
        rows = [int(m) for m in re.findall(r",line=(\d+),", r.stdout)]
    assert rows == [4]


def test_statistics(project):
    write(project, {"a.py": HEADER + f"{CUDA}\n{LOAD}\n{CUDA}\n{LOAD}\n"})
    r = check(project, "--statistics")
    assert r.stdout == ("1\tDEV001\thardcoded-cuda-call\n1\tDEV002\tload-without-map-location\n"
                        "Found 2 findings.\n1 fixable with --fix --unsafe-fixes.\n4 findings hidden by the baseline.\n")


def test_fix_leaves_baselined_findings_alone(project):
    write(project, {"a.py": HEADER + f"{CUDA}\n{LOAD}\ny = torch.load(q)\n"})
    r = check(project, "--diff", "--unsafe-fixes")
    assert r.returncode == 1
    assert '-y = torch.load(q)\n+y = torch.load(q, map_location=None if torch.cuda.is_available() else "cpu")\n' in r.stdout
    assert LOAD not in r.stdout.replace(f" {LOAD}\n", "")  # the baselined load stays context at most
    r = check(project, "--fix", "--unsafe-fixes")
    assert (project / "a.py").read_text() == HEADER + f'{CUDA}\n{LOAD}\ny = torch.load(q, map_location=None if torch.cuda.is_available() else "cpu")\n'
    assert r.stdout == "Fixed 1 finding, 0 remaining.\n4 findings hidden by the baseline.\n"
    assert r.returncode == 0


def test_stdin_filename(project):
    text = HEADER + f"{CUDA}\n{LOAD}\n{CUDA}\n"
    r = check(project, "-", "--stdin-filename", "a.py", input=text)
    assert findings(r.stdout) == [("a.py", 4, "DEV001")]
    assert r.stdout.endswith("2 findings hidden by the baseline.\n")
    r = check(project, "-", "--stdin-filename", "a.py", "--fix", "--unsafe-fixes", input=text + "y = torch.load(q)\n")
    assert r.stdout == text + 'y = torch.load(q, map_location=None if torch.cuda.is_available() else "cpu")\n'  # the baselined load is not fixed
    assert "2 findings hidden by the baseline." in r.stderr
    r = check(project, "-", "--stdin-filename", "other.py", input=text)  # recorded for a.py, not other.py
    assert len(findings(r.stdout)) == 3


def test_many_files_in_parallel_and_from_the_cache(tmp_path):
    files = {f"pkg/m{i:02}.py": HEADER + f"{CUDA}\n" * (1 + i % 3) for i in range(30)}
    write(tmp_path, {"pyproject.toml": "[tool.devlint]\n", **files})
    assert devlint("--baseline", "base.json", "--update-baseline", "-j", "4", ".", cwd=tmp_path).returncode == 0
    write(tmp_path, {"pkg/m07.py": "\n\n" + files["pkg/m07.py"] + f"{CUDA}\n"})
    expected = [("pkg/m07.py", 6, "DEV001")]
    runs = [devlint("--baseline", "base.json", "-j", "4", ".", cwd=tmp_path) for _ in range(2)]  # the second from the cache
    runs.append(devlint("--baseline", "base.json", "-j", "1", "--no-cache", ".", cwd=tmp_path))
    for r in runs:
        assert findings(r.stdout) == expected
        assert r.stdout.endswith("60 findings hidden by the baseline.\n")
    assert any((tmp_path / ".devlint_cache").rglob("*.json"))


def test_add_noqa_skips_baselined_findings(project):
    write(project, {"a.py": HEADER + f"{CUDA}\n{LOAD}\n{CUDA}\n"})
    r = check(project, "--add-noqa")
    assert (r.returncode, r.stderr) == (0, "Added 1 noqa directive.\n")
    assert (project / "a.py").read_text() == HEADER + f"{CUDA}\n{LOAD}\n{CUDA}  # noqa: DEV001\n"


def test_pre_commit_with_the_configured_baseline(tmp_path, hooks_repo, home):
    """The hooks name the staged files; `baseline` in [tool.devlint] hides what it records there too."""
    from helpers import git, run_hook

    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    write(project, {"pyproject.toml": '[tool.devlint]\nbaseline = "devlint-baseline.json"\n',
                    "m.py": HEADER + f"{CUDA}\n{LOAD}\n"})
    assert devlint("--update-baseline", ".", cwd=project).returncode == 0
    git(project, "add", "-A")

    def hook(name):
        return run_hook(hooks_repo, name, "--files", "m.py", cwd=project, home=home)

    r = hook("devlint")
    assert r.returncode == 0, r.stdout
    write(project, {"m.py": HEADER + f"\n{CUDA}\n{LOAD}\nmodel.load_state_dict(torch.load(q))\n"})  # a safe fix
    git(project, "add", "-A")
    r = hook("devlint")
    assert r.returncode == 1
    assert findings(r.stdout) == [("m.py", 5, "DEV002")]
    r = hook("devlint-fix")
    assert r.returncode == 1 and "files were modified by this hook" in r.stdout
    assert (project / "m.py").read_text() == HEADER + f'\n{CUDA}\n{LOAD}\nmodel.load_state_dict(torch.load(q, map_location="cpu"))\n'
    git(project, "add", "-A")
    assert hook("devlint").returncode == 0


@pytest.mark.parametrize("value", ["3", '""', "[\"a.json\"]"])
def test_the_config_key_must_name_a_file(project, value):
    (project / "pyproject.toml").write_text(f"[tool.devlint]\nbaseline = {value}\n")
    r = devlint(".", cwd=project)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"devlint: error: {project / 'pyproject.toml'} [tool.devlint]: `baseline` must be a file name (a string)\n"


# --- notebooks: lines are matched by their text in their cell -------------------------------------

def notebook(*cells: tuple[str, str]) -> str:
    """A notebook's JSON, as Jupyter writes it, of (cell type, source) pairs."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
                for kind, source in cells]
    return nbformat.writes(nb) + "\n"


HIDDEN_3 = "All checks passed!\n3 findings hidden by the baseline.\n"
NB_CELLS = [("code", "import torch\n%matplotlib inline"), ("markdown", "# Training"),
            ("code", f"{CUDA}\n{LOAD}"), ("code", f"def f(model):\n    {CUDA}")]


@pytest.fixture
def nb_project(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.devlint]\n", "nb.ipynb": notebook(*NB_CELLS)})
    r = devlint("--baseline", "base.json", "--update-baseline", ".", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "Recorded 3 findings in 1 file in base.json.\n")
    return tmp_path


def test_a_notebook_baseline_records_the_lines_of_its_cells(nb_project):
    entries = json.loads((nb_project / "base.json").read_text())["findings"]
    assert entries == [
        {"code": "DEV001", "count": 2, "file": "nb.ipynb", "line": CUDA},
        {"code": "DEV002", "count": 1, "file": "nb.ipynb", "line": LOAD},
    ]
    r = check(nb_project, ".")
    assert (r.returncode, r.stdout) == (0, HIDDEN_3)


def test_a_notebook_with_a_cell_inserted_above_and_one_new_bug(nb_project):
    cells = [("code", "import numpy as np\n\nz = np.zeros(3)"), *NB_CELLS]
    cells[3] = ("code", f"\n{CUDA}\n\n{LOAD}")  # the known lines move down inside their cell too
    write(nb_project, {"nb.ipynb": notebook(*cells, ("code", "y = torch.load(q)"))})
    r = check(nb_project, ".", "--output-format", "json")
    assert r.returncode == 1, r.stderr
    records = json.loads(r.stdout)
    assert [(x["cell"], x["location"]["row"], x["code"]) for x in records] == [(6, 1, "DEV002")]
    write(nb_project, {"nb.ipynb": notebook(*cells)})  # only the known ones
    r = check(nb_project, ".")
    assert (r.returncode, r.stdout) == (0, HIDDEN_3)


def test_fix_on_a_notebook_leaves_baselined_findings_alone(nb_project):
    cells = [*NB_CELLS, ("code", "w = torch.load(q)")]
    write(nb_project, {"nb.ipynb": notebook(*cells)})
    r = check(nb_project, "--fix", "--unsafe-fixes", ".")
    assert r.returncode == 0, (r.stdout, r.stderr)
    saved = json.loads((nb_project / "nb.ipynb").read_text())["cells"]
    assert ["".join(c["source"]) for c in saved] == [
        *(source for _, source in NB_CELLS), 'w = torch.load(q, map_location=None if torch.cuda.is_available() else "cpu")']
    r = check(nb_project, ".")
    assert (r.returncode, r.stdout) == (0, HIDDEN_3)


def test_add_noqa_on_a_notebook_skips_baselined_findings(nb_project):
    write(nb_project, {"nb.ipynb": notebook(*NB_CELLS, ("code", CUDA))})
    r = check(nb_project, "--add-noqa", ".")
    assert (r.returncode, r.stderr) == (0, "Added 1 noqa directive.\n")
    saved = json.loads((nb_project / "nb.ipynb").read_text())["cells"]
    assert ["".join(c["source"]) for c in saved][-1] == f"{CUDA}  # noqa: DEV001"
    assert ["".join(c["source"]) for c in saved][:-1] == [source for _, source in NB_CELLS]
