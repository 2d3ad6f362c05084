"""ContextGS (3D Gaussian splatting): anchor level ids made with `torch.arange` without a device.

Report: https://github.com/wyf0912/ContextGS/pull/11
Bug: several `torch.arange` calls in the Gaussian model lack `device=`, and their results are
compared with GPU tensors.
"""
import torch
from torch import nn


class AnchorLevels(nn.Module):
    def __init__(self, n_levels=3, dim=8):
        super().__init__()
        self.n_levels = n_levels
        self.level_embed = nn.Linear(dim, n_levels)

    def forward(self, anchor_feats):
        per_level = anchor_feats.shape[0] // self.n_levels
        level_ids = torch.arange(self.n_levels).repeat_interleave(per_level)  # cuda: confirmed - the CPU level ids are compared with cuda:0 predictions
        predicted = self.level_embed(anchor_feats).argmax(-1)
        return (predicted == level_ids).float().mean()


class AnchorLevelsFixed(nn.Module):
    def __init__(self, n_levels=3, dim=8):
        super().__init__()
        self.n_levels = n_levels
        self.level_embed = nn.Linear(dim, n_levels)

    def forward(self, anchor_feats):
        per_level = anchor_feats.shape[0] // self.n_levels
        level_ids = torch.arange(self.n_levels, device=anchor_feats.device).repeat_interleave(per_level)
        predicted = self.level_embed(anchor_feats).argmax(-1)
        return (predicted == level_ids).float().mean()


def devlint_example_inputs(cls):
    return (torch.randn(6, 8),)
