"""`devlint rule`, `devlint explain` and `devlint server`."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from devlint.frontends.cli.check import resolve_settings
from devlint.frontends.cli.options import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS


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


def run_explain(args: argparse.Namespace) -> int:
    from devlint.frontends import output
    from devlint.frontends.explain import InputError, explain, read_input
    from devlint.rules import BY_CODE
    from devlint.workspace.config import ConfigError

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
        settings = resolve_settings(args, cwd, cwd)
    except ConfigError as exc:  # it only limits which findings match: explain the error all the same
        print("devlint explain: warning: the configuration could not be read, so findings are matched with the "
              f"default settings (every rule, no per-file-ignores): {exc}", file=sys.stderr)
        settings = resolve_settings(argparse.Namespace(**{**vars(args), "isolated": True}), cwd, cwd)
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
