"""Multi-agent Q network: per-agent heads appended to a plain list.

Report: https://github.com/marlbenchmark/off-policy/issues/12
Bug: modules kept in a `list` are invisible to `model.to(device)` and to the optimizer, so
their weights stay on the CPU ("found at least two devices").
"""
import torch
from torch import nn


class MultiAgentQ(nn.Module):
    def __init__(self, n_agents=3, obs=6, actions=2):
        super().__init__()
        self.q_heads = []  # cuda: confirmed - the heads' weights stay on the CPU while the observations are on cuda:0
        for _ in range(n_agents):
            self.q_heads.append(nn.Linear(obs, actions))

    def forward(self, obs):
        return torch.stack([head(obs[:, i]) for i, head in enumerate(self.q_heads)], dim=1)


class MultiAgentQFixed(nn.Module):
    def __init__(self, n_agents=3, obs=6, actions=2):
        super().__init__()
        self.q_heads = nn.ModuleList()
        for _ in range(n_agents):
            self.q_heads.append(nn.Linear(obs, actions))

    def forward(self, obs):
        return torch.stack([head(obs[:, i]) for i, head in enumerate(self.q_heads)], dim=1)


def devlint_example_inputs(cls):
    return (torch.randn(2, 3, 6),)
