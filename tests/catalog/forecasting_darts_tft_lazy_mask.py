"""Temporal Fusion Transformer: attention mask cached lazily as a plain attribute.

Report: https://github.com/unit8co/darts/issues/3052 (fixed in https://github.com/unit8co/darts/pull/3053)
Bug: the causal mask and relative index are computed on the first forward and kept as plain
attributes, so a model that ran once and was then moved meets its old-device cache.
"""
import torch
from torch import nn


class TemporalAttention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.proj = nn.Linear(dim, dim)
        self.attention_mask = None
        self.relative_index = None

    def forward(self, x):
        steps = x.shape[1]
        if self.attention_mask is None:
            self.attention_mask = torch.triu(torch.ones(steps, steps, device=x.device), 1).bool()  # cuda: confirmed - after a first forward on the CPU and a move, the cached CPU mask meets cuda:0 scores
            self.relative_index = torch.arange(steps, device=x.device)  # cuda: confirmed - after a first forward on the CPU and a move, the cached CPU index is added to cuda:0 outputs
        out, _ = self.attn(x, x, x, attn_mask=self.attention_mask)
        position = self.relative_index.float().unsqueeze(-1) / steps
        return self.proj(out) + position


class TemporalAttentionFixed(nn.Module):
    """The fix: the mask and index are rebuilt from the input at every call."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        steps = x.shape[1]
        mask = torch.triu(torch.ones(steps, steps, device=x.device), 1).bool()
        index = torch.arange(steps, device=x.device)
        out, _ = self.attn(x, x, x, attn_mask=mask)
        return self.proj(out) + index.float().unsqueeze(-1) / steps


def devlint_example_inputs(cls):
    return (torch.randn(2, 6, 16),)
