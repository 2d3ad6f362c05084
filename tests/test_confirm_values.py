"""`devlint confirm` with the value stand-in: data-dependent modules that the data-less stand-in
cannot finish are run again on tensors that hold their data."""

import json
import textwrap

import pytest

from conftest import once_per_run
from helpers import CONFIRM_HEADER, confirm_run, devlint, statuses

torch = pytest.importorskip("torch")
nn = torch.nn


def confirm(tmp_path, source, *args):
    return confirm_run(tmp_path, source, *args)



# Each module hides its bug behind code that needs the data: (source, the finding it proves,
# the line where the data-less stand-in stops).
DATA_DEPENDENT = {
    "lengths": ("""
        class Lengths(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                lengths = (x[:, 0] + 3).long()
                out = self.proj(x)
                for n in lengths:
                    out = out[:, :n] + torch.arange(n)
                return out
    """, ("DEV003", 11), 11),
    "item": ("""
        class ItemScale(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                scale = x.abs().sum().item() + 1.0
                return self.proj(x) * torch.full((8,), scale)
    """, ("DEV003", 9), 8),
    "mask": ("""
        class Masked(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.offset = torch.ones(4)

            def forward(self, x):
                h = self.proj(x)
                kept = h[h > -100]
                return kept[:4] + self.offset
    """, ("DEV004", 6), 10),
    "nonzero": ("""
        class NonZero(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                idx = torch.nonzero(x[:, 0] >= 0).squeeze(1)
                return self.proj(x)[idx] + torch.ones(len(idx), 8)
    """, ("DEV003", 9), 8),
    "cpu": ("""
        class Packed(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                h = self.proj(x)
                lengths = h.argmax(-1).cpu() + 1
                packed = nn.utils.rnn.pack_padded_sequence(h.unsqueeze(-1), lengths, batch_first=True, enforce_sorted=False)
                return packed.data.sum() + torch.ones(8)
    """, ("DEV003", 11), 10),  # meta's `.cpu()` gives zeros; the packing stops on their device
    "numpy": ("""
        class ToNumpy(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                h = self.proj(x).to("cuda")
                if (h > 0).any():
                    h = h + 1
                return h.numpy()
    """, ("DEV008", 11), 9),
}


POLICIES = ("never", "auto", "always")


@pytest.fixture(scope="session")
def data_dependent_runs(tmp_path_factory):
    """One `devlint confirm` run per --values policy over every DATA_DEPENDENT module, a file each
    (one torch start per run, not per module; named `case_*.py`, as a `numpy.py` would shadow
    numpy): {policy: {case: (results, the run's exit status)}}, each case's results restricted to
    its own rule, as `--select` would."""
    def build(folder):
        runs = {}
        for policy in POLICIES:
            for case, (source, _, _) in DATA_DEPENDENT.items():
                (folder / f"case_{case}.py").write_text(CONFIRM_HEADER + textwrap.dedent(source))
            codes = ",".join(sorted({code for _, (code, _), _ in DATA_DEPENDENT.values()}))
            r = devlint("confirm", "--output-format", "json", "--values", policy, "--select", codes,
                        *(f"case_{case}.py" for case in DATA_DEPENDENT), cwd=folder)
            assert r.returncode in (0, 1), r.stderr
            records = json.loads(r.stdout)
            rows = CONFIRM_HEADER.count("\n")
            runs[policy] = {
                case: ([(x["code"], x["location"]["row"] - rows, x["confirm"]) for x in records
                        if x["filename"].endswith(f"case_{case}.py") and x["code"] == code], r.returncode)
                for case, (_, (code, _), _) in DATA_DEPENDENT.items()}
        return runs

    return once_per_run(tmp_path_factory, "data-dependent-runs", build)


@pytest.mark.parametrize("case", sorted(DATA_DEPENDENT))
def test_values_confirm_what_meta_leaves_inconclusive(data_dependent_runs, case):
    source, (code, row), stop = DATA_DEPENDENT[case]
    meta, _ = data_dependent_runs["never"][case]
    assert statuses(meta) == [(code, row, "inconclusive")]
    assert meta[0][2]["device"] == "stand-in (meta)"
    assert f"line {stop + 4}" in meta[0][2]["message"] or meta[0][2]["use"] == {"row": stop + 4}
    for policy in ("auto", "always"):
        results, exit_status = data_dependent_runs[policy][case]
        assert statuses(results) == [(code, row, "confirmed")], (policy, results)
        verdict = results[0][2]
        assert verdict["device"] == "stand-in (meta, values)"
        assert exit_status == 1
    if code == "DEV008":
        assert "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu()" in verdict["message"]
    else:
        assert "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!" in verdict["message"]


