"""A few hundred fuzz cases on every test run: bench/fuzz.py runs 10,000 (see bench/README.md)."""
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


def test_three_hundred_fuzz_cases(capsys):
    # Without a corpus, the mutated cases come from the shipped examples and rule fixtures.
    assert _fuzz().main(["--cases", "300", "--seed", "1", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "crash:           0" in out and "unparsable:      0" in out and "non-idempotent:  0" in out
