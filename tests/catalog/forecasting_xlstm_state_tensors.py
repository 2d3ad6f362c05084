"""xLSTM cell: recurrent state kept in plain tensor attributes.

Report: https://github.com/styalai/xLSTM-pytorch/issues/2
Bug: `self.ct_1`, `self.nt_1`, `self.ht_1` are plain tensors built in `__init__`, so
`model.to(device)` (or Lightning) leaves them on the CPU while the gates run on the GPU.
"""
import torch
from torch import nn


class SLSTMCell(nn.Module):
    def __init__(self, input_size=8, hidden_size=16):
        super().__init__()
        self.gates = nn.Linear(input_size + hidden_size, 4 * hidden_size)
        self.ct_1 = torch.zeros(1, hidden_size)  # cuda: confirmed - the CPU cell state is multiplied with cuda:0 gates
        self.nt_1 = torch.zeros(1, hidden_size)  # cuda: confirmed - the CPU normalizer state is multiplied with cuda:0 gates
        self.ht_1 = torch.zeros(1, hidden_size)  # cuda: confirmed - the CPU hidden state is concatenated with the cuda:0 input

    def forward(self, x):
        h = self.ht_1.expand(x.shape[0], -1)
        z, i, f, o = self.gates(torch.cat([x, h], dim=-1)).chunk(4, dim=-1)
        i, f = torch.exp(i), torch.exp(f)
        c = f * self.ct_1 + i * torch.tanh(z)
        n = f * self.nt_1 + i
        return torch.sigmoid(o) * (c / n)


class SLSTMCellFixed(nn.Module):
    """The fix: the initial states are buffers, so they follow the module."""

    def __init__(self, input_size=8, hidden_size=16):
        super().__init__()
        self.gates = nn.Linear(input_size + hidden_size, 4 * hidden_size)
        self.register_buffer("ct_1", torch.zeros(1, hidden_size))
        self.register_buffer("nt_1", torch.zeros(1, hidden_size))
        self.register_buffer("ht_1", torch.zeros(1, hidden_size))

    def forward(self, x):
        h = self.ht_1.expand(x.shape[0], -1)
        z, i, f, o = self.gates(torch.cat([x, h], dim=-1)).chunk(4, dim=-1)
        i, f = torch.exp(i), torch.exp(f)
        c = f * self.ct_1 + i * torch.tanh(z)
        n = f * self.nt_1 + i
        return torch.sigmoid(o) * (c / n)


def devlint_example_inputs(cls):
    return (torch.randn(4, 8),)
