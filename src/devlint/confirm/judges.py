"""Events to verdicts: what the child's runs recorded, turned into one status per finding, by a
judge per rule where the rule has its own evidence (DEV007-DEV015), and the common reading of
CUDA requests, mixes and lines run for the rest."""
from __future__ import annotations

import ast
import re
from typing import Iterable, Optional

from devlint import engine
from devlint.confirm.options import SCENARIO_NAMES, Verdict
from devlint.confirm.scopes import Case, Scopes
from devlint.torchinfo import cuda_api


def _judge(finding: engine.Finding, result: dict, lines: list[str], scopes: "Scopes") -> Verdict:
    if "fatal" in result:
        return Verdict("not-run", result["fatal"], use_row=result.get("row"))
    device = result.get("device")
    row = finding.row
    classes = result.get("classes", [])
    events = [e for c in classes for e in c["events"]]
    owner = next((c for c in classes if c["span"][0] <= row <= c["span"][1]), None)
    if owner is not None:
        device = owner.get("device", device)  # a class re-run with values names that stand-in

    def verdict(status, message, use=None, origin=None):
        return Verdict(status, message, use, origin, device)

    if finding.code in ("DEV001", "DEV005"):
        span = scopes.function_span(row) if finding.code == "DEV005" else (row, row)
        hit = next((e for e in events if e["kind"] in ("cuda-request", "cuda-failure")
                    and e.get("row") is not None and span[0] <= e["row"] <= span[1]), None)
        if hit is not None:
            pinned = re.fullmatch(r"cuda:(\d+)", hit.get("device") or "")
            other = f"; it also pins {pinned.group(0)}, so a model placed on cuda:{int(pinned.group(1)) + 1} meets it there" if pinned else ""
            return verdict("confirmed", f"{_scenario(hit)}: asked for {hit.get('device', 'cuda')}; on a CPU-only host "
                           f"this raises AssertionError: Torch not compiled with CUDA enabled{other}", hit["row"], row)
        later = _request_after_literal(finding, result, events, lines)
        if later is not None:
            hit, literal = later
            return verdict("confirmed", f"line {row} made {literal}; {VIA.get(hit.get('via'), VIA['tensor'])} at line "
                           f"{hit['row']} ({_scenario(hit)}): on a CPU-only host this raises AssertionError: "
                           "Torch not compiled with CUDA enabled", hit["row"], row)
    if finding.code in BUILT_BY_SCRIPTS:
        found = _judge_construction(finding, result, verdict)
        if found is not None:
            return found
    # a run that stopped early leaves what it did not reach undecided (the owning class's runs,
    # or any class's for code outside classes)
    stopped = [r for c in ([owner] if owner else classes) for r in c["runs"] if r["status"] in ("inconclusive", "error")]
    judge = RULE_JUDGES.get(finding.code)
    if judge is not None:
        found = judge(Case(finding, events, stopped, verdict, scopes))
        if found is not None:
            return found
    if owner is not None and owner["status"] == "not-run":
        return verdict("not-run", owner["reason"])
    if finding.code == "DEV003":
        mixes = [e for e in events if e["kind"] == "mix" and row in e["origin_rows"]]
        if mixes:
            hit = _worst(mixes)
            return verdict(hit["verdict"], f"{_scenario(hit)}: {hit['message']}", hit["row"], row)
        made = [e for e in events if e["kind"] == "factory" and e["row"] == row]
        if made and all(e.get("device") != "cpu" for e in made):
            return verdict("not-reproduced", f"the tensor made at line {row} was already on the device "
                           f"({made[0].get('device')}): its data was a tensor there", None, row)
        if not stopped and made:
            return verdict("not-reproduced", f"the tensor made at line {row} never met a tensor on another device", None, row)
    elif finding.code == "DEV004":
        name = _attribute(finding)
        behind, mixes = _left_behind(name, row, owner, classes)
        if behind:
            if mixes:
                hit = _worst(mixes)
                return verdict(hit["verdict"], f"self.{name} stayed on cpu when the module moved; {_scenario(hit)}: "
                               f"{hit['message']}", hit["row"], behind[0]["origin_row"] or row)
            if not stopped:
                return verdict(
                    "not-reproduced", f"self.{name} stayed on cpu when the module moved "
                    f"({_scenario(behind[0])}), but never met a tensor on another device",
                    None, behind[0]["origin_row"] or row)
        # a lazy cache shows only in the scenario with a first forward on the CPU: if that run
        # stopped, the finding is undecided
        cached = [c["cached"] for c in ([owner] if owner else classes) if c.get("cached", {}).get("status") in ("error", "inconclusive")]
        lazy = (scopes).method_at(row) != "__init__"
        if cached and lazy and not stopped and not behind:
            return verdict("inconclusive", cached[0]["reason"], cached[0].get("row"))
    if owner is not None and stopped:
        return verdict("inconclusive", stopped[0]["reason"], stopped[0].get("row"))
    ran = _ran(result)
    outside = scopes.outside_classes(finding, events, ran)
    if outside:
        return verdict("not-run", outside)
    if not classes:
        return verdict("not-run", "the file defines no nn.Module class to run")
    if row in ran:
        return verdict("not-reproduced", f"line {row} ran, but what it made never reached a CUDA device "
                       "(no CUDA request, no tensor on another device)", None, row)
    copies = _host_copies(owner, scopes.function_span(row))
    if copies:
        return verdict("inconclusive", f"line {row} did not run, but on the stand-in the copies to the host at line "
                       f"{copies} hold zeros, so a branch on their values may have gone another way", None)
    return verdict("not-reached", f"line {row} did not run when the file's modules were built, moved and run")


