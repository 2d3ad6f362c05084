"""What `devlint confirm` is asked and what it answers: the options of a run, the verdict on a
finding, and the names both sides share (the child reads the input dtypes)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

STATUSES = ("confirmed", "benign", "not-reproduced", "not-reached", "inconclusive", "not-run", "not-selected")
# the dtype names an input may have, each the name of a torch dtype: checked before any run, without torch
INPUT_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "long", "int32", "bool")
RUNTIME_RULES = {"DEV001", "DEV003", "DEV004", "DEV005", "DEV007", "DEV008", "DEV009", "DEV010", "DEV011", "DEV012", "DEV013", "DEV014", "DEV015"}
SCENARIO_NAMES = {
    "build": "while building the module",
    "move": "when the module was moved",
    "train": "in a training-mode forward",
    "eval": "in an eval-mode forward",
    "cached": "after a first forward on the CPU, then a move",
    "moved-back": "built for the GPU (device=\"cuda\") and moved back to the CPU",
}


@dataclass
class Options:
    device: str = "auto"  # auto | cuda | stand-in
    mode: str = "both"  # train | eval | both
    only_class: Optional[str] = None
    init_kwargs: Optional[dict] = None
    input_shapes: list[list[int]] = field(default_factory=list)
    input_dtype: str = "float32"
    checkpoint: Optional[Path] = None
    timeout: float = 120.0
    memory_mb: int = 8192
    values: str = "auto"  # auto | always | never: whether the stand-in holds real data (see scenarios.py)
    classes: dict = field(default_factory=dict)  # [tool.devlint.confirm.classes]


@dataclass
class Verdict:
    status: str
    message: str
    use_row: Optional[int] = None
    origin_row: Optional[int] = None
    device: Optional[str] = None

    def record(self) -> dict:
        return {
            "status": self.status,
            "message": self.message,
            "use": {"row": self.use_row},
            "origin": {"row": self.origin_row},
            "device": self.device,
        }
