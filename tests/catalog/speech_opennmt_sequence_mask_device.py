"""Sequence mask placed on the current CUDA device instead of the lengths' device.

Report: https://github.com/OpenNMT/OpenNMT-py/pull/1494
Bug: the mask is built on `torch.cuda.current_device()`, which differs from `lengths.device`
when the model lives on another GPU, and raises on a machine without CUDA.
"""
import torch
from torch import nn


class MaskedEncoder(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.rnn = nn.GRU(dim, dim, batch_first=True)

    def forward(self, src, lengths):
        out, _ = self.rnn(src)
        steps = torch.arange(src.shape[1], device=torch.cuda.current_device())  # cuda: confirmed - reached in forward; torch.cuda.current_device() raises Torch not compiled with CUDA enabled without CUDA
        mask = steps.unsqueeze(0) < lengths.unsqueeze(1)
        return out * mask.unsqueeze(-1)


class MaskedEncoderFixed(nn.Module):
    """The fix: the mask is built on the lengths' device."""

    def __init__(self, dim=8):
        super().__init__()
        self.rnn = nn.GRU(dim, dim, batch_first=True)

    def forward(self, src, lengths):
        out, _ = self.rnn(src)
        steps = torch.arange(src.shape[1], device=lengths.device)
        mask = steps.unsqueeze(0) < lengths.unsqueeze(1)
        return out * mask.unsqueeze(-1)


def devlint_example_inputs(cls):
    return torch.randn(2, 6, 8), torch.tensor([6, 3])
