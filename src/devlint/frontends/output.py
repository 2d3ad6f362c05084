"""How reports are shown: text (ruff's concise lines), JSON (ruff's field names), statistics."""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Sequence, TextIO

from devlint.core.findings import Finding
from devlint.rules import NAMES
from devlint.workspace.runner import FileReport


def rule_url(code: str) -> str:
    """The `file://` URI of the rule's doc shipped with devlint, which exists wherever it runs."""
    from devlint.frontends import docs

    return Path(str(docs.doc_path(code))).resolve().as_uri()


def count(reports: Sequence[FileReport]) -> tuple[int, int]:
    return sum(len(r.findings) for r in reports), sum(1 for r in reports if r.error)


def where(f: Finding) -> str:
    """`row:col`, or in a notebook `cell N:row:col` (as ruff writes it)."""
    return f"cell {f.cell}:{f.row}:{f.column}" if f.cell is not None else f"{f.row}:{f.column}"


class Style:
    """ANSI colour in ruff's palette (path bold, separators cyan, code bold red); when off, every
    method gives its text back unchanged."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _paint(self, sgr: str, text: str) -> str:
        return f"\x1b[{sgr}m{text}\x1b[0m" if self.enabled else text

    def bold(self, text: str) -> str:
        return self._paint("1", text)

    def code(self, text: str) -> str:
        return self._paint("1;31", text)

    def rule(self, code: str) -> str:
        """The code, bold red, and a terminal hyperlink (OSC 8) to the rule's doc, as ruff links
        its codes: terminals that do not know OSC 8 show the code alone."""
        if not self.enabled:
            return code
        return f"\x1b]8;;{rule_url(code)}\x1b\\{self.code(code)}\x1b]8;;\x1b\\"

    def cyan(self, text: str) -> str:
        return self._paint("36", text)

    def green(self, text: str) -> str:
        return self._paint("1;32", text)

    def fixable(self) -> str:
        return f"[{self.cyan('*')}]"


PLAIN = Style(False)


def use_color(choice: str, stream: TextIO) -> bool:
    """--color: `always` and `never` win; under `auto`, a non-empty FORCE_COLOR turns colour on
    and a non-empty NO_COLOR turns it off (FORCE_COLOR first, as ruff reads them), else colour
    goes to a terminal only."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def text_line(report: FileReport, f: Finding, unsafe: bool = False, style: Style = PLAIN) -> str:
    """ruff's concise line; a file error reads `path:row:col: error: message`."""
    colon = style.cyan(":")
    place = f"{style.bold(report.display)}{colon}{where(f).replace(':', colon)}{colon}"
    if f.is_file_error:
        return f"{place} {style.code('error')}: {f.message}"
    mark = f"{style.fixable()} " if f.fixable(unsafe) else ""
    return f"{place} {style.rule(f.code)} {mark}{f.text}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


plural = _plural


def baselined_line(n: int) -> str:
    return f"{_plural(n, 'finding')} hidden by the baseline."


def write_text(
    reports: Sequence[FileReport], out: TextIO, err: TextIO, statistics: bool = False,
    unsafe: bool = False, fixing: bool = False, baselined: int = 0, show_fixes: bool = False,
    summary: bool = True, style: Style = PLAIN, err_style: Style = PLAIN,
) -> None:
    """The findings (or with `statistics`, a count per rule), then with `show_fixes` what --fix
    fixed (or would fix) per file and rule, then unless `summary` is off the summary lines."""
    for report in reports:  # file errors go to standard error, before the findings
        if report.error:
            print(text_line(report, report.error, style=err_style), file=err)
    if statistics:
        _write_statistics(reports, out, style)
    else:
        for report in reports:
            for f in report.findings:
                print(text_line(report, f, unsafe, style), file=out)
    if show_fixes:
        if fixing:
            _write_fix_summary({r.display: r.fixed for r in reports}, "Fixed {}:", out, style)
        else:
            fixable_now = {r.display: [f for f in r.findings if f.fixable(unsafe)] for r in reports}
            _write_fix_summary(fixable_now, "--fix would fix {}:", out, style)
    if not summary:
        return
    findings, errors = count(reports)
    remaining = [f for r in reports for f in r.findings]
    fixable = sum(1 for f in remaining if f.fixable(unsafe))
    hidden = sum(1 for f in remaining if f.fixable(True) and not f.fixable(unsafe))
    more = f" ({hidden} more fixable with --unsafe-fixes)" if hidden else ""
    if fixing:
        fixed = sum(len(r.fixed) for r in reports)
        print(f"Fixed {_plural(fixed, 'finding')}, {findings} remaining{more}.", file=out)
    elif findings:
        print(f"Found {_plural(findings, 'finding')}.", file=out)
        if fixable:
            print(f"{style.fixable()} {fixable} fixable with --fix{more}.", file=out)
        elif hidden:
            print(f"{hidden} fixable with --fix --unsafe-fixes.", file=out)
    elif not errors:
        print("All checks passed!", file=out)
    if baselined:
        print(baselined_line(baselined), file=out)
    if errors:
        print(f"{_plural(errors, 'file')} could not be checked.", file=out)


