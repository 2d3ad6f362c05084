"""`.numpy()` on a tensor that is not on the CPU, without `.cpu()` first.

The `meta` device stands in for a GPU on a machine without one.
"""

import torch
from torch import nn


def predict(model: nn.Module, images: torch.Tensor, device: torch.device):
    model.to(device).eval()
    with torch.no_grad():
        preds = model(images.to(device)).argmax(1)
    return preds.numpy()  # the line to change


if __name__ == "__main__":
    model = nn.Sequential(nn.Conv2d(3, 8, kernel_size=3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, kernel_size=1))
    masks = predict(model, torch.rand(2, 3, 32, 32), torch.device("meta"))
    print(masks.shape)
