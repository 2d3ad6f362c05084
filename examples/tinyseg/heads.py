"""Heads that TinySeg can grow: an auxiliary head per encoder layer (deep supervision) and a
refinement stack."""

import torch
from torch import nn


class DeepSupervision(nn.Module):
    """A classifier on the tokens of each encoder layer, each trained against the same target."""

    def __init__(self, dim: int, num_classes: int, depth: int):
        super().__init__()
        self.aux_heads = [nn.Linear(dim, num_classes) for _ in range(depth)]

    def forward(self, features: list[torch.Tensor]) -> list[torch.Tensor]:
        return [head(f) for head, f in zip(self.aux_heads, features)]


class Refiner(nn.Module):
    """Residual convolutions over the upsampled logits."""

    def __init__(self, num_classes: int, steps: int = 2):
        super().__init__()
        self.steps = nn.ModuleList(
            nn.Conv2d(num_classes, num_classes, kernel_size=3, padding=1) for _ in range(steps)
        )

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        # the same scale for every class before refining
        logits = nn.GroupNorm(1, logits.size(1))(logits)
        for conv in self.steps:
            logits = logits + conv(logits)
        return logits
