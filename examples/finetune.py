"""Fine-tune a trained TinySeg on new synthetic images, on the GPU when there is one.

    python finetune.py --weights tinyseg.pt --epochs 1
"""

import argparse

import torch
from torch.utils.data import DataLoader

from tinyseg.model import TinySeg, dice_loss
from train import synthetic_data


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fine-tune TinySeg.")
    parser.add_argument("--weights", default="tinyseg.pt")
    parser.add_argument("--epochs", type=int, default=1)
    return parser.parse_args()


def finetune(model: TinySeg, loader: DataLoader, device: torch.device, epochs: int) -> float:
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss = torch.zeros(())
    for _ in range(epochs):
        for images, targets in loader:
            images.to(device)
            targets = targets.to(device)
            loss = dice_loss(model(images), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def main() -> None:
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TinySeg()
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    loader = DataLoader(synthetic_data(), batch_size=8, shuffle=True)
    print(f"last loss: {finetune(model, loader, device, args.epochs):.4f}")


if __name__ == "__main__":
    main()
