"""Transformer positional encoding: a numpy table kept as a plain attribute.

Report: https://github.com/wingedsheep/transformer/issues/4
Bug: `self.positional_encoding = torch.from_numpy(...)` stays on the CPU ("cpu vs cuda:0").
The fix given in the thread pins it with `.to(get_device())` at construction, which works on
one GPU but is still left behind by a later `model.to()`; a buffer is the real fix.
"""
import numpy as np
import torch
from torch import nn


def sinusoid_table(max_len, dim):
    position = np.arange(max_len)[:, None]
    rates = 1 / np.power(10000, (2 * (np.arange(dim) // 2)) / dim)
    angles = position * rates
    angles[:, 0::2] = np.sin(angles[:, 0::2])
    angles[:, 1::2] = np.cos(angles[:, 1::2])
    return angles.astype(np.float32)


def get_device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class PositionalEncoding(nn.Module):
    def __init__(self, max_len=32, dim=16):
        super().__init__()
        self.positional_encoding = torch.from_numpy(sinusoid_table(max_len, dim))  # cuda: confirmed - the CPU table is added to cuda:0 input of a parameter-less module

    def forward(self, x):
        return x + self.positional_encoding[: x.shape[1]]


class PositionalEncodingPinned(nn.Module):
    """The thread's workaround: the table is placed on the GPU when it is built."""

    def __init__(self, max_len=32, dim=16):
        super().__init__()
        self.positional_encoding = torch.from_numpy(sinusoid_table(max_len, dim)).to(get_device())  # cuda: not-reproduced - on a GPU host get_device() puts the table on cuda:0, where the module and its input are

    def forward(self, x):
        return x + self.positional_encoding[: x.shape[1]]


class PositionalEncodingFixed(nn.Module):
    def __init__(self, max_len=32, dim=16):
        super().__init__()
        self.register_buffer("positional_encoding", torch.from_numpy(sinusoid_table(max_len, dim)), persistent=False)

    def forward(self, x):
        return x + self.positional_encoding[: x.shape[1]]


def devlint_example_inputs(cls):
    return (torch.randn(2, 10, 16),)
