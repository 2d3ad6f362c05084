"""`devlint export`: each module class exported for a CUDA device (a fake one here), with the
lines that keep CPU tensors in the graph; the CLI run as a subprocess."""
import json
import textwrap

import pytest

from helpers import devlint

torch = pytest.importorskip("torch")

MODELS = '''\
import torch
from torch import nn


class FactoryInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        positions = torch.arange(4)
        return self.proj(x) + positions


class PlainAttribute(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.scale = torch.ones(4)

    def forward(self, x):
        return self.proj(x) * self.scale


class LiteralInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x) * torch.tensor([1.0, 2.0, 3.0, 4.0])


class ZeroDimScalar(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x) * torch.tensor(2.0)


class WrittenRight(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return self.proj(x) * self.scale + torch.arange(4, device=x.device)


class Indexes(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        keep = torch.tensor([0, 2])
        return self.proj(x)[:, keep] + torch.ones(2)


class FailsToBuild(nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("needs a config file")

    def forward(self, x):
        return x


class KeptDevice(nn.Module):
    def __init__(self, device="cpu"):
        super().__init__()
        self.device = torch.device(device)
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        offsets = torch.ones(4, device=self.device)
        return self.proj(x) + offsets
'''


def row_of(text: str, source: str = MODELS) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export")
    (folder / "models.py").write_text(MODELS)
    r = devlint("export", "--device", "fake", "--output-format", "json", "models.py", cwd=folder)
    assert r.returncode == 1, r.stderr  # some classes fail
    return {record["class"]: record for record in json.loads(r.stdout)}


def locations(record):
    return [(loc["row"], loc["code"], loc["role"]) for loc in record["locations"]]


def test_every_record_has_the_documented_keys(exported):
    for record in exported.values():
        assert set(record) >= {"filename", "class", "status", "message", "locations"}
        assert record["filename"] == "models.py"
        for location in record["locations"]:
            assert set(location) >= {"row", "column", "code"}


def test_a_factory_without_device_in_forward_fails_at_its_line(exported):
    record = exported["FactoryInForward"]
    assert record["status"] == "fails"
    assert "cuda:0" in record["message"] and "cpu" in record["message"]
    assert locations(record) == [(row_of("positions = torch.arange(4)"), "DEV003", "made"),
                                 (row_of("return self.proj(x) + positions"), None, "meets")]


def test_a_plain_tensor_attribute_fails_at_its_assignment(exported):
    record = exported["PlainAttribute"]
    assert record["status"] == "fails"
    assert locations(record) == [(row_of("self.scale = torch.ones(4)"), "DEV004", "made"),
                                 (row_of("return self.proj(x) * self.scale"), None, "meets")]


def test_a_tensor_literal_in_forward_fails(exported):
    record = exported["LiteralInForward"]
    assert record["status"] == "fails"
    row = row_of("torch.tensor([1.0, 2.0, 3.0, 4.0])")
    assert (row, "DEV003", "made") in locations(record)


def test_a_zero_dim_scalar_and_a_module_written_right_are_ready(exported):
    assert exported["ZeroDimScalar"]["status"] == "ready"
    assert exported["WrittenRight"]["status"] == "ready"
    assert exported["WrittenRight"]["locations"] == []
    assert exported["WrittenRight"]["device"] == "fake cuda:0"


def test_indexing_falls_back_to_the_meta_device_and_blames_only_the_tensor_that_meets(exported):
    record = exported["Indexes"]
    # fake CUDA indexes on a CUDA build of torch; on a CPU-only one it cannot, and meta stands in
    assert record["device"] == ("fake cuda:0" if torch.version.cuda else "meta stand-in")
    assert record["status"] == "fails"
    made = [row for row, _, role in locations(record) if role == "made"]
    assert made == [row_of("+ torch.ones(2)")]  # the CPU index is allowed on CUDA: not blamed


def test_a_module_whose_construction_fails_is_not_run_with_why(exported):
    record = exported["FailsToBuild"]
    assert record["status"] == "not-run"
    assert "ValueError: needs a config file" in record["message"]
    assert locations(record) == [(row_of('raise ValueError("needs a config file")'), None, "raised")]


def test_a_device_kept_from_init_fails_at_the_factory_that_reads_it(exported):
    record = exported["KeptDevice"]
    assert record["status"] == "fails"
    assert locations(record) == [(row_of("offsets = torch.ones(4, device=self.device)"), "DEV012", "made"),
                                 (row_of("return self.proj(x) + offsets"), None, "meets")]


def test_an_untested_torch_version_is_not_run_with_the_reason(monkeypatch):
    from devlint.confirm import export_child

    monkeypatch.setattr(export_child.torch, "__version__", "2.4.1")
    problem = export_child.torch_version_problem()
    assert problem.startswith("torch 2.4.1: devlint export is tested on torch 2.11 to 2.13")
    monkeypatch.setattr(export_child.torch, "__version__", "2.12.0+cu128")
    assert export_child.torch_version_problem() is None


