"""DEV003's message and fix where `device=X.device` would be wrong: legacy constructors,
`generator=`, and no parameter known to be a tensor."""
import textwrap

from helpers import lint


def findings(source: str) -> list:
    return lint(textwrap.dedent(source), select=("DEV003",))


def test_legacy_constructor_gets_torch_tensor_advice_and_no_fix():
    [found] = findings("""
        import torch
        from torch import Tensor

        def scale(x: Tensor):
            return x * torch.ByteTensor([1, 2])
    """)
    assert found.fix is None
    assert found.message.endswith("use `torch.tensor(..., dtype=torch.uint8, device=x.device)`")


def test_legacy_constructor_without_a_tensor_parameter_names_no_parameter():
    [found] = findings("""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                return x * torch.LongTensor([1, 2])
    """)
    assert found.fix is None
    assert found.message.endswith("use `torch.tensor(..., dtype=torch.long, device=...)`")


def test_generator_gets_no_fix():
    [found] = findings("""
        import torch
        from torch import Tensor

        def noisy(x: Tensor, g):
            return x + torch.randn(x.shape, generator=g)
    """)
    assert found.fix is None
    assert "`device=x.device` with a generator on that device" in found.message


def test_a_forward_parameter_with_a_number_default_is_never_the_device():
    [found] = findings("""
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def forward(self, x, inv_temperature=100.):
                return inv_temperature * torch.ones(3) * x.softmax(-1)
    """)
    assert found.fix is not None and "device=x.device" in found.fix.message
    [found] = findings("""
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def forward(self, inv_temperature=100.):
                return torch.ones(3) * inv_temperature
    """)
    assert found.fix is None
    assert found.message.endswith("pass `device=`")


# --- evidence: every finding names where the CPU tensor is made and what decides it -------------

def _evidence(found) -> list:
    return [(r.row, r.message) for r in found.related]


def test_a_meeting_names_the_factory_and_the_derived_tensor():
    [found] = findings("""
        import torch
        from torch import Tensor

        def sequence_mask(lengths: Tensor, n: int):
            steps = torch.arange(n)
            hidden = lengths[:, None] * 2
            return steps[None, :] < hidden
    """)
    assert _evidence(found) == [
        (6, "`torch.arange()` makes a CPU tensor"),
        (8, "it meets `hidden` (derived from parameter `lengths`)"),
    ]
    assert found.message.startswith("`torch.arange()` without `device=`")


def test_forward_time_code_names_the_call_path_from_forward():
    found = findings("""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, feats):
                return feats + torch.ones(3) + self.bias(feats.shape[-1])

            def bias(self, n):
                return self.grid(n) * 2

            def grid(self, n):
                return torch.arange(n)
    """)
    assert [_evidence(f) for f in found] == [
        [(7, "`torch.ones()` makes a CPU tensor"), (7, "it meets `feats` (`forward` input)")],
        [(13, "`torch.arange()` makes a CPU tensor"), (7, "called from `forward`"), (10, "called from `bias`"),
         (13, "it is returned")],
    ]
    assert all(r.row > 0 for f in found for r in f.related)


def test_no_fix_where_the_function_copies_the_parameter_to_the_host():
    [found] = findings("""
        import torch
        import torch.nn as nn

        class HostStage(nn.Module):
            def forward(self, y):
                mask = torch.ones(y.shape[0], 1)
                kspace = y.cpu()
                return self.reconstruct({"kspace": kspace, "mask": mask})
    """)
    assert found.fix is None  # `device=y.device` would meet the host copy `kspace`
    assert found.message.endswith("pass `device=y.device` and move it back with `.cpu()` where the host needs it")


def test_no_fix_where_the_value_is_combined_with_a_host_copy():
    found = findings("""
        import torch
        import torch.nn as nn

        class Supervision(nn.Module):
            def forward(self, out, lens):
                segments = torch.stack([torch.arange(out.shape[0]), lens.cpu()], dim=1)
                return self.graph(out, segments)
    """)
    assert [f.fix for f in found] == [None]  # on `out.device` it would meet the host copy of `lens`
