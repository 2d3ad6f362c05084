"""YOLOv5 detection head: grids kept in a plain list and rebuilt lazily on the CPU.

Report: https://github.com/Bobo-y/flexible-yolov5/issues/111
Bug: `self.grid` is a plain list of tensors filled by the first forward and `self.anchor_grid`
a plain tensor, so `model.detection.grid` / `anchor_grid` stay on the CPU after the model moves.
"""
import torch
from torch import nn


class Detect(nn.Module):
    def __init__(self, nc=2, anchors=((10, 13, 16, 30), (30, 61, 62, 45)), ch=(8, 16)):
        super().__init__()
        self.no, self.nl, self.na = nc + 5, len(anchors), len(anchors[0]) // 2
        self.grid = [torch.zeros(1)] * self.nl  # cuda: confirmed - the list keeps CPU grids (filled by a forward) that are added to cuda:0 predictions
        self.anchor_grid = torch.tensor(anchors).float().view(self.nl, 1, -1, 1, 1, 2)  # cuda: confirmed - anchor_grid[i] is a 5-d CPU tensor multiplied with cuda:0 predictions
        self.stride = torch.tensor([8.0, 16.0])  # cuda: benign - stride[i] is a 0-dim CPU scalar in an elementwise mul, which CUDA accepts
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)

    def forward(self, p3, p4):
        out = []
        for i, x in enumerate((p3, p4)):
            x = self.m[i](x)
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2)
            if self.grid[i].shape[2:4] != x.shape[2:4]:
                self.grid[i] = self._make_grid(nx, ny)
            y = x.sigmoid()
            xy = (y[..., 0:2] * 2 - 0.5 + self.grid[i]) * self.stride[i]
            wh = (y[..., 2:4] * 2) ** 2 * self.anchor_grid[i]
            out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(bs, -1, self.no))
        return torch.cat(out, 1)

    @staticmethod
    def _make_grid(nx, ny):
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")  # cuda: confirmed - the grid built from these CPU aranges is added to cuda:0 predictions
        return torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()


class DetectFixed(nn.Module):
    """The fix: anchors as a buffer, grids made on the feature map's device. The stride table
    stays a plain tensor: indexed by an int it is a 0-dim CPU scalar, which CUDA accepts."""

    def __init__(self, nc=2, anchors=((10, 13, 16, 30), (30, 61, 62, 45)), ch=(8, 16)):
        super().__init__()
        self.no, self.nl, self.na = nc + 5, len(anchors), len(anchors[0]) // 2
        self.register_buffer("anchor_grid", torch.tensor(anchors).float().view(self.nl, 1, -1, 1, 1, 2))
        self.stride = torch.tensor([8.0, 16.0])  # cuda: benign - stride[i] is a 0-dim CPU scalar in an elementwise mul, which CUDA accepts
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)

    def forward(self, p3, p4):
        out = []
        for i, x in enumerate((p3, p4)):
            x = self.m[i](x)
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2)
            grid = self._make_grid(nx, ny, x.device)
            y = x.sigmoid()
            xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.stride[i]
            wh = (y[..., 2:4] * 2) ** 2 * self.anchor_grid[i]
            out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(bs, -1, self.no))
        return torch.cat(out, 1)

    @staticmethod
    def _make_grid(nx, ny, device):
        yv, xv = torch.meshgrid(torch.arange(ny, device=device), torch.arange(nx, device=device), indexing="ij")
        return torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()


def devlint_example_inputs(cls):
    return torch.randn(1, 8, 8, 8), torch.randn(1, 16, 4, 4)
