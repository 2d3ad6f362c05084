"""Jupyter notebooks go everywhere a .py file goes: check, fix, diff, add-noqa, stdin, the cache,
worker processes, directory walks and the pre-commit hooks."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devlint.workspace.notebook import PLACEHOLDER, neutralise
from helpers import ROOT, devlint, git, run_hook

NOTEBOOK = ROOT / "tests" / "notebooks" / "train.ipynb"
DEV001 = "`.cuda()` hardcodes the CUDA device and fails where there is none; use `.to(device)`"
DEV002 = "`torch.load()` without `map_location`: a checkpoint saved on a GPU fails to load on a machine without one"
# What the notebook holds: an import in cell 2 resolves `load_checkpoint` in cell 6; the
# `%%time` cell (3), the raw cell (5), the markdown and the `# noqa` line in cell 6 hold none.
EXPECTED = [
    "nb.ipynb:cell 4:2:23: DEV002 [*] " + DEV002,
    "nb.ipynb:cell 6:4:15: DEV001 " + DEV001,
    "nb.ipynb:cell 6:6:8: DEV002 " + DEV002,
]


def copy(tmp_path: Path, name: str = "nb.ipynb") -> Path:
    target = tmp_path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(NOTEBOOK, target)
    return target


def sources(path: Path) -> dict[int, str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {i: "".join(c["source"]) for i, c in enumerate(cells, 1)}


# --- the IPython syntax a cell may hold -------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "%matplotlib inline", "!pip install -q torch", "! pip install datasets", "x = !ls *.pt", "files, = !ls",
    "%time x = f()", "y = %timeit -o f()", "torch.load?", "torch.load??", "?torch", "%load_ext autoreload",
    "obj.method?", "*int*?",
])
def test_ipython_lines_become_placeholders(line):
    source = f"import torch\n{line}\nz = 1\n"
    neutral, replaced = neutralise(source)
    assert neutral == f"import torch\n{PLACEHOLDER}\nz = 1\n"
    assert replaced == [line]
    compile(neutral, "<cell>", "exec")


@pytest.mark.parametrize("source", [
    "x = (a\n     %b)\n",  # a modulo continuing a bracketed expression
    's = """\n!not a shell escape\n%nor a magic\n"""\n',
    "x = 1  # really?\n",
    "if a != b:\n    pass\n",
    "a[i] %= 3\n",
    "x = y == !z\n",  # not valid Python, not IPython either: left for the parser to report
    "value = 1 \\\n    % 2\n",
])
def test_python_is_left_alone(source):
    assert neutralise(source) == (source, [])


def test_indented_magics_keep_the_block_valid_and_continuations_go_with_their_line():
    source = "for i in range(3):\n    %time f(i)\n!pip install \\\n   torch\nx = 1"
    neutral, replaced = neutralise(source)
    assert neutral == f"for i in range(3):\n    {PLACEHOLDER}\n{PLACEHOLDER}\n{PLACEHOLDER}\nx = 1"
    assert replaced == ["    %time f(i)", "!pip install \\", "   torch"]
    compile(neutral, "<cell>", "exec")


def test_a_cell_magic_takes_the_whole_cell():
    neutral, replaced = neutralise("%%time\nimport torch\nx = torch.load(p)\n")
    assert neutral == f"{PLACEHOLDER}\n" * 3
    assert replaced == ["%%time", "import torch", "x = torch.load(p)"]


# --- checking ------------------------------------------------------------------------------------

def test_findings_are_reported_by_cell(tmp_path):
    copy(tmp_path)
    r = devlint("nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[:3] == EXPECTED
    assert "Found 3 findings." in r.stdout


def test_a_cells_last_expression_is_displayed_not_dropped(tmp_path):
    """DEV010: Jupyter shows the value of a cell's last expression, so `x.cpu()` there is used;
    the same statement before another one in its cell drops the copy."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import torch\nx = torch.ones(3)"),
        nbformat.v4.new_code_cell("x.cpu()"),  # displayed
        nbformat.v4.new_code_cell("x.cpu()\nprint(x)"),  # dropped
        nbformat.v4.new_markdown_cell("x.cpu()"),
        nbformat.v4.new_code_cell("if True:\n    x.cpu()"),  # inside a block: not displayed
        nbformat.v4.new_code_cell("x.cpu(); y = 1"),  # not the cell's last statement
        nbformat.v4.new_code_cell("x.cpu()"),  # the notebook's last cell: displayed
    ]
    (tmp_path / "nb.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
    r = devlint("--select", "DEV010", "--output-format", "json", "nb.ipynb", cwd=tmp_path)
    assert [(x["cell"], x["location"]["row"]) for x in json.loads(r.stdout)] == [(3, 1), (5, 2), (6, 1)]


def test_json_records_name_the_cell_and_rows_inside_it(tmp_path):
    copy(tmp_path)
    records = json.loads(devlint("--output-format", "json", "nb.ipynb", cwd=tmp_path).stdout)
    assert [(x["cell"], x["code"], x["location"], x["end_location"], x["noqa_row"]) for x in records] == [
        (4, "DEV002", {"row": 2, "column": 23}, {"row": 2, "column": 33}, 2),
        (6, "DEV001", {"row": 4, "column": 15}, {"row": 4, "column": 19}, 4),
        (6, "DEV002", {"row": 6, "column": 8}, {"row": 6, "column": 23}, 6),
    ]
    (edit,) = records[0]["fix"]["edits"]  # the fix's edit counts rows inside the cell too
    assert edit["location"]["row"] == 2
    lines = [json.loads(line) for line in devlint("--output-format", "json-lines", "nb.ipynb", cwd=tmp_path).stdout.splitlines()]
    assert [(x["cell"], x["location"]["row"]) for x in lines] == [(4, 2), (6, 4), (6, 6)]


def test_sarif_and_github_name_the_cell(tmp_path):
    copy(tmp_path)
    results = json.loads(devlint("--output-format", "sarif", "nb.ipynb", cwd=tmp_path).stdout)["runs"][0]["results"]
    assert [(r["properties"]["cell"], r["locations"][0]["logicalLocations"][0]["name"],
             r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results] == [
        (4, "cell 4", 2), (6, "cell 6", 4), (6, "cell 6", 6)]
    github = devlint("--output-format", "github", "nb.ipynb", cwd=tmp_path).stdout.splitlines()
    assert github[0] == f"::error title=devlint (DEV002),file=nb.ipynb,line=2,col=23,endLine=2,endColumn=33::cell 4: {DEV002}"


def test_noqa_works_per_line_inside_a_cell(tmp_path):
    path = copy(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('model = model.cuda()\\n"', 'model = model.cuda()  # noqa: DEV001\\n"'), encoding="utf-8")
    r = devlint("nb.ipynb", cwd=tmp_path)
    assert r.stdout.splitlines()[:2] == [EXPECTED[0], EXPECTED[2]]


def test_a_directory_walk_finds_notebooks_and_honours_excludes(tmp_path):
    copy(tmp_path, "project/analysis/nb.ipynb")
    copy(tmp_path, "project/vendor/nb.ipynb")
    copy(tmp_path, "project/analysis/.ipynb_checkpoints/nb-checkpoint.ipynb")
    (tmp_path / "project" / "pyproject.toml").write_text('[tool.devlint]\nexclude = ["vendor"]\n')
    r = devlint(".", cwd=tmp_path / "project")
    assert r.returncode == 1
    assert sorted({line.split(":")[0] for line in r.stdout.splitlines() if ":cell " in line}) == ["analysis/nb.ipynb"]


def test_standard_input_with_a_notebook_name(tmp_path):
    data = NOTEBOOK.read_text(encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "devlint", "-", "--stdin-filename", "nb.ipynb"], cwd=tmp_path,
                       input=data, capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout.splitlines()[:3] == EXPECTED
    fixed = subprocess.run([sys.executable, "-m", "devlint", "-", "--fix", "--stdin-filename", "nb.ipynb"], cwd=tmp_path,
                           input=data, capture_output=True, text=True)
    assert sources_of(fixed.stdout)[4].splitlines()[1] == 'model.load_state_dict(torch.load("weights.pt", map_location="cpu"))'
    assert "Fixed 1 finding, 2 remaining (1 more fixable with --unsafe-fixes)." in fixed.stderr


def sources_of(text: str) -> dict[int, str]:
    return {i: "".join(c["source"]) for i, c in enumerate(json.loads(text)["cells"], 1)}


def test_the_cache_answers_a_notebook_without_parsing_it(tmp_path):
    copy(tmp_path)
    script = ("import sys, devlint.frontends.cli\nrc = devlint.frontends.cli.main(['nb.ipynb'])\n"
              "print(rc, 'libcst' in sys.modules, 'nbformat' in sys.modules)\n")
    runs = [subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True) for _ in range(2)]
    assert [r.stdout.splitlines()[-1] for r in runs] == ["1 True True", "1 False False"]
    assert runs[0].stdout.splitlines()[:3] == runs[1].stdout.splitlines()[:3] == EXPECTED


def test_worker_processes_check_notebooks(tmp_path):
    for i in range(12):  # enough files for the worker pool to start
        copy(tmp_path, f"nb{i:02}.ipynb")
    serial = devlint("-j", "1", "--no-cache", ".", cwd=tmp_path)
    parallel = devlint("-j", "2", "--no-cache", ".", cwd=tmp_path)
    assert parallel.stdout == serial.stdout
    assert parallel.stdout.count(":cell 4:2:23: DEV002") == 12 and "Found 36 findings." in parallel.stdout


# --- fixing --------------------------------------------------------------------------------------

def test_fix_changes_only_the_fixed_source_lines_and_a_second_fix_nothing(tmp_path):
    path = copy(tmp_path)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "notebook")
    original = json.loads(path.read_text(encoding="utf-8"))
    r = devlint("--fix", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1 and "Fixed 2 findings, 1 remaining." in r.stdout
    assert r.stdout.splitlines()[0] == EXPECTED[1]
    diff = git(tmp_path, "diff", "-U0", "nb.ipynb").stdout
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == [
        '-    "model.load_state_dict(torch.load(\\"weights.pt\\"))\\n",',
        '+    "model.load_state_dict(torch.load(\\"weights.pt\\", map_location=\\"cpu\\"))\\n",',
        '-    "last = load_checkpoint(\\"last.pt\\")"',
        '+    "last = load_checkpoint(\\"last.pt\\", map_location=None if torch.cuda.is_available() else \\"cpu\\")"',
    ]
    fixed = json.loads(path.read_text(encoding="utf-8"))
    for before, after in zip(original["cells"], fixed["cells"]):  # outputs, counts, ids, metadata kept
        assert {k: v for k, v in before.items() if k != "source"} == {k: v for k, v in after.items() if k != "source"}
    assert sources(path)[6].splitlines()[:3] == sources(NOTEBOOK)[6].splitlines()[:3]  # magic lines as they were
    data = path.read_bytes()
    again = devlint("--fix", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path)
    assert "Fixed 0 findings, 1 remaining." in again.stdout
    assert path.read_bytes() == data


def test_diff_shows_each_changed_cell_and_writes_nothing(tmp_path):
    path = copy(tmp_path)
    r = devlint("--diff", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1
    assert re.findall(r"^(?:---|\+\+\+) .*$", r.stdout, re.M) == [
        "--- a/nb.ipynb:cell 4", "+++ b/nb.ipynb:cell 4", "--- a/nb.ipynb:cell 6", "+++ b/nb.ipynb:cell 6"]
    assert '+last = load_checkpoint("last.pt", map_location=None if torch.cuda.is_available() else "cpu")' in r.stdout.splitlines()
    assert path.read_bytes() == NOTEBOOK.read_bytes()


def test_a_cell_source_stored_as_one_string_stays_one_string(tmp_path):
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        cell["source"] = "".join(cell["source"])
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert devlint("--fix", "nb.ipynb", cwd=tmp_path).returncode == 1
    fixed = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(fixed["cells"][3]["source"], str) and 'map_location="cpu"' in fixed["cells"][3]["source"]
    notebook["cells"][3]["source"] = fixed["cells"][3]["source"]
    assert path.read_text(encoding="utf-8") == json.dumps(notebook, indent=2, ensure_ascii=False) + "\n"


def test_a_layout_devlint_cannot_reproduce_refuses_the_fix(tmp_path):
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook, indent=1, separators=(", ", ": ")), encoding="utf-8")  # old json's trailing spaces
    data = path.read_bytes()
    r = devlint("--fix", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1
    assert "nb.ipynb:1:1: error: fixes not applied: the notebook's JSON layout" in r.stderr
    assert r.stdout.splitlines()[:3] == EXPECTED  # still reported
    assert path.read_bytes() == data


def test_add_noqa_silences_the_notebook(tmp_path):
    path = copy(tmp_path)
    r = devlint("--add-noqa", "nb.ipynb", cwd=tmp_path)
    assert "Added 3 noqa directives." in r.stderr
    assert sources(path)[4].splitlines()[1].endswith("  # noqa: DEV002")
    assert devlint("nb.ipynb", cwd=tmp_path).returncode == 0


# --- files that are not notebooks ----------------------------------------------------------------

V3 = json.dumps({"metadata": {}, "nbformat": 3, "nbformat_minor": 0,
                 "worksheets": [{"cells": [{"cell_type": "code", "input": "x = y.cuda()", "language": "python",
                                            "outputs": [], "metadata": {}}], "metadata": {}}]})


@pytest.mark.parametrize("content, message", [
    ('{"cells": [', "not a notebook: invalid JSON"),
    (V3, "not an nbformat 4 notebook (nbformat 3)"),
    ('{"cells": [{"cell_type": "code"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "not a valid notebook"),
])
@pytest.mark.parametrize("fix", [False, True])
def test_a_broken_notebook_is_reported_the_run_goes_on_and_nothing_is_written(tmp_path, content, message, fix):
    (tmp_path / "bad.ipynb").write_text(content)
    copy(tmp_path)
    r = devlint(*(["--fix"] if fix else []), "bad.ipynb", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1
    assert f"bad.ipynb:1:1: error: {message}" in r.stderr
    assert "1 file could not be checked." in r.stdout
    assert (tmp_path / "bad.ipynb").read_text() == content
    if fix:
        assert "Fixed 1 finding" in r.stdout
    else:
        assert r.stdout.splitlines()[:3] == EXPECTED


def test_a_cell_that_does_not_parse_is_named(tmp_path):
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    notebook["cells"][3]["source"] = ["x = 1\n", "def broken(:\n"]
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook, indent=1))
    r = devlint("nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1
    assert re.search(r"^nb\.ipynb:cell 4:2:\d+: error: cannot parse", r.stderr, re.M), r.stderr


# --- pre-commit ----------------------------------------------------------------------------------

def test_pre_commit_checks_and_fixes_a_staged_notebook(tmp_path, hooks_repo, home):
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    path = copy(project)
    git(project, "add", "-A")
    checked = run_hook(hooks_repo, "devlint", "--files", "nb.ipynb", cwd=project, home=home)
    assert checked.returncode == 1, checked.stdout
    assert EXPECTED[0] in checked.stdout
    fixed = run_hook(hooks_repo, "devlint-fix", "--files", "nb.ipynb", cwd=project, home=home)
    assert fixed.returncode == 1 and "files were modified by this hook" in fixed.stdout
    assert 'map_location=\\"cpu\\"' in path.read_text(encoding="utf-8")
    git(project, "add", "-A")
    again = run_hook(hooks_repo, "devlint", "--files", "nb.ipynb", cwd=project, home=home)
    assert again.returncode == 1 and EXPECTED[0] not in again.stdout and EXPECTED[1] in again.stdout


def test_a_notebook_in_another_language_is_skipped(tmp_path):
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    notebook["metadata"]["language_info"] = {"name": "R"}
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook, indent=1))
    r = devlint("nb.ipynb", cwd=tmp_path)
    assert r.returncode == 0 and "All checks passed!" in r.stdout


