"""`flake8 --select=DEV`: the same engine and the same findings, through flake8.

flake8 owns `# noqa` and the code selection; what `[tool.devlint]` says about rules
(select, ignore, per-file-ignores) and file-level `# devlint: noqa` applies here too.
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
        from devlint import engine
        from devlint.runner import checker

        path = Path(self.filename)
        try:
            findings = checker(_settings(path.parent.resolve()), path, line_noqa=False)("".join(self.lines))
        except engine.ParseError:
            return  # flake8 reports the syntax error itself (E999)
        for f in findings:
            yield f.row, f.column - 1, f"{f.code} {f.message}", type(self)  # flake8 columns are 0-based


@lru_cache(maxsize=None)
def _settings(directory: Path):
    from devlint.config import ConfigError, Settings, find_config, load_settings

    try:
        return load_settings(find_config(directory), directory)
    except ConfigError:
        return Settings(root=directory)