def test_text_output_one_line_per_class_and_one_per_location(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    r = devlint("export", "--device", "fake", "models.py::FactoryInForward", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("models.py::FactoryInForward: fails (fake cuda:0): ")
    assert lines[1] == f"    models.py:{row_of('positions = torch.arange(4)')}:21: DEV003 [confirmed] `torch.arange()` makes a CPU tensor"
    assert lines[2].startswith(f"    models.py:{row_of('return self.proj(x) + positions')}:9: devices meet here")
    assert lines[-1] == "1 fail"


def test_a_ready_class_exits_zero(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    r = devlint("export", "--device", "fake", "models.py::WrittenRight", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "1 ready"


def test_a_configured_class_is_built_and_fed_as_configured(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent('''\
        [tool.devlint.confirm.classes.Table]
        init-kwargs = { width = 6 }
        input-shapes = [[3, 6]]
    '''))
    (tmp_path / "table.py").write_text(textwrap.dedent('''\
        import torch
        from torch import nn


        class Table(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.register_buffer("table", torch.ones(width))

            def forward(self, x):
                return x * self.table
    '''))
    r = devlint("export", "--device", "fake", "--output-format", "json", "table.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [record["status"] for record in json.loads(r.stdout)] == ["ready"]


def test_a_missing_class_is_a_usage_error(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    r = devlint("export", "models.py::Nowhere", cwd=tmp_path)
    assert r.returncode == 2
    assert "no class named Nowhere in models.py" in r.stderr


def test_a_missing_path_is_a_usage_error_that_names_it(tmp_path):
    r = devlint("export", "nowhere.py", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("devlint export: error: nowhere.py: ")


def test_a_file_that_does_not_import_is_not_run(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nfrom torch import nn\nimport not_a_module_here\n\n\n"
                                        "class M(nn.Module):\n    def forward(self, x):\n        return x\n")
    r = devlint("export", "--device", "fake", "--output-format", "json", "broken.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (record,) = json.loads(r.stdout)
    assert record["status"] == "not-run"
    assert "cannot import broken.py: ModuleNotFoundError" in record["message"]


# --- `devlint confirm --export`: a finding on a line that stops the export is confirmed by it ------
def test_confirm_with_export_confirms_the_findings_export_blames(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    r = devlint("confirm", "--export", "--output-format", "json", "models.py::PlainAttribute", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    (record,) = [r for r in json.loads(r.stdout) if r["code"] == "DEV004"]
    assert record["location"]["row"] == row_of("self.scale = torch.ones(4)")
    assert record["confirm"]["status"] == "confirmed"
    assert "by export: PlainAttribute does not export for fake cuda:0: `self.scale`" in record["confirm"]["message"]


def test_an_export_failure_confirms_a_finding_the_run_did_not():
    from devlint.confirm import Verdict
    from devlint.confirm.export import confirmed_by_export
    from devlint.core.findings import Finding

    findings = [Finding(code, "name", "message", row, column, row, column + 1)
                for code, row, column in (("DEV003", 11, 21), ("DEV003", 12, 9), ("DEV004", 11, 9))]
    verdicts = [Verdict("not-reached", "the line did not run")] * 3
    records = [{"class": "Net", "status": "fails", "device": "fake cuda:0", "locations": [
        {"row": 11, "code": "DEV003", "role": "made", "message": "`torch.arange()` makes a CPU tensor"},
        {"row": 13, "code": None, "role": "meets", "message": "devices meet here"}]},
        {"class": "Other", "status": "ready", "device": "fake cuda:0", "locations": []}]
    first, second, third = confirmed_by_export(findings, verdicts, records)
    assert (first.status, first.use_row, first.origin_row) == ("confirmed", 13, 11)
    assert first.message == "by export: Net does not export for fake cuda:0: `torch.arange()` makes a CPU tensor"
    assert second.status == third.status == "not-reached"  # another line; another rule on the line


def test_a_module_built_in_forward_fails_at_its_construction(tmp_path):
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Conv2d(3, 8, 3)

            def forward(self, images):
                x = nn.BatchNorm2d(8)(self.features(images))
                return x.mean((2, 3))
    ''')
    (tmp_path / "models.py").write_text(source)
    r = devlint("export", "--device", "fake", "--output-format", "json", "models.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    (record,) = json.loads(r.stdout)
    row = row_of("nn.BatchNorm2d(8)", source)
    assert [(loc["row"], loc["code"], loc["role"], loc["message"]) for loc in record["locations"]] == [
        (row, "DEV013", "made", "the module built here makes its weights on the CPU"), (row, None, "meets", "devices meet here")]