def test_the_docs_notebook_outputs_are_real(tmp_path):
    section = (ROOT / "docs" / "notebooks.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```text\n\$ devlint (.*?)\n(.*?)```", section, re.S)
    assert len(blocks) == 3
    copy(tmp_path, "train.ipynb")
    (tmp_path / "broken.ipynb").write_text('{"cells": [\n')
    for command, shown in blocks:
        r = devlint(*command.split(), cwd=tmp_path)
        for line in shown.splitlines():
            assert line in (r.stdout + r.stderr).splitlines(), (command, line)
        if "--fix" not in command:
            assert shown == r.stdout + ("" if "--diff" not in command else r.stderr)


def test_rows_count_line_breaks_as_python_does(tmp_path):
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    notebook["cells"][3]["source"] = ['s = "a\u2028b\x0cc"\n', 'model.load_state_dict(torch.load("weights.pt"))\n']
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    r = devlint("nb.ipynb", cwd=tmp_path)
    assert r.stdout.splitlines()[:3] == EXPECTED
    assert devlint("--fix", "nb.ipynb", cwd=tmp_path).returncode == 1
    assert sources(tmp_path / "nb.ipynb")[4] == 's = "a\u2028b\x0cc"\nmodel.load_state_dict(torch.load("weights.pt", map_location="cpu"))\n'


