"""The runs the confirm child makes of one module class (built, moved, run in training and eval
mode; run on the CPU first, then moved; built for the GPU, then moved back; with real values
where the stand-in stopped) and of a module a script builds (DEV014, DEV015)."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any, Optional

import torch

from devlint.confirm.inputs import (
    constructible, data_dependent, describe_inputs, input_guesses, make_inputs, make_kwargs, user_frame_row,
)
from devlint.confirm.recorders import (
    NN_MODULE_STATE, STAND_IN, DispatchRecorder, FunctionRecorder, Recorder, _container_items, _shown,
)

CACHED_RUN = "with a first forward on the CPU, then a move"


def left_behind(model: torch.nn.Module, target: str, rec: Recorder) -> list[dict]:
    """Plain tensor attributes that `model.to(target)` did not move."""
    found = []
    for module in model.modules():
        for name, value in vars(module).items():
            values = value if isinstance(value, (list, tuple)) else list(value.values()) if isinstance(value, dict) else [value]
            for tensor in values:
                if isinstance(tensor, torch.Tensor) and not isinstance(tensor, torch.nn.Parameter) and tensor.device.type == "cpu":
                    rec.attr_names.setdefault(tensor, set()).add(name)
                    found.append({"attr": name, "module": type(module).__name__, "origin_row": rec.origin.get(tensor)})
    return found


def run_class(cls, spec: dict, job: dict, user_module, rec: Recorder) -> dict:
    user_file = rec.user_file
    target = rec.target
    outcome: dict[str, Any] = {"class": cls.__name__, "status": "ran", "runs": []}
    kwargs = spec.get("init_kwargs")
    if kwargs is None:
        hook = getattr(user_module, "devlint_init_kwargs", None)
        kwargs = hook(cls) if callable(hook) else None
    if kwargs is None and not constructible(cls):
        outcome.update(status="not-run", reason=f"cannot build {cls.__name__}: its constructor needs arguments; "
                       f'add [tool.devlint.confirm.classes.{cls.__name__}] init-kwargs = {{...}}')
        return outcome
    rec.scenario = "build"
    try:
        with FunctionRecorder(rec, params_on_stand_in=target == STAND_IN), DispatchRecorder(rec):
            model = cls(**(kwargs or {}))
    except BaseException as exc:  # noqa: BLE001 - user code
        outcome.update(status="not-run", reason=f"constructing {cls.__name__}() raised {type(exc).__name__}: {exc}",
                       row=user_frame_row(exc, user_file))
        return outcome
    # the sizes the extra scenarios and the value stand-in are gated on, known once built
    outcome["params"] = sum(p.numel() for p in model.parameters())
    outcome["buffers"] = sum(b.numel() for b in model.buffers())
    rec.scenario = "move"
    with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec):
        model.to(target if target == STAND_IN else "cuda")  # noqa: DEV005 (--device cuda asks for it)
    for item in left_behind(model, target, rec):
        rec.event("left-behind", **item)
    hidden_modules(model, rec)
    specs = spec.get("inputs")
    guesses = [("configuration", specs)] if specs else input_guesses(model, user_module, cls)
    if not guesses:
        outcome.update(status="not-run", reason=f"no inputs for {cls.__name__}.forward: add "
                       f"[tool.devlint.confirm.classes.{cls.__name__}] input-shapes = [[...]], or a "
                       f"devlint_example_inputs(cls) function to {Path(user_file).name}")
        return outcome
    modes = {"train": [True], "eval": [False], "both": [True, False]}[job.get("mode", "both")]
    device = STAND_IN if target == STAND_IN else "cuda"  # noqa: DEV005
    last_error = None
    for source, specs in guesses:
        runs = []
        try:
            for training in modes:
                model.train(training)
                rec.scenario = "train" if training else "eval"
                inputs = make_inputs(specs, device)
                extra = make_kwargs(spec.get("forward_kwargs") or {}, device)
                with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec), torch.no_grad():
                    model(*inputs, **extra)
                runs.append({"mode": rec.scenario, "inputs": describe_inputs(specs), "source": source, "status": "ran"})
        except BaseException as exc:  # noqa: BLE001 - user code
            row = user_frame_row(exc, user_file)
            if data_dependent(exc):
                runs.append({"mode": rec.scenario, "status": "inconclusive", "row": row,
                             "reason": f"data-dependent code stopped the stand-in run at line {row}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
            elif "CUDA" in str(exc) or "cuda" in str(exc):
                rec.event("cuda-failure", row=row, message=f"{type(exc).__name__}: {exc}")
                runs.append({"mode": rec.scenario, "status": "ran", "source": source})
            elif not runs and (source, specs) != guesses[-1]:
                last_error = f"{type(exc).__name__}: {exc}"
                continue  # the guess did not fit the model: try the next one
            else:
                runs.append({"mode": rec.scenario, "status": "error", "row": row,
                             "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
        outcome["runs"] = runs
        if all(r["status"] == "ran" for r in runs):
            cached = _cached_then_moved(cls, kwargs, specs, device, rec, outcome["params"])
            if cached is not None:
                outcome["cached"] = cached
            _built_for_device_then_moved_back(cls, kwargs, specs, rec)
        return outcome
    outcome.update(status="not-run", reason=f"no input fitted {cls.__name__}.forward (last: {last_error})")
    return outcome


def _cached_then_moved(cls, kwargs, specs, device: str, rec: Recorder, size: int,
                       max_params: int = 20_000_000) -> Optional[dict]:
    """The bug a single placement hides: a cache filled by a first forward on the CPU, then the
    model moved. Real CPU compute, so only for models of modest size. Every cache left behind is
    reported (the recorder heals each mix, so one run meets them all); None when the scenario
    ran through, else why it stopped or was skipped."""
    probe = Recorder(rec.user_file, STAND_IN)
    rec.scenario = "cached"  # the lines of this scenario, the CPU forward's included
    if size > max_params:
        return {"status": "skipped", "reason": f"{size:,} parameters: a first forward on the CPU would cost real compute"}
    stage = "building it for the CPU"
    try:
        model = cls(**(kwargs or {}))
        stage = "its first forward on the CPU"
        # provenance of what the CPU forward makes, so that a slice of a cache still names it
        with FunctionRecorder(probe, params_on_stand_in=False), torch.no_grad():
            model(*make_inputs(specs, "cpu"))
        for tensor, row in probe.origin.items():
            rec.origin[tensor] = row
        stage = "the move"
        with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec):
            model.to(device)
        for item in left_behind(model, device, rec):
            rec.event("left-behind", **item)
        hidden_modules(model, rec)
        stage = "the forward after the move"
        with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec), torch.no_grad():
            model(*make_inputs(specs, device))
    except BaseException as exc:  # noqa: BLE001 - user code; the verdicts give the reason
        row = user_frame_row(exc, rec.user_file)
        first = str(exc).splitlines()[0] if str(exc) else ""
        where = f" at line {row}" if row else ""
        return {"status": "inconclusive" if data_dependent(exc) else "error", "row": row,
                "reason": f"the run {CACHED_RUN} stopped in {stage}{where}: {type(exc).__name__}: {first}"}
    return None


def hidden_modules(model: torch.nn.Module, rec: Recorder) -> None:
    try:
        _hidden_modules(model, rec)
    except Exception:  # noqa: BLE001 - user containers of any kind: the run goes on without this evidence
        pass


def _hidden_modules(model: torch.nn.Module, rec: Recorder, max_values: int = 50_000_000) -> None:
    """Modules and parameters in plain containers (DEV009): `model.to()` and `model.parameters()`
    do not see them. On the stand-in, torch.nn's layers were built straight on the stand-in, so the
    hidden ones are put back on the CPU, where the build would have left them. Mixes made inside a
    hidden module's forward name its attribute. Above `max_values` they stay on the stand-in
    (no real memory is spent) and are reported on the CPU all the same."""
    known = {id(t) for t in model.parameters()} | {id(t) for t in model.buffers()}
    budget = max_values
    for owner in model.modules():
        for name, value in list(vars(owner).items()):
            if name in NN_MODULE_STATE:
                continue
            items = _container_items(value)
            modules = [i for i in items if isinstance(i, torch.nn.Module)]
            loose = [i for i in items if isinstance(i, torch.nn.Parameter) and id(i) not in known]
            if not modules and not loose:
                continue
            for module in modules:
                tensors = list(module.parameters()) + list(module.buffers())
                size = sum(t.numel() for t in tensors)
                if (rec.target == STAND_IN and tensors and all(id(t) not in known for t in tensors)
                        and any(t.device.type == STAND_IN for t in tensors) and size <= budget):
                    budget -= size
                    module.to_empty(device="cpu")
                    with torch.no_grad():
                        for t in list(module.parameters()) + list(module.buffers()):
                            t.zero_()
            hidden = [t for m in modules for t in (*m.parameters(), *m.buffers()) if id(t) not in known] + loose
            if modules and not hidden and any(id(t) in known for m in modules for t in m.parameters()):
                continue  # references to registered submodules
            for tensor in hidden:
                rec.attr_names.setdefault(tensor, set()).add(name)
            for module in modules:
                _tag_mixes(module, name, rec)
            rec.event("hidden", attr=name, module=type(owner).__name__,
                      items=sorted({type(m).__name__ for m in modules} | ({"Parameter"} if loose else set())),
                      count=len(modules) + len(loose), tensors=len(hidden), numel=sum(t.numel() for t in hidden),
                      devices=sorted({"cpu" if rec.target == STAND_IN and t.device.type == STAND_IN else _shown(t.device)
                                      for t in hidden}))


def _tag_mixes(module: torch.nn.Module, attr: str, rec: Recorder) -> None:
    """Mixes recorded while `module` runs its forward are charged to `attr` as well."""
    starts: list[int] = []

    def enter(_module, _inputs):
        starts.append(len(rec.events))

    def leave(_module, _inputs, _output):
        for event in rec.events[starts.pop() if starts else 0:]:
            if event["kind"] == "mix" and attr not in event["attrs"]:
                event["attrs"] = sorted([*event["attrs"], attr])

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)


def _device_parameters(cls) -> list[str]:
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if "device" in p.name.lower() and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _built_for_device_then_moved_back(cls, kwargs, specs, rec: Recorder, max_params: int = 20_000_000) -> None:
    """DEV012 the other way round: built for the GPU (`device="cuda"` for each constructor
    parameter named for a device), then moved back to the CPU, where an attribute that kept the
    GPU device makes its tensors away from the weights. Real CPU compute, so for modest models."""
    names = [n for n in _device_parameters(cls) if n not in (kwargs or {})]
    if not names:
        return
    probe = Recorder(rec.user_file, rec.target)
    probe.scenario = "moved-back"
    try:
        with FunctionRecorder(probe, params_on_stand_in=rec.target == STAND_IN), DispatchRecorder(probe):
            model = cls(**(kwargs or {}), **{n: "cuda" for n in names})  # noqa: DEV005 (the scenario asks for it)
        if sum(p.numel() for p in model.parameters()) > max_params:
            return
        if rec.target == STAND_IN:
            model.to_empty(device="cpu")  # meta tensors hold nothing to copy; where they go is what counts
        else:
            model.to("cpu")
        probe.events.append({"kind": "moved-back", "scenario": "moved-back", "params": names})
        with FunctionRecorder(probe, params_on_stand_in=False), DispatchRecorder(probe), torch.no_grad():
            model(*make_inputs(specs, "cpu"))
    except BaseException:  # noqa: BLE001 - a best-effort extra scenario
        pass
    rec.events.extend(e for e in probe.events if e["kind"] in ("moved-back", "factory", "tensor-move", "mix"))


def run_construction(item: dict, user_module, rec: Recorder) -> dict:
    """Build the module a finding points at as its line builds it (the expression alone, with the
    file's module-level names), then call it on inputs on the device, as the script's code does:
    CPU weights meet them. A construction that needs names of the code around it is not run."""
    row, text = item["row"], item["source"]
    done: dict[str, Any] = {"row": row, "finding_row": item["finding_row"]}
    try:
        tree = ast.parse(text.strip(), mode="eval")
        ast.increment_lineno(tree, row - 1)  # the line the module's tensors are made on is the user's
        code = compile(tree, rec.user_file, "eval")
    except SyntaxError as exc:
        return {**done, "status": "not-run", "reason": f"cannot read the construction at line {row}: {exc}"}
    rec.scenario = "construction"
    try:
        with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec):
            module = eval(code, dict(vars(user_module)))  # noqa: S307 - the user's own expression, as their script runs it
    except NameError as exc:
        return {**done, "status": "not-run", "reason": f"the module built at line {row} needs {exc.name!r}, a name of "
                "the code around it; confirm builds a construction made only of the file's module-level names"}
    except BaseException as exc:  # noqa: BLE001 - user code
        return {**done, "status": "not-run", "reason": f"building the module at line {row} raised {type(exc).__name__}: {exc}"}
    if not isinstance(module, torch.nn.Module):
        return {**done, "status": "not-run", "reason": f"line {row} does not build an nn.Module ({type(module).__name__})"}
    tensors = [*module.named_parameters(), *module.named_buffers()]
    done["on_cpu"] = [name for name, t in tensors if t.device.type == "cpu"]
    if not done["on_cpu"]:
        where = sorted({t.device.type for _, t in tensors}) or ["nowhere: it holds no tensor"]
        return {**done, "status": "not-reproduced", "reason": f"the module built at line {row} holds its tensors on {', '.join(where)}"}
    device = STAND_IN if rec.target == STAND_IN else "cuda"  # noqa: DEV005 (--device cuda asks for it)
    for source, specs in construction_inputs(module, user_module):
        before = len(rec.events)
        try:
            inputs = make_inputs(specs, device)
            with FunctionRecorder(rec, params_on_stand_in=False), DispatchRecorder(rec), torch.no_grad():
                module(*inputs)
        except BaseException as exc:  # noqa: BLE001 - user code
            if "device" not in str(exc):
                continue  # the guess did not fit the module
            return {**done, "status": "confirmed", "inputs": describe_inputs(specs), "source": source,
                    "message": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
        mixes = [e for e in rec.events[before:] if e["kind"] == "mix"]
        if mixes:
            hit = next((e for e in mixes if e["verdict"] == "confirmed"), mixes[0])
            return {**done, "status": hit["verdict"], "inputs": describe_inputs(specs), "source": source,
                    "message": hit["message"]}
        return {**done, "status": "not-reproduced", "inputs": describe_inputs(specs), "source": source,
                "reason": "called on inputs on the device, it mixed nothing"}
    return {**done, "status": "inconclusive", "reason": f"no input fitted the module built at line {row}"}


def construction_inputs(module: torch.nn.Module, user_module) -> list[tuple[str, list[dict]]]:
    """Inputs for a module a script builds: a weighted loss takes scores and targets of its
    number of classes; any other module, what confirm guesses for a module class."""
    if isinstance(module, torch.nn.modules.loss._Loss):
        weight = getattr(module, "weight", None)
        weight = weight if isinstance(weight, torch.Tensor) else getattr(module, "pos_weight", None)
        classes = weight.numel() if isinstance(weight, torch.Tensor) else 2
        return [("scores and class targets", [{"shape": [2, classes]}, {"shape": [2], "dtype": "int64"}]),
                ("scores and targets", [{"shape": [2, classes]}, {"shape": [2, classes]}])]
    return input_guesses(torch.nn.Sequential(module), user_module, type(module))


STAND_IN_VALUES = "stand-in (meta, values)"
# `--values auto` re-runs a class with values only below this size: a value run computes for
# real on the CPU and holds every parameter (4 bytes each in float32) twice over.


VALUES_MAX_PARAMS = 50_000_000


def run_with_values_policy(cls, spec: dict, job: dict, user_module, rec: Recorder, values: str) -> tuple[dict, Recorder]:
    """`values`: never (meta only), always (values only), auto (meta, and values again for a class
    whose meta run stopped, mostly on code that needs data; the value run's events and lines
    replace the meta run's). Returns the outcome and the recorder of the run that counts."""
    if values == "always":
        return _run_holding_values(cls, spec, job, user_module, rec), rec
    outcome = run_class(cls, spec, job, user_module, rec)
    outcome["events"] = rec.events
    stopped = any(r["status"] in ("inconclusive", "error") for r in outcome["runs"])
    # the data-less run served the user's copies to the host with zeros: its branches may not be the real ones
    zeros = any(e["kind"] == "host-copy" for e in rec.events)
    if values == "auto" and (stopped or zeros):
        if "params" in outcome and outcome["params"] + outcome["buffers"] <= VALUES_MAX_PARAMS:
            again_rec = Recorder(rec.user_file, rec.target)
            again_rec.owner = rec.owner
            again = _run_holding_values(cls, spec, job, user_module, again_rec)
            if again["status"] == "ran":
                return again, again_rec
    return outcome, rec


def _run_holding_values(cls, spec: dict, job: dict, user_module, rec: Recorder) -> dict:
    from devlint.confirm.values import value_run

    with value_run(rec):
        outcome = run_class(cls, spec, job, user_module, rec)
    outcome["events"] = rec.events
    outcome["device"] = STAND_IN_VALUES
    return outcome


def _span(cls) -> list[int]:
    try:
        lines, start = inspect.getsourcelines(cls)
        return [start, start + len(lines) - 1]
    except (OSError, TypeError):
        return [0, 0]
