"""What one `devlint confirm` run covers: inputs on the device whatever the module holds, the lines
that ran, every lazy cache, and the same verdicts on a busy machine."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import CONFIRM_HEADER as HEADER, confirm_run, devlint, statuses

torch = pytest.importorskip("torch")


def confirm(tmp_path, source, *args, name="models.py"):
    """(code, row in `source`, verdict) per finding, as `devlint confirm --output-format json` tells."""
    return confirm_run(tmp_path, source, *args, name=name)[0]



# --- inputs go to the device, whatever the module holds -------------------------------------------
def test_modules_without_parameters_get_inputs_on_the_device(tmp_path):
    results = confirm(tmp_path, """
        class PositionalEncoding(nn.Module):
            def __init__(self, dim=8, max_len=16):
                super().__init__()
                self.pe = torch.zeros(max_len, dim)

            def forward(self, x):
                return x + self.pe[: x.shape[1]]


        class Noise(nn.Module):
            def __init__(self):
                super().__init__()
                self.table = torch.ones(8)

            def forward(self):
                return self.table * torch.ones(8, device="cuda")


        class Sinusoid(nn.Module):
            def forward(self, x):
                return x + torch.arange(x.shape[-1])
    """)
    assert statuses(results) == [
        ("DEV004", 5, "confirmed"),  # the input's width comes from the table the module holds
        ("DEV004", 14, "confirmed"),  # forward takes no input at all
        ("DEV005", 17, "confirmed"),
        ("DEV003", 22, "not-run"),  # nothing tells the input's shape
    ]
    assert "Expected all tensors to be on the same device" in results[0][2]["message"]
    assert "[tool.devlint.confirm.classes.Sinusoid] input-shapes" in results[3][2]["message"]


def test_example_inputs_hook_values_go_to_the_device(tmp_path):
    results = confirm(tmp_path, """
        class PositionalEncoding(nn.Module):
            def __init__(self):
                super().__init__()
                self.pe = torch.zeros(1, 16, 8)

            def forward(self, x, length):
                return x + self.pe[:, :length]


        class Broken(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = torch.ones(8)

            def forward(self, x, y):  # two inputs: nothing to guess them from
                return x * self.scale + y


        def devlint_example_inputs(cls):
            if cls is Broken:
                raise KeyError("no example for Broken")
            return torch.zeros(2, 4, 8), 4  # CPU tensors and a plain int, as a user writes them
    """)
    assert statuses(results) == [("DEV004", 5, "confirmed"), ("DEV004", 14, "inconclusive")]
    assert "devlint_example_inputs(Broken) raised KeyError" in results[1][2]["message"]


# --- the lines that ran ----------------------------------------------------------------------------
def test_a_device_literal_in_a_helper_is_judged_by_the_lines_that_ran(tmp_path):
    results = confirm(tmp_path, """
        def pick():
            return torch.device("cuda:0")


        def spare():
            return torch.device("cuda:1")


        def unused():
            return torch.device("cuda:1")


        class Moved(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.spare = spare()
                self.to(pick())

            def forward(self, x):
                return self.proj(x)
    """, "--select", "DEV005")
    assert statuses(results) == [("DEV005", 3, "confirmed"), ("DEV005", 7, "not-reproduced"), ("DEV005", 11, "not-run")]
    moved = results[0][2]
    assert moved["message"].startswith("line 7 made cuda:0; the module was moved there at line 23")
    assert "Torch not compiled with CUDA enabled" in moved["message"]
    assert moved["use"] == {"row": 23} and moved["origin"] == {"row": 7}
    assert "line 11 ran" in results[1][2]["message"]
    # a plain function no module run called: confirm does not run it
    assert "the function unused(), which no module run reached" in results[2][2]["message"]


def test_a_literal_used_by_a_tensor_made_later_is_confirmed(tmp_path):
    results = confirm(tmp_path, """
        def pick():
            return torch.device("cuda")


        class Made(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.dev = pick()

            def forward(self, x):
                return self.proj(x) + torch.ones(8, device=self.dev)
    """, "--select", "DEV005")
    ((code, row, verdict),) = results
    assert (code, row, verdict["status"]) == ("DEV005", 3, "confirmed")
    assert verdict["message"].startswith("line 7 made cuda; a tensor was made there at line 17")


# --- every lazy cache --------------------------------------------------------------------------------
def test_every_lazy_cache_is_confirmed_by_one_run(tmp_path):
    results = confirm(tmp_path, """
        class Cached(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self._mask = None
                self._pos = None
                self._rel_index = None

            def forward(self, x):
                if self._mask is None:
                    self._mask = torch.ones(16, 16, device=x.device).tril()
                if self._pos is None:
                    self._pos = torch.arange(16, device=x.device).float()
                if self._rel_index is None:
                    self._rel_index = torch.zeros(16, device=x.device)
                y = self.proj(x) @ self._mask[:8, :8]
                y = y + self._pos[: x.shape[-1]]
                return y * self._rel_index[:8]
    """)
    assert statuses(results) == [("DEV004", 12, "confirmed"), ("DEV004", 14, "confirmed"), ("DEV004", 16, "confirmed")]
    # each one meets the device where it is used, through a slice of the cache
    assert [(v["use"]["row"], v["origin"]["row"]) for _, _, v in results] == [(21, 16), (22, 18), (23, 20)]
    assert all("after a first forward on the CPU, then a move" in v["message"] for _, _, v in results)


def test_a_cache_scenario_that_fails_says_why(tmp_path):
    results = confirm(tmp_path, """
        class AcceleratorOnly(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self._scale = None

            def forward(self, x):
                if x.device.type == "cpu":
                    raise RuntimeError("this layer needs an accelerator")
                if self._scale is None:
                    self._scale = torch.ones(8, device=x.device)
                return self.proj(x) * self._scale
    """)
    ((code, row, verdict),) = results
    assert (code, row, verdict["status"]) == ("DEV004", 12, "inconclusive")
    assert "its first forward on the CPU at line 14: RuntimeError: this layer needs an accelerator" in verdict["message"]


# --- stable verdicts ---------------------------------------------------------------------------------
GOOD = """
class Factory(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.scale = torch.ones(8)

    def forward(self, x):
        return self.proj(x) * self.scale + torch.arange(8)
"""


def test_the_timeout_counts_the_files_own_code(tmp_path):
    (tmp_path / "good.py").write_text(HEADER + GOOD)
    (tmp_path / "spin.py").write_text(HEADER + "while True:\n    pass\n" + GOOD)
    # a 1 s limit is shorter than the torch import: that is not the file's time
    r = devlint("confirm", "--output-format", "json", "--timeout", "1", "good.py", "spin.py", cwd=tmp_path)
    records = [(Path(x["filename"]).name, x["confirm"]["status"], x["confirm"]["message"]) for x in json.loads(r.stdout)]
    assert [(f, s) for f, s, _ in records] == [("good.py", "confirmed")] * 2 + [("spin.py", "not-run")] * 2
    message = records[2][2]
    assert message.startswith("timed out after 1 s of the file's own code: importing spin.py ran past the limit")
    assert "torch import are not counted" in message


def test_same_verdicts_three_times_on_a_busy_machine_with_jobs(tmp_path):
    names = []
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text(HEADER + GOOD)
        names.append(f"m{i}.py")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        seen = []
        for _ in range(3):
            started = time.monotonic()
            r = devlint("confirm", "--output-format", "json", "-j", "2", "--timeout", "5", *names, cwd=tmp_path)
            seen.append([(Path(x["filename"]).name, x["location"]["row"], x["confirm"]["status"]) for x in json.loads(r.stdout)])
            print(f"run took {time.monotonic() - started:.1f} s under load")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    expected = [(name, row, "confirmed") for name in names for row in (10, 13)]
    assert seen == [expected] * 3
