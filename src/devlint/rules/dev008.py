from __future__ import annotations

import libcst as cst

from devlint.engine import SAFE, NodeFix, Rule
from devlint.placement import PlacementEvents


class NumpyOnDeviceTensor(PlacementEvents, Rule):
    code = "DEV008"
    name = "numpy-on-device-tensor"
    summary = "`.numpy()` on a tensor the same scope put on an accelerator"

    def check_scope(self, scan) -> None:
        for call in scan.numpy_calls:
            func = call.func
            with_cpu = cst.Call(func=cst.Attribute(value=func.value, attr=cst.Name("cpu")))
            fix = NodeFix(SAFE, "Insert `.cpu()` before `.numpy()`", call,
                          call.with_changes(func=func.with_changes(value=with_cpu)))
            self.report(
                func.attr,
                "`.numpy()` on a tensor this code put on an accelerator fails (`can't convert cuda:0 device type "
                "tensor to numpy`); call `.cpu()` first",
                fix,
            )
