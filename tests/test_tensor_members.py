"""The pinned table of tensor members (`devlint.torchinfo.tensor_members`) is what the installed torch has."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from devlint.torchinfo import tensor_members
from helpers import bench_script  # noqa: E402


def test_table_is_the_installed_torch_members():
    assert set(bench_script("tensor_members").members()) == tensor_members.TENSOR_MEMBERS, "run: python bench/tensor_members.py"


def test_table_has_what_tensors_have_and_not_what_they_lack():
    assert {"device", "shape", "to", "grad", "mT", "is_cuda", "numpy"} <= tensor_members.TENSOR_MEMBERS
    assert not {"num_processes", "process_index", "module", "forward"} & tensor_members.TENSOR_MEMBERS


def _parameters(source: str) -> list[str]:
    import libcst as cst

    from devlint.analysis.parameters import tensor_parameters
    from devlint.semantic.facts import FileFacts

    module = cst.parse_module(source)
    func = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    return tensor_parameters(func, FileFacts(module))


def test_a_parameter_read_for_a_foreign_member_is_not_a_tensor_unless_rebound():
    assert _parameters("def f(state, x):\n    return state.device, state.num_processes, x.shape\n") == ["x"]
    # after rebinding, `x.payload` is a member of the new value, not of the parameter
    assert _parameters("def f(x):\n    n = x.shape\n    x = wrap(x)\n    return x.payload\n") == ["x"]


def test_a_parameter_read_for_size_as_a_number_is_an_array_even_annotated():
    source = "def f(a: Tensor, n):\n    if a.size > n:\n        a = a[:n]\n    return a.shape\n"
    assert _parameters(source) == []
    assert _parameters("def f(a: Tensor, n):\n    return a.size(0) > n\n") == ["a"]
