"""SoftGroup: a CPU proposal index selected with a boolean mask computed on the GPU.

Report: https://github.com/thangvubk/SoftGroup/issues/215
Bug: `proposals_idx[mask_inds]` raises "indices should be either on cpu or on the same device as
the indexed tensor (cpu)"; the fix moves `proposals_idx` to `mask_inds.device` first.
"""
import torch
from torch import nn


class InstanceHead(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.mask_score = nn.Linear(dim, 1)

    def forward(self, point_feats):
        proposals_idx = torch.arange(point_feats.shape[0]).unsqueeze(1).repeat(1, 2)  # cuda: confirmed - a CPU index tensor selected with a cuda:0 boolean mask: indices should be either on cpu or on the same device
        mask_inds = self.mask_score(point_feats).squeeze(-1) > 0.5
        kept = proposals_idx[mask_inds].long()
        return point_feats.sum() + kept.float().mean()


class InstanceHeadFixed(nn.Module):
    """The fix: the proposal index is on the mask's device."""

    def __init__(self, dim=8):
        super().__init__()
        self.mask_score = nn.Linear(dim, 1)

    def forward(self, point_feats):
        mask_inds = self.mask_score(point_feats).squeeze(-1) > 0.5
        proposals_idx = torch.arange(point_feats.shape[0], device=mask_inds.device).unsqueeze(1).repeat(1, 2)
        kept = proposals_idx[mask_inds].long()
        return point_feats.sum() + kept.float().mean()


def devlint_example_inputs(cls):
    return (torch.randn(10, 8),)
