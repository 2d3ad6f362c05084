"""A deterministic slice of fuzz cases on every test run (a fixed seed: the same 150 cases each
time, so a failure reproduces); bench/fuzz.py runs 10,000 (see bench/README.md)."""
import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("hypothesmith")

ROOT = Path(__file__).resolve().parent.parent


def _fuzz():
    spec = importlib.util.spec_from_file_location("fuzz", ROOT / "bench" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz"] = module  # its worker processes find their function by module name
    spec.loader.exec_module(module)
    return module


def test_a_fixed_slice_of_fuzz_cases(capsys):
    # Without a corpus, the mutated cases come from the shipped examples and rule fixtures. One
    # process: pytest-xdist already keeps every core busy.
    assert _fuzz().main(["--cases", "150", "--seed", "1", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "crash:           0" in out and "unparsable:      0" in out and "non-idempotent:  0" in out