def _write_fix_summary(fixed: dict[str, list[Finding]], header: str, out: TextIO, style: Style) -> None:
    """ruff's --show-fixes list: a count per file and rule, between blank lines; nothing when empty."""
    total = sum(len(found) for found in fixed.values())
    if not total:
        return
    print(f"\n{style.green(header.format(_plural(total, 'finding')))}", file=out)
    width = max(len(str(n)) for found in fixed.values() for n in Counter(f.code for f in found).values())
    for display in sorted(d for d, found in fixed.items() if found):
        print(f"{style.cyan('-')} {style.bold(display)}{style.cyan(':')}", file=out)
        counts = Counter(f.code for f in fixed[display])
        for code, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            print(f"    {n:>{width}} \u00d7 {style.code(code)} ({NAMES[code]})", file=out)
    print(file=out)


def write_diff(reports: Sequence[FileReport], out: TextIO, err: TextIO, baselined: int = 0, show_fixes: bool = False,
               summary: bool = True, style: Style = PLAIN) -> None:
    """The diff --fix would apply on `out`; file errors and the summary on `err` (`style` is err's)."""
    for report in reports:
        if report.error:
            print(text_line(report, report.error, style=style), file=err)
        out.write(report.diff)
    if show_fixes:
        _write_fix_summary({r.display: r.fixed for r in reports}, "Would fix {}:", err, style)
    if not summary:
        return
    fixed = sum(len(r.fixed) for r in reports)
    print(f"Would fix {_plural(fixed, 'finding')}." if fixed else "No fixes available.", file=err)
    if baselined:
        print(baselined_line(baselined), file=err)
    errors = count(reports)[1]
    if errors:
        print(f"{_plural(errors, 'file')} could not be checked.", file=err)


def statistics(reports: Sequence[FileReport], unsafe: bool = False) -> list[dict]:
    """A count per rule, most found first, in ruff's `--statistics --output-format json` shape:
    `fixable` is true when --fix fixes every finding of the rule."""
    found: dict[str, list[Finding]] = {}
    for r in reports:
        for f in r.findings:
            found.setdefault(f.code, []).append(f)
    return [
        {"code": code, "name": NAMES[code], "count": len(fs),
         "fixable": all(f.fixable(unsafe) for f in fs)}
        for code, fs in sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))
    ]


STATISTICS_FORMATS = ("text", "json", "json-lines")


def write_statistics_json(reports: Sequence[FileReport], out: TextIO, unsafe: bool = False) -> None:
    json.dump(statistics(reports, unsafe), out, indent=2)
    out.write("\n")


def write_statistics_json_lines(reports: Sequence[FileReport], out: TextIO, unsafe: bool = False) -> None:
    for record in statistics(reports, unsafe):
        out.write(json.dumps(record) + "\n")


def _write_statistics(reports: Sequence[FileReport], out: TextIO, style: Style = PLAIN) -> None:
    counts = statistics(reports)
    width = max((len(str(c["count"])) for c in counts), default=1)
    for c in counts:
        padded = f"{c['count']:>{width}}"
        print(f"{style.bold(padded)}\t{style.code(c['code'])}\t{c['name']}", file=out)


def records(reports: Sequence[FileReport]) -> list[dict]:
    out = []
    for report in reports:
        filename = str(report.path.resolve()) if report.path.exists() else str(report.path)
        for f in report.diagnostics:
            cell = {} if f.cell is None else {"cell": f.cell}  # rows count inside the cell
            out.append({
                **cell,
                "code": f.code,
                "name": f.name,
                "message": f.message,
                "filename": filename,
                "location": {"row": f.row, "column": f.column},
                "end_location": {"row": f.end_row, "column": f.end_column},
                "fix": _fix_record(f.fix),
                "related": [{
                    **({} if r.cell is None else {"cell": r.cell}),
                    "message": r.clause(f.cell),
                    "location": {"row": r.row, "column": r.column},
                    "end_location": {"row": r.end_row, "column": r.end_column},
                } for r in f.related],
                "url": None if f.is_file_error else rule_url(f.code),
                "noqa_row": None if f.is_file_error else f.row,
            })
    return out


