"""The target torch version: `target-torch`, `--target-torch`, the project's torch requirement, 2.1."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devlint.workspace.config import (
    DEFAULT_TARGET_TORCH, ConfigError, Settings, load_settings, parse_target_torch, torch_floor,
)


def floor(*requirements):
    found = torch_floor(requirements)
    return None if found is None else found[0]


# --- requirement strings --------------------------------------------------------------------------
@pytest.mark.parametrize("requirement, expected", [
    ("torch>=2.4", (2, 4)),
    ("torch >= 2.4.1", (2, 4)),
    ("torch>=2.4,<3", (2, 4)),
    ("torch<3,>=2.4", (2, 4)),
    ("torch>2.4", (2, 4)),
    ("torch~=2.5.0", (2, 5)),
    ("torch~=2.5", (2, 5)),
    ("torch==2.6.*", (2, 6)),
    ("torch==2.6.1", (2, 6)),
    ("torch==2.*", (2, 0)),
    ("torch>=2.0,>=2.3", (2, 3)),
    ("torch>=1.13", (1, 13)),
    ("torch>=2.10", (2, 10)),
    ("Torch>=2.4", (2, 4)),
    ("torch[opt-einsum]>=2.4", (2, 4)),
    ("torch==2.4.0+cu121", (2, 4)),
    ('torch>=2.4; python_version >= "3.9"', (2, 4)),
    ('torch>=2.4 ; sys_platform == "linux"', (2, 4)),
    ("torch (>=2.2)", (2, 2)),
])
def test_lowest_version_a_requirement_allows(requirement, expected):
    assert floor(requirement) == expected


@pytest.mark.parametrize("requirement", [
    "torch", "torch<3", "torch<=2.5", "torch!=2.2.0", "torch @ https://example.com/torch-2.4.0-cp311-linux_x86_64.whl",
])
def test_no_lower_bound(requirement):
    assert floor(requirement) is None


@pytest.mark.parametrize("requirement", [
    "torchvision>=0.19", "torch-geometric>=2.5", "torch_scatter>=2.1", "pytorch>=2.4", "numpy>=2", "torch>=>2", 42,
])
def test_other_packages_and_broken_strings_are_not_torch(requirement):
    assert floor(requirement) is None


def test_the_lowest_over_all_requirements():
    assert floor("numpy", "torch>=2.4", "torch~=2.5.0") == (2, 4)
    assert floor('torch>=2.1; sys_platform != "darwin"', 'torch>=2.4; sys_platform == "darwin"') == (2, 1)
    # one requirement without a lower bound lets any version in
    assert floor("torch>=2.4", "torch") is None


def test_floor_names_the_requirement_and_its_place():
    assert torch_floor([("torch>=2.6", "dependencies"), ("torch>=2.4", "optional-dependencies.gpu")]) == (
        (2, 4), "torch>=2.4", "optional-dependencies.gpu")


# --- the setting -----------------------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [("2.4", (2, 4)), ("2.10", (2, 10)), ("2.6.1", (2, 6)), (" 3.0 ", (3, 0))])
def test_parse_target_torch(value, expected):
    assert parse_target_torch(value, "here") == expected


@pytest.mark.parametrize("value", ["2", "2.x", "v2.4", "2.4.1.1", "", "latest", 2.4, 2, None, ["2.4"]])
def test_invalid_target_torch(value):
    with pytest.raises(ConfigError, match="target-torch"):
        parse_target_torch(value, "here")


def test_torch_at_least():
    settings = Settings(root=Path("."), target_torch_setting=(2, 5))
    assert settings.torch_at_least(2, 5) and settings.torch_at_least(2, 4) and settings.torch_at_least(1, 13)
    assert not settings.torch_at_least(2, 6) and not settings.torch_at_least(3)
    assert Settings(root=Path(".")).target_torch == DEFAULT_TARGET_TORCH == (2, 1)


def project(path: Path, devlint: str | None = None, dependencies=(), optional=None) -> Path:
    lines = ["[project]", 'name = "p"', f"dependencies = {json.dumps(list(dependencies))}"]
    if optional:
        lines.append("[project.optional-dependencies]")
        lines += [f"{extra} = {json.dumps(list(group))}" for extra, group in optional.items()]
    if devlint is not None:
        lines += ["[tool.devlint]", devlint]
    (path / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return path / "pyproject.toml"


def test_settings_from_the_table_win_over_the_requirement(tmp_path):
    config = project(tmp_path, 'target-torch = "2.6"', dependencies=["torch>=2.4"])
    settings = load_settings(config, tmp_path)
    assert settings.target_torch == (2, 6)


def test_settings_from_the_config_file_requirement(tmp_path):
    config = project(tmp_path, 'select = ["DEV"]', dependencies=["numpy"], optional={"gpu": ["torch~=2.5.0"]})
    settings = load_settings(config, tmp_path)
    assert settings.target_torch == (2, 5)
    assert "optional-dependencies.gpu" in settings.target_torch_source


def test_without_a_devlint_table_the_nearest_pyproject_gives_the_requirement(tmp_path):
    project(tmp_path, dependencies=["torch>=2.4"])
    (tmp_path / "pkg").mkdir()
    assert load_settings(None, tmp_path, start=tmp_path / "pkg").target_torch == (2, 4)
    assert load_settings(None, tmp_path, read_project=False).target_torch == (2, 1)


def test_invalid_table_value_is_a_config_error(tmp_path):
    config = project(tmp_path, "target-torch = 2.4")
    with pytest.raises(ConfigError, match='must be a string such as "2.4"'):
        load_settings(config, tmp_path)


def test_a_broken_project_table_only_loses_the_inference(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = "torch>=2.4"\noptional-dependencies = 3\n'
                                             '[tool.devlint]\n')
    assert load_settings(tmp_path / "pyproject.toml", tmp_path).target_torch == (2, 1)


def test_the_cache_key_holds_what_the_target_comes_from(tmp_path):
    from devlint.workspace.runner import FindingCache

    settings = [Settings(root=tmp_path), Settings(root=tmp_path, target_torch_setting=(2, 6)),
                Settings(root=tmp_path, torch_requirements=[("torch>=2.4", "pyproject.toml")])]
    assert len({FindingCache(tmp_path, s).codes for s in settings}) == 3


def test_the_requirements_are_parsed_on_first_use_only(tmp_path):
    """A run the cache answers reads the settings but never imports `packaging`."""
    project(tmp_path, dependencies=["torch>=2.4"])
    code = ("import sys; from pathlib import Path; from devlint.workspace.config import load_settings; "
            f"s = load_settings(None, Path({str(tmp_path)!r})); s.target_torch_key(); "
            "assert 'packaging.requirements' not in sys.modules; assert s.target_torch == (2, 4)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_set_target_torch_replaces_the_inferred_one(tmp_path):
    settings = Settings(root=tmp_path, torch_requirements=[("torch>=2.4", "here")])
    assert settings.target_torch == (2, 4)
    settings.set_target_torch((2, 7), "--target-torch")
    assert (settings.target_torch, settings.target_torch_source) == ((2, 7), "--target-torch")


# --- the command line ------------------------------------------------------------------------------
def devlint(*args, cwd):
    return subprocess.run([sys.executable, "-m", "devlint", *map(str, args)], cwd=cwd, capture_output=True, text=True)


def shown_target(*args, cwd) -> str:
    r = devlint("check", "--show-settings", *args, cwd=cwd)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    (line,) = [line for line in r.stdout.splitlines() if line.startswith("target-torch: ")]
    return line[len("target-torch: "):]


@pytest.mark.parametrize("dependencies, optional, expected", [
    (["torch>=2.4"], None, "2.4"),
    (["torch>=2.4,<3"], None, "2.4"),
    (["torch~=2.5.0"], None, "2.5"),
    (["torch==2.6.*"], None, "2.6"),
    (["torch"], None, "2.1"),
    (['torch>=2.7; python_version >= "3.10"'], None, "2.7"),
    (["numpy"], {"train": ["torch>=2.3"]}, "2.3"),
    (["torch>=2.6"], {"old": ["torch>=2.2"]}, "2.2"),
    (["numpy"], None, "2.1"),
])
def test_cli_infers_the_target_from_the_project(tmp_path, dependencies, optional, expected):
    project(tmp_path, dependencies=dependencies, optional=optional)
    assert shown_target(cwd=tmp_path).startswith(expected + " ")


def test_cli_precedence(tmp_path):
    project(tmp_path, 'target-torch = "2.5"', dependencies=["torch>=2.4"])
    assert shown_target(cwd=tmp_path).startswith("2.5 (target-torch in ")
    assert shown_target("--target-torch", "2.8", cwd=tmp_path) == "2.8 (--target-torch)"
    assert shown_target("--isolated", cwd=tmp_path) == "2.1 (default)"
    assert shown_target("--isolated", "--target-torch", "2.6", cwd=tmp_path) == "2.6 (--target-torch)"


def test_cli_reads_the_project_of_the_path_checked(tmp_path):
    (tmp_path / "a").mkdir()
    project(tmp_path / "a", dependencies=["torch>=2.4"])
    assert shown_target("a", cwd=tmp_path).startswith("2.4 (`torch>=2.4` in ")


def test_cli_explain_and_confirm_take_the_option(tmp_path):
    for command in ("explain", "confirm"):
        r = devlint(command, "--help", cwd=tmp_path)
        assert "--target-torch X.Y" in r.stdout
    r = devlint("explain", "--target-torch", "2.6", "Torch not compiled with CUDA enabled", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", ["check", "explain", "confirm"])
def test_cli_invalid_option_exits_2(tmp_path, command):
    r = devlint(command, "--target-torch", "2.x", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert f'devlint {command}: error: argument --target-torch: must be a torch version such as "2.4", not \'2.x\'' in r.stderr


@pytest.mark.parametrize("value, message", [
    ('"two"', 'must be a torch version such as "2.4", not \'two\''),
    ("2.10", 'must be a string such as "2.4", not 2.1'),
])
def test_cli_invalid_setting_exits_2(tmp_path, value, message):
    (tmp_path / "m.py").write_text("import torch\n")
    project(tmp_path, f"target-torch = {value}")
    r = devlint("check", "m.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith("devlint: error: ") and message in r.stderr


def test_check_runs_with_a_target(tmp_path):
    (tmp_path / "m.py").write_text("import torch\nm = model.cuda()\n")
    project(tmp_path, 'target-torch = "2.6"')
    r = devlint("check", "m.py", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1 and "DEV001" in r.stdout


# --- what the target changes in the rules' advice and fixes --------------------------------------
TARGET_SOURCE = '''\
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.index = torch.arange(dim, dtype=torch.long)

    def forward(self, x):
        return x[..., self.index]


def move(model, batch, device):
    model.cuda()
    torch.cuda.synchronize()
    return batch.to("cuda")
'''


def _by_code(target):
    from helpers import lint

    return {f.code: f for f in lint(TARGET_SOURCE, target_torch=target)}


def test_older_targets_keep_the_cuda_advice():
    found = _by_code((2, 4))
    assert "torch.accelerator" not in " ".join(f.message for f in found.values())
    assert "register_buffer" in found["DEV004"].fix.edits[0].content
    assert found["DEV011"].fix is None
    assert "torch.cuda.is_available()" in found["DEV005"].message


def test_target_2_5_writes_nn_buffer():
    found = _by_code((2, 5))
    assert found["DEV004"].fix.edits[0].content == "self.index = nn.Buffer(torch.arange(dim, dtype=torch.long), persistent=False)"
    assert "nn.Buffer" in found["DEV004"].message and found["DEV011"].fix is None


def test_target_2_6_advises_the_accelerator_api():
    found = _by_code((2, 6))
    for code in ("DEV001", "DEV005", "DEV011"):
        assert "torch.accelerator" in found[code].message, code
    for code in ("DEV001", "DEV005"):
        assert "torch.accelerator" in found[code].fix.message, code
    assert "torch.accelerator.synchronize()" in found["DEV011"].fix.edits[0].content


def test_target_torch_on_the_command_line(tmp_path):
    (tmp_path / "m.py").write_text(TARGET_SOURCE)
    args = (sys.executable, "-m", "devlint", "--isolated", "--no-cache", "--output-format", "json", "m.py")
    old = json.loads(subprocess.run(args, cwd=tmp_path, capture_output=True, text=True).stdout)
    new = json.loads(subprocess.run((*args, "--target-torch", "2.6"), cwd=tmp_path, capture_output=True, text=True).stdout)
    assert [r["code"] for r in old] == [r["code"] for r in new] == ["DEV004", "DEV001", "DEV011", "DEV005"]
    assert not any("torch.accelerator" in r["message"] for r in old)
    assert all("torch.accelerator" in r["message"] for r in new if r["code"] != "DEV004")
    result = subprocess.run((*args[:-3], "--fix", "--unsafe-fixes", "--target-torch", "2.6", "m.py"), cwd=tmp_path,
                            capture_output=True, text=True)
    text = (tmp_path / "m.py").read_text()
    assert "nn.Buffer(" in text and "torch.accelerator.synchronize()" in text, result.stderr
