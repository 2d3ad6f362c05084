"""The TinySeg model and its loss."""

import math

import torch
import torch.nn.functional as F
from torch import nn

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


class PositionalEncoding(nn.Module):
    """Sinusoidal positional encoding added to the patch tokens."""

    def __init__(self, dim: int, max_len: int = 1024):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1).float()
        div_term = torch.exp(torch.arange(0, dim, 2).float() * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.pe = pe

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens + self.pe[: tokens.size(1)]


class TinySeg(nn.Module):
    """Cuts an image into patches, mixes them with a transformer, predicts a class per pixel."""

    def __init__(
        self,
        num_classes: int = 4,
        dim: int = 64,
        patch: int = 8,
        depth: int = 2,
        heads: int = 4,
        window: int = 16,
        token_drop: float = 0.1,
    ):
        super().__init__()
        self.patch = patch
        self.window = window
        self.token_drop = token_drop
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)
        self.embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.pos = PositionalEncoding(dim)
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b, _, h, w = images.shape
        x = (images - self.mean) / self.std
        tokens = self.pos(self.embed(x).flatten(2).transpose(1, 2))
        n = tokens.size(1)
        if self.training and self.token_drop > 0:
            # Silence a few random patches so the model learns to use their context.
            keep = torch.rand(b, n) > self.token_drop
            tokens = tokens * keep.unsqueeze(-1)
        # Local attention: each patch sees its `window` neighbours in raster order.
        idx = torch.arange(n, device=tokens.device)
        far = (idx[None, :] - idx[:, None]).abs() > self.window
        tokens = self.encoder(tokens, mask=far)
        logits = self.head(tokens).transpose(1, 2)
        logits = logits.reshape(b, -1, h // self.patch, w // self.patch)
        return F.interpolate(logits, size=(h, w), mode="bilinear", align_corners=False)


def dice_loss(logits: torch.Tensor, target: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Soft Dice loss; `target` holds one class index per pixel."""
    num_classes = logits.size(1)
    classes = torch.arange(num_classes)
    one_hot = (target.unsqueeze(1) == classes.view(1, -1, 1, 1)).float()
    probs = logits.softmax(dim=1)
    inter = (probs * one_hot).sum(dim=(2, 3))
    union = probs.sum(dim=(2, 3)) + one_hot.sum(dim=(2, 3))
    return 1 - (2 * inter / union.clamp_min(eps)).mean()
