"""Random smoothing augmentation: kernel widths drawn with `torch.rand` on the CPU.

Report: https://github.com/balbasty/cornucopia/issues/22
Bug: `torch.rand(self.nk)` has no device, so sampling on GPU images mixes devices.
"""
import torch
from torch import nn


class RandomSmooth(nn.Module):
    def __init__(self, nk=3, max_fwhm=2.0):
        super().__init__()
        self.nk = nk
        self.max_fwhm = max_fwhm

    def forward(self, image):
        fwhm = torch.rand(self.nk) * self.max_fwhm  # cuda: confirmed - the CPU widths meet the cuda:0 taps
        taps = torch.linspace(-1, 1, self.nk, device=image.device)
        kernel = torch.exp(-taps ** 2 / (2 * fwhm ** 2 + 1e-6))
        kernel = kernel / kernel.sum()
        return nn.functional.conv1d(image, kernel.view(1, 1, -1).expand(image.shape[1], 1, -1),
                                    padding=self.nk // 2, groups=image.shape[1])


class RandomSmoothFixed(nn.Module):
    def __init__(self, nk=3, max_fwhm=2.0):
        super().__init__()
        self.nk = nk
        self.max_fwhm = max_fwhm

    def forward(self, image):
        fwhm = torch.rand(self.nk, device=image.device) * self.max_fwhm
        taps = torch.linspace(-1, 1, self.nk, device=image.device)
        kernel = torch.exp(-taps ** 2 / (2 * fwhm ** 2 + 1e-6))
        kernel = kernel / kernel.sum()
        return nn.functional.conv1d(image, kernel.view(1, 1, -1).expand(image.shape[1], 1, -1),
                                    padding=self.nk // 2, groups=image.shape[1])


def devlint_example_inputs(cls):
    return (torch.randn(2, 3, 20),)
