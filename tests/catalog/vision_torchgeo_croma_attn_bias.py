"""CROMA (remote sensing ViT): the ALiBi attention bias is not registered as a buffer.

Report: https://github.com/torchgeo/torchgeo/pull/3232
Bug: `self.attn_bias` comes from a helper that builds a tensor; kept as a plain attribute it
stays on the CPU while the attention scores are on the GPU.
"""
import torch
from torch import nn


def get_alibi(heads, num_patches):
    points = torch.arange(num_patches).float()
    distances = (points[None, :] - points[:, None]).abs()
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / heads) for h in range(heads)])
    return -(slopes[:, None, None] * distances[None])


class AlibiAttention(nn.Module):
    def __init__(self, dim=16, heads=2, num_patches=9):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.attn_bias = get_alibi(heads, num_patches)  # cuda: confirmed - the CPU bias is added to cuda:0 attention scores

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) + self.attn_bias
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)


class AlibiAttentionFixed(nn.Module):
    def __init__(self, dim=16, heads=2, num_patches=9):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.register_buffer("attn_bias", get_alibi(heads, num_patches), persistent=False)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) + self.attn_bias
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)


def devlint_example_inputs(cls):
    return (torch.randn(2, 9, 16),)