def _fix_record(fix):
    if fix is None:
        return None
    return {
        "applicability": fix.applicability,
        "message": fix.message,
        "edits": [
            {"content": e.content, "location": {"row": e.row, "column": e.column},
             "end_location": {"row": e.end_row, "column": e.end_column}}
            for e in fix.edits
        ],
    }


def write_json(reports: Sequence[FileReport], out: TextIO) -> None:
    json.dump(records(reports), out, indent=2)
    out.write("\n")


def write_json_lines(reports: Sequence[FileReport], out: TextIO) -> None:
    for record in records(reports):
        out.write(json.dumps(record) + "\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write_github(reports: Sequence[FileReport], out: TextIO) -> None:
    """GitHub Actions workflow commands: one annotation per finding (and per unreadable file)."""
    for report in reports:
        file = _escape_property(report.display)
        for f in report.diagnostics:
            title, end = ("devlint", "") if f.is_file_error else (
                f"devlint ({f.code})", f",endLine={f.end_row},endColumn={f.end_column}")
            message = f.text if f.cell is None else f"cell {f.cell}: {f.text}"
            print(f"::error title={title},file={file},line={f.row},col={f.column}{end}::{_escape_data(message)}", file=out)


def sarif(reports: Sequence[FileReport]) -> dict:
    """A SARIF 2.1.0 log: one run, a `tool.driver.rules` entry per rule, fixes as artifactChanges."""
    from devlint import __version__
    from devlint.frontends import docs
    from devlint.rules import ALL_RULES

    rules, index = [], {}
    for i, rule in enumerate(ALL_RULES):
        doc = docs.rule_doc(rule.code) or ""
        index[rule.code] = i
        rules.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": docs.sections(doc).get("What it does", rule.summary).strip()},
            "help": {"text": doc, "markdown": doc},
            "helpUri": rule_url(rule.code),
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["pytorch", "device"]},
        })
    results = []
    for report in reports:
        uri = Path(report.display).as_posix()
        for f in report.findings:
            result = {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": "error",
                "message": {"text": f.text},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": uri},
                    "region": {"startLine": f.row, "startColumn": f.column, "endLine": f.end_row, "endColumn": f.end_column},
                }}],
            }
            if f.related:
                result["relatedLocations"] = [{
                    "id": i,
                    "message": {"text": r.clause(f.cell)},
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri},
                        "region": {"startLine": r.row, "startColumn": r.column, "endLine": r.end_row, "endColumn": r.end_column},
                    },
                    **({} if r.cell is None else {"logicalLocations": [{"name": f"cell {r.cell}", "kind": "module"}]}),
                } for i, r in enumerate(f.related)]
            if f.cell is not None:  # the region's rows count inside the cell
                result["locations"][0]["logicalLocations"] = [{"name": f"cell {f.cell}", "kind": "module"}]
                result["properties"] = {"cell": f.cell}
            if f.fix is not None:
                result["fixes"] = [{
                    "description": {"text": f.fix.message},
                    "artifactChanges": [{
                        "artifactLocation": {"uri": uri},
                        "replacements": [{
                            "deletedRegion": {"startLine": e.row, "startColumn": e.column, "endLine": e.end_row, "endColumn": e.end_column},
                            "insertedContent": {"text": e.content},
                        } for e in f.fix.edits],
                    }],
                }]
            results.append(result)
    invocation = {"executionSuccessful": True, "toolExecutionNotifications": [
        {"level": "error", "message": {"text": r.error.message},
         "locations": [{"physicalLocation": {"artifactLocation": {"uri": Path(r.display).as_posix()}}}]}
        for r in reports if r.error
    ]}
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "devlint", "version": __version__,
                "rules": rules,
            }},
            "invocations": [invocation],
            "results": results,
        }],
    }


def write_sarif(reports: Sequence[FileReport], out: TextIO) -> None:
    json.dump(sarif(reports), out, indent=2)
    out.write("\n")
