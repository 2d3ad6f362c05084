import fcntl
import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import ROOT, git  # noqa: E402


def once_per_run(tmp_path_factory, name: str, build):
    """`build(folder)`'s JSON result, computed by the first pytest worker that asks and read back
    by the others: session fixtures are per worker under pytest-xdist, and these cost seconds."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if base.name.startswith("popen-gw") else base  # the run's folder, above each worker's
    folder, result = shared / name, shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.exists():
            folder.mkdir(exist_ok=True)
            result.write_text(json.dumps(build(folder)))
    return json.loads(result.read_text())


@pytest.fixture(scope="session")
def hooks_repo(tmp_path_factory):
    """A committed copy of this working tree, for pre-commit to install its hooks from."""
    def build(folder):
        repo = folder / "devlint"
        shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(
            ".git", "*.egg-info", "__pycache__", ".pytest_cache", ".venv", ".devlint_cache", "site", "build", "dist"))
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "hooks")
        return str(repo)

    return Path(once_per_run(tmp_path_factory, "hooks", build))


@pytest.fixture(scope="session")
def home(tmp_path_factory):
    """One PRE_COMMIT_HOME for the run: the hook environment is built once (pre-commit locks its
    store, so workers share it)."""
    return Path(once_per_run(tmp_path_factory, "pre-commit-home", str))
