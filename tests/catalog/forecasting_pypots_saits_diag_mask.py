"""SAITS imputation: the diagonal attention mask is built on the CPU inside forward.

Report: https://github.com/WenjieDu/PyPOTS/issues/3
Bug: "expected self and mask to be on the same device, but got mask on cpu and self on cuda:0":
`torch.eye(n_steps)` has no device and becomes the mask of `masked_fill` on GPU scores.
"""
import torch
from torch import nn


class DiagonalMaskedAttention(nn.Module):
    def __init__(self, d_model=16):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.scale = d_model ** -0.5

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) * self.scale
        diagonal = torch.eye(x.shape[1]).bool()  # cuda: confirmed - a CPU mask in masked_fill on cuda:0 scores: expected self and mask to be on the same device
        scores = scores.masked_fill(diagonal, -1e9)
        return scores.softmax(-1) @ v


class DiagonalMaskedAttentionFixed(nn.Module):
    """The fix: the mask is made on the scores' device."""

    def __init__(self, d_model=16):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.scale = d_model ** -0.5

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) * self.scale
        diagonal = torch.eye(x.shape[1], device=scores.device).bool()
        scores = scores.masked_fill(diagonal, -1e9)
        return scores.softmax(-1) @ v


def devlint_example_inputs(cls):
    return (torch.randn(2, 5, 16),)
