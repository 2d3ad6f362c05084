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
        if name.startswith("torch.nn.modules."):
            continue  # a base class, by its full name: checked through its subclasses below
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


def test_each_base_class_entry_is_what_its_torch_subclasses_hold():
    """`torch.nn.modules.batchnorm._BatchNorm` (a base a user's class may derive from): every
    class torch.nn exports that derives from it has the table's buffers too."""
    import importlib

    bases = [name for name in torch_buffers.TORCH_MODULE_BUFFERS if name.startswith("torch.nn.modules.")]
    assert "torch.nn.modules.batchnorm._BatchNorm" in bases
    for name in bases:
        module_name, _, class_name = name.rpartition(".")
        base = getattr(importlib.import_module(module_name), class_name)
        subclasses = [f"torch.nn.{n}" for n in dir(torch.nn)
                      if isinstance(getattr(torch.nn, n), type) and issubclass(getattr(torch.nn, n), base)]
        assert subclasses, name
        for subclass in subclasses:
            if subclass in torch_buffers.TORCH_MODULE_BUFFERS:
                assert torch_buffers.TORCH_MODULE_BUFFERS[name] <= torch_buffers.TORCH_MODULE_BUFFERS[subclass], (name, subclass)
