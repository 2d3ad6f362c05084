"""The `devlint` command's parsers: the commands, their options, and the checks of option values
that argparse runs."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

from devlint import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
COMMANDS = {
    "check": "check files and directories (the default: `devlint PATHS` is `devlint check PATHS`)",
    "rule": "show a rule's documentation, or list every rule",
    "explain": "from a device error or traceback to the line to change",
    "confirm": "run the modules the static pass flagged and prove each finding",
    "export": "tell whether each module exports for a CUDA device, and which lines stop it",
    "server": "a language server over stdio: diagnostics and fixes in an editor",
}
DESCRIPTION = ("Find PyTorch device bugs: hardcoded CUDA, torch.load without map_location, "
               "tensors left on the CPU.")


# --- options shared by several commands ----------------------------------------------------------
def _add_config_options(p) -> None:
    p.add_argument("--config", type=Path, metavar="PYPROJECT", help="use this pyproject.toml instead of searching for one")
    p.add_argument("--isolated", action="store_true", help="ignore all configuration files")


def _add_selection_options(p, extend: bool = False) -> None:
    p.add_argument("--select", action="append", metavar="CODES", help="rule codes or prefixes to enable (replaces the configured selection)")
    if extend:
        p.add_argument("--extend-select", action="append", metavar="CODES", help="rule codes or prefixes to enable on top of the selection")
    p.add_argument("--ignore", action="append", metavar="CODES", help="rule codes or prefixes to disable")


def _target_torch(value: str) -> tuple[int, int]:
    from devlint.workspace.config import ConfigError, parse_target_torch

    try:
        return parse_target_torch(value, "--target-torch")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("--target-torch: `target-torch` ", "")) from None


def _add_target_torch(p) -> None:
    p.add_argument("--target-torch", type=_target_torch, metavar="X.Y",
                   help="the oldest torch the checked code must run on; picks fixes and advice (default: "
                        "target-torch in [tool.devlint], else the lowest the project's torch requirement allows, else 2.1)")


def _add_output_format(p, choices: Sequence[str]) -> None:
    p.add_argument("--output-format", choices=choices, default="text", help="default: text")


def _add_check_options(p) -> None:
    """`devlint check`'s options, on its own parser and in `devlint --help`."""
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or directories (default: .); - reads standard input")
    _add_selection_options(p, extend=True)
    p.add_argument("--fix", action="store_true", help="apply safe fixes")
    p.add_argument("--unsafe-fixes", action="store_true", default=None, help="also apply (and mark) unsafe fixes")
    p.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false", help="override unsafe-fixes = true")
    p.add_argument("--diff", action="store_true", help="print the diff --fix would apply and write nothing (exit 1 when a diff is pending)")
    _add_output_format(p, ("text", "json", "json-lines", "sarif", "github"))
    p.add_argument("-o", "--output-file", type=Path, metavar="FILE", help="write the report to FILE instead of standard output")
    p.add_argument("--statistics", action="store_true", help="print a count per rule instead of each finding "
                   "(text, json or json-lines)")
    p.add_argument("--show-fixes", action="store_true",
                   help="list the fixes per file and rule: what --fix fixed, --diff would fix, or --fix would fix")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the text report: auto (default) on a terminal; FORCE_COLOR or NO_COLOR set decide under auto")
    p.add_argument("-q", "--quiet", action="store_true", help="print the findings only, no summary lines")
    p.add_argument("-s", "--silent", action="store_true", help="print nothing; the exit status still tells")
    p.add_argument("--add-noqa", action="store_true", help="write `# noqa: CODE` on every finding's line")
    p.add_argument("--stdin-filename", metavar="PATH", help="the path of the code read from standard input (for settings and messages)")
    p.add_argument("--force-exclude", action="store_true", help="apply the configured excludes to paths given on the command line too")
    p.add_argument("-j", "--jobs", type=_positive(int), metavar="N", help="worker processes (default: one per core)")
    p.add_argument("--no-cache", action="store_true", help="check every file again, ignoring .devlint_cache/")
    p.add_argument("--cache-dir", type=Path, metavar="DIR", help="where to keep the cache (default: .devlint_cache/ beside the configuration)")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings remain")
    p.add_argument("--baseline", type=Path, metavar="FILE",
                   help="hide the findings recorded in FILE (default: baseline in [tool.devlint])")
    p.add_argument("--update-baseline", action="store_true", help="record the current findings in the baseline file, and exit 0")
    _add_target_torch(p)
    p.add_argument("--show-settings", action="store_true", help="print the settings a check would use, and exit")
    _add_config_options(p)
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN", help="extra glob patterns to skip while walking directories")
    p.add_argument("-V", "--version", action="version", version=f"devlint {__version__}")


def _add_rule_options(p) -> None:
    p.add_argument("code", nargs="?", help="a rule code, e.g. DEV003")
    p.add_argument("--all", action="store_true", help="list every rule")
    _add_output_format(p, ("text", "json"))


def _add_explain_options(p) -> None:
    p.add_argument("error", nargs="?", help="the error text, a file holding it, or - (default) for standard input; an "
                   "argument without spaces that holds a / or ends in an extension (err.txt, logs/run.log) names a file, "
                   "and one that is not there is an error")
    _add_output_format(p, ("text", "json"))
    _add_target_torch(p)
    _add_config_options(p)


