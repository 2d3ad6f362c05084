"""Fine-tune a trained TinySeg on new synthetic images, on the GPU when there is one, with a new
classifier head when the new data has another number of classes.

    python finetune.py --weights tinyseg.pt --epochs 1 --num-classes 4
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from tinyseg.model import TinySeg, dice_loss
from train import synthetic_data


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fine-tune TinySeg.")
    parser.add_argument("--weights", default="tinyseg.pt")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--num-classes", type=int, default=4)
    return parser.parse_args()


def finetune(model: TinySeg, loader: DataLoader, device: torch.device, epochs: int, num_classes: int) -> float:
    model.to(device)
    if num_classes != model.head.out_features:
        model.head = nn.Linear(model.head.in_features, num_classes)
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
    print(f"last loss: {finetune(model, loader, device, args.epochs, args.num_classes):.4f}")


if __name__ == "__main__":
    main()
