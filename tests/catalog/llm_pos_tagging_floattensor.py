"""POS tagger: a `torch.FloatTensor(...)` built in forward is not moved to the device.

Report: https://github.com/bentrevett/pytorch-pos-tagging/pull/5
Bug: the legacy constructor `torch.FloatTensor(...)` always makes a CPU tensor (it takes no
`device=`), which meets the GPU embeddings ("found at least two devices, cuda:0 and cpu!").
"""
import torch
from torch import nn


class CharTagger(nn.Module):
    def __init__(self, vocab=30, dim=8, n_tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, n_tags)

    def forward(self, tokens):
        emb = self.embed(tokens)
        weights = torch.FloatTensor([1.0 / tokens.shape[1]] * tokens.shape[1])  # cuda: confirmed - the CPU weights (1-d, not a scalar) multiply cuda:0 embeddings
        return self.out((emb * weights.unsqueeze(-1)).sum(1))


class CharTaggerFixed(nn.Module):
    def __init__(self, vocab=30, dim=8, n_tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, n_tags)

    def forward(self, tokens):
        emb = self.embed(tokens)
        weights = torch.full((tokens.shape[1],), 1.0 / tokens.shape[1], device=tokens.device)
        return self.out((emb * weights.unsqueeze(-1)).sum(1))


def devlint_example_inputs(cls):
    return (torch.tensor([[1, 4, 2], [7, 3, 3]]),)
