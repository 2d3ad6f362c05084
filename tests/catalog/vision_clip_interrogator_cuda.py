"""CLIP interrogator: features sent to the GPU with `.cuda()`, so CPU and MPS cannot run it.

Report: https://github.com/pharmapsychotic/clip-interrogator/pull/9
Bug: hard-coded `.cuda()` calls; the fix replaces them with `.to(device)`.
"""
import torch
from torch import nn


class Ranker(nn.Module):
    def __init__(self, n_labels=6, dim=8):
        super().__init__()
        self.image_proj = nn.Linear(dim, dim)
        self.label_features = nn.Parameter(torch.randn(n_labels, dim))

    def forward(self, image_features):
        image = self.image_proj(image_features).cuda()  # cuda: confirmed - a hardcoded .cuda() request
        image = image / image.norm(dim=-1, keepdim=True)
        return (image @ self.label_features.T).softmax(-1)


class RankerFixed(nn.Module):
    def __init__(self, n_labels=6, dim=8):
        super().__init__()
        self.image_proj = nn.Linear(dim, dim)
        self.label_features = nn.Parameter(torch.randn(n_labels, dim))

    def forward(self, image_features):
        image = self.image_proj(image_features).to(self.label_features.device)
        image = image / image.norm(dim=-1, keepdim=True)
        return (image @ self.label_features.T).softmax(-1)


def devlint_example_inputs(cls):
    return (torch.randn(2, 8),)
