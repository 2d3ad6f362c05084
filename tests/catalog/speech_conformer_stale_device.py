"""Conformer: the device given to the constructor is kept and used in forward.

Report: https://github.com/sooftware/conformer/issues/27
Bug: `self.device` is captured in `__init__` (default "cuda") and forward moves tensors to it;
`model.cpu()` does not update it, so a CPU model still sends its masks to CUDA.
"""
import torch
from torch import nn


class ConformerEncoder(nn.Module):
    def __init__(self, dim=16, device="cuda"):  # cuda: confirmed - the default cuda device is requested in forward
        super().__init__()
        self.device = device
        self.subsample = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.proj = nn.Linear(dim, dim)

    def forward(self, features, lengths):
        outputs = self.subsample(features.transpose(1, 2)).transpose(1, 2)
        out_lengths = ((lengths + 1) // 2).to(self.device)  # cuda: confirmed - built for cuda and moved back to the CPU (the report's model.cpu()), the lengths go to the stale cuda device and the mask built from them meets CPU outputs
        steps = torch.arange(outputs.shape[1], device=self.device)  # cuda: confirmed - built for cuda and moved back to the CPU (the report's model.cpu()), the steps are made on the stale cuda device and meet CPU outputs
        mask = (steps.unsqueeze(0) < out_lengths.unsqueeze(1)).unsqueeze(-1)
        return self.proj(outputs) * mask


class ConformerEncoderFixed(nn.Module):
    """The fix: the device is read from the inputs at call time."""

    def __init__(self, dim=16):
        super().__init__()
        self.subsample = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.proj = nn.Linear(dim, dim)

    def forward(self, features, lengths):
        outputs = self.subsample(features.transpose(1, 2)).transpose(1, 2)
        out_lengths = (lengths + 1) // 2
        steps = torch.arange(outputs.shape[1], device=features.device)
        mask = (steps.unsqueeze(0) < out_lengths.unsqueeze(1)).unsqueeze(-1)
        return self.proj(outputs) * mask


def devlint_example_inputs(cls):
    return torch.randn(2, 12, 16), torch.tensor([12, 9])
