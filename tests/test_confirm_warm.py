"""`devlint confirm` imports torch once per run: each file runs in a fresh fork of a warm process
(devlint.confirm.zygote), and nothing of one file's run reaches the next."""
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CONFIRM_HEADER as HEADER

pytest.importorskip("torch")

# what the file saw of an earlier file's run, and which process forked it, told in the import error
TELLS = HEADER.replace("import torch", "import os\nimport torch") + """
saw = getattr(torch, "left_behind", None)
torch.left_behind = os.getpid()
raise RuntimeError(f"parent {os.getppid()}, saw {saw}")


class M(nn.Module):
    def forward(self, x):
        return x.cuda()
"""
GOOD = HEADER + """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(x).cuda()
"""


def confirm(tmp_path: Path, *names: str, env=None) -> tuple[int, dict]:
    """(devlint's pid, {file name: confirm record}) for `devlint confirm` on `names`."""
    proc = subprocess.Popen([sys.executable, "-m", "devlint", "confirm", "--output-format", "json", *names],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode in (0, 1), err
    return proc.pid, {Path(x["filename"]).name: x["confirm"] for x in json.loads(out)}


def told(message: str) -> tuple[int, str]:
    """(the pid of the process that forked the run, what it saw of an earlier run)."""
    match = re.search(r"RuntimeError: parent (\d+), saw (\w+)", message)
    assert match, message
    return int(match.group(1)), match.group(2)


def test_files_fork_from_one_warm_process_and_see_nothing_of_each_other(tmp_path):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(TELLS)
    (tmp_path / "good.py").write_text(GOOD)
    devlint_pid, records = confirm(tmp_path, "a.py", "b.py", "good.py")
    (parent_a, saw_a), (parent_b, saw_b) = told(records["a.py"]["message"]), told(records["b.py"]["message"])
    assert parent_a == parent_b != devlint_pid  # one warm process forked both (a fresh interpreter's parent is devlint)
    assert saw_a == saw_b == "None"  # a.py's change to torch did not reach b.py
    assert records["good.py"]["status"] == "confirmed"


def test_where_the_warm_process_cannot_fork_safely_each_file_gets_a_fresh_interpreter(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n")
    (tmp_path / "a.py").write_text(TELLS)
    (tmp_path / "good.py").write_text(GOOD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    devlint_pid, records = confirm(tmp_path, "a.py", "good.py", env=env)
    assert told(records["a.py"]["message"]) == (devlint_pid, "None")
    assert records["good.py"]["status"] == "confirmed"


def test_a_warm_process_that_died_is_replaced_for_the_next_file(tmp_path):
    from devlint.confirm import Options, run_child, warm_processes

    (tmp_path / "a.py").write_text(TELLS)
    options = Options(device="stand-in")
    with warm_processes():
        first, _ = told(run_child(tmp_path / "a.py", options)["fatal"])
        os.kill(first, signal.SIGKILL)
        second, saw = told(run_child(tmp_path / "a.py", options)["fatal"])
    assert second not in (first, os.getpid()) and saw == "None"


def test_the_exit_status_of_a_run_that_leaves_without_a_result(tmp_path):
    (tmp_path / "leaves.py").write_text(HEADER + "import os, sys\nprint('leaving now', file=sys.stderr)\nos._exit(3)\n"
                                        "\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x.cuda()\n")
    _, records = confirm(tmp_path, "leaves.py")
    record = records["leaves.py"]
    assert (record["status"], record["message"]) == ("not-run", "the run ended without a result (exit status 3: leaving now)")
