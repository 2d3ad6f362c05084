"""Quickstart classifier evaluated on a sample that was never moved to the GPU.

Report: https://github.com/pytorch/tutorials/issues/1983
Bug: the model is moved to the accelerator, the evaluation input is not ("Input type
(torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same").
"""
import torch
from torch import nn


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.stack = nn.Sequential(nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x):
        return self.stack(self.flatten(x))


def evaluate():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = NeuralNetwork().to(device)
    model.eval()
    x = torch.rand(1, 28, 28)  # cuda: not-run - confirm builds and runs the file's modules, not this function (run on a GPU, it raises)
    with torch.no_grad():
        return model(x).argmax(1)


def evaluate_fixed():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = NeuralNetwork().to(device)
    model.eval()
    x = torch.rand(1, 28, 28, device=device)
    with torch.no_grad():
        return model(x).argmax(1)


def devlint_example_inputs(cls):
    return (torch.rand(2, 28, 28),)
