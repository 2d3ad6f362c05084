"""The `devlint` command: `devlint [check] [PATHS]`, `devlint rule CODE`, `devlint explain`, `devlint confirm`,
`devlint server`."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

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


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
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


def _print_help() -> None:
    """`devlint --help`: the commands, then check's options (bare `devlint PATHS` is a check)."""
    parser, _ = _parsers()
    # On this parser only: where it parses, a second PATH positional would overwrite check's paths.
    _add_check_options(parser.add_argument_group("check options"))
    parser.print_help()


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
        _print_help()
        return EXIT_CLEAN
    command = argv.pop(0) if argv and argv[0] in COMMANDS else "check"
    run = {"check": run_check, "rule": run_rule, "confirm": run_confirm, "explain": run_explain,
           "export": run_export, "server": run_server}[command]
    try:
        # The command's own parser, so that its usage errors name it (`devlint confirm: error: ...`).
        return run(_parsers()[1][command].parse_args(argv))
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    except KeyboardInterrupt:
        return 130


def run_check(args: argparse.Namespace) -> int:
    from devlint.frontends import output
    from devlint.workspace.config import ConfigError
    from devlint.workspace.runner import FileReport, add_noqa_to_file, check_data, check_files, discover

    if args.statistics and args.output_format not in output.STATISTICS_FORMATS:
        print(f"devlint: error: --statistics has no {args.output_format} form: use --output-format "
              f"{', '.join(output.STATISTICS_FORMATS)}", file=sys.stderr)
        return EXIT_ERROR
    cwd = Path.cwd()
    paths = args.paths or [Path(".")]
    from_stdin = paths == [Path("-")]
    stdin_path = Path(args.stdin_filename) if args.stdin_filename else Path("-")
    try:
        settings = _settings(args, stdin_path if from_stdin else paths[0], cwd)
        settings.exclude += args.exclude
    except ConfigError as exc:
        print(f"devlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR

    unsafe = settings.unsafe_fixes if args.unsafe_fixes is None else args.unsafe_fixes
    if args.show_settings:
        _show_settings(settings, unsafe)
        return EXIT_CLEAN
    mode = None
    if args.diff or args.fix:
        mode = ("unsafe-" if unsafe else "") + ("diff" if args.diff else "write")
    try:
        baseline = _load_baseline(args, settings)
    except ValueError as exc:
        print(f"devlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR

    def recorded(path: Path):
        from devlint.workspace.baseline import file_key

        return baseline.recorded(file_key(path, settings)) if baseline is not None else None

    if args.add_noqa:
        added = problems = 0
        for path, problem in discover(paths, settings, args.force_exclude):
            changed, problem = (0, problem) if problem else add_noqa_to_file(path, settings, recorded(path))
            added += changed
            if problem:
                problems += 1
                print(f"{_display(path, cwd)}: error: {problem}", file=sys.stderr)
        if not (args.quiet or args.silent):
            print(f"Added {added} noqa directive{'s' * (added != 1)}.", file=sys.stderr)
        return EXIT_ERROR if problems else EXIT_CLEAN

    reports: list[FileReport] = []
    missing = False
    stdin_text = None
    if from_stdin:
        if args.force_exclude and args.stdin_filename and list(discover([stdin_path], settings, True)) == []:
            reports = []  # an excluded file: pass it through untouched
            data = sys.stdin.buffer.read()
            if args.fix:
                sys.stdout.buffer.write(data)
            return EXIT_CLEAN
        data = sys.stdin.buffer.read()
        display = args.stdin_filename or "-"
        report = check_data(data, stdin_path, settings, display, mode, recorded(stdin_path))
        reports.append(report)
        if baseline is not None and report.findings and mode is None:
            from devlint.workspace.runner import SourceError, decode

            try:
                stdin_text = decode(data)[0]
            except SourceError:
                pass
        if args.fix:  # like ruff: the fixed code goes to standard output, the report to stderr
            sys.stdout.buffer.write(report.new_data if report.new_data is not None else data)
            sys.stdout.flush()
    else:
        items = []
        for path, problem in discover(paths, settings, args.force_exclude):
            if problem is not None:
                missing = True
                reports.append(FileReport(path, _display(path, cwd)).fail(problem))
            else:
                items.append((path, _display(path, cwd)))
        cache_dir = None if args.no_cache else (args.cache_dir or settings.root / ".devlint_cache")
        show_progress = args.output_format == "text" and not args.diff and sys.stderr.isatty() and len(items) > 100
        reports += check_files(
            items, settings, mode, jobs=args.jobs or os.cpu_count() or 1, cache_dir=cache_dir,
            progress=_progress_bar(sys.stderr) if show_progress else None, baseline=baseline,
        )
        if not items and not missing and not (args.quiet or args.silent):
            print("warning: No Python files found under the given path(s)", file=sys.stderr)

    reports.sort(key=lambda r: r.display)
    if args.update_baseline:
        return _update_baseline(baseline, args, settings, reports, stdin_text, missing)
    if baseline is not None and mode is None:
        from devlint.workspace.runner import apply_baseline

        apply_baseline(baseline, reports, settings, stdin_text)
    baselined = sum(r.baselined for r in reports)
    findings, errors = output.count(reports)
    summary = not args.quiet
    err_style = output.Style(output.use_color(args.color, sys.stderr))
    if args.diff:
        if not args.silent:
            output.write_diff(reports, sys.stdout, sys.stderr, baselined=baselined, show_fixes=args.show_fixes,
                              summary=summary, style=err_style)
        pending = any(r.diff for r in reports)
        # a file that could not be read or parsed has no diff to show: the answer is unknown
        return EXIT_ERROR if missing or errors else (EXIT_FINDINGS if pending else EXIT_CLEAN)
    out = sys.stderr if (from_stdin and args.fix) else sys.stdout
    try:
        stream = open(args.output_file, "w", encoding="utf-8") if args.output_file else out
    except OSError as exc:
        print(f"devlint: error: cannot write {args.output_file}: {exc.strerror}", file=sys.stderr)
        return EXIT_ERROR
    # a report file gets colour only when asked for by name, not from the environment
    style = output.Style(args.color == "always" if args.output_file else output.use_color(args.color, stream))
    try:
        if args.silent:  # the exit status alone tells
            pass
        elif args.output_format == "text":
            output.write_text(reports, stream, sys.stderr, statistics=args.statistics, unsafe=unsafe, fixing=args.fix,
                              baselined=baselined, show_fixes=args.show_fixes, summary=summary, style=style,
                              err_style=err_style)
        elif args.statistics:  # as in text: the counts on standard output, file errors on standard error
            for report in reports:
                if report.error:
                    print(output.text_line(report, report.error, style=err_style), file=sys.stderr)
            writer = {"json": output.write_statistics_json, "json-lines": output.write_statistics_json_lines}
            writer[args.output_format](reports, stream, unsafe)
        else:
            writer = {"json": output.write_json, "json-lines": output.write_json_lines,
                      "sarif": output.write_sarif, "github": output.write_github}[args.output_format]
            writer(reports, stream)
        if baselined and summary and not args.silent and args.output_format != "text":
            print(output.baselined_line(baselined), file=sys.stderr)  # the report itself stays machine-readable
    finally:
        if stream is not out:
            stream.close()
    if missing:
        return EXIT_ERROR
    if args.exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if findings or errors else EXIT_CLEAN


def _load_baseline(args: argparse.Namespace, settings):
    """The baseline --baseline or `baseline` in [tool.devlint] names, or None. Raises ValueError."""
    from devlint.workspace.baseline import Baseline, BaselineError

    path = args.baseline if args.baseline is not None else settings.baseline
    if path is None:
        if args.update_baseline:
            raise ValueError("--update-baseline needs a baseline file: --baseline FILE, or baseline in [tool.devlint]")
        return None
    if args.update_baseline and (args.fix or args.diff or args.add_noqa or args.paths == [Path("-")] and not args.stdin_filename):
        raise ValueError("--update-baseline records what a plain check finds: it takes no --fix, --diff, --add-noqa, "
                         "or standard input without --stdin-filename")
    if args.update_baseline and not path.exists():
        if not path.parent.is_dir():
            raise ValueError(f"cannot write the baseline file {path}: no directory {path.parent}")
        return Baseline(path)
    try:
        return Baseline.load(path)
    except BaselineError as exc:
        raise ValueError(str(exc)) from None


def _update_baseline(old, args, settings, reports, stdin_text, missing: bool) -> int:
    """--update-baseline: record what `reports` found; a path that cannot be checked writes nothing."""
    from devlint.frontends import output
    from devlint.workspace.runner import update_baseline

    for report in reports:
        if report.error:
            print(output.text_line(report, report.error), file=sys.stderr)
    if missing:
        print(f"devlint: error: the baseline file {old.path} was not written", file=sys.stderr)
        return EXIT_ERROR
    new = update_baseline(old, old.path, reports, settings, stdin_text)
    try:
        new.write()
    except OSError as exc:
        print(f"devlint: error: cannot write the baseline file {old.path}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERROR
    findings, files = new.count()
    print(f"Recorded {output.plural(findings, 'finding')} in {output.plural(files, 'file')} in {old.path}.", file=sys.stderr)
    errors = sum(1 for r in reports if r.error)
    if errors:
        print(f"{output.plural(errors, 'file')} could not be checked: their recorded findings were kept.", file=sys.stderr)
    return EXIT_CLEAN


def _settings(args: argparse.Namespace, start: Path, cwd: Path):
    """`[tool.devlint]` from --config, or from the nearest pyproject.toml above `start` (then the
    current directory), with the command line's rule selection on top. Raises ConfigError."""
    from devlint.workspace.config import Selection, check_selectors, find_config, load_settings, split_codes

    if args.isolated:
        config_file = None
    elif args.config is not None:
        config_file = args.config
    else:
        config_file = find_config(start if start.exists() else cwd) or find_config(cwd)
    settings = load_settings(config_file, cwd, start=start, read_project=not args.isolated)
    if getattr(args, "target_torch", None) is not None:
        settings.set_target_torch(args.target_torch, "--target-torch")
    select = getattr(args, "select", None)
    settings.layers.append(Selection(
        select=check_selectors(split_codes(select), "--select") if select else None,
        extend_select=check_selectors(split_codes(getattr(args, "extend_select", None)), "--extend-select"),
        ignore=check_selectors(split_codes(getattr(args, "ignore", None)), "--ignore"),
    ))
    return settings


def _show_settings(settings, unsafe: bool) -> None:
    major, minor = settings.target_torch
    for key, value in (
        ("configuration", settings.config_file or "none"),
        ("root", settings.root),
        ("rules", ", ".join(sorted(settings.enabled_codes())) or "none"),
        ("unsafe-fixes", str(unsafe).lower()),
        ("exclude", ", ".join(settings.exclude) or "none"),
        ("per-file-ignores", ", ".join(f"{k} = {','.join(v)}" for k, v in settings.per_file_ignores.items()) or "none"),
        ("target-torch", f"{major}.{minor} ({settings.target_torch_source})"),
        ("baseline", settings.baseline or "none"),
    ):
        print(f"{key}: {value}")


def _progress_bar(stream):
    """A one-line bar on a terminal, cleared when the run is done."""
    state = {"shown": -1}

    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // total if total else width
        if filled == state["shown"] and done != total:
            return
        state["shown"] = filled
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} files")
        if done == total:
            stream.write("\r" + " " * (width + 30) + "\r")
        stream.flush()

    return show


def _display(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd)) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)


