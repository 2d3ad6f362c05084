"""Passing `map_location=` to `load_state_dict()` instead of `torch.load()`."""

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def load_model(path: str) -> nn.Module:
    model = make_model()
    model.load_state_dict(torch.load(path), map_location="cpu")  # the line to change
    return model.eval()


if __name__ == "__main__":
    torch.save(make_model().state_dict(), "/tmp/cpu_ckpt.pt")
    model = load_model("/tmp/cpu_ckpt.pt")
    print(model(torch.randn(8, 16)).shape)
