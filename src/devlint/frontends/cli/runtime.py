"""`devlint confirm` and `devlint export`: the commands that run the user's modules (in child
processes; this process never imports torch)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Optional

from devlint.frontends.cli.check import display_path, resolve_settings
from devlint.frontends.cli.options import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, VALUES_CHOICES


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
    from devlint.confirm import STATUSES, Options, confirm_findings, selectable_classes
    from devlint.frontends import output
    from devlint.workspace.config import ConfigError
    from devlint.workspace.runner import FileReport, SourceError, check_file, decode, discover

    cwd = Path.cwd()
    targets = _targets(args.paths)
    if (args.init_kwargs is not None or args.input_shape) and not any(only for _, only in targets):
        given = "--init-kwargs" if args.init_kwargs is not None else "--input-shape"
        print(f"devlint confirm: error: {given} is for one class: name it as FILE.py::ClassName", file=sys.stderr)
        return EXIT_ERROR
    try:
        settings = resolve_settings(args, targets[0][0], cwd)
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
                    reports.append(FileReport(path, display_path(path, cwd)).fail("`devlint confirm` runs .py modules, not notebooks"))
                continue
            report = check_file(path, settings, display_path(path, cwd)) if problem is None else FileReport(path, str(path)).fail(problem)
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
    from devlint.confirm import selectable_classes
    from devlint.confirm.export import STATUSES, ExportOptions, export_file, text_lines
    from devlint.workspace.config import ConfigError
    from devlint.workspace.runner import SourceError, check_file, decode, discover

    cwd = Path.cwd()
    targets = _targets(args.paths)
    try:
        settings = resolve_settings(args, targets[0][0], cwd)
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
            display = display_path(path, cwd)
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
