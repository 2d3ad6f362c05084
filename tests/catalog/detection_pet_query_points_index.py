"""PET crowd counting: query points on one device indexed by a window index on another.

Report: https://github.com/cxliu0/PET/issues/4
Bug: `points_queries_win[:, v_idx]` raises "indices should be either on cpu or on the same
device as the indexed tensor (cpu)": the point table is on the CPU, the index on the GPU.
"""
import torch
from torch import nn


class QueryPointDecoder(nn.Module):
    def __init__(self, n_points=8, dim=16):
        super().__init__()
        self.points_queries = torch.arange(2 * n_points).view(2, n_points).float()  # cuda: confirmed - a CPU table indexed by a cuda:0 index: indices should be either on cpu or on the same device
        self.window_sizes = torch.tensor([4, 8])  # cuda: not-reproduced - only read with .tolist(), never meets a device tensor
        self.score = nn.Linear(dim, 1)

    def forward(self, feats):
        window = int(self.window_sizes.tolist()[0])
        scores = self.score(feats).squeeze(-1).mean(0)
        v_idx = scores.topk(window).indices
        points = self.points_queries[:, v_idx]
        return feats[:, v_idx] * points.sum(0, keepdim=True).unsqueeze(-1)


class QueryPointDecoderFixed(nn.Module):
    """The fix: the point table is a buffer, on the index's device after any move. The window
    table stays host-side: it is only read with `.tolist()`."""

    def __init__(self, n_points=8, dim=16):
        super().__init__()
        self.register_buffer("points_queries", torch.arange(2 * n_points).view(2, n_points).float())
        self.window_sizes = torch.tensor([4, 8])  # cuda: not-reproduced - only read with .tolist(), never meets a device tensor
        self.score = nn.Linear(dim, 1)

    def forward(self, feats):
        window = int(self.window_sizes.tolist()[0])
        scores = self.score(feats).squeeze(-1).mean(0)
        v_idx = scores.topk(window).indices
        points = self.points_queries[:, v_idx]
        return feats[:, v_idx] * points.sum(0, keepdim=True).unsqueeze(-1)


def devlint_example_inputs(cls):
    return (torch.randn(2, 8, 16),)
