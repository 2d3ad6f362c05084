"""Hostile input: what real repositories contain. Each case runs the CLI as a user would, on the
hostile file next to a good one, and pins the exact message, the exit status, and that the good
file was still checked."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import helpers
import pytest

from devlint.frontends import output
from devlint.workspace import runner
from devlint.workspace.config import Settings

GOOD = "import torch\nm = model.cuda()\n"  # DEV001 at 2:11
GOOD_LINE = "good.py:2:11: DEV001 `.cuda()` hardcodes the CUDA device and fails where there is none; use `.to(device)`"
LOAD = 'torch.load("m.pt")'  # DEV002 wherever it stands


def devlint(*args, cwd: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return helpers.devlint("--no-cache", *args, cwd=cwd, prefix=prefix)


def project(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    (tmp_path / "good.py").write_text(GOOD)
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return tmp_path


def finding_lines(stdout: str) -> list[str]:
    """`path:row:column: CODE` for each finding line."""
    return [line.split(" `")[0] for line in stdout.splitlines() if ": DEV" in line]


# --- files that cannot be checked: one error line each, the rest still checked, exit 1 ---------

UNCHECKABLE = {
    "syntax error": (b"import torch\nx = (\n", "bad.py:2:5: error: cannot parse: '(' was never closed"),
    "python 2": (b'import torch\nprint "hello"\n',
                 "bad.py:2:1: error: cannot parse: Missing parentheses in call to 'print'. Did you mean print(...)?"),
    "NUL byte": (b"import torch\nx = 1\x00\n", "bad.py:2:6: error: cannot parse: source code cannot contain null bytes"),
    "invalid UTF-8": (b'import torch\nx = "\xff"\n', "bad.py:2:6: error: not valid UTF-8: byte 0xff (offset 18)"),
    "unknown coding cookie": (b"# -*- coding: klingon -*-\nimport torch\n", "bad.py:1:1: error: unknown encoding: klingon"),
}


@pytest.mark.parametrize("name", list(UNCHECKABLE))
def test_a_file_that_cannot_be_checked_is_reported_and_the_rest_checked(tmp_path, name):
    data, error = UNCHECKABLE[name]
    project(tmp_path, {"bad.py": data})
    r = devlint(".", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, error + "\n")
    assert r.stdout.splitlines()[0] == GOOD_LINE
    assert r.stdout.endswith("Found 1 finding.\n1 file could not be checked.\n")


# --- odd but valid files: checked, findings where they are -------------------------------------

CHECKABLE = {
    "latin-1 cookie": (f'# -*- coding: latin-1 -*-\nimport torch\ns = "caf\xe9"\nx = {LOAD}\n'.encode("latin-1"), ["bad.py:4:5"]),
    "UTF-8 BOM": (f"\ufeffimport torch\nx = {LOAD}\n".encode("utf-8"), ["bad.py:2:5"]),
    "CRLF": (f"import torch\r\nx = {LOAD}\r\ny = {LOAD}\r\n".encode(), ["bad.py:2:5", "bad.py:3:5"]),
    "mixed line endings": (f"import torch\r\nx = {LOAD}\ny = 1\rz = {LOAD}\r\n".encode(), ["bad.py:2:5", "bad.py:4:5"]),
    "tabs and form feeds": (f"import torch\n\x0c\ndef f():\n\tif True:\n\t\treturn {LOAD}\n\x0c\n".encode(), ["bad.py:5:10"]),
    "empty file": (b"", []),
    "only a BOM": (b"\xef\xbb\xbf", []),
    "no final newline": (f"import torch\nx = {LOAD}".encode(), ["bad.py:2:5"]),
}


@pytest.mark.parametrize("name", list(CHECKABLE))
def test_odd_but_valid_files_are_checked(tmp_path, name):
    data, places = CHECKABLE[name]
    project(tmp_path, {"bad.py": data})
    r = devlint(".", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, "")
    assert [line for line in finding_lines(r.stdout) if line.startswith("bad.py")] == [
        f"{p}: DEV002" for p in places]
    assert GOOD_LINE in r.stdout.splitlines()


def test_a_50000_line_file(tmp_path):
    body = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(25_000))
    project(tmp_path, {"big.py": f"import torch\n{body}y = {LOAD}\n"})
    r = devlint(".", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, "")
    assert [line for line in finding_lines(r.stdout) if line.startswith("big.py")] == ["big.py:50002:5: DEV002"]


NESTED = {
    "parentheses": "(" * 500 + LOAD + ")" * 500,
    "calls": "f(" * 500 + LOAD + ")" * 500,
    "lists": "[" * 500 + LOAD + "]" * 500,
    "subscripts": "x" + "[" * 500 + LOAD + "]" * 500,
    "unary": "not " * 500 + LOAD,
    "binary chain": " + ".join(["t"] * 500 + [LOAD]),
    "attribute chain": LOAD + ".a" * 500,
    "lambdas": "lambda: " * 500 + LOAD,
}


@pytest.mark.parametrize("name", list(NESTED))
def test_expressions_nested_500_deep(tmp_path, name):
    project(tmp_path, {"deep.py": f"import torch\nt = torch.ones(1)\ny = {NESTED[name]}\n"})
    r = devlint(".", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, "")
    found = [line for line in finding_lines(r.stdout) if line.startswith("deep.py")]
    assert len(found) == 1 and found[0].startswith("deep.py:3:") and found[0].endswith(": DEV002")


@pytest.mark.parametrize("name", list(NESTED))
def test_expressions_nested_500_deep_in_a_module_class(tmp_path, name):
    # where the value analyses look: an attribute set in `__init__`, a value in `forward`
    code = (
        "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self, t):\n        super().__init__()\n"
        f"        self.y = {NESTED[name]}\n\n"
        "    def forward(self, t):\n"
        f"        y = {NESTED[name]}\n        return y + self.y\n"
    )
    project(tmp_path, {"deep.py": code})
    r = devlint(".", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, "")
    found = [line for line in finding_lines(r.stdout) if line.startswith("deep.py")]
    assert [line.split(":")[1] for line in found if line.endswith(": DEV002")] == ["8", "11"]


def test_blocks_nested_as_deep_as_python_allows(tmp_path):
    depth = 98  # Python's tokenizer stops at 100 levels of indentation
    lines = ["import torch"] + [" " * i + "if x:" for i in range(depth)] + [" " * depth + f"y = {LOAD}"]
    project(tmp_path, {"deep.py": "\n".join(lines) + "\n", "deeper.py": "\n".join(
        ["import torch"] + [" " * i + "if x:" for i in range(100)] + [" " * 100 + "pass"]) + "\n"})
    r = devlint(".", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, "deeper.py:102:1: error: cannot parse: too many levels of indentation\n")
    assert f"deep.py:{depth + 2}:{depth + 5}: DEV002" in finding_lines(r.stdout)


# --- the file system ---------------------------------------------------------------------------

def test_a_directory_named_like_a_python_file_is_walked(tmp_path):
    project(tmp_path, {"x.py/inner.py": GOOD})
    for target in (".", "x.py"):
        r = devlint(target, cwd=tmp_path)
        assert (r.returncode, r.stderr) == (1, "")
        assert f"x.py{os.sep}inner.py:2:11: DEV001" in r.stdout.replace("/", os.sep)


def test_an_unreadable_file(tmp_path):
    project(tmp_path, {"bad.py": GOOD})
    (tmp_path / "bad.py").chmod(0)
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:  # root reads anything: drop the capabilities that let it
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv")
        prefix = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search")
    try:
        r = devlint(".", cwd=tmp_path, prefix=prefix)
    finally:
        (tmp_path / "bad.py").chmod(0o644)
    assert (r.returncode, r.stderr) == (1, "bad.py:1:1: error: cannot read: Permission denied\n")
    assert r.stdout.splitlines()[0] == GOOD_LINE


def test_a_broken_symlink_and_symlink_loops(tmp_path):
    project(tmp_path, {})
    (tmp_path / "broken.py").symlink_to("nowhere.py")
    (tmp_path / "loop1.py").symlink_to("loop2.py")
    (tmp_path / "loop2.py").symlink_to("loop1.py")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to("..", target_is_directory=True)  # a directory loop: not followed
    r = devlint(".", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "broken.py:1:1: error: cannot read: broken symbolic link (to nowhere.py)",
        "loop1.py:1:1: error: cannot read: symbolic link loop",
        "loop2.py:1:1: error: cannot read: symbolic link loop",
    ]
    assert r.stdout.splitlines()[0] == GOOD_LINE
    assert r.stdout.endswith("Found 1 finding.\n3 files could not be checked.\n")


def test_a_file_deleted_while_the_run_is_going(tmp_path):
    project(tmp_path, {"gone.py": GOOD})
    settings = Settings(root=tmp_path)
    items = [(path, path.name) for path, problem in runner.discover([tmp_path], settings) if problem is None]
    assert [name for _, name in items] == ["gone.py", "good.py"]
    (tmp_path / "gone.py").unlink()  # after discovery, before the check
    reports = runner.check_files(items, settings)
    out, err = io.StringIO(), io.StringIO()
    output.write_text(reports, out, err)
    assert err.getvalue() == "gone.py:1:1: error: cannot read: No such file or directory\n"
    assert out.getvalue().splitlines()[0] == GOOD_LINE


def test_a_path_that_does_not_exist(tmp_path):
    project(tmp_path, {})
    r = devlint("missing.py", "good.py", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, "missing.py:1:1: error: No such file or directory\n")
    assert r.stdout.splitlines()[0] == GOOD_LINE


# --- configuration: a broken pyproject.toml stops the run with a message, exit 2 ---------------

@pytest.mark.parametrize("text,error", [
    ("[tool.devlint\n", ": not valid TOML: Expected ']' at the end of a table declaration (at line 1, column 14)"),
    ('[tool.devlint]\nselect = ["DEV999"]\n', " [tool.devlint]: unknown rule selector `DEV999`"),
    ('[tool.devlint]\nignore = ["XYZ"]\n', " [tool.devlint]: unknown rule selector `XYZ`"),
    ("[tool.devlint]\nbogus = 1\n", ": unknown key(s) in [tool.devlint]: bogus"),
])
def test_a_broken_pyproject(tmp_path, text, error):
    project(tmp_path, {"pyproject.toml": text})
    r = devlint(".", cwd=tmp_path)
    config = tmp_path / "pyproject.toml"
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"devlint: error: {config}{error}\n")


# --- --fix over all of it: nothing it could not check is touched ------------------------------

def test_fix_over_hostile_files_writes_only_sound_code(tmp_path):
    files = {f"u{i}.py": data for i, (data, _) in enumerate(UNCHECKABLE.values())}
    files.update({f"c{i}.py": data for i, (data, _) in enumerate(CHECKABLE.values())})
    files.update({f"n{i}.py": f"import torch\nt = torch.ones(1)\ny = {e}\n" for i, e in enumerate(NESTED.values())})
    project(tmp_path, files)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    r = devlint("--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert r.returncode == 1
    for name in (f"u{i}.py" for i in range(len(UNCHECKABLE))):
        assert (tmp_path / name).read_bytes() == before[name]
    changed = [p for p in tmp_path.iterdir() if p.read_bytes() != before[p.name]]
    assert {p.name for p in changed} >= {"c0.py", "c1.py", "c2.py"}
    for path in changed:
        compile(path.read_bytes(), str(path), "exec")
    # Nested past CPython's own limit (200 parentheses): libcst reads it, but a fix must compile,
    # and this Python cannot compile the file itself either, which the message says.
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f"n0.py:1:1: error: fixes not applied: this Python ({python}) cannot parse the file itself (too many nested parentheses" in r.stderr
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    devlint("--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == after  # a second fix changes nothing


def test_a_check_that_recurses_too_deep_names_its_cause():
    """Deep code is a limit of the check; an endless recursion on shallow code is a devlint bug,
    and says so instead of blaming the file."""
    recursion_problem = runner.recursion_problem
    chain = "y = " + " + ".join(["x"] * 2000) + "\n"
    assert recursion_problem(chain).startswith("cannot check: nested deeper than")
    assert recursion_problem("y = " + "(" * 300 + "x" + ")" * 300 + "\n").startswith("cannot check: nested deeper")
    shallow = recursion_problem(b"def f(x):\n    return f(x)\n")
    assert shallow == "internal error: RecursionError (a devlint bug: please report it with this file)"
