"""Sparse-attention rotary embedding: the frequency buffer is built on a default "cuda" device.

Report: https://github.com/XunhaoLai/native-sparse-attention-triton/pull/15
Bug: the rope buffer is created on the index-less `"cuda"` device, so every DDP rank puts its
`inv_freq` on cuda:0, and a machine without CUDA cannot build the module at all.
"""
import torch
from torch import nn


def default_device():
    return torch.device("cuda")  # cuda: confirmed - the helper's CUDA device is requested when __init__ builds the buffer


class RopeAttention(nn.Module):
    def __init__(self, dim=16, device=None):
        super().__init__()
        device = device or default_device()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device).float() / dim)))
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        t = torch.arange(x.shape[1], device=x.device).float()
        angle = torch.outer(t, self.inv_freq).repeat_interleave(2, dim=-1)
        q, k = q * angle.cos(), k * angle.cos()
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v


class RopeAttentionFixed(nn.Module):
    """The fix: the buffer is built where the module is built and moves with it."""

    def __init__(self, dim=16):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        t = torch.arange(x.shape[1], device=x.device).float()
        angle = torch.outer(t, self.inv_freq).repeat_interleave(2, dim=-1)
        q, k = q * angle.cos(), k * angle.cos()
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v


def devlint_example_inputs(cls):
    return (torch.randn(2, 6, 16),)