def run_rule(args: argparse.Namespace) -> int:
    from devlint.frontends import docs
    from devlint.rules import ALL_RULES, BY_CODE

    if args.all:
        if args.output_format == "json":
            print(json.dumps([_rule_record(r) for r in ALL_RULES], indent=2))
        else:
            for r in ALL_RULES:
                print(f"{r.code}  {r.name:<32} {docs.fix_availability(r.code):<38} {r.summary}")
        return EXIT_CLEAN
    if not args.code:
        print("devlint rule: error: give a rule code (e.g. DEV003) or --all", file=sys.stderr)
        return EXIT_ERROR
    rule = BY_CODE.get(args.code.upper())
    doc = docs.rule_doc(rule.code) if rule else None
    if rule is None or doc is None:
        print(f"devlint rule: error: unknown rule `{args.code}`", file=sys.stderr)
        return EXIT_ERROR
    if args.output_format == "json":
        print(json.dumps(_rule_record(rule), indent=2))
    else:
        sys.stdout.write(doc if doc.endswith("\n") else doc + "\n")
    return EXIT_CLEAN


def _rule_record(rule) -> dict:
    from devlint.frontends import docs
    from devlint.frontends.output import rule_url

    return {
        "code": rule.code, "name": rule.name, "summary": rule.summary,
        "fix_availability": docs.fix_availability(rule.code),
        "url": rule_url(rule.code), "explanation": docs.rule_doc(rule.code),
    }


