"""The pinned table of the buffers torch.nn's module classes register (`devlint.torchinfo.torch_buffers`)
is what the installed torch registers."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from devlint.torchinfo import torch_buffers
from helpers import bench_script  # noqa: E402


def test_table_is_what_the_installed_torch_registers():
    table = {name: frozenset(names) for name, names in bench_script("torch_buffers").buffers().items()}
    assert table == torch_buffers.TORCH_MODULE_BUFFERS, "run: python bench/torch_buffers.py"


def test_each_class_really_has_those_buffers():
    """Built with its defaults (a weight where the class takes one), each class holds the
    buffers the table names."""
    for name, expected in torch_buffers.TORCH_MODULE_BUFFERS.items():
        cls = getattr(torch.nn, name.rsplit(".", 1)[-1])
        if name.endswith(("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
                          "InstanceNorm3d")) and "Lazy" not in name:
            module = cls(4, track_running_stats=True)
        elif "Lazy" in name:
            module = cls(track_running_stats=True)
        elif "Pool" in name:
            module = cls(2, output_size=1)
        elif name == "torch.nn.SyncBatchNorm":
            module = cls(4)
        else:
            try:
                module = cls(weight=torch.ones(3))
            except TypeError:
                continue  # takes no weight here
        assert expected <= set(module._buffers), name
