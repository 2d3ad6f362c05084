"""`devlint confirm` on the stand-in device: each status, each rule, and the fixed code clean."""
import json
import os
import pickle
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from helpers import CONFIRM_HEADER as HEADER, confirm_run, devlint, statuses

torch = pytest.importorskip("torch")


def confirm(tmp_path, source, *args, name="models.py"):
    return confirm_run(tmp_path, source, *args, name=name)[0]



def test_each_runtime_rule_confirmed(tmp_path):
    results = confirm(tmp_path, """
        class Factory(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                pos = torch.arange(x.shape[-1])
                return self.proj(x) + pos


        class Attribute(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.scale = torch.ones(8)

            def forward(self, x):
                return self.proj(x) * self.scale


        class Hardcoded(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, device="cuda"):
                return self.proj(x).to(device) + torch.ones(8).cuda()
    """)
    assert statuses(results) == [
        ("DEV003", 8, "confirmed"), ("DEV004", 16, "confirmed"), ("DEV005", 27, "confirmed"), ("DEV001", 28, "confirmed"),
    ]
    factory = results[0][2]
    assert factory["use"] == {"row": 13} and factory["origin"] == {"row": 12}  # rows in the file
    assert "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!" in factory["message"]
    assert factory["device"] == "stand-in (meta)"
    assert "Torch not compiled with CUDA enabled" in results[3][2]["message"]


def test_benign_not_reproduced_not_reached(tmp_path):
    results = confirm(tmp_path, """
        class Scalar(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.eps = torch.tensor(1e-6)

            def forward(self, x):
                return self.proj(x) + self.eps


        class HostOnly(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.table = torch.arange(8)

            def forward(self, x):
                return self.proj(x) * 2

            def describe(self):
                return self.table.tolist()


        class Unused(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return self.proj(x)

            def helper(self, x):
                return x + torch.ones(8).cuda()
    """)
    assert statuses(results) == [
        ("DEV004", 6, "benign"), ("DEV004", 16, "not-reproduced"), ("DEV001", 34, "not-reached"),
    ]


def test_lazy_cache_filled_on_cpu_then_moved(tmp_path):
    """The first forward on the CPU fills the cache; after model.to(device) it stays behind."""
    results = confirm(tmp_path, """
        class Cached(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.mask = None

            def forward(self, x):
                if self.mask is None:
                    self.mask = torch.ones(8, 8, device=x.device).tril()
                return self.proj(x) @ self.mask
    """)
    ((code, row, verdict),) = results
    assert (code, row, verdict["status"]) == ("DEV004", 10, "confirmed")
    assert "after a first forward on the CPU, then a move" in verdict["message"]


def test_data_dependent_code_is_inconclusive_with_its_line(tmp_path):
    results = confirm(tmp_path, """
        class Branchy(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.bias = torch.zeros(8)

            def forward(self, x):
                if x.sum().item() > 0:
                    return x
                return self.proj(x) + self.bias
    """, "--values", "never")  # the data-less stand-in alone (auto runs it again with values)
    ((code, row, verdict),) = results
    assert verdict["status"] == "inconclusive"
    assert "line 13" in verdict["message"] and "item" in verdict["message"]


def test_not_run_says_what_to_configure(tmp_path):
    results = confirm(tmp_path, """
        class NeedsArgs(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
                self.scale = torch.ones(dim)

            def forward(self, x):
                return self.proj(x) * self.scale
    """)
    ((code, row, verdict),) = results
    assert verdict["status"] == "not-run"
    assert "[tool.devlint.confirm.classes.NeedsArgs] init-kwargs" in verdict["message"]
    named = confirm(tmp_path, (tmp_path / "models.py").read_text()[len(HEADER):],
                    "--init-kwargs", '{"dim": 16}', "--input-shape", "2,16", name="models.py::NeedsArgs")
    assert named[0][2]["status"] == "confirmed"


def test_config_describes_a_class(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.devlint.confirm.classes.Tokens]\ninit-kwargs = {vocab = 50}\ninput-shapes = [[2, 7]]\ninput-dtype = "int64"\n'
    )
    results = confirm(tmp_path, """
        class Tokens(nn.Module):
            def __init__(self, vocab):
                super().__init__()
                self.embed = nn.Embedding(vocab, 8)

            def forward(self, ids):
                positions = torch.arange(ids.shape[1])
                return self.embed(ids) + self.embed(positions)
    """)
    assert statuses(results) == [("DEV003", 8, "confirmed")]


