"""The pinned table of which torch.nn module classes make parameters or buffers
(`devlint.torchinfo.torch_nn_tensors`, read by DEV013) is what the installed torch builds."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from devlint.torchinfo import torch_nn_tensors
from helpers import bench_script  # noqa: E402


def test_table_is_what_the_installed_torch_builds():
    if torch.__version__ != torch_nn_tensors.TORCH_VERSION:
        pytest.skip(f"the table is of torch {torch_nn_tensors.TORCH_VERSION}, torch {torch.__version__} is installed")
    assert bench_script("torch_nn_tensors").render() == (
        bench_script("torch_nn_tensors").TARGET.read_text(encoding="utf-8")), "run: python bench/torch_nn_tensors.py"


def test_the_layers_users_build_are_sorted_as_their_weights_say():
    assert {"Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "Embedding", "LSTM", "MultiheadAttention"} \
        <= torch_nn_tensors.MAKES_TENSORS
    assert {"ReLU", "Dropout", "MaxPool2d", "Upsample", "Identity", "CrossEntropyLoss", "InstanceNorm2d"} \
        <= torch_nn_tensors.MAKES_NO_TENSORS
    assert not torch_nn_tensors.MAKES_TENSORS & torch_nn_tensors.MAKES_NO_TENSORS


def test_turning_the_keywords_off_leaves_no_tensors():
    for name, flags in torch_nn_tensors.TENSORS_OFF.items():
        if name.startswith("Lazy"):
            continue  # built without sizes; the table says the same of them
        cls = getattr(torch.nn, name)
        off, on = build(cls, **{flag: False for flag in flags}), build(cls)
        assert not list(off.parameters()) and not list(off.buffers()), name
        assert list(on.parameters()) or list(on.buffers()), name


def build(cls, **keywords):
    try:
        return cls(4, **keywords)
    except TypeError:  # nn.GroupNorm(num_groups, num_channels)
        return cls(2, 4, **keywords)
