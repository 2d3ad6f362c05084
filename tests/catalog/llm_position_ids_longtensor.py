"""Position ids made with the legacy `torch.LongTensor(...)` constructor in forward.

Report: https://github.com/huggingface/transformers/issues/6142
Bug: `torch.LongTensor(...)` cannot take a device, so the position ids stay on the CPU and the
GPU position embedding rejects them (`index_select`: "found at least two devices").
"""
import torch
from torch import nn


class Embeddings(nn.Module):
    def __init__(self, vocab=50, max_positions=16, dim=8):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim)
        self.position_embeddings = nn.Embedding(max_positions, dim)

    def forward(self, input_ids):
        position_ids = torch.LongTensor([list(range(input_ids.shape[1]))])  # cuda: confirmed - CPU position ids into a cuda:0 nn.Embedding (index_select rejects them)
        return self.word_embeddings(input_ids) + self.position_embeddings(position_ids)


class EmbeddingsFixed(nn.Module):
    def __init__(self, vocab=50, max_positions=16, dim=8):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim)
        self.position_embeddings = nn.Embedding(max_positions, dim)

    def forward(self, input_ids):
        position_ids = torch.arange(input_ids.shape[1], dtype=torch.long, device=input_ids.device).unsqueeze(0)
        return self.word_embeddings(input_ids) + self.position_embeddings(position_ids)


def devlint_example_inputs(cls):
    return (torch.tensor([[4, 8, 15, 16, 23], [42, 4, 8, 15, 16]]),)
