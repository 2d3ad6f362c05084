"""DEV004 and DEV009 findings name their evidence: where the tensor (or the plain container) is
made, and where forward-time code reads it."""
import json
from pathlib import Path

from devlint.workspace.config import Settings
from devlint.workspace.linter import Linter
from helpers import devlint

SOURCE = '''\
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        pe = torch.zeros(n, dim)
        pe[:, 0::2] = 1.0
        self.pe = pe
        self.scale = torch.ones(dim)
        self.layers = [nn.Linear(dim, dim) for _ in range(2)]
        self.unused = torch.zeros(3)

    def forward(self, x):
        x = x * self.scale
        for layer in self.layers:
            x = layer(x)
        return self._add_position(x)

    def _add_position(self, x):
        return x + self.pe[: x.size(1)]

    def describe(self):
        return self.scale.tolist()
'''


def _findings(source=SOURCE):
    return {f.message.split("`")[1]: f for f in Linter(Settings(root=Path(".")), Path("m.py")).check(source)}


def test_dev004_names_where_the_tensor_is_made_and_where_forward_reads_it():
    found = _findings()
    pe, scale = found["self.pe"], found["self.scale"]
    assert [(r.message, r.row) for r in pe.related] == [("`pe` is made", 8), ("read in `_add_position`", 22)]
    # a read outside forward-time code (`describe`) is no evidence
    assert [(r.message, r.row) for r in scale.related] == [
        ("`torch.ones()` makes the tensor on the CPU", 11), ("read in `forward`", 16)]
    # read by nothing that runs after construction, it meets no input: nothing to name, no finding
    assert "self.unused" not in found
    assert pe.text.endswith("(`pe` is made at line 8; read in `_add_position` at line 22)")


def test_dev009_names_where_the_container_is_made_and_where_forward_uses_it():
    layers = _findings()["self.layers"]
    assert layers.code == "DEV009"
    assert [(r.message, r.row) for r in layers.related] == [
        ("the plain list is made", 12), ("its modules are used in `forward`", 17)]


def test_related_locations_reach_the_json_report(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE, encoding="utf-8")
    result = devlint("check", "--select", "DEV004,DEV009", "--output-format", "json", str(path), cwd=tmp_path)
    records = json.loads(result.stdout)
    by_name = {r["message"].split("`")[1]: r for r in records}
    assert all(by_name[name]["related"] for name in ("self.pe", "self.scale", "self.layers"))
    assert "self.unused" not in by_name
