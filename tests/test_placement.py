"""CUDA's placement rule as data (devlint.confirm.placement): every table entry on the stand-in,
the codegen method names against torch's own yaml, and modules through `devlint confirm`."""
import json
import textwrap

import pytest
from helpers import devlint

torch = pytest.importorskip("torch")

from devlint.confirm import placement, recorders

HEADER = "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n\n\n"


@pytest.mark.parametrize("entry", placement.TABLE, ids=[e.name for e in placement.TABLE])
def test_every_entry_on_the_stand_in_gives_the_tables_verdict(entry):
    verdict, message = placement.stand_in_verdict(entry, recorders)
    assert verdict == entry.verdict, message
    if entry.verdict == placement.REJECTS:
        assert message == entry.message


def test_the_table_covers_each_family():
    families = {e.family for e in placement.TABLE}
    assert families >= {"elementwise", "copy", "index", "masked", "where", "gather", "embedding", "matmul",
                        "convolution", "norm", "rnn", "attention", "cat", "loss"}
    names = {e.name.split(":")[0] for e in placement.TABLE}
    assert {"isin", "lerp", "addcmul", "take", "embedding_bag", "mv", "dot", "baddbmm", "group_norm"} <= names


def test_asymmetric_indexing_is_decided_both_ways():
    d = placement.STAND_IN
    index = torch.ops.aten.index.Tensor
    into_device = placement.decide(index, (torch.zeros(4, device=d), [torch.zeros(2, dtype=torch.long)]), {})
    into_cpu = placement.decide(index, (torch.zeros(4), [torch.zeros(2, dtype=torch.long, device=d)]), {})
    assert into_device.verdict == placement.ACCEPTS
    assert (into_cpu.verdict, into_cpu.message) == (
        placement.REJECTS, "indices should be either on cpu or on the same device as the indexed tensor (cpu)")


def test_ops_outside_the_table_follow_the_general_rule():
    d = placement.STAND_IN
    scalar = torch.tensor(2.0)
    kron = placement.decide(torch.ops.aten.kron.default, (torch.ones(2, device=d), scalar), {})
    assert kron.verdict == placement.REJECTS  # a 0-dim CPU tensor outside elementwise ops
    assert kron.message.endswith("(in aten.kron.default)")
    atan2 = placement.decide(torch.ops.aten.atan2.default, (torch.ones(2, device=d), scalar), {})
    assert atan2.verdict == placement.ACCEPTS  # pointwise, one 0-dim CPU tensor
    two = placement.decide(torch.ops.aten.atan2.default, (torch.ones(2, device=d), torch.ones(2)), {})
    assert two.verdict == placement.REJECTS


def test_codegen_method_names_match_torchs_yaml():
    """The wrapper names come from torch's native_functions.yaml through torchgen's own naming."""
    torchgen = pytest.importorskip("torchgen")
    import os

    from torchgen.api.types import DispatcherSignature, NativeSignature
    from torchgen.gen import get_grouped_native_functions, parse_native_yaml
    from torchgen.model import DeviceCheckType, DispatchKey, NativeFunctionsGroup

    root = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")
    if not os.path.exists(os.path.join(root, "native_functions.yaml")):
        pytest.skip("this torchgen ships no native_functions.yaml")
    parsed = parse_native_yaml(os.path.join(root, "native_functions.yaml"), os.path.join(root, "tags.yaml"))
    cuda = parsed.backend_indices[DispatchKey.CUDA]
    functions = {str(f.func.name): f for f in parsed.native_functions}
    groups = {str(f.func.name): g for g in get_grouped_native_functions(parsed.native_functions)
              if isinstance(g, NativeFunctionsGroup) for f in g.functions()}
    for op, method in placement.CODEGEN_METHODS.items():
        f = functions[op]
        assert f.device_check == DeviceCheckType.ExactSame, op
        group = groups.get(op)
        if group is not None and group.structured:
            assert cuda.get_kernel(group) is not None, op
            expected = NativeSignature(f.func, prefix="wrapper_CUDA_", symint=False).name()
        else:
            assert cuda.get_kernel(f) is not None, op
            expected = DispatcherSignature.from_schema(
                f.func, prefix=f"wrapper_CUDA_{f.func.name.overload_name}_", symint=False).name()
        assert method == expected, op


