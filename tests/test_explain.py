"""`devlint explain`: real tracebacks captured on this CPU-only machine, and the texts users paste."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, devlint

TRACEBACKS = sorted((ROOT / "tests" / "tracebacks").glob("*.txt"))
CASES = [p for p in TRACEBACKS if p.with_suffix(".py").exists()]
EXPECTED_RULE = {
    "cuda_call": "DEV001",
    "cuda_checkpoint": "DEV002",
    "device_mismatch": "DEV003",
    "export_cpu_input": "DEV007",
    "map_location_to_load_state_dict": "DEV006",
    "numpy_on_device": "DEV008",
}


def line_to_change(program: Path) -> int:
    (row,) = [i for i, line in enumerate(program.read_text().splitlines(), 1) if "# the line to change" in line]
    return row


@pytest.mark.parametrize("traceback", CASES, ids=lambda p: p.stem)
def test_first_finding_is_the_line_to_change(traceback):
    r = devlint("explain", "--isolated", "--output-format", "json", str(traceback.relative_to(ROOT)), cwd=ROOT)
    result = json.loads(r.stdout)
    program = traceback.with_suffix(".py")
    first = result["findings"][0]
    assert Path(first["filename"]) == program
    assert (first["location"]["row"], first["code"]) == (line_to_change(program), EXPECTED_RULE[traceback.stem])
    assert result["kinds"] and EXPECTED_RULE[traceback.stem] in result["kinds"][0]["rules"]


def test_text_output_names_the_kind_and_the_line(tmp_path):
    traceback = ROOT / "tests" / "tracebacks" / "cuda_checkpoint.txt"
    r = devlint("explain", "--isolated", "-", cwd=ROOT, input=traceback.read_text())
    lines = r.stdout.splitlines()
    assert lines[0] == "cuda-checkpoint-on-cpu-host: a checkpoint saved on a GPU, loaded where there is none"
    row = line_to_change(traceback.with_suffix(".py"))
    first = lines[lines.index("The line to change, most likely first:") + 1]
    assert first.startswith(f"tests/tracebacks/cuda_checkpoint.py:{row}:") and "DEV002" in first
    assert first.endswith("(on the failing line)")


# The texts of tests/tracebacks/pasted.txt, in order: as public reports quote them, or as torch
# 2.13 printed them on this CPU-only machine (with `meta` where a GPU machine says `cuda:0`).
PASTED_KINDS = [
    "device-mismatch",
    "cuda-checkpoint-on-cpu-host",
    "cuda-not-available",
    "input-weight-type-mismatch",
    "numpy-on-device-tensor",
    "map-location-on-load-state-dict",
    "cuda-not-available",
    "invalid-device-ordinal",
    "rnn-hidden-state-device",
    "data-parallel-parameters-not-on-device",
    "fake-tensor-device-propagation",
    "generator-device",
    "state-dict-module-prefix",
    "autocast-without-cuda",
    "autocast-without-cuda",
    "pin-memory-without-accelerator",
    "weights-only-load",
    "meta-tensor",
    "invalid-device-string",
    "invalid-device-string",
    "accelerator-not-available",
    "accelerator-not-available",
    "accelerator-not-available",
    "no-kernel-for-device",
    "no-kernel-for-device",
    "cpu-tensor-required",
    "accelerator-tensor-required",
    "accelerator-tensor-required",
    "map-location-value",
    "autocast-without-cuda",
    "device-mismatch",
    "numpy-on-device-tensor",
]


def test_every_kind_has_a_pasted_text():
    from devlint.frontends.error_kinds import KINDS
    assert set(PASTED_KINDS) == {kind.id for kind in KINDS}


def test_pasted_error_texts_are_recognised():
    texts = [t.strip() for t in (ROOT / "tests" / "tracebacks" / "pasted.txt").read_text().split("\n\n") if t.strip()]
    assert len(texts) == len(PASTED_KINDS)
    for text, kind in zip(texts, PASTED_KINDS):
        r = devlint("explain", "--isolated", "--output-format", "json", text, cwd=ROOT)
        assert [k["id"] for k in json.loads(r.stdout)["kinds"]] == [kind], text


def test_a_kind_no_rule_checks_says_so():
    r = devlint("explain", "--isolated", "UserWarning: 'pin_memory' argument is set as true but no accelerator is found",
                cwd=ROOT)
    assert r.stdout.splitlines()[:1] == ["pin-memory-without-accelerator: `pin_memory=True` on a machine without an "
                                         "accelerator (a warning: memory is not pinned)"]
    assert "  rules: none; look for `pin_memory=True` in `DataLoader(...)` calls and tensor factories" in r.stdout.splitlines()


def test_unknown_text_says_so():
    r = devlint("explain", "--isolated", "ValueError: something else", cwd=ROOT)
    assert r.returncode == 1 and "does not recognise" in r.stdout


# --- a traceback from another machine, misuse, configuration, ranking -----------------------------
FORWARD = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.scale = torch.ones(4)

    def forward(self, x):
        h = self.proj(x)
        noise = torch.randn(4)
        bias = torch.zeros(4)
        y = h * self.scale + bias + torch.ones(4)
        return y, x + noise
'''
TRAIN = '''\
import torch

from pkg.model import Net


def main():
    device = "cuda"
    model = Net().cuda()
    batch = torch.randn(2, 4).cuda()
    out = model(batch.to(device))
    print(out)


main()
'''
MISMATCH = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"


def traceback_text(train: str, model: str) -> str:
    """A device mismatch raised in Net.forward, called from train.py's main()."""
    return f'''\
Traceback (most recent call last):
  File "{train}", line 14, in <module>
    main()
  File "{train}", line 10, in main
    out = model(batch.to(device))
          ^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1511, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "{model}", line 15, in forward
    y = h * self.scale + bias + torch.ones(4)
        ~~~~~~~~~~~~~~~^~~~~~
{MISMATCH}
'''


