"""DQN agent: the device passed to the constructor is kept and used for every batch.

Report: https://github.com/yandexdataschool/Practical_RL/issues/170
Bug: `self.device` is fixed in `__init__`; after `agent.to(other)` forward still places the
states and the noise on the old device, next to weights that moved.
"""
import torch
from torch import nn


class DQNAgent(nn.Module):
    def __init__(self, n_obs=4, n_actions=2, device=torch.device("cpu")):
        super().__init__()
        self.device = device
        self.net = nn.Sequential(nn.Linear(n_obs, 16), nn.ReLU(), nn.Linear(16, n_actions))

    def forward(self, states):
        states = states.to(self.device)  # cuda: confirmed - states go back to the stale cpu device and meet cuda:0 weights
        noise = torch.zeros(states.shape[0], 2, device=self.device)  # cuda: confirmed - the noise is made on the stale cpu device and added to cuda:0 values
        return self.net(states) + noise


class DQNAgentFixed(nn.Module):
    """The fix: the device is read from the parameters at call time."""

    def __init__(self, n_obs=4, n_actions=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_obs, 16), nn.ReLU(), nn.Linear(16, n_actions))

    def forward(self, states):
        device = next(self.parameters()).device
        states = states.to(device)
        noise = torch.zeros(states.shape[0], 2, device=device)
        return self.net(states) + noise


def devlint_example_inputs(cls):
    return (torch.randn(3, 4),)