def test_a_correct_data_dependent_module_is_not_confirmed(tmp_path):
    source = """
        class Clean(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.table = torch.arange(8)

            def forward(self, x):
                n = int((x > -1).sum()) % 8 + 1
                pos = torch.arange(n, device=x.device)
                return self.proj(x)[:, self.table[:n]] + pos
    """
    results, exit_status = confirm(tmp_path, source, "--values", "always")
    # the CPU index table is a mix CUDA accepts; the factory given device= makes no finding
    assert statuses(results) == [("DEV004", 6, "benign")]
    assert exit_status == 0
    assert statuses(confirm(tmp_path, source, "--values", "never")[0]) == [("DEV004", 6, "inconclusive")]


def test_numpy_of_a_host_tensor_is_not_reproduced(tmp_path):
    results, _ = confirm(tmp_path, """
        class Host(nn.Module):
            def __init__(self, where="cpu"):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.where = where

            def forward(self, x):
                h = self.proj(x).to(self.where)
                return h.numpy()
    """, "--values", "always", "--select", "DEV008")
    assert statuses(results) == [("DEV008", 10, "not-reproduced")]
    assert results[0][2]["message"] == "the .numpy() at line 14 got a tensor on the CPU"


def test_values_key_in_the_configuration(tmp_path):
    source, (code, row), _ = DATA_DEPENDENT["item"]
    (tmp_path / "pyproject.toml").write_text('[tool.devlint.confirm]\nvalues = "never"\n')
    assert statuses(confirm(tmp_path, source)[0]) == [(code, row, "inconclusive")]
    assert statuses(confirm(tmp_path, source, "--values", "auto")[0]) == [(code, row, "confirmed")]  # the option wins
    (tmp_path / "pyproject.toml").write_text('[tool.devlint.confirm]\nvalues = "sometimes"\n')
    r = devlint("confirm", "models.py", cwd=tmp_path)
    assert r.returncode == 2 and "values must be one of auto, always, never" in r.stderr


def test_auto_leaves_a_large_module_to_the_data_less_stand_in(tmp_path):
    """67 M parameters, above the size `auto` runs with values: the class stays inconclusive."""
    results, _ = confirm(tmp_path, """
        class Wide(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8192, 8192)

            def forward(self, x):
                if x.sum().item() > 0:
                    return x
                return self.proj(x) + torch.ones(8192)
    """, "--values", "auto")
    assert statuses(results) == [("DEV003", 10, "inconclusive")]
    assert results[0][2]["device"] == "stand-in (meta)"


def test_value_tensors_behave_as_device_tensors():
    """In-process: the wrapper reports the stand-in device, keeps parameter values through
    model.to(), and hands data back to the host only where CUDA would."""
    from devlint.confirm.recorders import STAND_IN, DispatchRecorder, FunctionRecorder, Recorder
    from devlint.confirm.values import ValueTensor, value_run

    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    weight = model.weight.detach().clone()
    rec = Recorder(__file__, STAND_IN)
    with value_run(rec), FunctionRecorder(rec, False), DispatchRecorder(rec):
        model.to("cuda")  # noqa: DEV005 (the stand-in serves it)
        assert isinstance(model.weight, nn.Parameter) and isinstance(model.weight, ValueTensor)
        assert model.weight.device.type == "meta"
        assert torch.equal(model.weight.cpu(), weight)  # .cpu() is a plain host tensor with the data
        assert type(model.weight.detach().cpu()) is torch.Tensor
        x = torch.tensor([[1.0, -2.0, 3.0, -4.0]], device="cuda")
        y = model(x)
        assert torch.allclose(y.cpu(), x.cpu() @ weight.T + model.bias.detach().cpu())
        assert x[x > 0].tolist() == [1.0, 3.0] and int((x > 0).sum()) == 2 and len(x[0]) == 4
        assert [int(i) for i in torch.nonzero(x[0] < 0).flatten()] == [1, 3]
        assert torch.unique(x.abs() > 2).tolist() == [False, True]
        assert model.state_dict()["weight"].device.type == "meta"
        with pytest.warns(UserWarning, match="non-meta parameter"):  # torch's warning for meta; the copy happens
            model.load_state_dict({"weight": torch.full((3, 4), 7.0), "bias": torch.zeros(3)})
        assert model(x).tolist() == [[-14.0, -14.0, -14.0]]
        model.weight.data = torch.zeros(3, 4, device="cuda")
        assert model.weight.cpu().abs().sum().item() == 0
        z = x + torch.ones(4)  # a CPU tensor left behind: the recorder still decides, and heals it
        assert isinstance(z, ValueTensor) and z.tolist() == [[2.0, -1.0, 4.0, -3.0]]
    mixes = [(e["verdict"], e["op"]) for e in rec.events if e["kind"] == "mix"]
    # load_state_dict copies host tensors into device parameters, which CUDA accepts
    assert mixes == [("benign", "aten.copy_.default")] * 2 + [("confirmed", "aten.add.Tensor")]