def test_confirm_says_it_runs_modules_not_notebooks(tmp_path):
    copy(tmp_path)
    named = devlint("confirm", "nb.ipynb", cwd=tmp_path)
    assert "nb.ipynb:1:1: error: `devlint confirm` runs .py modules, not notebooks" in named.stderr
    walked = devlint("confirm", ".", cwd=tmp_path)  # a walk passes notebooks by
    assert walked.stderr == "" and "No findings to confirm." in walked.stdout


def test_a_notebook_with_windows_line_endings_keeps_them(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_bytes(NOTEBOOK.read_bytes().replace(b"\n", b"\r\n"))
    assert devlint("--fix", "nb.ipynb", cwd=tmp_path).returncode == 1
    expected = (NOTEBOOK.read_bytes().replace(b'torch.load(\\"weights.pt\\")', b'torch.load(\\"weights.pt\\", map_location=\\"cpu\\")')
                .replace(b"\n", b"\r\n"))
    assert path.read_bytes() == expected


def test_a_cell_that_holds_a_line_like_devlints_own_cell_marker(tmp_path):
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    notebook["cells"][3]["source"].insert(0, "# devlint: cell 6\n")
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    r = devlint("nb.ipynb", cwd=tmp_path)
    assert r.stdout.splitlines()[:3] == [EXPECTED[0].replace("cell 4:2:", "cell 4:3:"), *EXPECTED[1:]]
    assert devlint("--fix", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path).stdout.splitlines()[0] == EXPECTED[1]
    assert sources(tmp_path / "nb.ipynb")[4].startswith("# devlint: cell 6\nmodel = nn.Linear(4, 2)\nmodel.load_state_dict(")


def test_writing_back_refuses_an_ipython_line_a_change_moved_or_removed():
    from devlint.workspace import notebook

    nb = notebook.read(NOTEBOOK.read_bytes())
    assert notebook.split(nb, nb.module) == {}
    placeholder = f"{PLACEHOLDER}\nfor step"
    for changed in (nb.module.replace(placeholder, "    " + placeholder),  # re-indented
                    nb.module.replace(placeholder, "for step"),  # removed
                    nb.module.replace("# devlint: cell 6\n", "")):  # cells merged
        with pytest.raises(notebook.NotebookError):
            notebook.split(nb, changed)


def _dev007_positions(tmp_path, cells: list[str]) -> list[str]:
    """Where DEV007 reports in a notebook of these code cells (`nb.ipynb:cell N:ROW:COL:`)."""
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                  for c in cells],
        "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5,
    }
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    r = devlint("nb.ipynb", "--select", "DEV007", cwd=tmp_path)
    return [line.split(" DEV")[0] for line in r.stdout.splitlines() if "DEV007" in line]