VIA = {"module": "the module was moved there", "tensor": "a tensor was moved there", "factory": "a tensor was made there"}


def _ran(result: dict) -> dict[int, int]:
    """Rows of the user's file that executed, each with the clock at its first execution."""
    first: dict[int, int] = {}
    sinks = [result.get("import_lines", [])] + [rows for c in result.get("classes", []) for rows in c.get("lines", {}).values()]
    for rows in sinks:
        for row, seq in rows:
            first[row] = min(seq, first.get(row, seq))
    return first


def _literal(finding: engine.Finding, lines: list[str]) -> Optional[str]:
    """The device string a DEV001/DEV005 finding points at ("cuda", "cuda:0"), if it is a literal."""
    line = lines[finding.row - 1] if 0 < finding.row <= len(lines) else ""
    match = re.match(r"""\s*(['"])(cuda(?::\d+)?)\1""", line[finding.column - 1:])
    if match is None:
        match = re.search(r'device "(cuda(?::\d+)?)"', finding.message)
    return match.group(2 if match.lastindex == 2 else 1) if match else None


def _request_after_literal(finding: engine.Finding, result: dict, events: list[dict],
                           lines: list[str]) -> Optional[tuple[dict, str]]:
    """A CUDA request for the very device a literal names, made after the literal's line ran
    (a helper that returns the device, a module later moved there)."""
    literal = _literal(finding, lines)
    first = _ran(result).get(finding.row)
    if literal is None or first is None:
        return None
    for event in events:
        if (event["kind"] == "cuda-request" and event.get("device") == literal and event.get("row") is not None
                and event.get("seq", -1) >= first):
            return event, literal
    return None


def _left_behind(name: str, row: int, owner: Optional[dict], classes: list[dict]) -> tuple[list[dict], list[dict]]:
    """Where `self.NAME` of the finding's class stayed on the CPU, and the mixes it took part in,
    from each class run alone: another class's `self.NAME` is another tensor."""
    behind: list[dict] = []
    mixes: list[dict] = []
    for run in classes:
        mine = [e for e in run["events"] if e["kind"] == "left-behind" and e["attr"] == name
                and (owner is None or owner["class"] in (e["module"], run["class"]))]
        if not mine:
            continue
        origins = {e["origin_row"] for e in mine} | {row}
        behind += mine
        mixes += [e for e in run["events"] if e["kind"] == "mix" and (name in e["attrs"] or origins & set(e["origin_rows"]))]
    return behind, mixes


def _worst(events: list[dict]) -> dict:
    return next((e for e in events if e["verdict"] == "confirmed"), events[0])


