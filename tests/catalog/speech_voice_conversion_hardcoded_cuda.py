"""Voice conversion: speaker embeddings and noise sent to the GPU with `.cuda()`.

Report: https://github.com/jjery2243542/voice_conversion/issues/17
Bug: inference code calls `.cuda()` unconditionally, so a machine without a GPU stops with
"Torch not compiled with CUDA enabled".
"""
import torch
from torch import nn


class Generator(nn.Module):
    def __init__(self, n_speakers=4, dim=16):
        super().__init__()
        self.speaker = nn.Embedding(n_speakers, dim)
        self.decoder = nn.Conv1d(2 * dim, dim, 3, padding=1)

    def forward(self, content, speaker_id):
        emb = self.speaker(speaker_id.cuda())  # cuda: confirmed - a hardcoded .cuda() request
        noise = torch.randn(content.shape, device=content.device).cuda()  # cuda: confirmed - a hardcoded .cuda() request
        cond = emb.unsqueeze(-1).expand(-1, -1, content.shape[-1])
        return self.decoder(torch.cat([content + noise, cond], dim=1))


class GeneratorFixed(nn.Module):
    """The fix: everything stays where the inputs are."""

    def __init__(self, n_speakers=4, dim=16):
        super().__init__()
        self.speaker = nn.Embedding(n_speakers, dim)
        self.decoder = nn.Conv1d(2 * dim, dim, 3, padding=1)

    def forward(self, content, speaker_id):
        emb = self.speaker(speaker_id)
        noise = torch.randn(content.shape, device=content.device)
        cond = emb.unsqueeze(-1).expand(-1, -1, content.shape[-1])
        return self.decoder(torch.cat([content + noise, cond], dim=1))


def devlint_example_inputs(cls):
    return torch.randn(2, 16, 10), torch.tensor([1, 3])
