"""`devlint --fix`: fixes are sound on every fixture, keep the file's bytes outside the edits,
and the command writes files safely."""
import ast
import difflib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from devlint import engine
from devlint.engine import fixer
from devlint.workspace import runner
from devlint.workspace.config import Settings
from devlint.workspace.linter import Linter
from helpers import fixture_target, lint

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.py"))


def fix(source: str, unsafe: bool = True) -> fixer.FixResult:
    return Linter(Settings(root=Path("."), target_torch_setting=fixture_target(source)), Path("m.py")).fix(source, unsafe)


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "devlint", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_round_trip(path, unsafe):
    source = path.read_text(encoding="utf-8")
    result = fix(source, unsafe)
    assert result.problem is None
    ast.parse(result.text)  # the result parses
    second = fix(result.text, unsafe)
    assert second.text == result.text and not second.fixed  # a second fix changes nothing
    assert not [f for f in result.remaining if f.fixable(unsafe)]
    # the lines the fixes did not touch are byte-for-byte the same
    touched = {row for f in result.fixed for row in range(f.fix.edits[0].row, f.fix.edits[0].end_row + 1)}
    matcher = difflib.SequenceMatcher(a=source.splitlines(), b=result.text.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "insert":
            assert {i1, i1 + 1} & touched, (tag, i1)
        elif tag != "equal":
            assert set(range(i1 + 1, i2 + 1)) <= touched, (tag, i1, i2)


def test_fixtures_do_get_fixed():
    codes = {f.code for p in FIXTURES for f in fix(p.read_text(encoding="utf-8")).fixed}
    from devlint.rules import ALL_RULES

    assert codes == {rule.code for rule in ALL_RULES if rule.fixes != "never"}


def test_outer_fix_wins_and_the_inner_one_comes_next_round():
    source = 'import torch\nmodel.load_state_dict(torch.load(p), map_location="cpu")\n'
    result = fix(source, unsafe=False)
    assert result.text == 'import torch\nmodel.load_state_dict(torch.load(p, map_location="cpu"))\n'
    assert [f.code for f in result.fixed] == ["DEV006"]  # the DEV002 inside went away with it
    assert result.remaining == []


def test_multiline_call_keeps_its_layout():
    source = "import torch\nstate = torch.load(\n    path,\n    weights_only=True,\n)\nmodel.load_state_dict(state)\n"
    assert fix(source).text == (
        "import torch\nstate = torch.load(\n    path,\n    weights_only=True,\n    map_location=\"cpu\",\n)\n"
        "model.load_state_dict(state)\n"
    )


def test_comments_and_formatting_outside_the_edit_are_kept():
    source = (
        "import torch  # the framework\n\n\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        # a table\n"
        "        self.t = torch.zeros(3)   # trailing comment\n"
        "        x  =  1  ;  y = 2\n"
        "\n"
        "    def forward(self, x):\n"
        "        return x + self.t\n"
    )
    assert fix(source).text == source.replace(
        'self.t = torch.zeros(3)', 'self.register_buffer("t", torch.zeros(3), persistent=False)'
    )


def _offering(replacement_for):
    """A check that offers one fix on the first statement line of a text that holds `y = 1`."""
    def check(text):
        module = engine.parse(text)
        if "y = 1" not in text:
            return []
        fixed = module.deep_replace(module.body[0], replacement_for(module.body[0])).code
        lines = text.split("\n")
        fix = engine.Fix("safe", "test", (engine.Edit(fixed, 1, 1, len(lines), len(lines[-1]) + 1),))  # the whole text
        return [engine.Finding("DEV999", "test", "m", 1, 1, 1, 2, fix)]
    return check


@pytest.mark.parametrize("replacement_for, problem", [
    (lambda line: cst.SimpleStatementLine([cst.Expr(cst.Name("x"))]), "a fix would drop a comment ('# keep me')"),
    (lambda line: line.with_changes(body=[cst.Expr(cst.Name("class"))]), "the fixed code does not parse"),
], ids=["drops-a-comment", "does-not-parse"])
def test_a_fix_that_fails_a_check_is_dropped_and_reported(replacement_for, problem):
    source = "y = 1  # keep me\nz = 2\n"
    result = fixer.fix_text(source, _offering(replacement_for), unsafe=False)
    assert result.text == source
    assert result.problem.startswith(problem)
    assert [f.code for f in result.remaining] == ["DEV999"]


def test_fixes_that_never_settle_are_dropped():
    # each round offers a fix again (y = 1 -> y = 1; y = 1 ...): bounded, then refused
    grow = lambda line: cst.SimpleStatementLine(list(line.body) * 2, trailing_whitespace=line.trailing_whitespace)
    result = fixer.fix_text("y = 1  # c\n", _offering(grow), unsafe=False)
    assert result.text == "y = 1  # c\n"
    assert result.problem == f"fixes did not settle in {fixer.MAX_ROUNDS} rounds"


def test_soundness_checks():
    assert fixer.soundness_problem("x = 1\n", "x = (\n").startswith("the fixed code does not parse")
    assert "comment" in fixer.soundness_problem("x = 1  # note\n", "x = 1\n")
    assert "line endings" in fixer.soundness_problem("x = 1\r\ny = 2\r\n", "x = 1\r\ny = 2\n")
    assert fixer.soundness_problem("x = 1\n", "x = 2\n") is None


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the f-string below is valid from Python 3.12 on")
def test_soundness_names_a_file_this_python_cannot_parse():
    # libcst reads a 3.12 f-string that Python 3.11 rejects: the fix is refused, and the message
    # says the file itself is the problem, not the fix
    newer = 'names = f"{\'\\n\'.join(ns)}"\n'
    problem = fixer.soundness_problem(newer + "x = torch.load(p)\n", newer + 'x = torch.load(p, map_location="cpu")\n')
    assert problem.startswith(f"this Python ({sys.version_info[0]}.{sys.version_info[1]}) cannot parse the file itself")


def test_device_fix_uses_a_parameter_that_is_surely_a_tensor():
    # diffusers MultiAdapter: `adapter_weights` may be None and is rebound; `xs` is the tensor
    source = (
        "import torch\nfrom torch import nn\n\n\nclass MultiAdapter(nn.Module):\n"
        "    def forward(self, xs: torch.Tensor, adapter_weights=None, mode=0):\n"
        "        if adapter_weights is None:\n"
        "            adapter_weights = torch.tensor([0.5, 0.5])\n"
        "        return xs * adapter_weights\n"
    )
    assert "torch.tensor([0.5, 0.5], device=xs.device)" in fix(source).text


def test_device_name_is_not_used_as_its_own_fallback():
    # lightning: `device = device or torch.device("cuda")` must not become torch.device(device)
    source = 'import torch\n\n\ndef pick(device=None):\n    device = device or torch.device("cuda")\n    return device\n'
    result = fix(source)
    assert result.text == source
    assert [(f.code, f.fix) for f in result.remaining] == [("DEV005", None)]


@pytest.mark.parametrize("binding", ['device = "cuda"', 'device = "cuda:1"', 'device = torch.device("cuda", 0)'])
def test_a_device_name_bound_only_to_a_hardcoded_gpu_is_not_written(binding):
    # a notebook's `device = "cuda:1"`: `.to(device)` for `.cuda()` would move to another GPU, and
    # for `"cuda"` it would change nothing
    source = f"import torch\n\n{binding}\n\n\ndef f(x):\n    return x.cuda(), x.to(\"cuda\")\n"
    result = fix(source, unsafe=True)
    assert result.text == source
    assert {f.code for f in result.remaining} == {"DEV001", "DEV005"}
    assert all(f.fix is None for f in result.remaining)


def test_a_device_name_chosen_at_run_time_is_written():
    source = 'import torch\n\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n\n\ndef f(x):\n    return x.cuda()\n'
    assert "return x.to(device)" in fix(source, unsafe=True).text


# --- the command ---------------------------------------------------------------------------------
BUGGY = 'import torch\n\n\ndef load(model, path):\n    model.load_state_dict(torch.load(path))\n    return torch.load(path)\n'


def test_fix_writes_and_summarises(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    r = run("--fix", "m.py", cwd=tmp_path)
    assert r.returncode == 1  # one finding remains (its fix is unsafe)
    assert r.stdout.splitlines()[-1] == "Fixed 1 finding, 1 remaining (1 more fixable with --unsafe-fixes)."
    assert 'torch.load(path, map_location="cpu"))' in (tmp_path / "m.py").read_text()
    r = run("--fix", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert (r.returncode, r.stdout.splitlines()[-1]) == (0, "Fixed 1 finding, 0 remaining.")
    text = (tmp_path / "m.py").read_text()
    assert text.count('map_location="cpu"') == 1 and text.count('map_location=None if torch.cuda.is_available() else "cpu"') == 1


def test_unsafe_fixes_from_config(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\nunsafe-fixes = true\n")
    assert run("--fix", "m.py", cwd=tmp_path).returncode == 0
    (tmp_path / "m.py").write_text(BUGGY)
    assert run("--fix", "--no-unsafe-fixes", "m.py", cwd=tmp_path).returncode == 1


def test_diff_writes_nothing_and_exits_1_when_pending(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    r = run("--diff", "m.py", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.startswith("--- a/m.py\n+++ b/m.py\n")
    assert '+    model.load_state_dict(torch.load(path, map_location="cpu"))' in r.stdout
    assert r.stderr == "Would fix 1 finding.\n"
    assert (tmp_path / "m.py").read_text() == BUGGY
    (tmp_path / "clean.py").write_text("import torch\n")
    assert run("--diff", "clean.py", cwd=tmp_path).returncode == 0


def test_text_marks_fixable_findings(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    lines = run("m.py", cwd=tmp_path).stdout.splitlines()
    assert lines[0].startswith("m.py:5:27: DEV002 [*] `torch.load()`")
    assert lines[1].startswith("m.py:6:12: DEV002 `torch.load()`")
    assert lines[-1] == "[*] 1 fixable with --fix (1 more fixable with --unsafe-fixes)."
    assert run("--unsafe-fixes", "m.py", cwd=tmp_path).stdout.splitlines()[1].startswith("m.py:6:12: DEV002 [*] ")


def test_json_fix_record(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    records = json.loads(run("--output-format", "json", "m.py", cwd=tmp_path).stdout)
    assert records[0]["fix"] == {
        "applicability": "safe",
        "message": 'Add `map_location="cpu"`',
        "edits": [{
            "content": 'torch.load(path, map_location="cpu")',
            "location": {"row": 5, "column": 27},
            "end_location": {"row": 5, "column": 43},
        }],
    }
    assert records[1]["fix"]["applicability"] == "unsafe"


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig"], ids=["plain", "bom"])
def test_line_endings_and_bom_are_kept(tmp_path, newline, encoding):
    text = BUGGY.replace("\n", newline)
    (tmp_path / "m.py").write_bytes(text.encode(encoding))
    run("--fix", "--unsafe-fixes", "m.py", cwd=tmp_path)
    data = (tmp_path / "m.py").read_bytes()
    expected = text.replace("load_state_dict(torch.load(path))", 'load_state_dict(torch.load(path, map_location="cpu"))')
    expected = expected.replace("return torch.load(path)", 'return torch.load(path, map_location=None if torch.cuda.is_available() else "cpu")')
    assert data == expected.encode(encoding)


def test_latin1_file_stays_latin1(tmp_path):
    text = '# -*- coding: latin-1 -*-\n# café\nimport torch\nx = torch.load(p)\n'
    (tmp_path / "m.py").write_bytes(text.encode("latin-1"))
    run("--fix", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_bytes() == text.replace("load(p)", 'load(p, map_location=None if torch.cuda.is_available() else "cpu")').encode("latin-1")


def test_mode_bits_are_kept(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    path.chmod(0o751)
    run("--fix", "m.py", cwd=tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert 'map_location="cpu"' in path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]  # no temporary file left behind


def test_file_without_findings_is_not_touched(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import torch\nx = torch.zeros(3)\n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    r = run("--fix", "m.py", cwd=tmp_path)
    assert r.returncode == 0
    assert path.stat().st_mtime_ns == 1_000_000_000


def test_read_only_file_is_reported_not_written(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    path.chmod(0o444)
    r = run("--fix", "m.py", cwd=tmp_path)
    assert r.returncode == 1
    assert "m.py:1:1: error: fixes not applied: the file is read-only" in r.stderr
    assert path.read_text() == BUGGY


def test_file_changed_on_disk_is_not_overwritten(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    original = path.read_bytes()
    path.write_text(BUGGY + "# edited by someone else\n")
    problem = runner.write_atomically(path, b"fixed\n", original)
    assert problem == "fixes not applied: the file changed on disk while devlint was fixing it"
    assert path.read_text() == BUGGY + "# edited by someone else\n"


def test_interrupted_write_leaves_the_original(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_text(BUGGY)

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    problem = runner.write_atomically(path, b"half", path.read_bytes())
    assert problem == "fixes not applied: cannot write (No space left on device)"
    assert path.read_text() == BUGGY
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]


def test_symlink_is_written_through(tmp_path):
    (tmp_path / "real.py").write_text(BUGGY)
    (tmp_path / "link.py").symlink_to(tmp_path / "real.py")
    run("--fix", "link.py", cwd=tmp_path)
    assert (tmp_path / "link.py").is_symlink()
    assert 'map_location="cpu"' in (tmp_path / "real.py").read_text()


DTYPE_MODULE = """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self, dim, device):
        super().__init__()
        {local}
        self.t = {value}

    def forward(self, x):
        return x, self.t
"""


@pytest.mark.parametrize("value, applicability", [
    ("torch.arange(8)", "safe"),
    ("torch.arange(0, 8, 2).view(2, 2)", "safe"),
    ("torch.ones(4, 4, dtype=torch.bool)", "safe"),
    ("torch.zeros(3, dtype=torch.int32).to(device)", "safe"),
    ("torch.tensor([1, 2, 3])", "safe"),
    ("torch.rand(3).long()", "safe"),
    ("~torch.ones(3, 3).bool()", "safe"),
    ("ids", "safe"),
    ("torch.zeros(3)", "unsafe"),
    ("torch.arange(dim)", "unsafe"),
    ("torch.arange(0, dim, 2).float() / dim", "unsafe"),
    ("torch.tensor([0.5, 1.0])", "unsafe"),
    ("torch.arange(8).to(torch.float16)", "unsafe"),
    ("torch.arange(8).to(dim)", "unsafe"),
    ("torch.polar(torch.ones(4), torch.zeros(4))", "unsafe"),
    ("torch.from_numpy(dim)", "unsafe"),
    ("pe", "unsafe"),
    ("[torch.arange(8)]", None),
    ("tables", None),
])
def test_dev004_fix_is_safe_only_for_integer_and_bool_tables(value, applicability):
    local = "ids = torch.arange(4); pe = torch.zeros(4); tables = (torch.arange(2), torch.arange(3))"
    (finding,) = lint(DTYPE_MODULE.format(local=local, value=value))
    assert finding.code == "DEV004"
    assert (finding.fix.applicability if finding.fix is not None else None) == applicability
