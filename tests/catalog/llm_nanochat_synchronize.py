"""Generation step timed with `torch.cuda.synchronize()` outside any CUDA guard.

Report: https://github.com/karpathy/nanochat/issues/792
Bug: an unguarded `torch.cuda.synchronize()` crashes on Apple MPS and CPU-only machines.
"""
import time

import torch
from torch import nn


class TimedDecoder(nn.Module):
    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)
        self.last_step_s = 0.0

    def forward(self, ids):
        start = time.perf_counter()
        logits = self.head(self.embed(ids))
        torch.cuda.synchronize()  # cuda: confirmed - reached in forward; torch.cuda.synchronize() raises Torch not compiled with CUDA enabled without CUDA
        self.last_step_s = time.perf_counter() - start
        return logits


class TimedDecoderFixed(nn.Module):
    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)
        self.last_step_s = 0.0

    def forward(self, ids):
        start = time.perf_counter()
        logits = self.head(self.embed(ids))
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.last_step_s = time.perf_counter() - start
        return logits


def devlint_example_inputs(cls):
    return (torch.tensor([[1, 2, 3], [4, 5, 6]]),)