def test_cells_are_one_scope_for_placements(tmp_path):
    """A loader built in one cell over tensors moved there yields moved batches in a later cell;
    one over CPU tensors does not."""
    cells = [
        "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
        "X = torch.randn(100, 3).to(device)\ny = torch.randint(0, 2, (100,)).to(device)\n"
        "train_loader = DataLoader(TensorDataset(X, y), batch_size=8)",
        "model = nn.Linear(3, 2).to(device)",
        "%matplotlib inline",
        "for xb, yb in train_loader:\n    loss = nn.functional.cross_entropy(model(xb), yb)",
        "cpu_loader = DataLoader(TensorDataset(torch.randn(10, 3)), batch_size=2)",
        "for (xb,) in cpu_loader:\n    model(xb)",
    ]
    assert _dev007_positions(tmp_path, cells) == ["nb.ipynb:cell 7:2:11:"]


def test_a_function_of_a_later_cell_reads_the_moved_loader_as_the_module_level_left_it(tmp_path):
    """Tensors moved under a CUDA test in one cell, a loader over them in the next, and a function
    that moves its model and reads the global loader in a third: the batches are moved there too.
    A loader the same cells build over CPU tensors still yields CPU batches in the function."""
    cells = [
        "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader, TensorDataset",
        "train_x, train_y = torch.randn(100, 3), torch.randn(100)\n"
        "if torch.cuda.is_available():\n    train_x, train_y = train_x.cuda(), train_y.cuda()",
        "train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=8)\n"
        "cpu_loader = DataLoader(TensorDataset(torch.randn(10, 3)), batch_size=2)",
        "def train(model):\n    if torch.cuda.is_available():\n        model = model.cuda()\n"
        "    for xb, yb in train_loader:\n        model(xb)\n    for (xb,) in cpu_loader:\n        model(xb)",
    ]
    assert _dev007_positions(tmp_path, cells) == ["nb.ipynb:cell 4:7:15:"]