def _scenario(event: dict) -> str:
    return SCENARIO_NAMES.get(event.get("scenario"), event.get("scenario", "during the run"))


def _attribute(finding: engine.Finding) -> str:
    match = re.search(r"`self\.(\w+)`", finding.message)
    return match.group(1) if match else ""


def _judge_input(case: Case) -> Optional[Verdict]:
    """DEV007: a CPU value (made here, or used here) that meets a placed one."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    mixes = case.mixes_from(rows) or [e for e in case.of_kind("mix") if e["row"] == row]
    if mixes:
        hit = _worst(mixes)
        return case.verdict(hit["verdict"], f"{_scenario(hit)}: {hit['message']}", hit["row"], row)
    made = case.of_kind("factory", rows)
    if made and all(e.get("device") != "cpu" for e in made):
        return case.verdict("not-reproduced", f"the tensor made at line {row} was already on the device ({made[0].get('device')})", None, row)
    if made and not case.stopped:
        return case.verdict("not-reproduced", f"the tensor made at line {row} never met a tensor on another device", None, row)
    return None


NUMPY_ERROR = ("TypeError: can't convert {device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
               "memory first.")


def _judge_numpy(case: Case) -> Optional[Verdict]:
    """DEV008: `.numpy()` called on a tensor on the device."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    calls = case.of_kind("numpy", rows)
    on_device = [e for e in calls if not e["device"].startswith("cpu")]
    if on_device:
        hit = on_device[0]
        return case.verdict("confirmed", f"{_scenario(hit)}: .numpy() got a tensor on {hit['device']}; on CUDA this raises "
                            + NUMPY_ERROR.format(device=hit["device"]), hit["row"], row)
    failed = [e for e in case.of_kind("cuda-failure", rows) if "numpy" in e.get("message", "")]
    if failed:
        return case.verdict("confirmed", f"{_scenario(failed[0])}: {failed[0]['message']}", failed[0]["row"], row)
    if calls:
        return case.verdict("not-reproduced", f"the .numpy() at line {row} got a tensor on the CPU", calls[0]["row"], row)
    return None


def _judge_hidden(case: Case) -> Optional[Verdict]:
    """DEV009: modules in a plain container that the move and `parameters()` do not see."""
    row = case.finding.row
    name = _attribute(case.finding)
    hidden = [e for e in case.of_kind("hidden") if e["attr"] == name]
    if not hidden:
        return None
    left = [e for e in hidden if "cpu" in e["devices"]]
    if left:
        h = left[0]
        held = ", ".join(h["items"])
        said = (f"{_scenario(h)}, the {_count(h['tensors'], 'tensor')} ({_count(h['numel'], 'value')}) of the {held} in self.{name} "
                f"stayed on cpu, and model.parameters() does not list them")
        mixes = [e for e in case.of_kind("mix") if name in e["attrs"]]
        if mixes:
            hit = _worst(mixes)
            return case.verdict("confirmed", f"{said}; {_scenario(hit)}: {hit['message']}", hit["row"], row)
        return case.verdict("confirmed", said, None, row)
    h = hidden[0]
    if h["tensors"]:
        return case.verdict("not-reproduced", f"the {_count(h['tensors'], 'tensor')} in self.{name} were on {', '.join(h['devices'])} "
                            f"already, though model.parameters() does not list them", None, row)
    return case.verdict("not-reproduced", f"the {', '.join(h['items'])} in self.{name} hold no parameters or buffers: the "
                        f"move has nothing to leave behind (.train()/.eval() still skip them)", None, row)


