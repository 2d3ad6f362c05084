"""Files in, reports out: reading, decoding, discovery, and the suppressions a user configured."""
from __future__ import annotations

import difflib
import gc
import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from collections import Counter
from typing import Iterator, Optional, Sequence, Union

from devlint.core.findings import Edit, Finding, Fix, ParseError, Related
from devlint.semantic.project import ProjectView
from devlint.workspace import noqa
from devlint.workspace import notebook
from devlint.workspace.baseline import Baseline, file_key, hide, line_keys, updated
from devlint.workspace.config import Settings
from devlint.workspace.files import FileReport, SourceError, decode, write_atomically  # noqa: F401 (re-exported)
from devlint.workspace.linter import Linter
from devlint.workspace.notebook import is_notebook
from devlint.workspace.paths import is_checked_name, named_file_problem
from devlint.workspace.paths import read_problem as _read_problem


def check_file(path: Path, settings: Settings, display: Optional[str] = None, fix: Optional[str] = None,
               baseline=None) -> FileReport:
    """Check one file. With fix="write" (or "diff"), apply the fixes (or only show them);
    fix="unsafe-write" / "unsafe-diff" include unsafe fixes. `baseline`: the findings a
    baseline records for the file, which fixing leaves alone (a plain check ignores it: the
    caller applies baselines to what is, maybe, cached)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return FileReport(path, display or str(path)).fail(f"cannot read: {_read_problem(path, exc)}")
    report = check_data(data, path, settings, display, fix, baseline)
    if report.new_data is not None and fix is not None and fix.endswith("write"):
        problem = write_atomically(path, report.new_data, data)
        if problem is not None:
            report.findings, report.fixed = report.unfixed, []
            report.baselined = report.unfixed_baselined
            report.fail(problem)
    return report


def check_data(
    data: bytes, path: Path, settings: Settings, display: Optional[str] = None, fix: Optional[str] = None,
    baseline=None,
) -> FileReport:
    """Check (and with `fix`, fix) the bytes of a file; writes nothing. The fixed bytes, if any,
    are in `report.new_data`."""
    try:
        try:
            return _check_data(data, path, settings, display, fix, baseline)
        except Exception as exc:  # noqa: BLE001 - re-raised unless deep nesting caused it
            # deeply nested code: libcst parses and prints recursively (and its position
            # recorder turns the RecursionError into a KeyError on the way out)
            if not _from_recursion(exc):
                raise
            return _on_a_deep_stack(_check_data, data, path, settings, display, fix, baseline)
    except Exception as exc:  # noqa: BLE001 - a bug in devlint must not stop the run or cost the other files
        if _from_recursion(exc):
            return FileReport(path, display or str(path)).fail(recursion_problem(data))
        try:
            detail = str(exc)
        except RecursionError:  # the message itself is too deep to print (a node's repr)
            detail = ""
        message = f"internal error: {type(exc).__name__}: {detail}".rstrip(": ")
        return FileReport(path, display or str(path)).fail(f"{message} (a devlint bug: please report it with this file)")


def _from_recursion(exc: BaseException) -> bool:
    """Whether exc is a RecursionError or was raised while handling one."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, RecursionError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


DEEP_RECURSION_LIMIT = 20_000
# Nesting that a deep stack takes in its stride: a file no deeper than this that still recursed
# past DEEP_RECURSION_LIMIT met a bug in devlint, not a limit.
_SHALLOW = 500


def recursion_problem(source: Union[bytes, str]) -> str:
    """What to say of a file whose check recursed too deep even on a deep stack: that the code
    nests too deep, or, where it does not, that devlint has a bug (an endless recursion)."""
    if _nesting_depth(source) < _SHALLOW:
        return "internal error: RecursionError (a devlint bug: please report it with this file)"
    return f"cannot check: nested deeper than {DEEP_RECURSION_LIMIT} levels"


