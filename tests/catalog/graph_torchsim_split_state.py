"""TorchSim: the system ids to keep are made with `torch.arange` on the CPU.

Report: https://github.com/TorchSim/torch-sim/pull/508
Bug: `torch.arange(...)` in `_split_state` defaults to the CPU and `torch.isin` then meets the
GPU `system_idx`.
"""
import torch
from torch import nn


class SystemEnergy(nn.Module):
    def __init__(self, dim=3):
        super().__init__()
        self.energy = nn.Linear(dim, 1)

    def forward(self, positions, system_idx):
        n_systems = int(system_idx.max().item()) + 1
        wanted = torch.arange(0, n_systems, 2)  # cuda: confirmed - torch.isin of cuda:0 ids against CPU test elements
        keep = torch.isin(system_idx, wanted)
        return self.energy(positions).squeeze(-1) * keep


class SystemEnergyFixed(nn.Module):
    def __init__(self, dim=3):
        super().__init__()
        self.energy = nn.Linear(dim, 1)

    def forward(self, positions, system_idx):
        n_systems = int(system_idx.max().item()) + 1
        wanted = torch.arange(0, n_systems, 2, device=system_idx.device)
        keep = torch.isin(system_idx, wanted)
        return self.energy(positions).squeeze(-1) * keep


def devlint_example_inputs(cls):
    # six atoms in three systems
    return torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2])
