"""Rotary embedding: the frequency cache is keyed by sequence length only.

Report: https://github.com/lucidrains/rotary-embedding-torch/pull/48
Bug: a cache primed on the CPU is reused for GPU inputs of the same length, and the rotation
meets CPU frequencies ("Expected all tensors to be on the same device").
"""
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
        self.cached_freqs = None
        self.cached_len = 0

    def forward(self, x):
        seq_len = x.shape[-2]
        if self.cached_freqs is None or seq_len > self.cached_len:
            t = torch.arange(seq_len, device=x.device).float()
            self.cached_freqs = torch.outer(t, self.inv_freq).repeat_interleave(2, dim=-1)  # cuda: confirmed - a cache filled by a first forward on the CPU is reused for cuda:0 input after the move
            self.cached_len = seq_len
        freqs = self.cached_freqs[:seq_len]
        rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
        return x * freqs.cos() + rotated * freqs.sin()


class RotaryEmbeddingFixed(nn.Module):
    """The fix: the cache is rebuilt when the input is on another device. The cache is still a
    plain attribute, left behind by a move, but it never meets a tensor on another device."""

    def __init__(self, dim=16):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
        self.cached_freqs = None
        self.cached_len = 0

    def forward(self, x):
        seq_len = x.shape[-2]
        stale = self.cached_freqs is None or self.cached_freqs.device != x.device
        if stale or seq_len > self.cached_len:
            t = torch.arange(seq_len, device=x.device).float()
            self.cached_freqs = torch.outer(t, self.inv_freq).repeat_interleave(2, dim=-1)  # cuda: not-reproduced - left behind by the move, but rebuilt before use because its device differs
            self.cached_len = seq_len
        freqs = self.cached_freqs[:seq_len]
        rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
        return x * freqs.cos() + rotated * freqs.sin()


def devlint_example_inputs(cls):
    return (torch.randn(2, 2, 6, 16),)
