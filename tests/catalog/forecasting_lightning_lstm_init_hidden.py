"""LSTM forecaster in Lightning: the initial hidden state is made on the CPU in forward.

Report: https://github.com/Lightning-AI/pytorch-lightning/issues/3738
Bug: `init_hidden` returns `torch.zeros(...)` without a device; on a GPU the LSTM raises
"Input and hidden tensors are not at the same device".
"""
import torch
from torch import nn


class Forecaster(nn.Module):
    def __init__(self, n_features=4, hidden=16, layers=2):
        super().__init__()
        self.hidden, self.layers = hidden, layers
        self.lstm = nn.LSTM(n_features, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def init_hidden(self, batch):
        return (torch.zeros(self.layers, batch, self.hidden),  # cuda: confirmed - the LSTM gets a CPU h0 beside cuda:0 input: Input and hidden tensors are not at the same device
                torch.zeros(self.layers, batch, self.hidden))  # cuda: confirmed - the LSTM gets a CPU c0 beside cuda:0 input

    def forward(self, series):
        out, _ = self.lstm(series, self.init_hidden(series.shape[0]))
        return self.head(out[:, -1])


class ForecasterFixed(nn.Module):
    """The fix: the state is made on the input's device."""

    def __init__(self, n_features=4, hidden=16, layers=2):
        super().__init__()
        self.hidden, self.layers = hidden, layers
        self.lstm = nn.LSTM(n_features, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def init_hidden(self, series):
        shape = (self.layers, series.shape[0], self.hidden)
        return torch.zeros(shape, device=series.device), torch.zeros(shape, device=series.device)

    def forward(self, series):
        out, _ = self.lstm(series, self.init_hidden(series))
        return self.head(out[:, -1])


def devlint_example_inputs(cls):
    return (torch.randn(2, 10, 4),)