VALUES_CHOICES = ("auto", "always", "never")  # `devlint confirm --values`


def _add_confirm_options(p) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .); FILE.py::ClassName runs one class")
    p.add_argument("--device", choices=("auto", "cuda", "stand-in"), default="auto",
                   help="cuda: a real GPU; stand-in: no GPU needed (default when none is there)")
    p.add_argument("--mode", choices=("train", "eval", "both"), default="both")
    p.add_argument("--init-kwargs", type=_json_object, metavar="JSON",
                   help='constructor arguments for the named class, e.g. \'{"dim": 64}\'')
    p.add_argument("--input-shape", type=_shape, action="append", default=[], metavar="N,N,...",
                   help="one per positional input of forward")
    p.add_argument("--input-dtype", default="float32", metavar="DTYPE", help="dtype of the inputs (int64 for token ids)")
    p.add_argument("--checkpoint", type=Path, metavar="FILE", help="the checkpoint a DEV002 finding loads")
    p.add_argument("--export", action="store_true",
                   help="also export each module class for CUDA (as `devlint export` does): a finding on a line "
                        "that stops the export is confirmed by it")
    p.add_argument("--timeout", type=_positive(float), metavar="SECONDS", help="per file (default 120)")
    p.add_argument("--memory-mb", type=_positive(int), metavar="MB", help="address-space limit per file (default 8192)")
    p.add_argument("-j", "--jobs", type=_positive(int), default=1, metavar="N",
                   help="files run at once, each in its own process (default 1); results keep the input order")
    p.add_argument("--values", choices=VALUES_CHOICES, help="whether the stand-in device holds real data: "
                   "auto (default) re-runs with data a module whose data-dependent code stops the data-less run")
    _add_selection_options(p)
    _add_output_format(p, ("text", "json"))
    _add_target_torch(p)
    _add_config_options(p)


def _add_export_options(p) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .); FILE.py::ClassName exports one class")
    p.add_argument("--device", choices=("auto", "cuda", "fake"), default="auto",
                   help="cuda: a real GPU; fake: a fake cuda:0 (no GPU needed; the default when none is there)")
    p.add_argument("--timeout", type=_positive(float), metavar="SECONDS", help="per file (default 300)")
    _add_output_format(p, ("text", "json"))
    _add_config_options(p)


def _json_object(value: str) -> dict:
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {value!r}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"dim\": 64}}', not {value!r}")
    return parsed


def _shape(value: str) -> list[int]:
    try:
        shape = [int(n) for n in value.split(",")]
    except ValueError:
        shape = [-1]
    if any(n < 0 for n in shape):
        raise argparse.ArgumentTypeError(f"expected sizes separated by commas, such as 2,16, not {value!r}")
    return shape


def _add_server_options(p) -> None:
    p.add_argument("--debounce", type=_seconds, default=0.25, metavar="SECONDS",
                   help="how long after the last change a buffer is checked (default: 0.25)")


def _positive(kind):
    """An argparse type: a number of `kind` above 0 (a count of workers, seconds, megabytes)."""
    def parse(value: str):
        try:
            number = kind(value)
        except ValueError:
            number = 0
        if not number > 0:
            word = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {word} above 0, not {value!r}")
        return number

    return parse


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 60:
        raise argparse.ArgumentTypeError(f"expected seconds between 0 and 60, not {value!r}")
    return seconds


DESCRIPTIONS = {
    "check": DESCRIPTION,
    "rule": "Show a rule's documentation.",
    "explain": "Explain a PyTorch device error (a message or a whole traceback) and point at the line to change.",
    "confirm": "Run the modules the static pass flagged and tell, for each finding, whether it breaks.",
    "export": "Export each nn.Module class for a CUDA device (torch.export; a fake CUDA device where there is "
              "no GPU) and tell whether it is ready, or which lines keep CPU tensors in the graph.",
    "server": "Serve the Language Server Protocol over standard input and output, for editors.",
}
OPTIONS = {"check": _add_check_options, "rule": _add_rule_options,
           "explain": _add_explain_options, "confirm": _add_confirm_options, "export": _add_export_options,
           "server": _add_server_options}


def parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The `devlint` parser and its subcommands' parsers, by name."""
    parser = argparse.ArgumentParser(
        prog="devlint",
        usage="devlint [check] [options] [PATH ...]\n       devlint {rule,explain,confirm,export,server} [options] ...",
        description=DESCRIPTION,
    )
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", prog="devlint",
                                     help="`devlint COMMAND --help` shows a command's options")
    by_name = {}
    for name, add_options in OPTIONS.items():
        by_name[name] = commands.add_parser(name, help=COMMANDS[name], description=DESCRIPTIONS[name])
        add_options(by_name[name])
    return parser, by_name


def print_help() -> None:
    """`devlint --help`: the commands, then check's options (bare `devlint PATHS` is a check)."""
    parser, _ = parsers()
    # On this parser only: where it parses, a second PATH positional would overwrite check's paths.
    _add_check_options(parser.add_argument_group("check options"))
    parser.print_help()
