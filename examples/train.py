"""Train TinySeg on a synthetic data set.

    python train.py --epochs 2
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tinyseg.checkpoint import resume, save_checkpoint
from tinyseg.model import TinySeg, dice_loss


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train TinySeg on a synthetic data set.")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--resume", default=None, help="training checkpoint to continue from")
    parser.add_argument("--out", default="tinyseg.pt")
    return parser.parse_args()


def synthetic_data(n: int = 64, size: int = 64, num_classes: int = 4) -> TensorDataset:
    """Random images; the class of each pixel is its brightness bucket."""
    images = torch.rand(n, 3, size, size)
    targets = (images.mean(dim=1) * num_classes).long().clamp_max(num_classes - 1)
    return TensorDataset(images, targets)


def evaluate(model: TinySeg, loader: DataLoader) -> float:
    """Mean Dice loss over `loader`."""
    device = "cuda"
    model.cuda().eval()
    total = 0.0
    with torch.no_grad():
        for images, targets in loader:
            images, targets = images.to(device), targets.to(device)
            total += dice_loss(model(images), targets).item()
    return total / len(loader)


def predict(model: TinySeg, images: torch.Tensor) -> torch.Tensor:
    """Class index per pixel; runs on the GPU when there is one."""
    model.eval()
    if torch.cuda.is_available():
        model, images = model.cuda(), images.cuda()
    with torch.no_grad():
        return model(images).argmax(dim=1).cpu()


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    train_loader = DataLoader(synthetic_data(), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(synthetic_data(), batch_size=args.batch_size)

    model = TinySeg().to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    start = resume(model, optimizer, args.resume) if args.resume else 0
    # highlights are rare in the synthetic images: weigh their pixels up
    pixel_loss = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 1.0, 1.0, 4.0]))

    for epoch in range(start, start + args.epochs):
        model.train()
        for images, targets in train_loader:
            images, targets = images.to(args.device), targets.to(args.device)
            logits = model(images)
            loss = dice_loss(logits, targets) + pixel_loss(logits, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: train {loss.item():.4f}, val {evaluate(model, val_loader):.4f}")
        save_checkpoint(model, optimizer, epoch, args.out)

    masks = predict(model, next(iter(val_loader))[0][:4])
    print("classes in the first predictions:", masks.unique().tolist())


if __name__ == "__main__":
    main()
