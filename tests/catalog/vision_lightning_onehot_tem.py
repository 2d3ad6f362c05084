"""A one-hot template tensor built in `__init__` stays on the CPU under Lightning.

Report: https://github.com/Lightning-AI/pytorch-lightning/issues/3674
Bug: `self.tem` is a plain tensor attribute, so it is not moved with the module to the GPU.
"""
import torch
from torch import nn


class PartClassifier(nn.Module):
    def __init__(self, n_parts=4, dim=8):
        super().__init__()
        self.backbone = nn.Conv2d(3, dim, 3, padding=1)
        self.tem = torch.eye(n_parts)  # cuda: confirmed - the CPU template is matmul-ed with cuda:0 logits
        self.head = nn.Linear(dim, n_parts)

    def forward(self, images):
        feats = self.backbone(images).mean((2, 3))
        logits = self.head(feats)
        return logits @ self.tem


class PartClassifierFixed(nn.Module):
    def __init__(self, n_parts=4, dim=8):
        super().__init__()
        self.backbone = nn.Conv2d(3, dim, 3, padding=1)
        self.register_buffer("tem", torch.eye(n_parts))
        self.head = nn.Linear(dim, n_parts)

    def forward(self, images):
        feats = self.backbone(images).mean((2, 3))
        logits = self.head(feats)
        return logits @ self.tem


def devlint_example_inputs(cls):
    return (torch.randn(2, 3, 16, 16),)
