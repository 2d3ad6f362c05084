"""The `devlint` command: `devlint [check] [PATHS]`, `devlint rule CODE`, `devlint explain`, `devlint confirm`,
`devlint export`, `devlint server`. Each command's run is in a module of its own (`check`,
`runtime` for confirm and export, `commands` for rule, explain and server); the parsers are in
`options`."""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from devlint.frontends.cli.options import COMMANDS, EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, parsers, print_help


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        status = _main(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        return status
    except BrokenPipeError:
        # The reader stopped early (`devlint check . | head -1`): stop quietly, as ruff does, but
        # exit 1, as Python's documentation does (ruff exits 0): the report was cut short, and a
        # `set -o pipefail` gate must not pass on it. Standard output goes to /dev/null so that
        # the interpreter's last flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FINDINGS


def _main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print_help()
        return EXIT_CLEAN
    command = argv.pop(0) if argv and argv[0] in COMMANDS else "check"
    run = _run_of(command)
    try:
        # The command's own parser, so that its usage errors name it (`devlint confirm: error: ...`).
        return run(parsers()[1][command].parse_args(argv))
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    except KeyboardInterrupt:
        return 130


def _run_of(command: str):
    """The function that runs `command`; only its module is imported (a cached check stays quick)."""
    if command == "check":
        from devlint.frontends.cli import check

        return check.run_check
    if command in ("confirm", "export"):
        from devlint.frontends.cli import runtime

        return getattr(runtime, f"run_{command}")
    from devlint.frontends.cli import commands

    return getattr(commands, f"run_{command}")
