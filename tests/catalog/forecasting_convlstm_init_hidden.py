"""ConvLSTM: the hidden state is allocated without a device in a helper forward calls.

Report: https://github.com/ndrplz/ConvLSTM_pytorch/issues/10
Bug: `init_hidden` builds `torch.zeros(...)` on the CPU, and forward concatenates it with the
GPU input frame.
"""
import torch
from torch import nn


class ConvLSTMCell(nn.Module):
    def __init__(self, in_channels=3, hidden=8):
        super().__init__()
        self.hidden = hidden
        self.conv = nn.Conv2d(in_channels + hidden, 4 * hidden, 3, padding=1)

    def init_hidden(self, batch, height, width):
        return (torch.zeros(batch, self.hidden, height, width),  # cuda: confirmed - the CPU hidden state is concatenated with the cuda:0 frame
                torch.zeros(batch, self.hidden, height, width))  # cuda: confirmed - the CPU cell state is multiplied with cuda:0 gates

    def forward(self, frames):
        b, t, _, hgt, wid = frames.shape
        h, c = self.init_hidden(b, hgt, wid)
        for step in range(t):
            gates = self.conv(torch.cat([frames[:, step], h], dim=1))
            i, f, o, g = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h


class ConvLSTMCellFixed(nn.Module):
    """The fix: the state is made on the device of the convolution's weight."""

    def __init__(self, in_channels=3, hidden=8):
        super().__init__()
        self.hidden = hidden
        self.conv = nn.Conv2d(in_channels + hidden, 4 * hidden, 3, padding=1)

    def init_hidden(self, batch, height, width):
        device = self.conv.weight.device
        return (torch.zeros(batch, self.hidden, height, width, device=device),
                torch.zeros(batch, self.hidden, height, width, device=device))

    def forward(self, frames):
        b, t, _, hgt, wid = frames.shape
        h, c = self.init_hidden(b, hgt, wid)
        for step in range(t):
            gates = self.conv(torch.cat([frames[:, step], h], dim=1))
            i, f, o, g = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h


def devlint_example_inputs(cls):
    return (torch.randn(2, 3, 3, 8, 8),)
