"""Settings: `[tool.devlint]` in the nearest pyproject.toml, then the command line on top."""
from __future__ import annotations

import fnmatch
import functools
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from devlint.rules import NAMES

# Always skipped while walking directories: VCS data, virtual environments, caches, build output.
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".devlint_cache", "build", "dist", "site-packages", "node_modules",
    "*.egg-info", ".eggs", "__pypackages__", "_build", "buck-out", ".ipynb_checkpoints", ".direnv",
)
KNOWN_KEYS = {"select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores", "unsafe-fixes", "confirm",
              "target-torch", "baseline"}
# The torch that checked code must run on when neither the settings nor a requirement say.
DEFAULT_TARGET_TORCH = (2, 1)


class ConfigError(Exception):
    pass


@dataclass
class Selection:
    """One layer of rule selection (defaults, pyproject, command line)."""

    select: Optional[list[str]] = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)


@dataclass
class Settings:
    root: Path
    config_file: Optional[Path] = None
    layers: list[Selection] = field(default_factory=lambda: [Selection(select=["DEV"])])
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    unsafe_fixes: bool = False
    confirm: dict = field(default_factory=dict)  # [tool.devlint.confirm], read by `devlint confirm`
    # The target torch picks fixes and advice, never what is flagged. It is `target-torch` (or
    # --target-torch) when given, else what the project's torch requirements allow, worked out
    # on first use: parsing them imports `packaging`, which a run the cache answers never needs.
    target_torch_setting: Optional[tuple[int, int]] = None
    target_torch_setting_source: str = ""
    torch_requirements: list[tuple[str, str]] = field(default_factory=list)  # (requirement, where)
    baseline: Optional[Path] = None  # `baseline` in [tool.devlint], relative to the pyproject

    @property
    def target_torch(self) -> tuple[int, int]:
        return self._target[0]

    @property
    def target_torch_source(self) -> str:
        return self._target[1]

    def torch_at_least(self, major: int, minor: int = 0) -> bool:
        """Whether the checked code may use an API that torch `major.minor` introduced."""
        return self.target_torch >= (major, minor)

    def set_target_torch(self, version: tuple[int, int], source: str) -> None:
        self.target_torch_setting, self.target_torch_setting_source = version, source
        self.__dict__.pop("_target", None)

    def target_torch_key(self) -> str:
        """What the target torch is worked out from, for cache keys (no parsing)."""
        if self.target_torch_setting is not None:
            return "%d.%d" % self.target_torch_setting
        return "\n".join(text for text, _ in self.torch_requirements)

    @functools.cached_property
    def _target(self) -> tuple[tuple[int, int], str]:
        if self.target_torch_setting is not None:
            return self.target_torch_setting, self.target_torch_setting_source
        found = torch_floor(self.torch_requirements)
        if found is None:
            return DEFAULT_TARGET_TORCH, "default"
        version, text, where = found
        return version, f"`{text}` in {where}"

    def enabled_codes(self) -> set[str]:
        enabled: set[str] = set()
        for layer in self.layers:
            if layer.select is not None:
                enabled = set()
            selecting = (layer.select or []) + layer.extend_select
            for code in NAMES:
                chosen = most_specific(code, selecting)
                dropped = most_specific(code, layer.ignore)
                if dropped is not None and (chosen is None or len(dropped) >= len(chosen)):
                    enabled.discard(code)
                elif chosen is not None:
                    enabled.add(code)
        return enabled

    def rules(self):
        from devlint.rules import ALL_RULES

        codes = self.enabled_codes()
        return [rule for rule in ALL_RULES if rule.code in codes]

    def relative(self, path: Path) -> Optional[str]:
        """The path from the project root, as written (`abspath`: no file system calls), or
        else through symlinks (`resolve`), or None for a file outside the project."""
        logical, real = self._roots
        found = _path_under(os.path.abspath(path), logical)
        return found if found is not None else _path_under(str(path.resolve()), real)

    @functools.cached_property
    def _roots(self) -> tuple[str, str]:
        return os.path.abspath(self.root), str(self.root.resolve())

    def is_excluded(self, path: Path) -> bool:
        by_name, by_path = self._exclude_patterns
        if by_name.match(path.name):
            return True
        if by_path is None:
            return False
        rel = self.relative(path)
        return rel is not None and by_path.match(rel) is not None

    @functools.cached_property
    def _exclude_patterns(self):
        """One regex for the patterns matched against a name, one for those with a `/`,
        matched against the path from the project root (None when there are none)."""
        patterns = [p.rstrip("/") for p in (*DEFAULT_EXCLUDE, *self.exclude)]
        by_name = re.compile("|".join(fnmatch.translate(p) for p in patterns))
        paths = [fnmatch.translate(p.lstrip("./")) for p in patterns if "/" in p]
        return by_name, re.compile("|".join(paths)) if paths else None

    def ignored_codes_for(self, path: Path) -> list[str]:
        if not self.per_file_ignores:
            return []
        rel = self.relative(path) or path.as_posix()
        out: list[str] = []
        for pattern, codes in self.per_file_ignores.items():
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(path.name, pattern):
                out.extend(codes)
        return out


