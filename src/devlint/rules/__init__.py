"""The rules, in code order. Registration happens here and nowhere else.

`NAMES` is all that selecting rules and printing findings need; the rule classes import
libcst, so they are loaded on first use of `ALL_RULES` or `BY_CODE` (a run the cache
answers never loads them). A test holds `NAMES` to the classes.
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
}


def __getattr__(attribute: str):
    if attribute not in ("ALL_RULES", "BY_CODE"):
        raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
    from devlint.rules.dev001 import HardcodedCudaCall
    from devlint.rules.dev002 import LoadWithoutMapLocation
    from devlint.rules.dev003 import FactoryWithoutDevice
    from devlint.rules.dev004 import UnregisteredTensorAttribute
    from devlint.rules.dev005 import HardcodedCudaString
    from devlint.rules.dev006 import MapLocationOnWrongCall
    from devlint.rules.dev007 import InputDeviceMismatch
    from devlint.rules.dev008 import NumpyOnDeviceTensor

    all_rules = (
        HardcodedCudaCall,
        LoadWithoutMapLocation,
        FactoryWithoutDevice,
        UnregisteredTensorAttribute,
        HardcodedCudaString,
        MapLocationOnWrongCall,
        InputDeviceMismatch,
        NumpyOnDeviceTensor,
    )
    globals().update(ALL_RULES=all_rules, BY_CODE={rule.code: rule for rule in all_rules})
    return globals()[attribute]
