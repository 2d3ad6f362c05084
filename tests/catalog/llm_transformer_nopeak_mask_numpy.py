"""Seq2seq Transformer: the no-peek mask is built from numpy on the CPU.

Report: https://github.com/SamLynnEvans/Transformer/issues/27
Bug: `create_masks` combines the target padding mask (on the GPU) with a mask made by
`torch.from_numpy(np.triu(...))` ("found at least two devices, cuda:0 and cpu").
"""
import numpy as np
import torch
from torch import nn


def create_masks(trg, pad=0):
    trg_mask = (trg != pad).unsqueeze(-2)
    size = trg.size(1)
    np_mask = torch.from_numpy(np.triu(np.ones((1, size, size)), k=1).astype("uint8")) == 0  # cuda: confirmed - the CPU numpy mask is and-ed with the cuda:0 padding mask
    return trg_mask & np_mask


def create_masks_fixed(trg, pad=0):
    trg_mask = (trg != pad).unsqueeze(-2)
    size = trg.size(1)
    np_mask = torch.triu(torch.ones(1, size, size, device=trg.device), diagonal=1) == 0
    return trg_mask & np_mask


class Decoder(nn.Module):
    def __init__(self, vocab=20, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, trg):
        mask = create_masks(trg)
        h = self.embed(trg)
        scores = (h @ h.transpose(-2, -1)).masked_fill(~mask, -1e9)
        return self.out(scores.softmax(-1) @ h)


class DecoderFixed(nn.Module):
    def __init__(self, vocab=20, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, trg):
        mask = create_masks_fixed(trg)
        h = self.embed(trg)
        scores = (h @ h.transpose(-2, -1)).masked_fill(~mask, -1e9)
        return self.out(scores.softmax(-1) @ h)


def devlint_example_inputs(cls):
    return (torch.tensor([[3, 5, 7, 0], [2, 9, 0, 0]]),)
