"""`flake8 --select=DEV`: the same engine and the same findings, through flake8.

flake8 owns `# noqa` and the code selection; what `[tool.devlint]` says about rules
(select, ignore, per-file-ignores) and file-level `# devlint: noqa` applies here too. A
configuration devlint cannot read is reported as DEV000 at the top of each file.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Iterator

from devlint import __version__


class Plugin:
    name = "devlint"
    version = __version__

    def __init__(self, tree, filename: str, lines: list[str]) -> None:
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        from devlint.core.findings import ParseError
        from devlint.workspace.config import ConfigError
        from devlint.workspace.linter import Linter

        path = Path(self.filename)
        settings = _settings(path.parent.resolve())
        if isinstance(settings, ConfigError):  # the CLI exits 2 here; flake8 goes on, so say it once per file
            yield 1, 0, f"DEV000 invalid devlint configuration, file not checked: {settings}", type(self)
            return
        try:
            findings = Linter(settings, path, line_noqa=False).check("".join(self.lines))
        except ParseError:
            return  # flake8 reports the syntax error itself (E999)
        for f in findings:
            yield f.row, f.column - 1, f"{f.code} {f.text}", type(self)  # flake8 columns are 0-based


@lru_cache(maxsize=None)
def _settings(directory: Path):
    """The settings for the files of `directory`, or the ConfigError that keeps them from loading."""
    from devlint.workspace.config import ConfigError, find_config, load_settings

    try:
        return load_settings(find_config(directory), directory)
    except ConfigError as exc:
        return exc
