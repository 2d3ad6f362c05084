"""The rules, in code order: one module a rule (`devNNN.py`), its doc in `rules/DEVNNN.md`,
its fixture in `tests/fixtures/DEVNNN.py`.

`NAMES` is all that selecting rules and printing findings need. The rule classes import
libcst, so `ALL_RULES` and `BY_CODE` come from `registry` on first use: a run the cache
answers never loads them. A test holds `NAMES` to the classes.
"""
from __future__ import annotations

NAMES = {
    "DEV001": "hardcoded-cuda-call",
    "DEV002": "load-without-map-location",
    "DEV003": "factory-without-device",
    "DEV004": "unregistered-tensor-attribute",
    "DEV005": "hardcoded-cuda-string",
    "DEV006": "map-location-on-wrong-call",
    "DEV007": "input-device-mismatch",
    "DEV008": "numpy-on-device-tensor",
    "DEV009": "module-in-plain-container",
    "DEV010": "discarded-move",
    "DEV011": "cuda-only-api",
    "DEV012": "stale-device-attribute",
    "DEV013": "module-built-in-forward",
    "DEV014": "module-added-after-move",
    "DEV015": "unmoved-module",
}


def __getattr__(attribute: str):
    if attribute not in ("ALL_RULES", "BY_CODE"):
        raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
    from devlint.rules import registry

    return getattr(registry, attribute)