def _confirm_values(value) -> str:
    if value not in VALUES_CHOICES:
        raise ValueError(f"[tool.devlint.confirm] values must be one of {', '.join(VALUES_CHOICES)}, not {value!r}")
    return value


def _input_dtype(value, where: str) -> str:
    from devlint.confirm import INPUT_DTYPES

    if value not in INPUT_DTYPES:
        raise ValueError(f"{where} must be one of {', '.join(INPUT_DTYPES)}, not {value!r}")
    return value


def run_confirm(args: argparse.Namespace) -> int:
    from devlint.frontends import output
    from devlint.workspace.config import ConfigError
    from devlint.confirm import STATUSES, Options, confirm_findings, selectable_classes
    from devlint.workspace.runner import FileReport, SourceError, check_file, decode, discover

    cwd = Path.cwd()
    targets = _targets(args.paths)
    if (args.init_kwargs is not None or args.input_shape) and not any(only for _, only in targets):
        given = "--init-kwargs" if args.init_kwargs is not None else "--input-shape"
        print(f"devlint confirm: error: {given} is for one class: name it as FILE.py::ClassName", file=sys.stderr)
        return EXIT_ERROR
    try:
        settings = _settings(args, targets[0][0], cwd)
        table = settings.confirm
        options = Options(
            device=args.device, mode=args.mode, input_dtype=_input_dtype(args.input_dtype, "--input-dtype"),
            checkpoint=args.checkpoint,
            timeout=args.timeout or float(table.get("timeout", 120)),
            memory_mb=args.memory_mb or int(table.get("memory-mb", 8192)),
            values=_confirm_values(args.values or table.get("values", "auto")),
            classes=_configured_classes(table),
        )
        options.init_kwargs = args.init_kwargs
        options.input_shapes = args.input_shape
    except (ConfigError, ValueError) as exc:
        print(f"devlint confirm: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    # before any run, so that a missing torch or GPU is said once, not once per finding
    problem = _runtime_missing(args.device, "--device stand-in", "to run on the stand-in device")
    if problem:
        print(f"devlint confirm: error: {problem}", file=sys.stderr)
        return EXIT_ERROR

    reports, work = [], []
    for root, only in targets:
        defined: dict[str, dict[str, bool]] = {}  # per file of the target: its classes, and which may be modules
        for path, problem in discover([root], settings):
            if problem is None and path.suffix == ".ipynb":  # confirm runs modules, not notebooks
                if path == root:
                    reports.append(FileReport(path, _display(path, cwd)).fail("`devlint confirm` runs .py modules, not notebooks"))
                continue
            report = check_file(path, settings, _display(path, cwd)) if problem is None else FileReport(path, str(path)).fail(problem)
            reports.append(report)
            if only and not report.error:
                try:
                    defined[report.display] = selectable_classes(decode(path.read_bytes())[0])
                except (OSError, SourceError):
                    pass
            if report.findings and not report.error:
                work.append((report, path, dataclasses.replace(options, only_class=only)))
        problem = _selection_problem(only, defined, root) if only and defined else None
        if problem:
            print(f"devlint confirm: error: {problem}", file=sys.stderr)
            return EXIT_ERROR
    verdicts = _confirm_files(work, confirm_findings, decode, max(1, args.jobs))
    if args.export:
        from devlint.confirm.export import ExportOptions, confirmed_by_export, export_file

        exporting = ExportOptions(device={"stand-in": "fake"}.get(args.device, args.device), timeout=options.timeout,
                                  classes=options.classes)
        for report, path, file_options in work:
            records = export_file(path, report.display, decode(path.read_bytes())[0], report.findings,
                                  file_options.only_class, exporting)
            verdicts[id(report)] = confirmed_by_export(report.findings, verdicts[id(report)], records)
    counts = {status: 0 for status in STATUSES}
    for report in reports:
        for v in verdicts.get(id(report), []):
            counts[v.status] += 1
    if args.output_format == "json":
        out = []
        for report in reports:
            confirmations = iter(verdicts.get(id(report), []))
            for record in output.records([report]):  # the file's error first, then its findings in order
                if record["code"] is not None:
                    record["confirm"] = next(confirmations).record()
                out.append(record)
        print(json.dumps(out, indent=2))
    else:
        for report in reports:
            if report.error:
                print(output.text_line(report, report.error), file=sys.stderr)
            for f, v in zip(report.findings, verdicts.get(id(report), [])):
                print(f"{report.display}:{f.row}:{f.column}: {f.code} [{v.status}] {f.message}")
                where = ", ".join(x for x in (
                    f"use: line {v.use_row}" if v.use_row else "", f"origin: line {v.origin_row}" if v.origin_row else "",
                    v.device or "") if x)
                print(f"    {v.message}" + (f" ({where})" if where else ""))
        summary = ", ".join(f"{n} {status.replace('-', ' ')}" for status, n in counts.items() if n)
        print(summary or "No findings to confirm.")
    return EXIT_FINDINGS if counts["confirmed"] else EXIT_CLEAN


def _runtime_missing(device: str, other: str, instead: str) -> Optional[str]:
    """Why `confirm` or `export` cannot run here: no torch, or `--device cuda` without a GPU."""
    from devlint.confirm import cuda_missing, torch_missing

    missing = torch_missing()
    if missing:
        return f"{missing}; install the confirm extra: pip install 'devlint[confirm]'"
    if device == "cuda":
        missing = cuda_missing()
        if missing:
            return f"--device cuda: {missing}; leave --device out (or give {other}) {instead}"
    return None


def _configured_classes(table: dict) -> dict:
    """`[tool.devlint.confirm.classes.NAME]`: how to build and feed the classes no guess fits."""
    return {
        name: {
            "init_kwargs": spec.get("init-kwargs"),
            "inputs": [{"shape": shape, "dtype": _input_dtype(
                           spec.get("input-dtype", "float32"), f"[tool.devlint.confirm.classes.{name}] input-dtype")}
                       for shape in spec.get("input-shapes", [])] or None,
            "forward_kwargs": spec.get("forward-kwargs"),
        }
        for name, spec in table.get("classes", {}).items()
    }


def run_export(args: argparse.Namespace) -> int:
    from devlint.workspace.config import ConfigError
    from devlint.confirm import selectable_classes
    from devlint.confirm.export import STATUSES, ExportOptions, export_file, text_lines
    from devlint.workspace.runner import SourceError, check_file, decode, discover

    cwd = Path.cwd()
    targets = _targets(args.paths)
    try:
        settings = _settings(args, targets[0][0], cwd)
    except (ConfigError, ValueError) as exc:
        print(f"devlint export: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    problem = _runtime_missing(args.device, "--device fake", "to export for a fake CUDA device")
    if problem:
        print(f"devlint export: error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    try:
        options = ExportOptions(device=args.device, timeout=args.timeout or float(settings.confirm.get("timeout", 300)),
                                classes=_configured_classes(settings.confirm))
    except ValueError as exc:
        print(f"devlint export: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    work = []
    for root, only in targets:
        defined: dict[str, dict[str, bool]] = {}
        for path, problem in discover([root], settings):
            if problem is not None:
                print(f"devlint export: error: {path}: {problem}", file=sys.stderr)
                return EXIT_ERROR
            if path.suffix != ".py":
                continue  # export imports modules, not notebooks
            try:
                source = decode(path.read_bytes())[0]
            except (OSError, SourceError) as exc:
                print(f"devlint export: error: {path}: {exc}", file=sys.stderr)
                return EXIT_ERROR
            classes = selectable_classes(source)
            display = _display(path, cwd)
            defined[display] = classes
            if only is None and not any(classes.values()):
                continue  # no class that may be a module: nothing to export
            if only is not None and only not in classes:
                continue
            work.append((path, display, source, only))
        problem = _selection_problem(only, defined, root) if only and defined else None
        if problem:
            print(f"devlint export: error: {problem.replace('confirm', 'export')}", file=sys.stderr)
            return EXIT_ERROR
    records = []
    for path, display, source, only in work:
        findings = check_file(path, settings, display).findings
        records += export_file(path, display, source, findings, only, options)
    counts = {status: sum(r["status"] == status for r in records) for status in STATUSES}
    if args.output_format == "json":
        print(json.dumps(records, indent=2))
    else:
        for record in records:
            print("\n".join(text_lines(record)))
        words = {"ready": "ready", "fails": "fail", "not-run": "not run"}
        summary = ", ".join(f"{n} {words[status]}" for status, n in counts.items() if n)
        print(summary or "No module classes to export.")
    return EXIT_FINDINGS if counts["fails"] else EXIT_CLEAN


def _targets(paths: list[str]) -> list[tuple[Path, Optional[str]]]:
    """(path, class or None) for each `PATH` or `FILE.py::ClassName` (default: the current folder)."""
    return [(Path(p.split("::")[0]), p.split("::")[1] if "::" in p else None) for p in paths or ["."]]


def _selection_problem(only: str, defined: dict[str, dict[str, bool]], root: Path) -> Optional[str]:
    """Why `ROOT::ONLY` selects nothing to run, given the classes each file under `root` defines
    (and whether each may be an nn.Module); None when it selects a class."""
    holders = [display for display, classes in defined.items() if only in classes]
    if not holders:
        names = sorted({name for classes in defined.values() for name in classes})
        where = next(iter(defined)) if root.is_file() else str(root)
        return f"no class named {only} in {where}" + (f" (its classes: {', '.join(names)})" if names else " (it defines no class)")
    if any(defined[display][only] for display in holders):
        return None
    runnable = sorted({name for classes in defined.values() for name, may_run in classes.items() if may_run})
    where = holders[0] if len(holders) == 1 else str(root)
    return (f"{only} in {where} is not an nn.Module class, so confirm has nothing of it to run"
            + (f" (the classes it can run: {', '.join(runnable)})" if runnable else ""))


def _confirm_files(work, confirm_findings, decode, jobs: int) -> dict:
    """Verdicts per report; `jobs` files at once (each runs in a child process of its own, so
    threads are enough here; each thread's children fork from a warm process that imported torch once)."""
    from concurrent.futures import ThreadPoolExecutor

    from devlint.confirm import warm_processes

    def one(item):
        report, path, options = item
        return id(report), confirm_findings(path, decode(path.read_bytes())[0], report.findings, options)

    with warm_processes():
        if jobs == 1 or len(work) < 2:
            return dict(map(one, work))
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return dict(pool.map(one, work))


def run_explain(args: argparse.Namespace) -> int:
    from devlint.frontends import output
    from devlint.workspace.config import ConfigError
    from devlint.frontends.explain import InputError, explain, read_input
    from devlint.rules import BY_CODE

    cwd = Path.cwd()
    if args.config is not None and not args.config.is_file():
        print(f"devlint explain: error: --config {args.config}: no such file", file=sys.stderr)
        return EXIT_ERROR
    if args.error in (None, "-") and sys.stdin.isatty():
        end = "Ctrl-Z, then Enter" if os.name == "nt" else "Ctrl-D"
        print(f"devlint explain: reading the error from standard input (paste it, press Enter, then {end})", file=sys.stderr)
    try:
        text = read_input(args.error, sys.stdin)
    except InputError as exc:
        print(f"devlint explain: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        settings = _settings(args, cwd, cwd)
    except ConfigError as exc:  # it only limits which findings match: explain the error all the same
        print("devlint explain: warning: the configuration could not be read, so findings are matched with the "
              f"default settings (every rule, no per-file-ignores): {exc}", file=sys.stderr)
        settings = _settings(argparse.Namespace(**{**vars(args), "isolated": True}), cwd, cwd)
    result = explain(text, settings, cwd)
    if args.output_format == "json":
        findings = []
        for report, finding, place in result.findings:
            (record,) = [r for r in output.records([report]) if r["code"] == finding.code
                         and r["location"] == {"row": finding.row, "column": finding.column}]
            findings.append({**record, "place": place})
        print(json.dumps({
            "kinds": [{"id": k.id, "title": k.title, "causes": list(k.causes), "rules": list(k.rules),
                       "look_for": k.look_for or None} for k in result.kinds],
            "frames": [{"filename": f.filename, "row": f.row, "function": f.function, "status": f.status,
                        "local_file": f.shown} for f in result.frames],
            "findings": findings,
        }, indent=2))
        return EXIT_CLEAN if result.kinds or result.findings else EXIT_FINDINGS
    if not result.kinds:
        print("devlint does not recognise this as a device error (expected e.g. 'Expected all tensors to be on "
              "the same device' or 'Torch not compiled with CUDA enabled').")
    for kind in result.kinds:
        print(f"{kind.id}: {kind.title}")
        for cause in kind.causes:
            print(f"  - {cause}")
        print("  rules: " + (", ".join(f"{code} {BY_CODE[code].name}" for code in kind.rules)
                             or f"none; look for {kind.look_for}"))
    if result.frames:
        print("\nTraceback frames, innermost first:")
        for f in result.frames:
            if not f.library:
                print(f"  {f.filename}:{f.row}{f' in {f.function}' if f.function else ''} -> {f.shown or 'not found here'}")
        library = sum(f.library for f in result.frames)
        if library:
            print(f"  {'and ' * (library < len(result.frames))}{output.plural(library, 'frame')} in installed packages "
                  "or the standard library, not looked for")
    if result.findings:
        print("\nThe line to change, most likely first:")
        for report, finding, place in result.findings:
            print(f"{report.display}:{finding.row}:{finding.column}: {finding.code} {finding.message}  ({place})")
    elif any(f.local for f in result.frames):
        print("\nNo finding that could cause it in the files of the traceback: "
              + ", ".join(sorted({f.shown for f in result.frames if f.shown})))
    return EXIT_CLEAN if result.kinds or result.findings else EXIT_FINDINGS


def run_server(args: argparse.Namespace) -> int:
    try:
        from devlint.frontends.server import serve
    except ImportError as exc:
        print(f"devlint server: error: {exc}; install the server extra: pip install 'devlint[server]'", file=sys.stderr)
        return EXIT_ERROR
    serve(debounce=args.debounce)
    return EXIT_CLEAN