def _path_under(path: str, root: str) -> Optional[str]:
    if path == root:
        return "."
    prefix = root.rstrip(os.sep) + os.sep
    return Path(path[len(prefix):]).as_posix() if path.startswith(prefix) else None


def most_specific(code: str, selectors: Iterable[str]) -> Optional[str]:
    matches = [s for s in selectors if code.startswith(s)]
    return max(matches, key=len) if matches else None


def check_selectors(selectors: Iterable[str], where: str) -> list[str]:
    out = []
    for selector in selectors:
        selector = selector.strip().upper()
        if not selector:
            continue
        if selector != "ALL" and not any(code.startswith(selector) for code in NAMES):
            raise ConfigError(f"{where}: unknown rule selector `{selector}`")
        out.append("DEV" if selector == "ALL" else selector)
    return out


def find_config(start: Path) -> Optional[Path]:
    """The nearest pyproject.toml with a [tool.devlint] table, from `start` upwards."""
    start = start.resolve()
    for directory in (start, *start.parents) if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"{candidate}: not valid TOML: {exc}") from None
            if "devlint" in data.get("tool", {}):
                return candidate
    return None


def find_project(start: Path) -> Optional[Path]:
    """The nearest pyproject.toml from `start` upwards, with or without [tool.devlint]."""
    start = start.resolve()
    for directory in (start, *start.parents) if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_settings(config_file: Optional[Path], cwd: Path, start: Optional[Path] = None,
                  read_project: bool = True) -> Settings:
    """`[tool.devlint]` of `config_file` (None: the defaults). The target torch, when the table
    does not set it, comes from the torch requirement of the config file's project, or, without
    a config file, of the nearest pyproject.toml above `start` (default: `cwd`); `read_project`
    False reads none."""
    if config_file is None:
        settings = Settings(root=cwd)
        project = find_project(start if start is not None and start.exists() else cwd) if read_project else None
        if project is not None:
            try:
                _target_from_project(settings, tomllib.loads(project.read_text(encoding="utf-8")), project)
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                pass  # not a configuration file of ours: an unreadable one only loses the inference
        return settings
    try:
        data = tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{config_file}: not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("devlint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{config_file}: [tool.devlint] must be a table")
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{config_file}: unknown key(s) in [tool.devlint]: {', '.join(sorted(unknown))}")
    where = f"{config_file} [tool.devlint]"
    layer = Selection(
        select=check_selectors(_strings(table, "select", where), where) if "select" in table else None,
        extend_select=check_selectors(_strings(table, "extend-select", where), where),
        ignore=check_selectors(_strings(table, "ignore", where), where),
    )
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where}: per-file-ignores must be a table of glob = [codes]")
    settings = Settings(root=config_file.parent, config_file=config_file)
    settings.layers.append(layer)
    settings.exclude = _strings(table, "exclude", where) + _strings(table, "extend-exclude", where)
    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(f"{where}: `unsafe-fixes` must be true or false")
    settings.unsafe_fixes = unsafe
    confirm = table.get("confirm", {})
    if not isinstance(confirm, dict):
        raise ConfigError(f"{where}: `confirm` must be a table")
    settings.confirm = confirm
    settings.per_file_ignores = {
        pattern: check_selectors(_as_list(codes, f"{where} per-file-ignores", pattern), where)
        for pattern, codes in per_file.items()
    }
    if "baseline" in table:
        if not isinstance(table["baseline"], str) or not table["baseline"]:
            raise ConfigError(f"{where}: `baseline` must be a file name (a string)")
        settings.baseline = config_file.parent / table["baseline"]
    if "target-torch" in table:
        settings.set_target_torch(parse_target_torch(table["target-torch"], where), f"target-torch in {config_file}")
    elif read_project:
        _target_from_project(settings, data, config_file)
    return settings


