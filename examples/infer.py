"""Segment a batch of images with trained TinySeg weights.

    python infer.py --weights tinyseg.pt --out masks.npy
"""

import argparse
import time

import numpy as np
import torch

from tinyseg.model import TinySeg

CLASS_NAMES = ["background", "shadow", "midtone", "highlight"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Segment images with a trained TinySeg.")
    parser.add_argument("--weights", default="tinyseg.pt", help="weights saved by export_weights()")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--out", default="masks.npy")
    return parser.parse_args()


def segment(weights: str, images: torch.Tensor) -> np.ndarray:
    """Class index per pixel for a batch of images; runs on the GPU when there is one."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TinySeg()
    model.load_state_dict(torch.load(weights, map_location=device))
    model.to(device)
    model.eval()
    with torch.no_grad():
        start = time.perf_counter()
        preds = model(images.to(device)).argmax(1)
        torch.cuda.synchronize()  # wait for the GPU to finish before reading the clock
        print(f"inference took {time.perf_counter() - start:.3f}s")
    present = preds.unique().cpu().numpy()
    print("classes present:", ", ".join(CLASS_NAMES[c] for c in present))
    return preds.numpy()


class Segmenter:
    """Loads the weights once, then segments batch after batch (for a service)."""

    def __init__(self, weights: str, device: torch.device):
        self.device = device
        self.model = TinySeg().to(device)
        self.model.load_state_dict(torch.load(weights, map_location=device))
        self.model.eval()

    def __call__(self, images: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return self.model(images.to(self.device)).argmax(1).numpy()


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    images = torch.rand(args.batch_size, 3, 64, 64)
    masks = segment(args.weights, images)
    np.save(args.out, masks)
    print(f"wrote {masks.shape[0]} masks to {args.out}")


if __name__ == "__main__":
    main()
