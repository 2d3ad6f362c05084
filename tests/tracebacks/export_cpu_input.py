"""Running a model moved off the CPU on an example input made on the CPU, as before an export.

The `meta` device stands in for a GPU on a machine without one.
"""

import torch
from torch import nn


def build_model() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 64), nn.ReLU(), nn.Linear(64, 10))


def main() -> None:
    model = build_model()
    model.to("meta")
    model.eval()
    dummy = torch.randn(1, 3, 32, 32)  # the line to change
    logits = model(dummy)
    print("example output:", tuple(logits.shape))


if __name__ == "__main__":
    main()
