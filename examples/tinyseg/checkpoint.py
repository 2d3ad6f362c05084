"""Saving and restoring TinySeg checkpoints."""

import os
from typing import Union

import torch
from torch import nn

PathLike = Union[str, os.PathLike]


def save_checkpoint(model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int, path: PathLike) -> None:
    """Save everything needed to resume training."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
    torch.save(state, path)


def export_weights(model: nn.Module, path: PathLike) -> None:
    """Save the model weights alone, for inference."""
    torch.save(model.state_dict(), path)


def read_checkpoint(path: PathLike) -> dict:
    """Return a raw training checkpoint, e.g. to look at its epoch or keys."""
    return torch.load(path)


def load_weights(model: nn.Module, path: PathLike, device: torch.device) -> nn.Module:
    """Load exported weights into `model` and get it ready for inference on `device`."""
    model.load_state_dict(torch.load(path), map_location=device)
    return model.to(device).eval()


def resume(model: nn.Module, optimizer: torch.optim.Optimizer, path: PathLike) -> int:
    """Restore the model and optimizer from a training checkpoint; returns the next epoch."""
    ckpt = torch.load(path, map_location="cpu")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    return ckpt["epoch"] + 1
