"""`devlint confirm` on DEV002: the checkpoints torch.save writes, read for their storages' devices.

Every checkpoint here is written by real torch. One "saved on a GPU" is written on this CPU-only
machine by registering a location tagger with `torch.serialization.register_package`, the registry
torch's own CUDA tagger is in: torch.save writes the same storage ids it writes for CUDA storages,
and torch.load on a CPU-only machine fails on the file as on one saved from a GPU (checked).
"""
import argparse
import json
import os
import pickle
import subprocess
import sys
import textwrap
from collections import Counter, OrderedDict

import pytest
from helpers import devlint

from devlint.confirm.checkpoint import storage_locations

torch = pytest.importorskip("torch")
nn = torch.nn

CUDA_ERROR = "Attempting to deserialize object on a CUDA device"
KINDS = ("state_dict", "training", "module")
FORMATS = ("zip", "legacy")

USER_MODULE = """
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 3)
            self.norm = nn.BatchNorm1d(3)

        def forward(self, x):
            return self.norm(self.proj(x))
"""

# Writes KINDS x FORMATS x (cpu, cuda), then loads each with torch as a user on this CPU-only
# machine would and prints the storages torch restored from each, by location.
WRITER = """
    import json
    from collections import Counter
    import torch
    from models import Net

    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    checkpoints = {
        "state_dict": model.state_dict(),
        "training": {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3,
                     "loss": 0.25, "run": "baseline", "scheduler": None, "input_shape": (2, 4)},
        "module": model,
    }

    def save_all(device):
        for kind, obj in checkpoints.items():
            torch.save(obj, f"{kind}-zip-{device}.pt")
            torch.save(obj, f"{kind}-legacy-{device}.pt", _use_new_zipfile_serialization=False)

    # On a GPU, Adam keeps its step counters on the CPU (torch/optim/adam.py); the rest is the GPU's.
    steps = {state["step"].untyped_storage().data_ptr() for state in optimizer.state.values()}
    save_all("cpu")
    registry = list(torch.serialization._package_registry)
    torch.serialization.register_package(-100, lambda s: None if s.data_ptr() in steps else "cuda:0",
                                         lambda storage, location: None)
    save_all("cuda")
    torch.serialization._package_registry[:] = registry

    restored = {}
    for name in [f"{k}-{f}-{d}.pt" for k in checkpoints for f in ("zip", "legacy") for d in ("cpu", "cuda")]:
        weights_only = not name.startswith("module")  # a whole module needs its class, as torch.load says
        locations = []
        torch.load(name, weights_only=weights_only, map_location=lambda s, loc: locations.append(loc) or s)
        try:
            torch.load(name, weights_only=weights_only)
            error = None
        except RuntimeError as exc:
            error = str(exc)
        restored[name] = {"locations": Counter(locations), "error": error}
    print(json.dumps(restored))
"""


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """The folder of checkpoints, and what torch itself restored from each: {name: {location: n}}.
    The user's class lives in `src/models.py`, which devlint, run from the folder, cannot import."""
    folder = tmp_path_factory.mktemp("checkpoints")
    (folder / "src").mkdir()
    (folder / "src" / "models.py").write_text(textwrap.dedent(USER_MODULE))
    env = {**os.environ, "PYTHONPATH": str(folder / "src")}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(WRITER)], cwd=folder, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    restored = json.loads(r.stdout.splitlines()[-1])
    for name, seen in restored.items():
        # torch.load on this CPU-only machine: CPU checkpoints load, GPU ones raise the CUDA error
        assert seen["error"] is None if name.endswith("-cpu.pt") else CUDA_ERROR in seen["error"], (name, seen)
        assert ("cuda:0" in seen["locations"]) == name.endswith("-cuda.pt"), (name, seen)
    restored = {name: Counter(seen["locations"]) for name, seen in restored.items()}
    return folder, restored


def names():
    return [f"{kind}-{fmt}-{device}.pt" for kind in KINDS for fmt in FORMATS for device in ("cpu", "cuda")]


