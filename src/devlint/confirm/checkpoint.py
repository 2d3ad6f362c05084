"""Where a checkpoint's tensors were saved, read without unpickling anything real.

torch.save writes a zip whose `*/data.pkl` pickles the object graph, with each storage as a
persistent id `('storage', type, key, location, numel)`. A stub unpickler (classes become
inert stubs, nothing is imported or run) collects the locations. The legacy (non-zip) format
starts with three small pickles (magic number, protocol, system info) before the graph.
"""
from __future__ import annotations

import io
import pickle
import zipfile
from collections import Counter
from pathlib import Path


class _Stub:
    def __init__(self, *args, **kwargs) -> None:
        pass

    def __call__(self, *args, **kwargs):
        return _Stub()

    def __setstate__(self, state) -> None:
        pass


class _LocationReader(pickle.Unpickler):
    def __init__(self, data) -> None:
        super().__init__(data)
        self.locations: Counter = Counter()

    def find_class(self, module, name):
        return _Stub

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and pid and pid[0] == "storage" and len(pid) >= 4:
            self.locations[str(pid[3])] += 1
        return _Stub()


def storage_locations(path: Path) -> Counter:
    """{'cuda:0': 9} for a checkpoint saved from a GPU. Raises ValueError if it is not one."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("data.pkl")]
            if not names:
                raise ValueError("a zip file without data.pkl: not a torch checkpoint")
            reader = _LocationReader(io.BytesIO(archive.read(names[0])))
            reader.load()
            return reader.locations
    with open(path, "rb") as handle:
        for _ in range(3):  # magic number, protocol version, system info
            pickle.Unpickler(handle).load()
        reader = _LocationReader(handle)
        reader.load()
        return reader.locations


CPU_ONLY_ERROR = (
    "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. "
    "If you are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') "
    "to map your storages to the CPU."
)
