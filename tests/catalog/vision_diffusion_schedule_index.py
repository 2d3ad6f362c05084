"""Diffusion model: the noise schedule lives on the CPU and is indexed by GPU timesteps.

Report: https://github.com/modelscope/modelscope/issues/220
Bug: `tensor[t]` with the schedule on the CPU and `t` on the GPU raises "indices should be
either on cpu or on the same device as the indexed tensor (cpu)". The opposite direction, a CPU
index into a GPU tensor (the channel reorder below), is accepted by CUDA.
"""
import torch
from torch import nn


class Denoiser(nn.Module):
    def __init__(self, steps=10, channels=3):
        super().__init__()
        betas = torch.linspace(1e-4, 0.02, steps)
        self.sqrt_alphas_cumprod = torch.cumprod(1 - betas, 0).sqrt()  # cuda: confirmed - a CPU schedule indexed by cuda:0 timesteps: indices should be either on cpu or on the same device
        self.bgr_to_rgb = torch.tensor([2, 1, 0])  # cuda: benign - a CPU index into a cuda:0 tensor, which CUDA accepts
        self.net = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x0, t):
        x0 = x0[:, self.bgr_to_rgb]
        scale = self.sqrt_alphas_cumprod[t].view(-1, 1, 1, 1)
        return self.net(x0 * scale)


class DenoiserFixed(nn.Module):
    """The fix: the schedule is a buffer; the reorder index may stay a plain CPU tensor."""

    def __init__(self, steps=10, channels=3):
        super().__init__()
        betas = torch.linspace(1e-4, 0.02, steps)
        self.register_buffer("sqrt_alphas_cumprod", torch.cumprod(1 - betas, 0).sqrt())
        self.bgr_to_rgb = torch.tensor([2, 1, 0])  # cuda: benign - a CPU index into a cuda:0 tensor, which CUDA accepts
        self.net = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x0, t):
        x0 = x0[:, self.bgr_to_rgb]
        scale = self.sqrt_alphas_cumprod[t].view(-1, 1, 1, 1)
        return self.net(x0 * scale)


def devlint_example_inputs(cls):
    return torch.randn(2, 3, 8, 8), torch.tensor([3, 7])
