"""Running the real tools as a user would: devlint, git and pre-commit as subprocesses."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


TARGET_TORCH = re.compile(r"\A# target-torch: (\d+)\.(\d+)\n")


def bench_script(name: str):
    """The script bench/<name>.py loaded as a module (a generator of a table the package ships)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixture_target(source: str):
    """The target torch a fixture names on its first line (`# target-torch: 2.6`), or None."""
    match = TARGET_TORCH.match(source)
    return (int(match.group(1)), int(match.group(2))) if match else None


def lint(source: str, select: tuple[str, ...] = ("DEV",), target_torch=None) -> list:
    """What `devlint` reports for `source` as a file of no project, with the rules `select` names:
    the findings, through the same Linter every front end uses. The target torch is
    `target_torch`, else the one the source names on its first line, else the default."""
    from devlint.workspace.config import Selection, Settings
    from devlint.workspace.linter import Linter

    settings = Settings(root=Path("."), layers=[Selection(select=list(select))],
                        target_torch_setting=target_torch or fixture_target(source))
    return Linter(settings, Path("m.py")).check(source)


def devlint(*args, cwd, input=None, prefix: tuple[str, ...] = (), env=None) -> subprocess.CompletedProcess:
    """`prefix`: a command to run devlint under (`setpriv ...`); `env`: its environment (default: ours)."""
    return subprocess.run([*prefix, sys.executable, "-m", "devlint", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, input=input, env=env)


def git(cwd, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env)


def pre_commit(*args, cwd, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, capture_output=True, text=True, env=env)


def run_hook(hooks_repo, hook: str, *args, cwd, home) -> subprocess.CompletedProcess:
    """`pre-commit run HOOK ARGS` in `cwd`, with a configuration that takes devlint's hooks from
    `hooks_repo` at its commit, as a project using them does. The hook environment is built once
    per PRE_COMMIT_HOME (`pre-commit try-repo` would build it afresh in a store of its own on
    every call)."""
    import tempfile

    rev = git(hooks_repo, "rev-parse", "HEAD").stdout.strip()
    config = (f"repos:\n- repo: {hooks_repo}\n  rev: {rev}\n  hooks:\n"
              "  - id: devlint\n  - id: devlint-fix\n")
    with tempfile.TemporaryDirectory() as folder:  # outside the project: not one of its files
        path = Path(folder) / ".pre-commit-config.yaml"
        path.write_text(config)
        return pre_commit("run", "--config", str(path), hook, *args, cwd=cwd, home=home)


# --- `devlint confirm` on a module of a test's own -------------------------------------------------
CONFIRM_HEADER = "import torch\nfrom torch import nn\n\n\n"


def confirm_run(tmp_path, source, *args, name="models.py"):
    """`devlint confirm --output-format json` on CONFIRM_HEADER + `source`: ((code, row in
    `source`, confirm record) per finding, exit status)."""
    import json
    import textwrap

    (tmp_path / name).write_text(CONFIRM_HEADER + textwrap.dedent(source))
    r = devlint("confirm", "--output-format", "json", *args, name, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    rows = CONFIRM_HEADER.count("\n")
    return [(x["code"], x["location"]["row"] - rows, x["confirm"]) for x in json.loads(r.stdout)], r.returncode


def statuses(results):
    return [(code, row, c["status"]) for code, row, c in results]
