"""`devlint [check] PATHS`: check, fix, show the diff, add `# noqa`, record or apply a baseline."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from devlint.frontends.cli.options import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS


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
        settings = resolve_settings(args, stdin_path if from_stdin else paths[0], cwd)
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
                print(f"{display_path(path, cwd)}: error: {problem}", file=sys.stderr)
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
                reports.append(FileReport(path, display_path(path, cwd)).fail(problem))
            else:
                items.append((path, display_path(path, cwd)))
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


def resolve_settings(args: argparse.Namespace, start: Path, cwd: Path):
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


def display_path(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd)) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)
