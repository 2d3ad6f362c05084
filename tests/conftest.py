import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import ROOT, git  # noqa: E402


@pytest.fixture(scope="session")
def hooks_repo(tmp_path_factory):
    """A committed copy of this working tree, for pre-commit to install its hooks from."""
    repo = tmp_path_factory.mktemp("hooks") / "devlint"
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".pytest_cache"))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "hooks")
    return repo


@pytest.fixture(scope="session")
def home(tmp_path_factory):
    """One PRE_COMMIT_HOME for the session: the hook environment is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")
