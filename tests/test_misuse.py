"""Misuse fails loudly and exactly, and the options ruff users reach for (--show-fixes, --color,
-q/-s), each run as a user runs it: `devlint` in a subprocess, in a small project of its own."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import urllib.parse
from pathlib import Path

import pytest

from devlint.frontends.output import rule_url
from helpers import devlint

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="confirm runs modules with torch")

LOADS = "import torch\n\na = torch.load(p)\nb = torch.load(q)\nm = model.cuda()\n"  # DEV002 x2, DEV001
STATS = ('import torch\n\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\nDEVICE = "cuda:0"\n'
         'train_device = "cuda"\neval_device = "cuda"\n'
         "a = torch.load(p)\nb = torch.load(q)\nm = model.cuda()\n")  # DEV005 x3, DEV002 x2, DEV001
BROKEN = "import torch\n\nx = (\n"
ESC = "\x1b["


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))


def plain_env(**extra: str) -> dict:
    """This environment without the colour variables a CI machine may set, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    return {**env, **extra}


def run(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """devlint as a user runs it, without the colour variables of this environment."""
    return devlint(*args, cwd=cwd, env=env if env is not None else plain_env())


# --- a closed pipe: quiet, exit 1 ------------------------------------------------------------------

def test_a_reader_that_stops_after_one_line_gets_no_traceback(tmp_path):
    """`devlint check . | head -1`: far more than a pipe holds, so devlint is still writing."""
    (tmp_path / "many.py").write_text("import torch\n\n" + "".join(f"a{i} = b.cuda()\n" for i in range(3000)))
    proc = subprocess.Popen([sys.executable, "-m", "devlint", "check", "--no-cache", "many.py"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=plain_env())
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait() == 1
    assert first.startswith("many.py:3:")
    assert err == ""


@pytest.mark.parametrize("args", [
    ["rule", "--all"],
    ["rule", "DEV001"],
    ["check", "--statistics", "m.py"],
    ["check", "--output-format", "json", "m.py"],
    ["explain", "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"],
], ids=["rule-all", "rule", "statistics", "json", "explain"])
def test_a_pipe_closed_before_the_first_write_is_a_quiet_exit_1(tmp_path, args):
    (tmp_path / "m.py").write_text(LOADS)
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: the first write meets a closed pipe
    try:
        proc = subprocess.run([sys.executable, "-m", "devlint", *args], cwd=tmp_path, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env=plain_env())
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (1, "")


# --- --diff: 1 when a diff is pending, 2 when a file could not be checked ------------------------

def test_diff_exits_2_when_a_file_does_not_parse(tmp_path):
    write(tmp_path, {"bad.py": BROKEN, "good.py": LOADS})
    r = run("--diff", "--unsafe-fixes", "bad.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.splitlines() == [
        "bad.py:3:5: error: cannot parse: '(' was never closed",
        "No fixes available.",
        "1 file could not be checked.",
    ]
    r = run("--diff", "--unsafe-fixes", "bad.py", "good.py", cwd=tmp_path)
    assert r.returncode == 2
    assert '+a = torch.load(p, map_location=None if torch.cuda.is_available() else "cpu")\n' in r.stdout  # the other file's diff is still shown
    assert r.stderr.endswith("Would fix 2 findings.\n1 file could not be checked.\n")
    assert run("--diff", "--unsafe-fixes", "good.py", cwd=tmp_path).returncode == 1


# --- confirm: the class, the device, the option values, torch itself ------------------------------

TWO_CLASSES = """\
    import torch
    from torch import nn


    class A(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Linear(4, 4)
            self.s = torch.ones(4)

        def forward(self, x):
            return self.p(x) * self.s


    class B(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Linear(4, 4)
            self.s = torch.ones(4)

        def forward(self, x):
            return self.p(x) * self.s + torch.arange(4)
"""


@needs_torch
def test_confirm_an_unknown_class_exits_2_naming_it_and_the_classes_there(tmp_path):
    write(tmp_path, {"model.py": TWO_CLASSES, "pkg/m.py": TWO_CLASSES})
    r = run("confirm", "model.py::Nope", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "devlint confirm: error: no class named Nope in model.py (its classes: A, B)\n"
    r = run("confirm", "pkg::Nope", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "devlint confirm: error: no class named Nope in pkg (its classes: A, B)\n"


@needs_torch
def test_confirm_a_class_that_is_not_a_module_exits_2(tmp_path):
    """Nothing of a plain class runs: naming one is a usage error, not a report of `not-run`s. A
    class over an imported base of unknown kind is left to the run, which sees what it is."""
    write(tmp_path, {"model.py": TWO_CLASSES + """

    class Helper:
        def make(self):
            return torch.ones(3).cuda()


    class Loader(torch.utils.data.Dataset):
        def __getitem__(self, i):
            return torch.ones(3).cuda()


    class Head(ProjectBase):
        def make(self):
            return torch.ones(3).cuda()
    """})
    for name in ("Helper", "Loader"):
        r = run("confirm", f"model.py::{name}", cwd=tmp_path)
        assert (r.returncode, r.stdout) == (2, "")
        assert r.stderr == (f"devlint confirm: error: {name} in model.py is not an nn.Module class, so confirm has "
                            "nothing of it to run (the classes it can run: A, B, Head)\n")
    r = run("confirm", "model.py::Head", cwd=tmp_path)  # `ProjectBase` is not defined: the run says so
    assert r.returncode in (0, 1) and "not an nn.Module class" not in r.stderr


@needs_torch
def test_confirm_classes_left_out_by_the_selection_are_not_selected(tmp_path):
    write(tmp_path, {"model.py": TWO_CLASSES, "other.py": """\
        import torch
        from torch import nn


        class C(nn.Module):
            def __init__(self):
                super().__init__()
                self.s = torch.ones(4)

            def forward(self, x):
                return x * self.s
    """})
    r = run("confirm", "--isolated", ".::A", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert [re.match(r"\S+ DEV\d+ \[[\w-]+\]", line).group(0) for line in lines[:-1:2]] == [
        "model.py:9:9: DEV004 [confirmed]",
        "model.py:19:9: DEV004 [not-selected]",
        "model.py:22:37: DEV003 [not-selected]",
        "other.py:8:9: DEV004 [not-selected]",
    ]
    assert lines[3] == "    not selected: line 19 is in class B, and only A was run"
    assert lines[7] == "    not selected: the file has no class A, the one selected, so nothing in it was run"
    assert lines[-1] == "1 confirmed, 3 not selected"


@needs_torch
@pytest.mark.skipif(HAS_TORCH and __import__("torch").cuda.is_available(), reason="there is a GPU here")
def test_confirm_device_cuda_without_a_gpu_exits_2_naming_the_option(tmp_path):
    write(tmp_path, {"model.py": TWO_CLASSES})
    r = run("confirm", "--device", "cuda", "model.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith("devlint confirm: error: --device cuda: no CUDA device here "
                               "(torch.cuda.is_available() is False); ")


@pytest.mark.parametrize("args, message", [
    (["--init-kwargs", "{dim: 4}", "model.py::A"], "argument --init-kwargs: not JSON ("),
    (["--init-kwargs", "[4]", "model.py::A"], "argument --init-kwargs: expected a JSON object"),
    (["--input-shape", "2,x", "model.py::A"], "argument --input-shape: expected sizes separated by commas"),
    (["--input-dtype", "float8", "model.py::A"], "--input-dtype must be one of float32, "),
    (["--init-kwargs", '{"dim": 4}', "model.py"], "--init-kwargs is for one class: name it as FILE.py::ClassName"),
    (["--input-shape", "2,4", "model.py"], "--input-shape is for one class: name it as FILE.py::ClassName"),
    (["--timeout", "-3", "model.py"], "argument --timeout: expected a number above 0, not '-3'"),
    (["--memory-mb", "0", "model.py"], "argument --memory-mb: expected a whole number above 0, not '0'"),
    (["-j", "two", "model.py"], "argument -j/--jobs: expected a whole number above 0, not 'two'"),
], ids=["init-kwargs-not-json", "init-kwargs-not-object", "input-shape", "input-dtype", "init-kwargs-no-class",
        "input-shape-no-class", "timeout", "memory-mb", "jobs"])
def test_confirm_a_bad_option_value_exits_2_naming_the_option(tmp_path, args, message):
    write(tmp_path, {"model.py": TWO_CLASSES})
    r = run("confirm", *args, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert f"devlint confirm: error: {message}" in r.stderr


def test_check_jobs_must_be_a_count(tmp_path):
    write(tmp_path, {"m.py": LOADS})
    r = run("-j", "0", "m.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert "devlint check: error: argument -j/--jobs: expected a whole number above 0, not '0'" in r.stderr


def test_confirm_a_bad_input_dtype_in_the_configuration_exits_2_naming_it(tmp_path):
    write(tmp_path, {"model.py": TWO_CLASSES, "pyproject.toml": """\
        [tool.devlint.confirm.classes.A]
        input-shapes = [[2, 4]]
        input-dtype = "float8"
    """})
    r = run("confirm", "model.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith("devlint confirm: error: [tool.devlint.confirm.classes.A] input-dtype must be one of ")


def test_confirm_without_torch_says_so_once_and_exits_2(tmp_path):
    """torch is hidden from every interpreter the run starts (a sitecustomize runs in each)."""
    write(tmp_path, {"model.py": TWO_CLASSES, "no_torch/sitecustomize.py": "import sys\nsys.modules['torch'] = None\n"})
    env = plain_env(PYTHONPATH=os.pathsep.join(p for p in (str(tmp_path / "no_torch"), os.environ.get("PYTHONPATH")) if p))
    hidden = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert "ModuleNotFoundError" in hidden.stderr
    r = run("confirm", "model.py", cwd=tmp_path, env=env)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "devlint confirm: error: No module named 'torch'; install the confirm extra: pip install 'devlint[confirm]'\n"


# --- --statistics in the output format asked for -----------------------------------------------

def test_statistics_as_json_is_ruffs_shape(tmp_path):
    write(tmp_path, {"m.py": STATS})
    r = run("--statistics", "--output-format", "json", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert r.returncode == 1
    assert json.loads(r.stdout) == [
        {"code": "DEV005", "name": "hardcoded-cuda-string", "count": 3, "fixable": False},
        {"code": "DEV002", "name": "load-without-map-location", "count": 2, "fixable": True},
        {"code": "DEV001", "name": "hardcoded-cuda-call", "count": 1, "fixable": True},
    ]
    r = run("--statistics", "--output-format", "json-lines", "m.py", cwd=tmp_path)
    assert [json.loads(line) for line in r.stdout.splitlines()] == [
        {"code": "DEV005", "name": "hardcoded-cuda-string", "count": 3, "fixable": False},
        {"code": "DEV002", "name": "load-without-map-location", "count": 2, "fixable": False},
        {"code": "DEV001", "name": "hardcoded-cuda-call", "count": 1, "fixable": False},
    ]


@pytest.mark.parametrize("fmt", ["sarif", "github"])
def test_statistics_in_a_format_without_counts_exits_2(tmp_path, fmt):
    write(tmp_path, {"m.py": STATS})
    r = run("--statistics", "--output-format", fmt, "m.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"devlint: error: --statistics has no {fmt} form: use --output-format text, json, json-lines\n"


# --- --color ------------------------------------------------------------------------------------

LINK = re.compile("\x1b]8;;(?P<uri>[^\x1b]+)\x1b\\\\(?P<text>.*?)\x1b]8;;\x1b\\\\")


def linked(code: str) -> str:
    """The code in bold red, as a terminal hyperlink (OSC 8) to its rule's doc, as ruff shows it."""
    return f"\x1b]8;;{rule_url(code)}\x1b\\\x1b[1;31m{code}\x1b[0m\x1b]8;;\x1b\\"


COLORED = "\x1b[1mm.py\x1b[0m\x1b[36m:\x1b[0m3\x1b[36m:\x1b[0m5\x1b[36m:\x1b[0m " + linked("DEV002") + " "


@pytest.mark.parametrize("args, env, colored", [
    (["--color", "always"], {}, True),
    (["--color", "never"], {"FORCE_COLOR": "1"}, False),
    ([], {}, False),  # auto, into a pipe
    ([], {"FORCE_COLOR": "1"}, True),
    ([], {"FORCE_COLOR": ""}, False),  # set but empty: as if unset
    ([], {"NO_COLOR": "1"}, False),
    ([], {"NO_COLOR": "1", "FORCE_COLOR": "1"}, True),  # FORCE_COLOR first, as ruff reads them
    (["--color", "always"], {"NO_COLOR": "1"}, True),
])
def test_color(tmp_path, args, env, colored):
    write(tmp_path, {"m.py": LOADS})
    r = run(*args, "m.py", cwd=tmp_path, env=plain_env(**env))
    assert r.returncode == 1
    assert (ESC in r.stdout) is colored
    if colored:
        assert r.stdout.startswith(COLORED)
        # the link leads to the rule's doc shipped with devlint
        uri = LINK.search(r.stdout).group("uri")
        assert Path(urllib.parse.urlparse(uri).path).read_text().startswith("# DEV002")
    else:
        assert r.stdout.startswith("m.py:3:5: DEV002 ")


def test_color_auto_on_a_terminal(tmp_path):
    write(tmp_path, {"m.py": LOADS})
    primary, secondary = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "devlint", "--unsafe-fixes", "m.py"], cwd=tmp_path, stdout=secondary,
                            stderr=subprocess.PIPE, env=plain_env())
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait() == 1
    shown = b"".join(chunks).decode()
    assert shown.startswith(COLORED + "[\x1b[36m*\x1b[0m] ")
    assert "\r\n[\x1b[36m*\x1b[0m] 2 fixable with --fix.\r\n" in shown


def test_a_report_file_gets_colour_only_when_asked_by_name(tmp_path):
    write(tmp_path, {"m.py": LOADS})
    run("-o", "forced.txt", "m.py", cwd=tmp_path, env=plain_env(FORCE_COLOR="1"))
    run("-o", "always.txt", "--color", "always", "m.py", cwd=tmp_path)
    assert ESC not in (tmp_path / "forced.txt").read_text()
    assert (tmp_path / "always.txt").read_text().startswith(COLORED)


# --- -q / -s -------------------------------------------------------------------------------------

def test_quiet_prints_the_findings_only(tmp_path):
    write(tmp_path, {"m.py": LOADS, "clean.py": "import torch\n", "bad.py": BROKEN})
    r = run("-q", "m.py", cwd=tmp_path)
    assert r.returncode == 1
    assert [line.split(" ")[0] for line in r.stdout.splitlines()] == ["m.py:3:5:", "m.py:4:5:", "m.py:5:11:"]
    r = run("--quiet", "clean.py", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = run("-q", "bad.py", cwd=tmp_path)  # the file error is a finding of its own: it stays
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "bad.py:3:5: error: cannot parse: '(' was never closed\n"
    r = run("-q", "--diff", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, "")
    assert r.stdout.startswith("--- a/m.py\n")


def test_silent_prints_nothing_and_the_status_still_tells(tmp_path):
    write(tmp_path, {"m.py": LOADS, "clean.py": "import torch\n", "bad.py": BROKEN})
    assert [(r.returncode, r.stdout, r.stderr) for r in (
        run("-s", "m.py", cwd=tmp_path),
        run("--silent", "clean.py", cwd=tmp_path),
        run("-s", "bad.py", cwd=tmp_path),
        run("-s", "--diff", "--unsafe-fixes", "m.py", cwd=tmp_path),
        run("-s", "--output-format", "json", "m.py", cwd=tmp_path),
    )] == [(1, "", ""), (0, "", ""), (1, "", ""), (1, "", ""), (1, "", "")]


# --- --show-fixes --------------------------------------------------------------------------------

def test_show_fixes_after_fix_lists_each_file_and_rule(tmp_path):
    write(tmp_path, {"a.py": LOADS, "b.py": "import torch\n\nc = torch.load(r)\n", "clean.py": "import torch\n"})
    r = run("--fix", "--unsafe-fixes", "--show-fixes", ".", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.split("\n", 1)[1] == (  # after the finding that remains
        "\nFixed 3 findings:\n"
        "- a.py:\n"
        "    2 \u00d7 DEV002 (load-without-map-location)\n"
        "- b.py:\n"
        "    1 \u00d7 DEV002 (load-without-map-location)\n"
        "\n"
        "Fixed 3 findings, 1 remaining.\n"
    )
    assert 'c = torch.load(r, map_location=None if torch.cuda.is_available() else "cpu")' in (tmp_path / "b.py").read_text()
    r = run("--fix", "--show-fixes", ".", cwd=tmp_path)  # nothing left to fix: no list
    assert r.stdout.split("\n", 1)[1] == "Fixed 0 findings, 1 remaining.\n"


def test_show_fixes_without_fix_lists_what_fix_would_fix(tmp_path):
    write(tmp_path, {"m.py": STATS})
    r = run("--show-fixes", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.endswith(
        "\n--fix would fix 3 findings:\n"
        "- m.py:\n"
        "    2 \u00d7 DEV002 (load-without-map-location)\n"
        "    1 \u00d7 DEV001 (hardcoded-cuda-call)\n"
        "\n"
        "Found 6 findings.\n"
        "[*] 3 fixable with --fix.\n"
    )
    assert (tmp_path / "m.py").read_text() == STATS
    r = run("--diff", "--show-fixes", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr == ("\nWould fix 3 findings:\n- m.py:\n    2 \u00d7 DEV002 (load-without-map-location)\n"
                        "    1 \u00d7 DEV001 (hardcoded-cuda-call)\n\nWould fix 3 findings.\n")
