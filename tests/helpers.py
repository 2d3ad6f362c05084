"""Running the real tools as a user would: devlint, git and pre-commit as subprocesses."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint(source: str, select: tuple[str, ...] = ("DEV",)) -> list:
    """What `devlint` reports for `source` as a file of no project, with the rules `select` names:
    the findings, through the same Linter every front end uses."""
    from devlint.config import Selection, Settings
    from devlint.linter import Linter

    return Linter(Settings(root=Path("."), layers=[Selection(select=list(select))]), Path("m.py")).check(source)


def devlint(*args, cwd, input=None, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`prefix`: a command to run devlint under (`setpriv ...`)."""
    return subprocess.run([*prefix, sys.executable, "-m", "devlint", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, input=input)


def git(cwd, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env)


def pre_commit(*args, cwd, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, capture_output=True, text=True, env=env)
