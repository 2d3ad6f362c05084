"""Where a checkpoint's tensors were saved, read without importing or running anything it names.

torch.save pickles the object graph with each storage as a persistent id
`('storage', type, key, location, numel)` (the legacy format adds a view entry) and writes the
storages' bytes apart from it: in the zip format (the default) the graph is `*/data.pkl`; in the
legacy format (`_use_new_zipfile_serialization=False`) it follows three small pickles (magic
number, protocol version, system info) and comes before the bytes. Only the graph is read, a few
kilobytes however large the checkpoint, and torch is not imported.

Every class the graph names (OrderedDict, a tensor's rebuild function, numpy's arrays, the user's
own nn.Module, whose file need not be importable) becomes an inert `_Stub` that accepts whatever
pickle does to build an object. Only the location tag of each storage is kept.
"""
from __future__ import annotations

import io
import pickle
import zipfile
from collections import Counter
from pathlib import Path

ZIP_MAGIC = b"PK\x03\x04"  # torch.load's own test: a zip checkpoint starts with a local file header
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # the legacy format's first pickle (torch.serialization.MAGIC_NUMBER)


class _Stub:
    """Stands in for any class or function: called, filled (SETITEM, APPEND, ADDITEMS), given
    state (BUILD), it keeps nothing."""

    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __call__(self, *args, **kwargs):
        return _Stub()

    def __setstate__(self, state) -> None:
        pass

    def __setitem__(self, key, value) -> None:
        pass

    def append(self, item) -> None:
        pass

    def extend(self, items) -> None:
        pass

    def add(self, item) -> None:
        pass


def _attribute(*args):
    """`getattr(Outer, "Inner")`: how pickle protocol 2 (torch.save's default, which spells the
    module `__builtin__`) names a nested class, which NEWOBJ may then instantiate: it takes only
    a class."""
    return _Stub


class _LocationReader(pickle.Unpickler):
    def __init__(self, data) -> None:
        super().__init__(data)
        self.storages: dict = {}  # key -> location tag: a storage shared by several tensors counts once

    def find_class(self, module, name):
        return _attribute if (module, name) in {("builtins", "getattr"), ("__builtin__", "getattr")} else _Stub

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) >= 4 and pid[0] == "storage":
            self.storages[pid[2]] = str(pid[3])
        elif isinstance(pid, tuple) and len(pid) >= 2 and pid[0] == "module":
            return pid[1]  # the legacy format's id for a pickled module's class (with its source)
        return _Stub()


def storage_locations(path: Path) -> Counter:
    """How many storages each location tag holds: {'cuda:0': 9} for a checkpoint saved from a GPU.
    Raises ValueError (or pickle's errors) if the file is not a torch checkpoint."""
    with open(path, "rb") as handle:
        if handle.read(len(ZIP_MAGIC)) != ZIP_MAGIC:
            handle.seek(0)
            # The small pickles before the graph go through the same reader: nothing is imported.
            if _LocationReader(handle).load() != LEGACY_MAGIC:
                raise ValueError("neither a zip nor a legacy torch.save file: not a torch checkpoint")
            _LocationReader(handle).load()  # protocol version
            _LocationReader(handle).load()  # system info
            return _locations(handle)
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if not names:
            raise ValueError("a zip file without data.pkl: not a torch checkpoint")
        return _locations(io.BytesIO(archive.read(names[0])))


def _locations(data) -> Counter:
    reader = _LocationReader(data)
    reader.load()
    return Counter(reader.storages.values())


CPU_ONLY_ERROR = (
    "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. "
    "If you are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') "
    "to map your storages to the CPU."
)
