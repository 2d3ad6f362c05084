"""TokenLearner: the per-token attention maps are kept in a plain Python list.

Report: https://github.com/rish-16/tokenlearner-pytorch/issues/4
Bug: submodules in a `list` are not registered, so `model.to(device)` leaves their weights on
the CPU ("Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor)").
"""
import torch
from torch import nn


class TokenLearner(nn.Module):
    def __init__(self, n_tokens=4, channels=8):
        super().__init__()
        self.tokenizers = [nn.Sequential(nn.Conv2d(channels, 1, 3, padding=1), nn.Sigmoid())  # cuda: confirmed - the listed convolutions keep CPU weights and get cuda:0 input
                           for _ in range(n_tokens)]

    def forward(self, x):
        maps = [tokenizer(x) for tokenizer in self.tokenizers]
        return torch.stack([(x * m).mean((2, 3)) for m in maps], dim=1)


class TokenLearnerFixed(nn.Module):
    def __init__(self, n_tokens=4, channels=8):
        super().__init__()
        self.tokenizers = nn.ModuleList(nn.Sequential(nn.Conv2d(channels, 1, 3, padding=1), nn.Sigmoid())
                                        for _ in range(n_tokens))

    def forward(self, x):
        maps = [tokenizer(x) for tokenizer in self.tokenizers]
        return torch.stack([(x * m).mean((2, 3)) for m in maps], dim=1)


def devlint_example_inputs(cls):
    return (torch.randn(2, 8, 8, 8),)
