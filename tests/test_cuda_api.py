"""The pinned DEV011 table (`devlint.torchinfo.cuda_api`) is what the installed CPU build of torch does."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from devlint.torchinfo import cuda_api

ROOT = Path(__file__).resolve().parents[1]

# The spec's named examples.
RAISE = ["synchronize", "current_device", "get_device_name", "get_device_capability", "mem_get_info",
         "set_per_process_memory_fraction", "get_device_properties", "current_stream", "set_device",
         "reset_peak_memory_stats", "Stream", "Event"]
WORK = ["is_available", "device_count", "empty_cache", "manual_seed", "manual_seed_all", "memory_allocated",
        "max_memory_allocated"]


def _script():
    spec = importlib.util.spec_from_file_location("cuda_only_api", ROOT / "bench" / "cuda_only_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def derived():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("with a GPU the CUDA-only functions work")
    if torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None:
        pytest.skip("the table is derived on the CPU build of torch")
    if importlib.util.find_spec("pynvml") is not None:
        pytest.skip("the table is derived without nvidia-ml-py")
    if not hasattr(__import__("os"), "fork"):
        pytest.skip("the derivation forks a process per call")
    return _script().derive(sys.executable, timeout=300)


def test_pinned_table_is_what_torch_does(derived):
    script = _script()
    for name in script.TABLE_FIELDS:
        assert getattr(cuda_api, name) == derived[name], (
            f"{name} differs from torch {derived['TORCH_VERSION']} (pinned from {cuda_api.TORCH_VERSION}): "
            "run python bench/cuda_only_api.py"
        )


def test_rendered_module_is_the_pinned_file(derived):
    script = _script()
    pinned_version = cuda_api.TORCH_VERSION
    rendered = script.render({**derived, "TORCH_VERSION": pinned_version})
    assert rendered == (ROOT / "src" / "devlint" / "torchinfo" / "cuda_api.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", RAISE)
def test_cuda_only_functions_raise(name):
    assert f"torch.cuda.{name}" in cuda_api.RAISES_WITHOUT_CUDA
    assert f"torch.cuda.{name}" not in cuda_api.WORKS_WITHOUT_CUDA


def test_exception_types():
    raises = cuda_api.RAISES_WITHOUT_CUDA
    for name in ("synchronize", "current_device", "get_device_name", "get_device_capability", "mem_get_info",
                 "set_per_process_memory_fraction"):
        assert raises[f"torch.cuda.{name}"] == "AssertionError"
        assert cuda_api.MESSAGES[f"torch.cuda.{name}"] == "Torch not compiled with CUDA enabled"
    assert raises["torch.cuda.set_device"] == "AttributeError"
    assert cuda_api.MESSAGES["torch.cuda.set_device"] == "module 'torch._C' has no attribute '_cuda_setDevice'"
    assert raises["torch.cuda.reset_peak_memory_stats"] == "AttributeError"
    assert raises["torch.cuda.Stream"] == raises["torch.cuda.Event"] == "RuntimeError"


@pytest.mark.parametrize("name", WORK)
def test_harmless_functions_work(name):
    assert f"torch.cuda.{name}" in cuda_api.WORKS_WITHOUT_CUDA
    assert f"torch.cuda.{name}" not in cuda_api.RAISES_WITHOUT_CUDA


def test_legacy_types_raise_type_error():
    assert {"torch.cuda.FloatTensor", "torch.cuda.LongTensor", "torch.cuda.sparse.FloatTensor"} <= cuda_api.LEGACY_TENSOR_TYPES
    for name in cuda_api.LEGACY_TENSOR_TYPES:
        assert cuda_api.RAISES_WITHOUT_CUDA[name] == "TypeError"


def test_context_managers_raise_on_entry():
    assert {"torch.cuda.device", "torch.cuda.profiler.profile"} <= set(cuda_api.CONTEXT_MANAGERS)
    assert "torch.cuda.graph" in cuda_api.RAISES_WITHOUT_CUDA  # it makes a CUDA stream when made


def test_sets_are_disjoint_and_plain_data():
    called = [set(cuda_api.RAISES_WITHOUT_CUDA), set(cuda_api.CONTEXT_MANAGERS), set(cuda_api.WORKS_WITHOUT_CUDA),
              set(cuda_api.NOT_CALLED)]
    assert sum(map(len, called)) == len(set().union(*called))
    assert set(cuda_api.MESSAGES) == called[0] | called[1]
    assert "torch" not in cuda_api.__dict__