def confirm(tmp_path, source, name):
    (tmp_path / name).write_text(HEADER + textwrap.dedent(source))
    r = devlint("confirm", "--output-format", "json", name, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    return [(x["code"], x["location"]["row"] - 5, x["confirm"]) for x in json.loads(r.stdout)]


def test_indexing_and_masked_ops_through_confirm(tmp_path):
    results = confirm(tmp_path, """
        class CpuIndex(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                idx = torch.arange(4)
                return self.proj(x)[:, idx]


        class DeviceMask(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.table = torch.arange(8.0)

            def forward(self, x):
                mask = self.proj(x)[0] > 0
                return self.table[mask]


        class CpuMask(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.keep = torch.ones(8, dtype=torch.bool)

            def forward(self, x):
                return self.proj(x).masked_fill(self.keep, 0.0)


        class CpuValue(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.fill = torch.tensor(0.5)

            def forward(self, x):
                y = self.proj(x)
                return y.masked_fill(y > 0, self.fill)
    """, "models.py")
    # CpuIndex's `idx`, only an index into a device tensor, is not flagged (DEV003 spares it)
    assert [(code, row, c["status"]) for code, row, c in results] == [
        ("DEV004", 16, "confirmed"), ("DEV004", 27, "confirmed"), ("DEV004", 37, "benign"),
    ]
    messages = [c["message"] for _, _, c in results]
    assert "indices should be either on cpu or on the same device as the indexed tensor (cpu)" in messages[0]
    assert results[0][2]["use"] == {"row": 25}  # the line of self.table[mask], in the file
    assert "expected self and mask to be on the same device, but got mask on cpu and self on cuda:0" in messages[1]


def test_linear_attention_and_rnn_calls_through_confirm(tmp_path):
    results = confirm(tmp_path, """
        class CpuInput(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                extra = torch.ones(2, 8)
                return F.linear(extra, self.proj.weight, self.proj.bias) + x


        class CpuKey(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                q = self.proj(x)
                k = torch.zeros(2, 8)
                out = F.scaled_dot_product_attention(q, k, q)
                return out + torch.ones(8)


        class CpuHidden(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(8, 8)

            def forward(self, x):
                h = torch.zeros(1, x.shape[1], 8)
                out, _ = self.rnn(x, (h, h))
                return out * torch.ones(8)
    """, "calls.py")
    assert [(code, row, c["status"]) for code, row, c in results] == [
        ("DEV003", 8, "confirmed"), ("DEV003", 19, "confirmed"), ("DEV003", 21, "confirmed"),
        ("DEV003", 30, "confirmed"), ("DEV003", 32, "confirmed"),
    ]
    messages = [c["message"] for _, _, c in results]
    assert ("but got mat1 is on cpu, different from other tensors on cuda:0 "
            "(when checking argument in method wrapper_CUDA_addmm)") in messages[0]
    assert "Expected query, key, and value to have the same device type" in messages[1]
    # the attention call was decided and healed: the run went on to the next line's mismatch
    assert "found at least two devices, cuda:0 and cpu!" in messages[2]
    assert "Input and hidden tensors are not at the same device, found input tensor at cuda:0" in messages[3]
    assert "found at least two devices, cuda:0 and cpu!" in messages[4]


# --- real CUDA: runs where a GPU is present ------------------------------------------------------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
def test_every_entry_on_real_cuda_agrees_with_the_table_and_the_stand_in(capsys):
    rows, disagreements = [], []
    for entry in placement.TABLE:
        real, real_message = placement.cuda_verdict(entry)
        stand_in, stand_in_message = placement.stand_in_verdict(entry, recorders)
        rows.append(f"{entry.name[:58]:58}  table={entry.verdict:8} stand-in={stand_in:8} cuda={real:8} {real_message[:90]}")
        words = lambda text: " ".join(text.split()[:6])
        if real != entry.verdict or stand_in != entry.verdict or stand_in_message != entry.message or (
                real == placement.REJECTS and words(real_message) != words(entry.message)):
            disagreements.append((entry.name, real, real_message))
    with capsys.disabled():
        print("\n" + "\n".join(rows))
    assert not disagreements
