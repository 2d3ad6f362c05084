"""HeCo schema-view encoder: sampled neighbours concatenated and sent to the GPU with `.cuda()`.

Report: https://github.com/liun-online/HeCo/issues/15
Bug: `Sc_encoder.forward` calls `torch.cat(...).cuda()`, so a machine without CUDA stops with
"Torch not compiled with CUDA enabled".
"""
import torch
from torch import nn


class SchemaEncoder(nn.Module):
    def __init__(self, dim=8, sample_rate=2):
        super().__init__()
        self.sample_rate = sample_rate
        self.att = nn.Linear(dim, 1)

    def forward(self, h, nei):
        cols = torch.randperm(nei.shape[1])[: self.sample_rate]
        sele_nei = torch.cat([nei[:, :1], nei[:, cols]], dim=-1).cuda()  # cuda: confirmed - a hardcoded .cuda() request: raises Torch not compiled with CUDA enabled without CUDA
        emb = h[sele_nei]
        weights = self.att(emb).softmax(1)
        return (weights * emb).sum(1)


class SchemaEncoderFixed(nn.Module):
    def __init__(self, dim=8, sample_rate=2):
        super().__init__()
        self.sample_rate = sample_rate
        self.att = nn.Linear(dim, 1)

    def forward(self, h, nei):
        cols = torch.randperm(nei.shape[1], device=nei.device)[: self.sample_rate]
        sele_nei = torch.cat([nei[:, :1], nei[:, cols]], dim=-1)
        emb = h[sele_nei]
        weights = self.att(emb).softmax(1)
        return (weights * emb).sum(1)


def devlint_example_inputs(cls):
    return torch.randn(5, 8), torch.tensor([[1, 2, 3], [0, 2, 4], [0, 1, 3], [1, 2, 4], [0, 3, 2]])