# --- the target torch version -------------------------------------------------------------------
_VERSION = re.compile(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*")
_NAMES_TORCH = re.compile(r"\s*torch(?![\w.-])", re.IGNORECASE)  # a quick test before parsing


def parse_target_torch(value, where: str) -> tuple[int, int]:
    """"2.4" (or "2.4.1") -> (2, 4). Raises ConfigError."""
    if not isinstance(value, str):
        # TOML would read 2.10 as the float 2.1
        raise ConfigError(f"{where}: `target-torch` must be a string such as \"2.4\", not {value!r}")
    match = _VERSION.fullmatch(value)
    if match is None:
        raise ConfigError(f"{where}: `target-torch` must be a torch version such as \"2.4\", not {value!r}")
    return int(match.group(1)), int(match.group(2))


def _target_from_project(settings: Settings, data: dict, pyproject: Path) -> None:
    project = data.get("project")
    if not isinstance(project, dict):
        return
    requirements = []
    dependencies = project.get("dependencies")
    if isinstance(dependencies, list):
        requirements += [(r, "dependencies") for r in dependencies]
    optional = project.get("optional-dependencies")
    if isinstance(optional, dict):
        requirements += [(r, f"optional-dependencies.{extra}") for extra, group in optional.items()
                         if isinstance(group, list) for r in group]
    settings.torch_requirements = [(text, f"{pyproject} [project] {place}") for text, place in requirements
                                   if isinstance(text, str) and _NAMES_TORCH.match(text)]


def torch_floor(requirements: Iterable) -> Optional[tuple[tuple[int, int], str, str]]:
    """The lowest torch (major, minor) that the requirement strings allow, with the requirement
    that sets it and its place (`requirements` holds (string, place) pairs or plain strings).
    None when no string names torch, or one names it with no lower bound (`torch`, `torch<3`):
    any version may then be installed. Markers are not evaluated: the lowest over all of them."""
    floors = []
    for item in requirements:
        text, place = item if isinstance(item, tuple) else (item, "")
        if not isinstance(text, str) or not _NAMES_TORCH.match(text):
            continue
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name

        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != "torch":
            continue
        floor = _lower_bound(requirement.specifier)
        if floor is None:
            return None
        floors.append((floor, text.strip(), place))
    return min(floors, key=lambda f: f[0]) if floors else None


def _lower_bound(specifiers) -> Optional[tuple[int, int]]:
    """The (major, minor) of the highest lower bound in a specifier set: `>=2.4`, `>2.4`,
    `~=2.5.0`, `==2.6.*`, `==2.6.1`; None when there is none (`<3`, `!=2.2`)."""
    from packaging.version import InvalidVersion, Version

    bounds = []
    for spec in specifiers:
        if spec.operator not in (">=", ">", "~=", "==", "==="):
            continue
        try:
            release = Version(spec.version.rstrip("*").rstrip(".")).release
        except InvalidVersion:
            continue
        bounds.append((release + (0,))[:2])
    return max(bounds) if bounds else None


def _strings(table: dict, key: str, where: str) -> list[str]:
    return _as_list(table.get(key, []), where, key)


def _as_list(value, where: str, key: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    return list(value)


def split_codes(values: Optional[Sequence[str]]) -> list[str]:
    """`--select DEV001,DEV002 --select DEV5` -> ['DEV001', 'DEV002', 'DEV5']"""
    return [part for value in values or () for part in value.split(",") if part.strip()]