def _host_copies(owner: Optional[dict], function: tuple[int, int]) -> str:
    """The lines where the stand-in served a copy to the host (zeros: meta tensors hold no data),
    when the function around the unreached line ran: its other lines left events."""
    events = (owner or {}).get("events", [])
    if not any(function[0] <= (e.get("row") or 0) <= function[1] for e in events):
        return ""
    return ", ".join(str(r) for r in sorted({e["row"] for e in events if e["kind"] == "host-copy"}))


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _judge_discarded(case: Case) -> Optional[Verdict]:
    """DEV010: a move whose copy is dropped, so the tensor stays where it was."""
    row = case.finding.row
    moves = case.of_kind("tensor-move", case.scopes.call_rows(row))
    copies = [e for e in moves if e["copied"]]
    if copies:
        c = copies[0]
        said = f".{c['method']}() at line {c['row']} returned a copy on {c['to']}, and the tensor itself stayed on {c['stayed']}"
        mixes = case.mixes_from({c["origin_row"]}) if c["origin_row"] is not None else []
        if mixes:
            hit = _worst(mixes)
            return case.verdict(hit["verdict"], f"{said}; {_scenario(hit)}: {hit['message']}", hit["row"], c["origin_row"])
        return case.verdict("confirmed", f"{_scenario(c)}: {said}", c["row"], c["origin_row"])
    if moves:
        m = moves[0]
        return case.verdict("not-reproduced", f"the tensor was on {m['stayed']} already: .{m['method']}() returned it as it "
                            "was, so the dropped result changed nothing", m["row"], row)
    return None


def _judge_cuda_api(case: Case) -> Optional[Verdict]:
    """DEV011: a torch.cuda call that raises on a host without CUDA."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    calls = case.of_kind("cuda-api", rows)
    if calls:
        hit = calls[0]
        name = hit["name"]
        error = f"{cuda_api.RAISES_WITHOUT_CUDA.get(name, 'an error')}: {cuda_api.MESSAGES.get(name, '')}".rstrip(": ")
        return case.verdict("confirmed", f"{_scenario(hit)}: {name}() was called; on a CPU-only host (the CPU build of "
                            f"torch) it raises {error}", hit["row"], row)
    failed = case.of_kind("cuda-failure", rows)
    if failed:
        return case.verdict("confirmed", f"{_scenario(failed[0])}: {failed[0]['message']}", failed[0]["row"], row)
    return None


def _judge_stale_device(case: Case) -> Optional[Verdict]:
    """DEV012: `self.NAME` still names the device of `__init__` after the module moved."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    name = _attribute(case.finding)
    mixes = [e for e in case.mixes_from(rows) if e["scenario"] != "moved-back"]
    if mixes:
        hit = _worst(mixes)
        return case.verdict(hit["verdict"], f"the tensor placed with self.{name} at line {row} was made on cpu, where the "
                            f"module was built, after the module moved; {_scenario(hit)}: {hit['message']}", hit["row"], row)
    for i, made in enumerate(case.events):
        placed = made.get("device") if made["kind"] == "factory" else made.get("to") if made["kind"] == "tensor-move" else None
        if placed not in (None, "cpu") and made["scenario"] == "moved-back" and made["row"] in rows:
            after = [e for e in case.events[i:] if e["kind"] == "mix" and e["scenario"] == "moved-back"]
            if after:
                hit = _worst(after)
                return case.verdict(hit["verdict"], f"{_scenario(hit)}: the tensor placed with self.{name} at line {row} was "
                                    f"made on the GPU while the weights were on cpu: {hit['message']}", hit["row"], row)
    made = [e for e in case.of_kind("factory", rows) if e["scenario"] != "moved-back"]
    if made and not case.stopped:
        return case.verdict("not-reproduced", f"the tensor placed with self.{name} at line {row} never met a tensor on "
                            "another device", None, row)
    # an op that checks devices itself (`meshgrid expects all tensors to have the same device`)
    # stopped the run in this method, after the line made a CPU tensor there
    if any(e.get("device") == "cpu" for e in made):
        start, end = case.scopes.function_span(row)
        for run in case.stopped:
            if _DEVICE_ERROR.search(run.get("reason") or "") and row <= (run.get("row") or 0) <= end:
                return case.verdict("confirmed", f"the tensor placed with self.{name} at line {row} was made on cpu, "
                                    f"where the module was built, after the module moved; {run['reason']}", run["row"], row)
    return None


# The words of torch's own device checks: "Expected all tensors to be on the same device", "meshgrid
# expects all tensors to have the same device", "found at least two devices".
_DEVICE_ERROR = re.compile(r"(on|have) the same device|at least two devices")


