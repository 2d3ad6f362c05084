"""The one seam between the front ends and the engine: (settings, path, text) in, findings and
fixes out. The command line, the flake8 plugin (and through them the pre-commit hooks),
`explain` and `confirm` all check code through a `Linter`.

libcst is imported only when a text is actually checked: a run the cache answers never pays
for it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from devlint.core.findings import Finding
from devlint.semantic.project import ProjectView
from devlint.workspace import noqa
from devlint.workspace.config import Settings, most_specific

if TYPE_CHECKING:
    from collections import Counter

    import libcst

    from devlint.engine.fixer import FixResult


class Linter:
    """What a run reports for the texts of one path: the selected rules, minus the per-file
    ignores and `# noqa` comments. line_noqa=False leaves `# noqa` comments to the caller
    (flake8 owns them). `parse`: what turns a text into a libcst module (default: a whole-file
    parse; the language server reuses what it parsed of the buffer before)."""

    def __init__(self, settings: Settings, path: Path, line_noqa: bool = True,
                 parse: Optional[Callable[[str], "libcst.Module"]] = None) -> None:
        ignored = settings.ignored_codes_for(path)
        self.rules = [r for r in settings.rules() if not ignored or most_specific(r.code, ignored) is None]
        self.line_noqa = line_noqa
        self.settings = settings
        self.parse = parse
        self.project = ProjectView(path)  # what the checks asked of the rest of the project: `project.asked`

    def check(self, source: str) -> list[Finding]:
        """The findings in `source`, sorted by position. Raises ParseError when it does not parse."""
        from devlint import engine

        if not self.rules or not engine.could_hold_finding(source):
            return []
        module = (self.parse or engine.parse)(source)
        findings = engine.check_module(module, self.rules, source, self.settings.target_torch, self.project)
        return noqa.unsuppressed(findings, source, self.line_noqa) if findings else []

    def fix(self, source: str, unsafe: bool, findings: Optional[list[Finding]] = None,
            baseline: Optional["Counter"] = None) -> "FixResult":
        """Apply the fixes (safe ones; unsafe ones too when asked) in rounds; see `fixer`.
        Findings the `baseline` records for this file are, like `# noqa` ones, neither fixed nor
        reported; the result counts them (`baselined`, `baselined_before`)."""
        from devlint.engine import fixer

        if baseline is None:
            return fixer.fix_text(source, self.check, unsafe, findings)
        from devlint.workspace.baseline import hide

        hidden: dict[str, int] = {}

        def check(text: str) -> list[Finding]:
            kept, hidden[text] = hide(self.check(text), text, baseline)
            return kept

        result = fixer.fix_text(source, check, unsafe)
        result.baselined, result.baselined_before = hidden.get(result.text, 0), hidden.get(source, 0)
        return result
