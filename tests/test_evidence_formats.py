"""Every finding of the rules that say two things meet (DEV003, DEV004, DEV007, DEV008, DEV012)
carries its evidence, and every output format shows it: the text formats (and flake8) as a
clause after the message, JSON and JSON lines as `related`, SARIF as `relatedLocations`,
notebooks with the cell of each place. The language server's `relatedInformation` is tested
in test_server.py."""
import json
import subprocess
import sys
import textwrap

import pytest

from helpers import devlint

SOURCE = textwrap.dedent('''\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, device):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.device = device
            self.scale = torch.ones(2)

        def forward(self, x):
            steps = torch.arange(x.shape[0])
            y = self.fc(x + torch.randn(3, device=self.device)) * self.scale
            return y + steps[:, None]


    def evaluate(loader, device):
        model = Net(device).to(device)
        for x, y in loader:
            out = model(x)
            print(out.numpy())
        return out
''')
CODES = {"DEV003", "DEV004", "DEV007", "DEV008", "DEV012"}


def records(tmp_path, *args):
    (tmp_path / "m.py").write_text(SOURCE)
    out = devlint("--isolated", "--output-format", "json", *args, "m.py", cwd=tmp_path).stdout
    return json.loads(out)


def clauses(record) -> str:
    return "; ".join(r["message"] for r in record["related"])


def test_every_finding_of_the_meeting_rules_names_its_evidence(tmp_path):
    found = records(tmp_path, "--no-cache")
    assert {r["code"] for r in found} >= CODES
    for r in found:
        if r["code"] in CODES:
            assert r["related"], r
            for place in r["related"]:
                assert place["message"].endswith(f"line {place['location']['row']}") or \
                    f"line {place['location']['row']}" in place["message"]
                assert 1 <= place["location"]["row"] <= place["end_location"]["row"] <= SOURCE.count("\n")


def test_the_cache_keeps_the_evidence(tmp_path):
    first = records(tmp_path)  # writes the cache
    assert records(tmp_path) == first  # read back from it
    assert any(r["related"] for r in first)


def test_text_and_github_formats_append_the_evidence_to_the_message(tmp_path):
    found = [r for r in records(tmp_path, "--no-cache") if r["related"]]
    text = devlint("--isolated", "--no-cache", "m.py", cwd=tmp_path).stdout
    github = devlint("--isolated", "--no-cache", "--output-format", "github", "m.py", cwd=tmp_path).stdout
    for r in found:
        line = f"m.py:{r['location']['row']}:{r['location']['column']}: {r['code']} "
        assert f"{r['message']} ({clauses(r)})" in next(s for s in text.splitlines() if s.startswith(line))
        assert f"{r['message']} ({clauses(r)})" in github


def test_json_lines_carries_the_same_evidence(tmp_path):
    found = records(tmp_path, "--no-cache")
    lines = devlint("--isolated", "--no-cache", "--output-format", "json-lines", "m.py", cwd=tmp_path).stdout
    assert [json.loads(s)["related"] for s in lines.splitlines()] == [r["related"] for r in found]


def test_sarif_has_related_locations(tmp_path):
    found = [r for r in records(tmp_path, "--no-cache") if r["related"]]
    log = json.loads(devlint("--isolated", "--no-cache", "--output-format", "sarif", "m.py", cwd=tmp_path).stdout)
    results = [x for x in log["runs"][0]["results"] if "relatedLocations" in x]
    assert len(results) == len(found)
    for x, r in zip(results, found):
        assert x["ruleId"] == r["code"]
        assert [(loc["message"]["text"], loc["physicalLocation"]["region"]["startLine"],
                 loc["physicalLocation"]["region"]["startColumn"]) for loc in x["relatedLocations"]] == [
            (p["message"], p["location"]["row"], p["location"]["column"]) for p in r["related"]]
        assert [loc["id"] for loc in x["relatedLocations"]] == list(range(len(r["related"])))


def test_flake8_appends_the_evidence(tmp_path):
    found = [r for r in records(tmp_path, "--no-cache") if r["related"]]
    out = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=DEV", "m.py"],
                         cwd=tmp_path, capture_output=True, text=True).stdout
    for r in found:
        assert f"m.py:{r['location']['row']}:{r['location']['column']}: {r['code']} {r['message']} ({clauses(r)})" in out


def test_notebook_evidence_names_the_cell_of_each_place(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(text) for text in (
        "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\nloader = DataLoader(dataset, batch_size=8)",
        "device = torch.device('cuda')\nmodel = nn.Linear(3, 2).to(device)",
        "for x, y in loader:\n    out = model(x)",
    )]
    (tmp_path / "nb.ipynb").write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    found = json.loads(devlint("--isolated", "--no-cache", "--output-format", "json", "nb.ipynb", cwd=tmp_path).stdout)
    dev007 = next(r for r in found if r["code"] == "DEV007")
    assert (dev007["cell"], dev007["location"]["row"]) == (3, 2)
    # the batch is drawn in the finding's own cell; the model is moved in cell 2, and the clause says so
    assert [(p.get("cell"), p["location"]["row"]) for p in dev007["related"]] == [(3, 1), (2, 2)]
    assert dev007["related"][0]["message"].endswith("at line 1 (CPU)") or dev007["related"][0]["message"].endswith("at line 1")
    assert dev007["related"][1]["message"].endswith("at cell 2, line 2")
    text = devlint("--isolated", "--no-cache", "nb.ipynb", cwd=tmp_path).stdout
    assert "nb.ipynb:cell 3:2:" in text and "at cell 2, line 2)" in text
