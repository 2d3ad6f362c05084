"""GraphSAGE-style layer: neighbours sampled on the CPU while node features are on the GPU.

Report: https://github.com/pyg-team/pytorch_geometric/pull/3329
Bug: the sampled edges stay on the CPU while `data.x` is on the GPU. Gathering features with a
CPU index (`x[edge_index[0]]`) is accepted by CUDA; scattering with it (`index_add_`) is not.
"""
import torch
from torch import nn


class SampledSAGE(nn.Module):
    def __init__(self, dim=8, fanout=3):
        super().__init__()
        self.fanout = fanout
        self.lin = nn.Linear(2 * dim, dim)
        self.root_nodes = torch.tensor([0, 1])  # cuda: benign - a CPU index into a cuda:0 tensor, which CUDA accepts

    def forward(self, x):
        n = x.shape[0]
        edge_index = torch.randint(0, n, (2, n * self.fanout))  # cuda: confirmed - the CPU index of index_add_ on a cuda:0 tensor is rejected (the gather with it is accepted)
        messages = x[edge_index[0]]
        aggregated = torch.zeros_like(x).index_add_(0, edge_index[1], messages)
        out = self.lin(torch.cat([x, aggregated], dim=-1))
        return out[self.root_nodes]


class SampledSAGEFixed(nn.Module):
    """The fix: edges sampled on the features' device. The root index may stay on the CPU."""

    def __init__(self, dim=8, fanout=3):
        super().__init__()
        self.fanout = fanout
        self.lin = nn.Linear(2 * dim, dim)
        self.root_nodes = torch.tensor([0, 1])  # cuda: benign - a CPU index into a cuda:0 tensor, which CUDA accepts

    def forward(self, x):
        n = x.shape[0]
        edge_index = torch.randint(0, n, (2, n * self.fanout), device=x.device)
        messages = x[edge_index[0]]
        aggregated = torch.zeros_like(x).index_add_(0, edge_index[1], messages)
        out = self.lin(torch.cat([x, aggregated], dim=-1))
        return out[self.root_nodes]


def devlint_example_inputs(cls):
    return (torch.randn(6, 8),)
