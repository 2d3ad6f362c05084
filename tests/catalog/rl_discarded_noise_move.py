"""Exploration noise "moved" with a discarded `.to(...)`.

Report: https://github.com/pytorch/pytorch/issues/43313
Bug: `tensor.to(device)` as a statement does nothing (tensor moves are not in place), so the
tensor stays on the CPU ("Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)").
"""
import torch
from torch import nn


class NoisyActor(nn.Module):
    def __init__(self, obs=4, actions=2, sigma=0.1):
        super().__init__()
        self.net = nn.Linear(obs, actions)
        self.sigma = sigma

    def forward(self, obs):
        action = torch.tanh(self.net(obs))
        noise = torch.randn(action.shape) * self.sigma  # cuda: confirmed - the CPU noise is added to the cuda:0 action
        noise.to(action.device)  # cuda: confirmed - the dropped move leaves the noise on the CPU, where it meets the cuda:0 action
        return (action + noise).clamp(-1, 1)


class NoisyActorFixed(nn.Module):
    def __init__(self, obs=4, actions=2, sigma=0.1):
        super().__init__()
        self.net = nn.Linear(obs, actions)
        self.sigma = sigma

    def forward(self, obs):
        action = torch.tanh(self.net(obs))
        noise = torch.randn(action.shape) * self.sigma
        noise = noise.to(action.device)
        return (action + noise).clamp(-1, 1)


def devlint_example_inputs(cls):
    return (torch.randn(3, 4),)
