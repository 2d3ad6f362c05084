"""LaneATT: anchors kept as plain tensors and moved by hand-written `cuda()`/`to()` overrides.

Report: https://github.com/lucastabelini/LaneATT/issues/96
Bug: `self.anchors` and `self.cut_xs` are plain tensors that only the overridden `cuda()`/`to()`
move; `DataParallel` replicas bypass the overrides and keep them on cuda:0 ("cuda:1 and cuda:0").
On one GPU `model.to(device)` goes through the override, so nothing breaks there.
"""
import torch
from torch import nn


class LaneHead(nn.Module):
    def __init__(self, n_anchors=6, feat=8):
        super().__init__()
        self.anchors = torch.linspace(0, 1, n_anchors).unsqueeze(-1).repeat(1, 4)  # cuda: not-reproduced - the overridden to() moves it with the module; only DataParallel replicas (several GPUs) skip the override
        self.cut_xs = torch.arange(n_anchors)  # cuda: not-reproduced - moved by the to() override; a CPU index into a device tensor would be accepted anyway
        self.cls = nn.Linear(feat, 4)

    def forward(self, features):
        pooled = features[:, self.cut_xs]
        return self.anchors + self.cls(pooled)

    def cuda(self, device=None):
        moved = super().cuda(device)
        moved.anchors = moved.anchors.cuda(device)
        moved.cut_xs = moved.cut_xs.cuda(device)
        return moved

    def to(self, *args, **kwargs):
        moved = super().to(*args, **kwargs)
        moved.anchors = moved.anchors.to(*args, **kwargs)
        moved.cut_xs = moved.cut_xs.to(*args, **kwargs)
        return moved


class LaneHeadFixed(nn.Module):
    """The fix: buffers, which every move (DataParallel replicas included) carries along."""

    def __init__(self, n_anchors=6, feat=8):
        super().__init__()
        self.register_buffer("anchors", torch.linspace(0, 1, n_anchors).unsqueeze(-1).repeat(1, 4))
        self.register_buffer("cut_xs", torch.arange(n_anchors))
        self.cls = nn.Linear(feat, 4)

    def forward(self, features):
        pooled = features[:, self.cut_xs]
        return self.anchors + self.cls(pooled)


def devlint_example_inputs(cls):
    return (torch.randn(2, 6, 8),)
