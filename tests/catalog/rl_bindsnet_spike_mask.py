"""Spiking neuron layer: the spike state used as a `masked_fill_` mask stays on the CPU.

Report: https://github.com/BindsNET/bindsnet/issues/569
Bug: `self.x.masked_fill_(self.s.bool(), ...)` raises "expected self and mask to be on the same
device, but got mask on cpu and self on cuda:0". A 0-dim CPU *value* for `masked_fill` is fine.
"""
import torch
from torch import nn


class LIFNodes(nn.Module):
    def __init__(self, n=8, decay=0.9):
        super().__init__()
        self.decay = decay
        self.register_buffer("x", torch.zeros(n))
        self.register_buffer("v", torch.zeros(n))
        self.s = torch.zeros(n, dtype=torch.bool)  # cuda: confirmed - the CPU spike state is the mask of masked_fill_ on a cuda:0 trace
        self.rest = torch.tensor(-0.5)  # cuda: benign - a 0-dim CPU value for masked_fill, which CUDA accepts

    def forward(self, inputs):
        self.x.mul_(self.decay)
        self.x.masked_fill_(self.s, 1.0)
        v = self.v + inputs.sum(0)
        spikes = v > 1.0
        self.s = spikes
        return v.masked_fill(~spikes, self.rest) + self.x


class LIFNodesFixed(nn.Module):
    """The fix: the spike state is a buffer. The rest value stays a 0-dim CPU scalar."""

    def __init__(self, n=8, decay=0.9):
        super().__init__()
        self.decay = decay
        self.register_buffer("x", torch.zeros(n))
        self.register_buffer("v", torch.zeros(n))
        self.register_buffer("s", torch.zeros(n, dtype=torch.bool))
        self.rest = torch.tensor(-0.5)  # cuda: benign - a 0-dim CPU value for masked_fill, which CUDA accepts

    def forward(self, inputs):
        self.x.mul_(self.decay)
        self.x.masked_fill_(self.s, 1.0)
        v = self.v + inputs.sum(0)
        spikes = v > 1.0
        self.s.copy_(spikes)
        return v.masked_fill(~spikes, self.rest) + self.x


def devlint_example_inputs(cls):
    return (torch.randn(4, 8),)
