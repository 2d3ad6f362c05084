"""`devlint explain`: real tracebacks captured on this CPU-only machine, and the texts users paste."""
import json
from pathlib import Path

import pytest

from helpers import ROOT, devlint

TRACEBACKS = sorted((ROOT / "tests" / "tracebacks").glob("*.txt"))
CASES = [p for p in TRACEBACKS if p.with_suffix(".py").exists()]
EXPECTED_RULE = {
    "cuda_call": "DEV001",
    "cuda_checkpoint": "DEV002",
    "device_mismatch": "DEV003",
    "export_cpu_input": "DEV007",
    "map_location_to_load_state_dict": "DEV006",
    "numpy_on_device": "DEV008",
}


def line_to_change(program: Path) -> int:
    (row,) = [i for i, line in enumerate(program.read_text().splitlines(), 1) if "# the line to change" in line]
    return row


@pytest.mark.parametrize("traceback", CASES, ids=lambda p: p.stem)
def test_first_finding_is_the_line_to_change(traceback):
    r = devlint("explain", "--isolated", "--output-format", "json", str(traceback.relative_to(ROOT)), cwd=ROOT)
    result = json.loads(r.stdout)
    program = traceback.with_suffix(".py")
    first = result["findings"][0]
    assert Path(first["filename"]) == program
    assert (first["location"]["row"], first["code"]) == (line_to_change(program), EXPECTED_RULE[traceback.stem])
    assert result["kinds"] and EXPECTED_RULE[traceback.stem] in result["kinds"][0]["rules"]


def test_text_output_names_the_kind_and_the_line(tmp_path):
    traceback = ROOT / "tests" / "tracebacks" / "cuda_checkpoint.txt"
    r = devlint("explain", "--isolated", "-", cwd=ROOT, input=traceback.read_text())
    lines = r.stdout.splitlines()
    assert lines[0] == "cuda-checkpoint-on-cpu-host: a checkpoint saved on a GPU, loaded where there is none"
    row = line_to_change(traceback.with_suffix(".py"))
    first = lines[lines.index("The line to change, most likely first:") + 1]
    assert first.startswith(f"tests/tracebacks/cuda_checkpoint.py:{row}:") and "DEV002" in first
    assert first.endswith("(on the failing line)")


PASTED_KINDS = [
    "device-mismatch",
    "cuda-checkpoint-on-cpu-host",
    "cuda-not-available",
    "input-weight-type-mismatch",
    "numpy-on-device-tensor",
    "map-location-on-load-state-dict",
    "cuda-not-available",
    "invalid-device-ordinal",
    "rnn-hidden-state-device",
    "data-parallel-parameters-not-on-device",
    "fake-tensor-device-propagation",
    "generator-device",
    "state-dict-module-prefix",
    "autocast-without-cuda",
    "autocast-without-cuda",
    "pin-memory-without-accelerator",
    "weights-only-load",
]


def test_pasted_error_texts_are_recognised():
    texts = [t.strip() for t in (ROOT / "tests" / "tracebacks" / "pasted.txt").read_text().split("\n\n") if t.strip()]
    assert len(texts) == len(PASTED_KINDS)
    for text, kind in zip(texts, PASTED_KINDS):
        r = devlint("explain", "--isolated", "--output-format", "json", text, cwd=ROOT)
        assert [k["id"] for k in json.loads(r.stdout)["kinds"]] == [kind], text


def test_a_kind_no_rule_checks_says_so():
    r = devlint("explain", "--isolated", "UserWarning: 'pin_memory' argument is set as true but no accelerator is found",
                cwd=ROOT)
    assert r.stdout.splitlines()[:1] == ["pin-memory-without-accelerator: `pin_memory=True` on a machine without an "
                                         "accelerator (a warning: memory is not pinned)"]
    assert "  rules: none (the cause is not in code devlint checks)" in r.stdout.splitlines()


def test_unknown_text_says_so():
    r = devlint("explain", "--isolated", "ValueError: something else", cwd=ROOT)
    assert r.returncode == 1 and "does not recognise" in r.stdout
