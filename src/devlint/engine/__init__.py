"""The engine: source text in, findings and fixes out, with no I/O.

- `traversal`: one libcst parse and one walk of a file, calling the analyses and rules selected;
- `fixer`: applying their fixes in rounds until the text is stable;
- `incremental`: re-parsing only the statements an edit touched (the language server).

Below it are the rules, the analyses they ask, the rule API (`devlint.api`), what a name is
(`devlint.semantic`), what devlint knows about torch (`devlint.torchinfo`) and the shared data
and syntax helpers (`devlint.core`). Above it, the workspace feeds it files.
"""
from devlint.core.findings import Edit, Finding, Fix, ParseError
from devlint.engine.traversal import check_module, could_hold_finding, parse, text_edit

__all__ = ["Edit", "Finding", "Fix", "ParseError", "check_module", "could_hold_finding", "parse", "text_edit"]