def checkout(tmp_path: Path, train: bool = True) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(FORWARD)
    if train:
        (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def test_frames_from_another_machine_are_matched_by_their_longest_suffix_here(tmp_path):
    checkout(tmp_path, train=False)
    (tmp_path / "model.py").write_text("import torch\nx = torch.ones(2).cuda()\n")  # a shorter suffix: not taken
    text = traceback_text("/home/alice/work/proj/train.py", "/home/alice/work/proj/pkg/model.py")
    (tmp_path / "err.txt").write_text(text)
    r = devlint("explain", "--isolated", "--output-format", "json", "err.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert [(f["filename"], f["row"], f["function"], f["status"], f["local_file"]) for f in result["frames"]] == [
        ("/home/alice/work/proj/pkg/model.py", 15, "forward", "matched", "pkg/model.py"),
        ("/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", 1511, "_wrapped_call_impl", "library", None),
        ("/home/alice/work/proj/train.py", 10, "main", "unmatched", None),
        ("/home/alice/work/proj/train.py", 14, "<module>", "unmatched", None),
    ]
    first = result["findings"][0]
    assert (Path(first["filename"]).relative_to(tmp_path.resolve()), first["location"]["row"], first["code"]) == (
        Path("pkg/model.py"), 15, "DEV003")

    r = devlint("explain", "--isolated", "err.txt", cwd=tmp_path)
    lines = r.stdout.splitlines()
    frames = lines.index("Traceback frames, innermost first:")
    assert lines[frames + 1:frames + 5] == [
        "  /home/alice/work/proj/pkg/model.py:15 in forward -> pkg/model.py",
        "  /home/alice/work/proj/train.py:10 in main -> not found here",
        "  /home/alice/work/proj/train.py:14 in <module> -> not found here",
        "  and 1 frame in installed packages or the standard library, not looked for",
    ]
    assert "pkg/model.py:15:37: DEV003 " in lines[lines.index("The line to change, most likely first:") + 1]


def test_a_windows_traceback_is_matched_too(tmp_path):
    checkout(tmp_path)
    text = traceback_text(r"C:\Users\alice\proj\train.py", r"C:\Users\alice\proj\pkg\model.py")
    r = devlint("explain", "--isolated", "--output-format", "json", "-", cwd=tmp_path, input=text)
    assert [f["local_file"] for f in json.loads(r.stdout)["frames"]] == ["pkg/model.py", None, "train.py", "train.py"]


def test_a_path_that_does_not_exist_is_an_error(tmp_path):
    for argument in ("err.txt", "logs/run.log"):
        r = devlint("explain", argument, cwd=tmp_path)
        assert (r.returncode, r.stdout) == (2, "")
        assert r.stderr == f"devlint explain: error: cannot read {argument}: No such file or directory\n"
    (tmp_path / "logs").mkdir()
    r = devlint("explain", "logs", cwd=tmp_path)  # a name that is not a path is the text itself...
    assert r.returncode == 1 and "does not recognise" in r.stdout
    r = devlint("explain", "logs/", cwd=tmp_path)  # ...but this one is
    assert (r.returncode, r.stderr) == (2, "devlint explain: error: cannot read logs/: Is a directory\n")
    r = devlint("explain", "Expected all tensors to be on the same device", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("device-mismatch: ")


def test_on_a_terminal_it_says_it_reads_standard_input(tmp_path):
    pty = pytest.importorskip("pty")  # a POSIX terminal
    main, terminal = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "devlint", "explain", "--isolated"], cwd=tmp_path,
                                   stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(terminal)
        os.write(main, b"AssertionError: Torch not compiled with CUDA enabled\n\x04")  # then Ctrl-D: the end
        out, err = process.communicate(timeout=60)
    finally:
        os.close(main)
    assert err == "devlint explain: reading the error from standard input (paste it, press Enter, then Ctrl-D)\n"
    assert process.returncode == 0 and out.startswith("cuda-not-available: ")


@pytest.mark.parametrize("table, problem", [
    ("[tool.devlint\nselect = [", "not valid TOML"),
    ('[tool.devlint]\nselect = ["DEV999"]\n', "unknown rule selector `DEV999`"),
])
def test_a_broken_configuration_does_not_stop_the_explanation(tmp_path, table, problem):
    checkout(tmp_path)
    (tmp_path / "pyproject.toml").write_text(table)
    r = devlint("explain", "Torch not compiled with CUDA enabled", cwd=tmp_path)
    assert (r.returncode, r.stdout.splitlines()[0]) == (0, "cuda-not-available: CUDA asked for on a machine without it")
    warning = r.stderr.splitlines()
    assert len(warning) == 1 and warning[0].startswith("devlint explain: warning: the configuration could not be read")
    assert "default settings" in warning[0] and "pyproject.toml" in warning[0] and problem in warning[0]
    r = devlint("explain", "-", cwd=tmp_path, input=traceback_text("train.py", "pkg/model.py"))
    assert r.returncode == 0 and len(r.stderr.splitlines()) == 1
    assert "pkg/model.py:15:37: DEV003 " in r.stdout
    r = devlint("explain", "ValueError: something else", cwd=tmp_path)  # unrecognised: 1, as without the problem
    assert r.returncode == 1 and "does not recognise" in r.stdout


def test_a_configuration_file_that_is_not_there_is_an_error(tmp_path):
    r = devlint("explain", "--config", "nope.toml", "Torch not compiled with CUDA enabled", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "devlint explain: error: --config nope.toml: no such file\n"


def test_causes_rank_by_the_failing_line_then_what_feeds_it(tmp_path):
    checkout(tmp_path)
    r = devlint("explain", "--isolated", "--output-format", "json", "-", cwd=tmp_path,
                input=traceback_text("train.py", "pkg/model.py"))
    ranked = [(Path(f["filename"]).name, f["location"]["row"], f["code"], f["place"]) for f in json.loads(r.stdout)["findings"]]
    assert ranked == [
        ("model.py", 15, "DEV003", "on the failing line"),
        ("model.py", 14, "DEV003", "makes a value the failing line uses"),  # bias
        ("model.py", 9, "DEV004", "makes a value the failing line uses"),  # self.scale, in __init__
        ("model.py", 13, "DEV003", "in the failing function"),
    ]  # train.py's `.cuda()` and "cuda" cannot put two devices in one operation on a GPU machine
    assert not {"DEV001", "DEV002", "DEV005", "DEV011"} & set(json.loads(r.stdout)["kinds"][0]["rules"])


def test_the_cuda_hardcodes_are_the_causes_where_there_is_no_cuda(tmp_path):
    checkout(tmp_path)
    text = '''\
Traceback (most recent call last):
  File "/home/alice/proj/train.py", line 14, in <module>
    main()
  File "/home/alice/proj/train.py", line 8, in main
    model = Net().cuda()
AssertionError: Torch not compiled with CUDA enabled
'''
    r = devlint("explain", "--isolated", "--output-format", "json", text, cwd=tmp_path)
    ranked = [(f["location"]["row"], f["code"], f["place"]) for f in json.loads(r.stdout)["findings"]]
    assert ranked == [(8, "DEV001", "on the failing line"), (9, "DEV001", "in the failing function"),
                      (7, "DEV005", "in the failing function")]


def test_a_frame_not_here_leaves_the_calling_lines(tmp_path):
    (tmp_path / "train.py").write_text("""\
import torch
from torch import nn


def main(loader, device):
    model = nn.Linear(4, 2).to(device)
    criterion = nn.CrossEntropyLoss()
    for images, labels in loader:
        images.to(device)
        loss = criterion(model(images), labels)
        loss.backward()
    torch.cuda.synchronize()
""")
    text = f'''\
Traceback (most recent call last):
  File "/srv/job/train.py", line 10, in main
    loss = criterion(model(images), labels)
  File "/srv/job/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", line 1511, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/srv/job/layers/linear.py", line 5, in forward
    return F.linear(x, self.weight)
{MISMATCH}
'''
    r = devlint("explain", "--isolated", "--output-format", "json", text, cwd=tmp_path)
    result = json.loads(r.stdout)
    assert [f["status"] for f in result["frames"]] == ["unmatched", "library", "matched"]
    assert [(f["location"]["row"], f["code"], f["place"]) for f in result["findings"]] == [
        (10, "DEV007", "on a calling line"),
        (9, "DEV010", "makes a value a calling line uses"),  # `images.to(device)` does not move images
    ]  # not DEV011 `torch.cuda.synchronize()`, which cannot put two devices in one operation


def test_each_error_a_rule_doc_names_is_recognised_and_lists_that_rule():
    from devlint.frontends.error_kinds import KINDS

    for doc in sorted((ROOT / "rules").glob("DEV*.md")):
        why = doc.read_text().split("## Why is this bad?")[1].split("\n## ")[0]
        errors = [m[1] for m in re.finditer(r"^`(\w[\w.]*(?:Error|Warning): [^`]*)`", why, re.M)]
        assert errors, doc.name
        for error in errors:
            rules = [k.rules for k in KINDS if k.matches(error)]
            assert rules and all(doc.stem in r for r in rules), (doc.stem, error)
