"""Building what the confirm child runs: the user's file imported as part of its package, its
module classes, whether each can be built with no arguments, and the inputs to feed one (the
user's hook, a model's example inputs, or a guess from its first layer)."""
from __future__ import annotations

import importlib
import inspect
import sys
import traceback
import types
from pathlib import Path
from typing import Optional

import torch
from torch.utils._pytree import tree_map

from devlint.confirm.options import INPUT_DTYPES
from devlint.confirm.recorders import DATA_DEPENDENT


def import_user_file(path: Path) -> types.ModuleType:
    """Import `path` as part of its package (walking up `__init__.py` files), so relative imports work."""
    parts = [path.stem]
    root = path.parent
    while (root / "__init__.py").exists():
        parts.insert(0, root.name)
        root = root.parent
    sys.path.insert(0, str(root))
    if parts[-1] == "__init__":
        parts.pop()
    return importlib.import_module(".".join(parts))


def module_classes(module: types.ModuleType) -> list[type]:
    return [
        obj for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, torch.nn.Module) and obj.__module__ == module.__name__
    ]


def constructible(cls: type) -> bool:
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


DTYPES = {name: getattr(torch, name) for name in INPUT_DTYPES}  # torch.long is torch.int64


def make_inputs(specs: list[dict], device: str) -> tuple:
    out = []
    for spec in specs:
        if "value" in spec or "error" in spec:
            out.append(given_input(spec, device))
            continue
        dtype = DTYPES.get(spec.get("dtype", "float32"), torch.float32)
        if dtype.is_floating_point:
            out.append(torch.zeros(spec["shape"], dtype=dtype, device=device))
        else:
            out.append(torch.zeros(spec["shape"], dtype=dtype, device=device))
    return tuple(out)


def make_kwargs(values: dict, device: str) -> dict:
    """Keyword inputs: `{"shape": [...], "dtype": ...}` becomes a tensor, anything else is passed as is."""
    return {
        name: make_inputs([value], device)[0] if isinstance(value, dict) and "shape" in value else value
        for name, value in values.items()
    }


def input_guesses(model: torch.nn.Module, user_module, cls) -> list[tuple[str, list[dict]]]:
    """Candidate inputs, best first: user hook, Lightning/transformers attributes, the first layer."""
    guesses = hook_guesses(user_module, cls)
    for attr in ("example_input_array", "dummy_inputs"):
        value = getattr(model, attr, None)
        if isinstance(value, torch.Tensor):
            guesses.append((attr, [{"shape": list(value.shape), "dtype": str(value.dtype).split(".")[-1]}]))
        elif isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
            guesses.append((attr, [{"shape": list(v.shape), "dtype": str(v.dtype).split(".")[-1]} for v in value]))
    try:
        forward_params = [
            p for p in list(inspect.signature(model.forward).parameters.values())
            if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        forward_params = []
    if len(forward_params) > 1:
        return guesses  # several required inputs: do not guess
    for layer in model.modules():
        if layer is model or list(layer.children()):
            continue
        if isinstance(layer, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)):
            spatial = {torch.nn.Conv1d: 1, torch.nn.Conv2d: 2, torch.nn.Conv3d: 3}[type(layer)]
            for size in (32, 28, 64, 224, 16):
                guesses.append((f"first layer {type(layer).__name__}", [{"shape": [2, layer.in_channels] + [size] * spatial}]))
        elif isinstance(layer, torch.nn.Linear):
            guesses.append(("first layer Linear", [{"shape": [2, layer.in_features]}]))
            guesses.append(("first layer Linear", [{"shape": [2, 8, layer.in_features]}]))
        elif isinstance(layer, torch.nn.Embedding):
            guesses.append(("first layer Embedding", [{"shape": [2, 8], "dtype": "int64"}]))
        elif isinstance(layer, torch.nn.RNNBase):
            shape = [2, 8, layer.input_size] if layer.batch_first else [8, 2, layer.input_size]
            guesses.append((f"first layer {type(layer).__name__}", [{"shape": shape}]))
        elif isinstance(layer, (torch.nn.LayerNorm,)):
            guesses.append(("first layer LayerNorm", [{"shape": [2, 8, *layer.normalized_shape]}]))
        else:
            continue
        break
    return guesses + holder_guesses(model, forward_params)


def hook_guesses(user_module, cls) -> list[tuple[str, list[dict]]]:
    """What `devlint_example_inputs(cls)` returns, as given: tensors keep their values and dtypes
    (each run moves them to its device), other values are passed as they are."""
    hook = getattr(user_module, "devlint_example_inputs", None)
    if not callable(hook):
        return []
    try:
        value = hook(cls)
    except Exception as exc:  # noqa: BLE001 - user code: the run reports it
        return [("devlint_example_inputs()", [{"error": f"devlint_example_inputs({cls.__name__}) raised {type(exc).__name__}: {exc}"}])]
    if value is None:
        return []
    values = value if isinstance(value, (tuple, list)) else (value,)
    return [("devlint_example_inputs()", [{"value": v} for v in values])]


def holder_guesses(model: torch.nn.Module, forward_params: list) -> list[tuple[str, list[dict]]]:
    """Inputs for modules no layer describes: a module with no parameters that holds tables
    (a positional encoding adds its table to an input of the table's width), and a forward
    that takes no input at all."""
    guesses = []
    if len(forward_params) == 1 and not any(True for _ in model.parameters()):
        widths = []
        for module in model.modules():
            for value in list(vars(module).values()) + list(module.buffers(recurse=False)):
                if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.is_floating_point():
                    if value.shape[-1] not in widths:
                        widths.append(value.shape[-1])
        for width in widths[:2]:
            guesses.append(("a table the module holds", [{"shape": [2, 4, width]}]))
            guesses.append(("a table the module holds", [{"shape": [2, width]}]))
    if not forward_params:
        guesses.append(("forward takes no input", []))
    return guesses


def given_input(spec: dict, device: str):
    if "error" in spec:
        raise RuntimeError(spec["error"])
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v
    return tree_map(move, spec["value"])


def describe_inputs(specs: list[dict]) -> list:
    """A run's inputs as JSON: shapes and dtypes, values other than tensors by their type."""
    def one(value):
        if isinstance(value, torch.Tensor):
            return {"shape": list(value.shape), "dtype": str(value.dtype).split(".")[-1]}
        return type(value).__name__
    return [tree_map(one, s["value"]) if "value" in s else s.get("error", s) for s in specs]


def data_dependent(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in DATA_DEPENDENT)


def user_frame_row(exc: BaseException, user_file: str) -> Optional[int]:
    rows = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == user_file]
    return rows[-1] if rows else None
