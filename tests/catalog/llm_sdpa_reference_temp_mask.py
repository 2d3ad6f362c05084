"""Reference scaled-dot-product attention: the causal mask is made without a device.

Report: https://github.com/InfiniTensor/llaisys/pull/11 (the code comes from the SDPA docstring,
fixed in https://github.com/pytorch/pytorch/pull/178684)
Bug: `temp_mask = torch.ones(L, S, dtype=torch.bool).tril(...)` lives on the CPU, and
`attn_bias.masked_fill_(temp_mask.logical_not(), ...)` raises "expected self and mask to be on
the same device, but got mask on cpu and self on cuda:0".
"""
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        query, key, value = self.qkv(x).chunk(3, dim=-1)
        L, S = query.size(-2), key.size(-2)
        attn_bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
        temp_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)  # cuda: confirmed - a CPU mask in masked_fill_ on a cuda:0 bias: expected self and mask to be on the same device
        attn_bias.masked_fill_(temp_mask.logical_not(), float("-inf"))
        attn_weight = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)) + attn_bias
        return attn_weight.softmax(dim=-1) @ value


class CausalSelfAttentionFixed(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        query, key, value = self.qkv(x).chunk(3, dim=-1)
        L, S = query.size(-2), key.size(-2)
        attn_bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
        temp_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=0)
        attn_bias.masked_fill_(temp_mask.logical_not(), float("-inf"))
        attn_weight = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)) + attn_bias
        return attn_weight.softmax(dim=-1) @ value


def devlint_example_inputs(cls):
    return (torch.randn(2, 5, 16),)
