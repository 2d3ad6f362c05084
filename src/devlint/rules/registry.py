"""The rule classes, in code order. A new rule is added here and in `NAMES` (`__init__.py`)."""
from __future__ import annotations

from devlint.rules.dev001 import HardcodedCudaCall
from devlint.rules.dev002 import LoadWithoutMapLocation
from devlint.rules.dev003 import FactoryWithoutDevice
from devlint.rules.dev004 import UnregisteredTensorAttribute
from devlint.rules.dev005 import HardcodedCudaString
from devlint.rules.dev006 import MapLocationOnWrongCall
from devlint.rules.dev007 import InputDeviceMismatch
from devlint.rules.dev008 import NumpyOnDeviceTensor
from devlint.rules.dev009 import ModuleInPlainContainer
from devlint.rules.dev010 import DiscardedMove
from devlint.rules.dev011 import CudaOnlyApi
from devlint.rules.dev012 import StaleDeviceAttribute
from devlint.rules.dev013 import ModuleBuiltInForward
from devlint.rules.dev014 import ModuleAddedAfterMove
from devlint.rules.dev015 import UnmovedModule

ALL_RULES = (
    HardcodedCudaCall,
    LoadWithoutMapLocation,
    FactoryWithoutDevice,
    UnregisteredTensorAttribute,
    HardcodedCudaString,
    MapLocationOnWrongCall,
    InputDeviceMismatch,
    NumpyOnDeviceTensor,
    ModuleInPlainContainer,
    DiscardedMove,
    CudaOnlyApi,
    StaleDeviceAttribute,
    ModuleBuiltInForward,
    ModuleAddedAfterMove,
    UnmovedModule,
)
BY_CODE = {rule.code: rule for rule in ALL_RULES}
