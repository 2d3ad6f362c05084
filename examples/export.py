"""Export trained TinySeg weights to ONNX and TorchScript for deployment.

    python export.py --weights tinyseg.pt
"""

import argparse

import torch

from tinyseg.model import TinySeg


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Export TinySeg to ONNX and TorchScript.")
    parser.add_argument("--weights", default="tinyseg.pt", help="weights saved by export_weights()")
    parser.add_argument("--size", type=int, default=64, help="side of the square example input")
    parser.add_argument("--torchscript", default="tinyseg.ts")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    model = TinySeg()
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.eval()
    model.cuda()

    # Export traces the model with an example input: a batch of one image.
    dummy = torch.randn(1, 3, args.size, args.size)
    with torch.no_grad():
        torch.onnx.export(
            model,
            dummy,
            "tinyseg.onnx",
            input_names=["images"],
            output_names=["logits"],
            dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
        )
        traced = torch.jit.trace(model, dummy)
    traced.save(args.torchscript)
    print(f"wrote tinyseg.onnx and {args.torchscript}")


if __name__ == "__main__":
    main()
