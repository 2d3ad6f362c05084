"""A forward that makes a tensor without `device=` and mixes it with its input.

Run with the module and the input on the `meta` device: the stand-in, on a machine without a
GPU, for the same mismatch on CUDA.
"""

import torch
from torch import nn


class AddPosition(nn.Module):
    """Adds each token's index to its features."""

    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        position = torch.arange(tokens.size(1))  # the line to change
        return self.proj(tokens) + position.view(1, -1, 1)


if __name__ == "__main__":
    device = torch.device("meta")
    model = AddPosition(16).to(device)
    out = model(torch.randn(2, 10, 16, device=device))
    print(out.shape)