def test_confirm_reads_every_checkpoint_format(checkpoints):
    folder, restored = checkpoints
    assert restored["training-zip-cuda.pt"] == {"cuda:0": 15, "cpu": 4}  # Adam's step counters stay on the CPU
    with open(folder / "plain.pkl", "wb") as handle:
        pickle.dump({"epoch": 3}, handle)
    torch.save({"epoch": 3, "note": "no tensors"}, folder / "epoch.pt")
    loads = [f'c{i} = torch.load("{name}")\n' for i, name in enumerate(names())]
    (folder / "load.py").write_text("import torch\n\n" + "".join(loads) + 'epoch = torch.load("epoch.pt")\n'
                                    'other = torch.load("plain.pkl")\n')
    r = devlint("confirm", "--output-format", "json", "load.py", cwd=folder)
    assert r.returncode == 1, r.stderr
    records = json.loads(r.stdout)
    assert [x["location"]["row"] for x in records] == list(range(3, len(loads) + 5))
    for name, record in zip(names(), records):
        devices = ", ".join(f"{loc} x{n}" for loc, n in sorted(restored[name].items()))
        status, message = record["confirm"]["status"], record["confirm"]["message"]
        if name.endswith("-cuda.pt"):
            assert status == "confirmed", (name, message)
            assert message.startswith(f"{name} holds storages saved on {devices}; on a CPU-only machine torch.load "
                                      f"raises RuntimeError: {CUDA_ERROR}"), message
        else:
            assert (status, message) == ("not-reproduced", f"{name} holds only {devices} storages")
    epoch = records[-2]["confirm"]
    assert (epoch["status"], epoch["message"]) == ("not-reproduced", "epoch.pt holds no tensor storages")
    other = records[-1]["confirm"]
    assert (other["status"], other["message"]) == (
        "not-run", "cannot read plain.pkl: ValueError: neither a zip nor a legacy torch.save file: not a torch checkpoint")


def test_confirm_checkpoint_option_reads_a_gpu_training_checkpoint(checkpoints):
    folder, restored = checkpoints
    (folder / "resume.py").write_text("import sys\n\nimport torch\n\nstate = torch.load(sys.argv[1])\n")
    r = devlint("confirm", "--checkpoint", "training-legacy-cuda.pt", "resume.py", cwd=folder)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[:2] == [
        ("resume.py:5:9: DEV002 [confirmed] `torch.load()` without `map_location`: a checkpoint saved on a GPU "
         "fails to load on a machine without one"),
        (f"    training-legacy-cuda.pt holds storages saved on cpu x4, cuda:0 x15; on a CPU-only machine torch.load "
         f"raises RuntimeError: {CUDA_ERROR} but torch.cuda.is_available() is False. If you are running on a "
         "CPU-only machine, please use torch.load with map_location=torch.device('cpu') to map your storages to "
         "the CPU. (use: line 5, origin: line 5, checkpoint)"),
    ]
    assert restored["training-legacy-cuda.pt"] == {"cpu": 4, "cuda:0": 15}


# --- the reader alone: what else training scripts put in a checkpoint --------------------------
@pytest.fixture
def tag_cuda(monkeypatch):
    """torch.save tags every storage "cuda:0" (in a copy of torch's registry, restored after)."""
    monkeypatch.setattr(torch.serialization, "_package_registry", list(torch.serialization._package_registry))
    torch.serialization.register_package(-100, lambda storage: "cuda:0", lambda storage, location: None)


class Trainer:
    class Config:  # nested: pickle protocol 2 names it as getattr(Trainer, "Config")
        def __init__(self, lr):
            self.lr = lr


class History(OrderedDict):
    pass


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
@pytest.mark.parametrize("protocol", [2, 5])
def test_reader_reads_what_training_scripts_save(tmp_path, tag_cuda, zip_format, protocol):
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5, bias=False))
    model[1].weight = model[0].weight  # tied, as in a language model: one storage
    checkpoint = {
        "model": model.state_dict(),
        "halves": (model[0].weight[:2], model[0].weight[2:]),  # views of it
        "embedding": torch.zeros(3),
        "args": argparse.Namespace(lr=0.1, layers=[1, 2]),
        "config": Trainer.Config(lr=0.1),
        "history": History(loss=[0.5, 0.25]),
        "seen": {"a", "b"},
        "rng": torch.get_rng_state(),
    }
    path = tmp_path / "ckpt.pt"
    torch.save(checkpoint, path, pickle_protocol=protocol, _use_new_zipfile_serialization=zip_format)
    # the tied weight, the embedding and the RNG state: each storage once, however many tensors view it
    assert storage_locations(path) == {"cuda:0": 3}


def test_reader_never_runs_a_legacy_header(tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps(Boom()) + pickle.dumps(1001))
    with pytest.raises(ValueError, match="not a torch checkpoint"):
        storage_locations(path)
    assert not (tmp_path / "pwned").exists()
