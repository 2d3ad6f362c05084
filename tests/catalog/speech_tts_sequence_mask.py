"""TTS loss: the sequence mask is built from `torch.arange(max_len)` on the CPU.

Report: https://github.com/mozilla/TTS/pull/549 (issue https://github.com/mozilla/TTS/issues/473)
Bug: `torch.arange(lengths.max())` returns a CPU tensor even though its bound is a CUDA scalar,
and it is compared with the CUDA lengths.
"""
import torch
from torch import nn


def sequence_mask(lengths):
    max_len = lengths.max()
    positions = torch.arange(max_len)  # cuda: confirmed - arange of a cuda:0 scalar is a CPU tensor, compared with cuda:0 lengths
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


def sequence_mask_fixed(lengths):
    max_len = lengths.max()
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


class MaskedL1Loss(nn.Module):
    def forward(self, prediction, target, lengths):
        mask = sequence_mask(lengths).unsqueeze(-1).float()
        return ((prediction - target).abs() * mask).sum() / mask.sum().clamp(min=1)


class MaskedL1LossFixed(nn.Module):
    def forward(self, prediction, target, lengths):
        mask = sequence_mask_fixed(lengths).unsqueeze(-1).float()
        return ((prediction - target).abs() * mask).sum() / mask.sum().clamp(min=1)


def devlint_example_inputs(cls):
    # mel frames of two utterances of 7 and 4 frames, padded to 7
    return torch.randn(2, 7, 4), torch.randn(2, 7, 4), torch.tensor([7, 4])