def _judge_built_in_forward(case: Case) -> Optional[Verdict]:
    """DEV013: the weights a module built at forward time makes, on the CPU, meeting the input. A
    parameter loses the record of the line that made it, so a mix later in the function that no
    other line made counts too."""
    row = case.finding.row
    rows = case.scopes.call_rows(row)
    made = case.of_kind("factory", rows)
    on_cpu = [e for e in made if e.get("device") == "cpu"]
    first, last = case.scopes.function_span(row)
    mixes = case.mixes_from(rows) or ([e for e in case.of_kind("mix") if not e["origin_rows"] and row <= e["row"] <= last]
                                      if on_cpu else [])
    if mixes:
        hit = _worst(mixes)
        return case.verdict(hit["verdict"], f"the module built at line {row} made its weights on cpu; {_scenario(hit)}: "
                            f"{hit['message']}", hit["row"], row)
    if made and not on_cpu:
        return case.verdict("not-reproduced", f"the module built at line {row} made its weights on {made[0].get('device')}",
                            None, row)
    if made and not case.stopped:
        return case.verdict("not-reproduced", f"the weights made at line {row} never met a tensor on another device", None, row)
    return None


# --- DEV014, DEV015: a module a script builds ------------------------------------------------------
BUILT_BY_SCRIPTS = ("DEV014", "DEV015")


def constructions(tree: Optional[ast.Module], source: str, findings: Iterable[engine.Finding]) -> list[dict]:
    """The construction each DEV014/DEV015 finding reports, as the text of its expression (the
    value set as the new attribute, or the module built and never moved), for the child to build;
    `tree`: `source` parsed."""
    wanted = [f for f in findings if f.code in BUILT_BY_SCRIPTS]
    if not wanted or tree is None:
        return []
    at: dict[tuple[int, int], list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Call, ast.Assign)):
            at.setdefault((node.lineno, node.col_offset), []).append(node)
    found = []
    for f in wanted:
        built = _construction(at.get((f.row, f.column - 1), []))
        text = ast.get_source_segment(source, built) if built is not None else None
        if text:
            found.append({"row": built.lineno, "finding_row": f.row, "source": text})
    return found


def _construction(nodes: list) -> Optional[ast.AST]:
    """The module built at a finding's position: an assignment's value (`model.fc = nn.Linear(...)`),
    the module given to `setattr`/`add_module`, or the call itself (not a `DataParallel` wrapper:
    what it wraps is built elsewhere)."""
    assign = next((n for n in nodes if isinstance(n, ast.Assign)), None)
    if assign is not None:
        return assign.value
    calls = sorted((n for n in nodes if isinstance(n, ast.Call)), key=lambda n: (n.end_lineno, n.end_col_offset))
    call = calls[0] if calls else None  # the innermost of those starting here: `nn.Linear(...)` of `nn.Linear(...).double()`
    if call is None:
        return None
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name in ("setattr", "add_module") and call.args:
        return call.args[-1]
    return None if name.endswith("DataParallel") else call


def _judge_construction(finding: engine.Finding, result: dict, verdict) -> Optional[Verdict]:
    built = next((c for c in result.get("constructions", []) if c["finding_row"] == finding.row), None)
    if built is None:
        return None
    row = built["row"]
    if built["status"] in ("confirmed", "benign"):
        on_cpu = ", ".join(built["on_cpu"][:4]) + (", ..." if len(built["on_cpu"]) > 4 else "")
        return verdict(built["status"], f"the module built at line {row} holds {on_cpu} on cpu; called on inputs on the "
                       f"device ({built['source']}: {_shapes(built['inputs'])}): {built['message']}", row, row)
    return verdict(built["status"], built["reason"], None, row)


def _shapes(inputs: list) -> str:
    return ", ".join("x".join(map(str, i["shape"])) + (f" {i['dtype']}" if i.get("dtype") not in (None, "float32") else "")
                     if isinstance(i, dict) and "shape" in i else str(i) for i in inputs)


RULE_JUDGES = {
    "DEV007": _judge_input,
    "DEV008": _judge_numpy,
    "DEV009": _judge_hidden,
    "DEV010": _judge_discarded,
    "DEV011": _judge_cuda_api,
    "DEV012": _judge_stale_device,
    "DEV013": _judge_built_in_forward,
}