def _nesting_depth(source: Union[bytes, str]) -> int:
    """How deep the file's syntax tree goes (without recursing); a file `ast` cannot read counts as deep."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _SHALLOW
    deepest, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _on_a_deep_stack(function, *args):
    """function(*args) on a thread with a 512 MiB stack and a high recursion limit."""
    import sys
    import threading

    outcome: list = []

    def target():
        try:
            outcome.append((True, function(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome.append((False, exc))

    old_limit, old_size = sys.getrecursionlimit(), threading.stack_size()
    sys.setrecursionlimit(DEEP_RECURSION_LIMIT)
    try:
        threading.stack_size(512 * 1024 * 1024)
        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old_size)
        sys.setrecursionlimit(old_limit)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _check_data(data: bytes, path: Path, settings: Settings, display: Optional[str], fix: Optional[str],
                baseline=None) -> FileReport:
    if is_notebook(path):
        return notebook.check_data(data, path, settings, display or str(path), fix, baseline)
    report = FileReport(path, display or str(path))
    try:
        source, encoding = decode(data)
        linter = Linter(settings, path)
        report.project = linter.project
        if fix is None:
            report.findings = linter.check(source)
            return report
        result = linter.fix(source, unsafe=fix.startswith("unsafe"), baseline=baseline)
    except SourceError as exc:
        return report.fail(str(exc), exc.row, exc.column)
    except ParseError as exc:
        return report.fail(f"cannot parse: {exc.message}", exc.row, exc.column)
    report.findings = result.remaining
    report.baselined, report.unfixed_baselined = result.baselined, result.baselined_before
    if result.problem is not None:
        return report.fail(f"fixes not applied: {result.problem}")
    if result.text == source:
        return report
    try:
        report.new_data = result.text.encode(encoding)
    except UnicodeEncodeError as exc:
        report.findings = result.before
        report.baselined = result.baselined_before
        return report.fail(f"fixes not applied: cannot encode the result as {encoding} ({exc.reason})")
    report.fixed = result.fixed
    report.unfixed = result.before
    report.diff = "".join(difflib.unified_diff(
        source.splitlines(keepends=True), result.text.splitlines(keepends=True),
        fromfile=f"a/{report.display}", tofile=f"b/{report.display}",
    ))
    return report


def add_noqa_to_file(path: Path, settings: Settings, baseline=None) -> tuple[int, Optional[str]]:
    """Silence every finding of a file in place (but those `baseline` records for it); (lines
    changed, problem)."""
    try:
        data = path.read_bytes()
        if is_notebook(path):
            return _add_noqa_to_notebook(path, data, settings, baseline)
        source, encoding = decode(data)
        findings = Linter(settings, path).check(source)
    except OSError as exc:
        return 0, f"cannot read: {_read_problem(path, exc)}"
    except (SourceError, ParseError) as exc:
        return 0, getattr(exc, "message", str(exc))
    if baseline:
        findings = hide(findings, source, baseline)[0]
    new_source, changed = noqa.add_noqa(source, findings)
    if not changed:
        return 0, None
    problem = write_atomically(path, new_source.encode(encoding), data)
    return (0, problem) if problem else (changed, None)


def _add_noqa_to_notebook(path: Path, data: bytes, settings: Settings, baseline=None) -> tuple[int, Optional[str]]:
    new_data, changed, problem = notebook.add_noqa(data, path, settings, baseline)
    if new_data is None:
        return 0, problem
    problem = write_atomically(path, new_data, data)
    return (0, problem) if problem else (changed, None)


def discover(
    paths: Sequence[Path], settings: Settings, force_exclude: bool = False
) -> Iterator[tuple[Path, Optional[str]]]:
    """(path, problem) for every Python file and notebook under `paths`. Paths given explicitly are checked
    even when excluded (excludes apply to what the walk finds, as in ruff), unless
    force_exclude, as pre-commit needs: it names every staged file. A named path that cannot
    be checked (missing, unreadable, not a Python file) comes with the reason."""
    for root in paths:
        if force_exclude and _excluded_with_parents(root, settings):
            continue
        if root.is_dir():
            yield from ((p, None) for p in _walk(root, settings))
        elif root.exists() or root.is_symlink():
            yield root, named_file_problem(root)
        else:
            yield root, "No such file or directory"


def _excluded_with_parents(path: Path, settings: Settings) -> bool:
    relative = settings.relative(path)
    if relative is None:
        return settings.is_excluded(path)
    parts = Path(relative).parts
    return any(settings.is_excluded(settings.root / Path(*parts[: i + 1])) for i in range(len(parts)))


def _walk(root: Path, settings: Settings) -> Iterator[Path]:
    found = []
    for directory, dirnames, filenames in os.walk(root):
        here = Path(directory)
        dirnames[:] = sorted(
            d for d in dirnames
            if not settings.is_excluded(here / d) and not (here / d / "pyvenv.cfg").exists()
        )
        for name in filenames:
            if is_checked_name(name) and not settings.is_excluded(here / name):
                found.append(here / name)
    yield from sorted(found)


# --- many files: a cache keyed by content and settings, and worker processes ----------------------
def check_files(
    items: Sequence[tuple[Path, str]],
    settings: Settings,
    fix: Optional[str] = None,
    jobs: int = 1,
    cache_dir: Optional[Path] = None,
    progress=None,
    baseline=None,
) -> list[FileReport]:
    """Check (or fix) every (path, display) pair. Plain checks are cached by file content and
    settings; files are spread over `jobs` processes when there are enough of them. A fix
    leaves alone the findings `baseline` records; a plain check does not apply it."""
    cache = FindingCache(cache_dir, settings) if cache_dir is not None and fix is None else None
    reports: list[Optional[FileReport]] = [None] * len(items)
    todo = []
    for i, (path, display) in enumerate(items):
        hit = cache.get(path, display) if cache is not None else None
        if hit is not None:
            reports[i] = hit
        else:
            todo.append(i)
    done = len(items) - len(todo)
    if progress is not None:
        progress(done, len(items))
    work = [(items[i][0], items[i][1], settings, fix, _recorded(baseline, items[i][0], settings, fix)) for i in todo]
    gc.freeze()  # what is alive now lives to the end: keep it out of every collection
    if jobs > 1 and len(work) > 8:
        import concurrent.futures
        import multiprocessing

        # Largest files first, one at a time: no worker is left with a long tail.
        order = sorted(range(len(work)), key=lambda k: -_size(work[k][0]))
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            results = pool.map(_check_portable, [work[k] for k in order])
            for k, report in zip(order, results):
                reports[todo[k]] = report
                done += 1
                if progress is not None:
                    progress(done, len(items))
    else:
        for i, job in zip(todo, work):
            reports[i] = _check_portable(job)
            done += 1
            if progress is not None:
                progress(done, len(items))
    if cache is not None:
        for i in todo:
            cache.put(reports[i])
    return reports


def _recorded(baseline, path: Path, settings: Settings, fix: Optional[str]):
    if baseline is None or fix is None:
        return None
    return baseline.recorded(file_key(path, settings))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _check_portable(job) -> FileReport:
    """check_file in a worker process (or in this one)."""
    path, display, settings, fix, baseline = job
    # A parse allocates a million objects: automatic collections would scan them again and
    # again. The trees hold no reference cycles, so reference counting frees them; a full
    # collection after every file cost 13-18% of a serial run (bench/README.md), one every
    # COLLECT_EVERY files only keeps a stray cycle from piling up.
    global _checked
    gc.disable()
    try:
        report = check_file(path, settings, display, fix, baseline)
    finally:
        gc.enable()
    _checked += 1
    if _checked % COLLECT_EVERY == 0:
        gc.collect()
    report.unfixed = []
    return report


COLLECT_EVERY = 100
_checked = 0  # files checked by this process


class FindingCache:
    """`.devlint_cache/<version>-<format>/`: one JSON file per (content, effective rules) key.
    A record that does not read as this format is a miss."""

    FORMAT = 3  # a file's diagnostics (with their evidence), its file error among them

    def __init__(self, root: Path, settings: Settings) -> None:
        from devlint import __version__

        self.root = root / f"{__version__}-{self.FORMAT}"
        self.settings = settings
        self.code = _code_fingerprint()
        # The target torch picks fixes and messages: what it is worked out from is part of the key.
        self.codes = ",".join(sorted(settings.enabled_codes())) + "|torch " + settings.target_torch_key()
        self.marked = False

    def _mark(self) -> None:
        """CACHEDIR.TAG for backup tools, and a .gitignore so the cache never shows in `git status`."""
        top = self.root.parent
        for name, text in (
            ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# devlint's cache: safe to delete.\n"),
            (".gitignore", "# Automatically created by devlint.\n*\n"),
        ):
            if not (top / name).exists():
                (top / name).write_text(text)
        self.marked = True

    def _key(self, path: Path) -> Optional[tuple[str, bytes]]:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        ignored = ",".join(sorted(self.settings.ignored_codes_for(path)))
        digest = hashlib.sha256(f"{self.code}|{self.codes}|{ignored}|".encode() + data).hexdigest()
        return digest, data

    def get(self, path: Path, display: str) -> Optional[FileReport]:
        key = self._key(path)
        if key is None:
            return None
        try:
            record = json.loads((self.root / key[0][:2] / f"{key[0]}.json").read_text())
            diagnostics = [_finding_from(r) for r in record["diagnostics"]]
            asked = dict(record.get("asked", {}))
            stamp = record.get("project")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if asked:  # answered from other files of the project: only while they answer the same
            project = ProjectView(path)
            if not project.unchanged_since(stamp) and any(project.answer(k) != answer for k, answer in asked.items()):
                return None
        report = FileReport(path, display, findings=[d for d in diagnostics if not d.is_file_error])
        report.error = next((d for d in diagnostics if d.is_file_error), None)
        return report

    def put(self, report: FileReport) -> None:
        key = self._key(report.path)
        if key is None or report.error is not None and report.error.message.startswith("cannot read"):
            return
        project = report.project
        record = {"diagnostics": [_finding_to(f) for f in report.diagnostics],
                  "asked": project.asked if project else {}, "project": project.stamp if project else None}
        target = self.root / key[0][:2] / f"{key[0]}.json"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not self.marked:
                self._mark()
            temporary = target.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(record))
            os.replace(temporary, target)
        except OSError:
            pass  # a cache that cannot be written only costs time


def _code_fingerprint() -> str:
    """Which devlint made a cached record: the size and modification time of each of its source
    files (a few stat calls), so a changed rule in a checkout or an editable install is never
    answered from records of the code before it."""
    package = Path(__file__).resolve().parents[1]  # the whole devlint package
    stamps = sorted(
        f"{p.relative_to(package)}:{s.st_size}:{s.st_mtime_ns}" for p in package.rglob("*.py") for s in [p.stat()]
    )
    return hashlib.sha256("\n".join(stamps).encode()).hexdigest()[:16]


def _finding_to(f: Finding) -> dict:
    return asdict(f)


def _finding_from(data: dict) -> Finding:
    fix = data.pop("fix")
    if fix is not None:
        fix = Fix(fix["applicability"], fix["message"], tuple(Edit(**e) for e in fix["edits"]))
    related = tuple(Related(**r) for r in data.pop("related", ()))
    return Finding(**data, fix=fix, related=related)


# --- a run's reports -----------------------------------------------------------------------------
def _source(report, stdin_text: Optional[str]) -> Union[str, dict[int, str], None]:
    """The text a report's findings point into: standard input's, or the file's as it is now;
    for a notebook, its code cells' sources by cell number."""
    try:
        if notebook.is_notebook(report.path):
            data = stdin_text.encode("utf-8") if stdin_text is not None else report.path.read_bytes()
            return notebook.cell_sources(data)
        if stdin_text is not None:
            return stdin_text
        return decode(report.path.read_bytes())[0]
    except (OSError, SourceError, notebook.NotebookError):
        return None


def apply_baseline(baseline, reports: Sequence, settings, stdin_text: Optional[str] = None) -> None:
    """Hide the recorded findings from plain-check reports (fixing runs hide them as they fix)."""
    for report in reports:
        if not report.findings:
            continue
        recorded = baseline.recorded(file_key(report.path, settings))
        source = _source(report, stdin_text) if recorded else None
        if source is not None:
            report.findings, report.baselined = hide(report.findings, source, recorded)


def update_baseline(old, path: Path, reports: Sequence, settings, stdin_text: Optional[str] = None) -> Baseline:
    """The baseline recording what the plain-check `reports` found."""
    checked: dict = {}
    for report in reports:
        key = file_key(report.path, settings)
        source = _source(report, stdin_text) if report.findings and report.error is None else ""
        if report.error is not None or source is None:
            checked[key] = None
        else:
            codes = {rule.code for rule in Linter(settings, report.path).rules}
            checked[key] = (Counter(line_keys(report.findings, source)), codes)
    return updated(old, path, checked, settings.root)