def test_config_passes_keyword_inputs(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.devlint.confirm.classes.Dropper]\ninput-shapes = [[4, 8]]\n"
        'forward-kwargs = { keep = { shape = [4], dtype = "bool" }, scale = 2.0 }\n'
    )
    results = confirm(tmp_path, """
        class Dropper(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, keep=None, scale=1.0):
                if keep is None:
                    return self.proj(x)
                return self.proj(x) * scale + torch.zeros(8)
    """)
    assert statuses(results) == [("DEV003", 10, "confirmed")]


@pytest.mark.parametrize("body, status", [
    ("self.rnn = nn.GRU(8, 8, batch_first=True)", "confirmed"),
    ("self.rnn = nn.LSTM(8, 8)", "confirmed"),
])
def test_recurrent_layers_run_on_the_stand_in(tmp_path, body, status):
    results = confirm(tmp_path, f"""
        class Recurrent(nn.Module):
            def __init__(self):
                super().__init__()
                {body}

            def forward(self, x):
                out, _ = self.rnn(x)
                return out + torch.ones(8)
    """)
    assert statuses(results) == [("DEV003", 9, status)]


def test_cuda_synchronize_on_a_cpu_only_host(tmp_path):
    results = confirm(tmp_path, """
        class Synced(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                torch.cuda.synchronize()
                return self.proj(x).cuda()
    """, "--select", "DEV001")
    ((code, row, verdict),) = results
    # the stand-in plays the GPU for torch.cuda's housekeeping calls, so the run goes on
    assert (code, verdict["status"]) == ("DEV001", "confirmed")


