"""Loading a checkpoint saved on a GPU on a CPU-only machine, without `map_location`."""

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def save_gpu_checkpoint(path: str) -> None:
    """Write a checkpoint whose storages are tagged "cuda:0", as one saved on a GPU would be."""
    is_storage = lambda obj: isinstance(obj, (torch.storage.UntypedStorage, torch.storage.TypedStorage))  # noqa: E731
    tagger = lambda obj: "cuda:0" if is_storage(obj) else None  # noqa: E731
    torch.serialization.register_package(-100, tagger, lambda obj, location: None)
    torch.save(make_model().state_dict(), path)
    # Unregister it again, so loading behaves as on a CPU-only host.
    torch.serialization._package_registry[:] = [
        entry for entry in torch.serialization._package_registry if entry[1] is not tagger
    ]


def load_model(path: str) -> nn.Module:
    model = make_model()
    model.load_state_dict(torch.load(path))  # the line to change
    return model.eval()


if __name__ == "__main__":
    save_gpu_checkpoint("/tmp/gpu_ckpt.pt")
    model = load_model("/tmp/gpu_ckpt.pt")
    print(model(torch.randn(8, 16)).shape)
