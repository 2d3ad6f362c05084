"""Fuzzing: the engine never raises, every fix parses, and a second fix changes nothing.

    python bench/fuzz.py --cases 10000 [--corpus DIR] [--seed 0] [--jobs N]

Cases come from two sources, half each:
- hypothesmith: Python programs generated from the grammar (`from_grammar`: code that
  CPython compiles), with `import torch` and a few device lines spliced in so the prefilter
  lets them through to the rules;
- mutated real files from the corpus (`DIR`, the unpacked output of the corpus fetch script;
  without it, the files in `examples/` and `tests/fixtures/`): lines deleted, duplicated,
  indented, dedented, swapped, or the file truncated, one to three times.

Each case is checked and fixed (unsafe fixes included) the way `devlint --fix` does it,
in memory. Counted, and each must be 0:
- crashes: any exception out of the check or the fix (a file libcst cannot parse is not
  a crash: it is reported as `cannot parse`);
- unparsable fixes: a fixed text that `ast` or libcst rejects;
- non-idempotent fixes: fixing the fixed text changes it again.
The first few failing cases are written to `--failures DIR` for a regression test.
"""
from __future__ import annotations

import argparse
import ast
import os
import random
import sys
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DEVICE_LINES = [
    "x = torch.zeros(3).cuda()",
    "state = torch.load('model.pt')",
    "device = 'cuda'",
    "model.load_state_dict(torch.load(path), map_location='cpu')",
    "t = torch.arange(10)",
    "model = model.to('cuda:0')",
    "out = model(torch.randn(1, 3))",
]


def mutate(source: str, rng: random.Random) -> str:
    lines = source.splitlines(keepends=True) or ["\n"]
    for _ in range(rng.randint(1, 3)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        kind = rng.choice(("delete", "duplicate", "indent", "dedent", "swap", "truncate", "device"))
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "indent":
            lines[i] = "    " + lines[i]
        elif kind == "dedent":
            lines[i] = lines[i].lstrip(" \t")
        elif kind == "swap" and len(lines) > 1:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "truncate":
            cut = rng.randrange(len(lines[i]) + 1)
            lines = lines[:i] + [lines[i][:cut]]
        else:  # a device line, at the indentation of the line it goes before
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip(" \t"))]
            lines.insert(i, indent + rng.choice(DEVICE_LINES) + "\n")
    return "".join(lines)


def spliced(program: str, rng: random.Random) -> str:
    """A generated program with torch imported and device lines between its statements."""
    if program and not program.endswith(("\n", "\r")):
        program += "\n"
    lines = program.splitlines(keepends=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            starts = [node.lineno - 1 for node in ast.parse(program).body]
    except (SyntaxError, ValueError):
        starts = []
    top_level = [i for i in starts if i < len(lines) and not lines[i][:1].isspace()] + [len(lines)]
    for i in sorted(rng.sample(top_level, min(len(top_level), rng.randint(1, 3))), reverse=True):
        lines.insert(i, rng.choice(DEVICE_LINES) + "\n")
    return "import torch\n" + "".join(lines)


def check_case(source: str) -> tuple[str | None, int, bool]:
    """(problem, findings, fixed): problem is None when the case passes, else `crash`,
    `unparsable` or `non-idempotent` and why; then how many findings the case had and
    whether a fix changed it."""
    from devlint import engine
    from devlint.workspace.config import Settings
    from devlint.workspace.linter import Linter

    linter = Linter(Settings(root=ROOT), ROOT / "case.py")  # what a run checks: all rules, noqa
    check = linter.check

    found = 0
    try:
        try:
            found = len(check(source))
        except engine.ParseError:
            return None, 0, False  # reported to the user as `cannot parse`: not a crash
        first = linter.fix(source, unsafe=True)
        if first.text == source:
            return None, found, False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(first.text)
            engine.parse(first.text)
        except (SyntaxError, ValueError, engine.ParseError) as exc:
            return f"unparsable: {exc}", found, True
        second = linter.fix(first.text, unsafe=True)
        if second.text != first.text:
            return "non-idempotent", found, True
    except Exception:  # noqa: BLE001 - this is what we count
        return "crash: " + traceback.format_exc(limit=-3), found, False
    return None, found, True


def generated_programs(count: int, seed: int) -> list[str]:
    """`count` programs from hypothesmith, deterministic for a seed."""
    import hypothesis
    import hypothesmith
    from hypothesis import HealthCheck, given, settings

    programs: list[str] = []
    warnings.simplefilter("ignore", SyntaxWarning)  # hypothesmith compiles what it generates

    @settings(max_examples=count, database=None, derandomize=False, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[hypothesis.Phase.generate])
    @given(hypothesmith.from_grammar())
    def collect(program):
        programs.append(program)

    hypothesis.seed(seed)(collect)()
    return programs[:count]


def corpus_files(corpus: Path | None) -> list[str]:
    if corpus is not None:
        paths = [p for p in sorted(corpus.rglob("*.py")) if p.stat().st_size < 40_000]
    else:
        paths = sorted((ROOT / "examples").rglob("*.py")) + sorted((ROOT / "tests" / "fixtures").glob("*.py"))
    texts = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        if "torch" in text or "cuda" in text:
            texts.append(text)
    return texts


def make_cases(count: int, corpus: Path | None, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    generated = generated_programs(count // 2, seed)
    cases = [("hypothesmith", spliced(p, rng)) for p in generated]
    files = corpus_files(corpus)
    while len(cases) < count:
        cases.append(("mutated", mutate(rng.choice(files), rng)))
    return cases


def _run(case: tuple[str, str]) -> tuple[str, str, tuple[str | None, int, bool]]:
    kind, source = case
    return kind, source, check_case(source)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--failures", type=Path, help="write failing cases here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cases = make_cases(args.cases, args.corpus, args.seed)
    made = time.perf_counter() - start
    counts = {"crash": 0, "unparsable": 0, "non-idempotent": 0}
    kinds: dict[str, int] = {}
    parsed = with_findings = findings = fixed = 0
    failures = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for kind, source, (problem, found, changed) in pool.map(_run, cases, chunksize=16):
            kinds[kind] = kinds.get(kind, 0) + 1
            with_findings += found > 0
            findings += found
            fixed += changed
            if problem is not None:
                counts[problem.split(":")[0]] += 1
                failures.append((kind, source, problem))
    for kind, source in cases:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(source, "<case>", "exec", flags=ast.PyCF_ONLY_AST)
            parsed += 1
        except (SyntaxError, ValueError):
            pass
    print(f"{len(cases)} cases ({', '.join(f'{n} {k}' for k, n in kinds.items())}; {parsed} valid Python; "
          f"{with_findings} with findings, {findings} findings; {fixed} changed by fixes), "
          f"made in {made:.0f} s, checked in {time.perf_counter() - start - made:.0f} s, seed {args.seed}")
    for name, n in counts.items():
        print(f"{name + ':':<16} {n}")
    for kind, source, problem in failures[:5]:
        print(f"\n--- {kind}: {problem}\n{source[:2000]}")
    if args.failures is not None:
        args.failures.mkdir(parents=True, exist_ok=True)
        for i, (kind, source, problem) in enumerate(failures[:50]):
            (args.failures / f"case{i:03}.py").write_text(source, encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