def test_relative_imports_work(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text("WIDTH = 8\n")
    (pkg / "model.py").write_text(HEADER + textwrap.dedent("""
        from .layers import WIDTH


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(WIDTH, WIDTH)

            def forward(self, x):
                return self.proj(x) + torch.ones(WIDTH)
    """))
    r = devlint("confirm", "--output-format", "json", "pkg/model.py", cwd=tmp_path)
    assert [x["confirm"]["status"] for x in json.loads(r.stdout)] == ["confirmed"]


# --- isolation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("body, reason", [
    ("while True:\n    pass", "timed out after 5 s"),
    ("import os\nos.abort()", "crashed (SIGABRT)"),
    ("import sys\nsys.exit(3)", "SystemExit"),
    ("x = bytearray(6 * 1024 ** 3)", "MemoryError"),
])
def test_hostile_modules_get_a_status_and_the_run_goes_on(tmp_path, body, reason):
    (tmp_path / "hostile.py").write_text(HEADER + body + "\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x.cuda()\n")
    (tmp_path / "good.py").write_text(HEADER + "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                      "        self.proj = nn.Linear(8, 8)\n\n    def forward(self, x):\n        return self.proj(x).cuda()\n")
    r = devlint("confirm", "--output-format", "json", "--timeout", "5", "--memory-mb", "3072", "hostile.py", "good.py", cwd=tmp_path)
    records = {Path(x["filename"]).name: x["confirm"] for x in json.loads(r.stdout)}
    assert records["hostile.py"]["status"] == "not-run"
    assert reason in records["hostile.py"]["message"]
    assert records["good.py"]["status"] == "confirmed"


def test_user_stdout_does_not_corrupt_the_result(tmp_path):
    (tmp_path / "m.py").write_text(HEADER + 'print(\'{"fatal": "forged"}\')\n\n\nclass M(nn.Module):\n'
                                   "    def __init__(self):\n        super().__init__()\n        self.proj = nn.Linear(8, 8)\n\n"
                                   "    def forward(self, x):\n        return self.proj(x).cuda()\n")
    r = devlint("confirm", "--output-format", "json", "m.py", cwd=tmp_path)
    assert json.loads(r.stdout)[0]["confirm"]["status"] == "confirmed"


# --- DEV002: checkpoints ----------------------------------------------------------------------
CRAFT = """
import sys, torch
from torch.serialization import register_package
register_package(-100, lambda obj: "cuda:0" if isinstance(obj, (torch.storage.UntypedStorage, torch.storage.TypedStorage)) else None,
                 lambda obj, location: None)
torch.save({"w": torch.ones(3), "b": torch.zeros(2)}, sys.argv[1])
"""


def test_checkpoint_with_cuda_storages_confirms_dev002(tmp_path):
    subprocess.run([sys.executable, "-c", CRAFT, str(tmp_path / "gpu.pt")], check=True)
    torch.save({"w": torch.ones(3)}, tmp_path / "cpu.pt")
    (tmp_path / "load.py").write_text('import torch\n\nstate = torch.load("gpu.pt")\nother = torch.load("cpu.pt")\n'
                                      "third = torch.load(path)\n")
    r = devlint("confirm", "--output-format", "json", "load.py", cwd=tmp_path)
    got = [(x["location"]["row"], x["confirm"]["status"]) for x in json.loads(r.stdout)]
    assert got == [(3, "confirmed"), (4, "not-reproduced"), (5, "not-run")]
    message = json.loads(r.stdout)[0]["confirm"]["message"]
    assert "cuda:0 x2" in message and "Attempting to deserialize object on a CUDA device" in message
    # the real torch.load on this CPU-only host agrees
    failed = subprocess.run([sys.executable, "-c", "import torch; torch.load('gpu.pt')"], cwd=tmp_path, capture_output=True, text=True)
    assert "Attempting to deserialize object on a CUDA device" in failed.stderr


def test_checkpoint_reader_never_runs_pickled_code(tmp_path):
    from devlint.confirm.checkpoint import storage_locations

    class Boom:
        def __reduce__(self):
            return (os.system, ("touch pwned",))

    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("evil/data.pkl", pickle.dumps({"x": Boom()}))
    assert storage_locations(path) == {}
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


# --- the loop closed -----------------------------------------------------------------------------
LOOP = {
    "DEV001": """
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                device = x.device
                return self.proj(x).cuda()
    """,
    "DEV003": """
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return self.proj(x) + torch.arange(x.shape[-1])
    """,
    "DEV004": """
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.scale = torch.ones(8)

            def forward(self, x):
                return self.proj(x) * self.scale
    """,
    "DEV005": """
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                device = x.device
                return self.proj(x).to("cuda")
    """,
    "DEV002": """
        def load(model):
            model.load_state_dict(torch.load("gpu.pt"))
    """,
}


@pytest.mark.parametrize("code", sorted(LOOP))
def test_fix_then_confirm_is_clean(tmp_path, code):
    subprocess.run([sys.executable, "-c", CRAFT, str(tmp_path / "gpu.pt")], check=True)
    (tmp_path / "m.py").write_text(HEADER + textwrap.dedent(LOOP[code]))
    before = json.loads(devlint("confirm", "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    assert [(x["code"], x["confirm"]["status"]) for x in before] == [(code, "confirmed")]
    fixed = devlint("--fix", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert fixed.stdout.splitlines()[-1] == "Fixed 1 finding, 0 remaining."
    after = devlint("confirm", "m.py", cwd=tmp_path)
    assert (after.returncode, after.stdout) == (0, "No findings to confirm.\n")
    if code != "DEV002":  # the fixed module really runs on the stand-in device
        namespace = {}
        exec(compile((tmp_path / "m.py").read_text(), "m.py", "exec"), namespace)
        model = namespace["M"]().to("meta")
        assert model(torch.zeros(2, 8, device="meta")).device.type == "meta"


# --- real CUDA: these run where a GPU is present ----------------------------------------------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
def test_real_cuda_agrees_with_the_stand_in(tmp_path):
    source = """
        class Factory(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.scale = torch.ones(8)

            def forward(self, x):
                return self.proj(x) * self.scale + torch.arange(8)
    """
    stand_in = statuses(confirm(tmp_path, source, "--device", "stand-in"))
    real = confirm(tmp_path, source, "--device", "cuda")
    assert statuses(real) == stand_in == [("DEV004", 6, "confirmed"), ("DEV003", 9, "confirmed")]
    assert real[0][2]["device"].startswith("cuda")


def test_the_child_watches_every_call_the_static_rules_know():
    from devlint.confirm import recorders
    from devlint.torchinfo import names

    def torch_objects(qualified):
        return {getattr(torch, name.split(".", 1)[1]) for name in qualified}

    assert recorders.LEGACY == torch_objects(names.LEGACY_CONSTRUCTORS)
    assert {torch.BFloat16Tensor, torch.CharTensor, torch.ShortTensor} <= recorders.LEGACY
    assert recorders.FACTORIES == torch_objects(names.FACTORIES | {names.AS_TENSOR, names.FROM_NUMPY})
