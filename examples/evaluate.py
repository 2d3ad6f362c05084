"""Per-pixel accuracy and Dice loss of trained TinySeg weights on held-out data.

    python evaluate.py --weights tinyseg.pt
"""

import argparse

import torch
from torch.utils.data import DataLoader

from tinyseg.model import TinySeg, dice_loss
from train import synthetic_data


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Evaluate trained TinySeg weights.")
    parser.add_argument("--weights", default="tinyseg.pt", help="weights saved by export_weights()")
    parser.add_argument("--batch-size", type=int, default=8)
    return parser.parse_args()


def evaluate(weights: str, batch_size: int) -> dict[str, float]:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TinySeg()
    model.load_state_dict(torch.load(weights, map_location=device))
    model.to(device)
    model.eval()
    test_loader = DataLoader(synthetic_data(n=32), batch_size=batch_size)
    correct = total = 0
    loss = 0.0
    with torch.no_grad():
        for images, targets in test_loader:
            logits = model(images.to(device))
            loss += dice_loss(logits, targets.to(device)).item()
            correct += (logits.argmax(dim=1) == targets).sum().item()
            total += targets.numel()
    return {"pixel_accuracy": correct / total, "dice_loss": loss / len(test_loader)}


def main() -> None:
    args = parse_args()
    for name, value in evaluate(args.weights, args.batch_size).items():
        print(f"{name}: {value:.4f}")


if __name__ == "__main__":
    main()
