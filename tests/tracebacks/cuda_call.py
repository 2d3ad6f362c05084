"""Moving a model to the GPU with `.cuda()` on a machine without CUDA."""

import torch
from torch import nn


def build_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    return model.cuda()  # the line to change


if __name__ == "__main__":
    model = build_model()
    print(model(torch.randn(8, 16)).shape)
