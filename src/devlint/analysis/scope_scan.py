"""Where values live in one scope, scanned in statement order (the scan behind
devlint.analysis.placements): which names the code placed on an accelerator, which hold CPU
tensors made without `device=`, loader batches, data set items, tokenizer outputs, devices."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Callable, Optional

import libcst as cst

from devlint.analysis import round_trips, values
from devlint.analysis.values import Placement, ValueModel
from devlint.core import syntax
from devlint.torchinfo import names


@dataclass(eq=False)  # one scan a scope: compared (and hashed) by identity
class ScopeScan:
    facts: object
    placed: dict[str, Placement] = field(default_factory=dict)
    factories: dict[str, cst.Call] = field(default_factory=dict)  # name -> the device-less factory it holds
    order: dict = field(default_factory=dict)  # node -> position in evaluation order
    factory_names: dict = field(default_factory=dict)  # factory call -> the name it was bound to
    root: Optional[cst.CSTNode] = None
    cpu: dict[str, "CpuValue"] = field(default_factory=dict)  # name -> the CPU value it holds (not a factory)
    loaders: dict[str, bool] = field(default_factory=dict)  # name -> yields CPU batches (False: moved by a framework)
    datasets: dict[str, bool] = field(default_factory=dict)  # name -> items on the CPU (False: built from placed tensors)
    dataset_calls: dict[str, cst.Call] = field(default_factory=dict)  # name -> the call that built the data set
    modules: set = field(default_factory=set)  # placed names known to be modules (moved in place, loaded)
    losses: set = field(default_factory=set)  # names bound to an `nn.*Loss` instance
    cpu_devices: set = field(default_factory=set)  # names bound to a CPU device
    called: set = field(default_factory=set)  # names the scope calls as functions
    tensors: set = field(default_factory=set)  # names bound to what a tensor method returns: not devices
    scalars: set = field(default_factory=set)  # names bound to Python numbers (`n = x.shape[-1]`)
    devices: set = field(default_factory=set)  # names bound to a device (`torch.device(...)`, `"cuda:0"`, `x.device`)
    # names bound to a tensor's device (`device = x.device`): that tensor's name, and where it was then
    tensor_devices: dict = field(default_factory=dict)
    loaded: set = field(default_factory=set)  # placed names bound to `torch.load(p)`: placed only as modules
    # across the file's scopes: modules the module level placed (for a function that reads the
    # global), and modules the class's methods placed as `self.NAME` (for the other methods)
    outer: dict[str, Placement] = field(default_factory=dict)
    attributes: dict[str, Placement] = field(default_factory=dict)
    self_name: Optional[str] = None
    module_names: set = field(default_factory=set)  # names known to be modules, their place not known

    def __post_init__(self) -> None:
        scan = weakref.proxy(self)  # a bound method kept by the model would be a reference cycle
        self.model = ValueModel(self.facts, placed=self.placed, factories=self.factories,
                                module_output=lambda call: scan._module_output(call))

    def _module_output(self, call: cst.Call) -> Optional[Placement]:
        """Where a module's output lives: where this scope, the class or the module level placed
        the module (`model(x)`, `self.net(x)`), or, for a module whose place is not known, where its
        input is (`def evaluate(model, x, device)`: `model(x.to(device))` is on the device)."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        if isinstance(func, cst.Name):
            if func.value in self.placed:
                return self.placed[func.value]
            if func.value in self.module_names:
                return next(filter(None, (self.placement_of(a.value) for a in call.args if not a.star)), None)
            return None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == self.self_name:
            return self.attributes.get(func.attr.value)
        return None

    def device_less_factory(self, expr: cst.BaseExpression) -> Optional[cst.Call]:
        return self.model.device_less_factory(expr)

    def placement_of(self, expr: cst.BaseExpression) -> Optional[Placement]:
        if isinstance(expr, cst.Name) and expr.value in self.loaded:
            return None  # `torch.load(p)` met as a tensor (`torch.cat((t, chunk))`): placed as saved, not known
        if isinstance(expr, cst.BinaryOperation):
            return self.placement_of(expr.left) or self.placement_of(expr.right)
        if isinstance(expr, cst.Subscript):
            base = expr
            while isinstance(base, cst.Subscript):
                base = base.value
            if isinstance(base, cst.Name) and base.value in self.modules:
                return None  # `model[0]`, `torch.load(p)[key]`: a submodule or a checkpoint's entry, not an output
        placement = self.model.placement_of(expr)
        if placement is None or placement.device is None:
            return placement
        device = placement.device
        if isinstance(device, cst.Name):
            name = device.value
            if name in self.cpu_devices or name in self.cpu or name in self.factories:
                return None  # a CPU device, or a CPU tensor's
            if name in self.tensor_devices:
                owner, then = self.tensor_devices[name]
                if self.placed.get(owner) is not then:
                    # read off x before this scope moved x: the place x came from, which values
                    # are sent back to (`out.to(origin)`), not where this code puts them
                    return then
            if name in self.placed and name not in self.modules:
                return self.placed[name]  # `.to(x)`: where x is
            if name in self.tensors:
                return None  # `.to(t)` with a tensor t not placed here: where t is, not known
        elif isinstance(device, cst.Attribute) and device.attr.value == "device":
            owner = device.value
            if isinstance(owner, cst.Name) and owner.value not in _SETTINGS:
                return self.placement_of(owner)  # `.to(x.device)`: placed only with the tensor x
        return placement

    def cpu_value(self, expr: cst.BaseExpression) -> Optional["CpuValue"]:
        """The CPU value expr holds (made here without `device=`, from a loader, a data set, a
        tokenizer, `.cpu()`), or None. 0-dim scalars are not counted."""
        factory = self.device_less_factory(expr)
        if factory is not None:
            scalar = values.is_scalar_factory(factory, self.facts, lambda: frozenset(self.scalars))
            return None if scalar else CpuValue(FACTORY, factory, origin=factory)
        reductions = 0
        while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and self._tokenized(expr) is None
               and self.facts.resolve(expr.func) is None):
            method = expr.func.attr.value
            if method == "cpu":  # `out.mean().cpu()` is a 0-dim scalar: not counted
                return None if reductions or _is_reduction(expr.func.value) else CpuValue(HOST, origin=expr)
            if method not in names.SHAPE_METHODS and not (method == "to" and values.is_dtype_only_move(expr, self.facts)):
                return None
            if method in _REDUCTIONS and not expr.args:
                reductions += 1
            expr = expr.func.value
        found = None
        if isinstance(expr, cst.Name):
            found = self.cpu.get(expr.value)
        elif isinstance(expr, cst.Subscript):
            base = expr.value
            if isinstance(base, cst.Name) and self.datasets.get(base.value):
                found = CpuValue(DATASET, whole=True, origin=self.dataset_calls.get(base.value, expr))
            else:
                inner = self.cpu_value(base)
                found = inner.item() if inner is not None and inner.kind != FACTORY else None
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            inner = self.cpu.get(expr.value.value)
            found = inner.item() if inner is not None and inner.kind == TOKENIZER else None  # `inputs.input_ids`
        elif isinstance(expr, cst.BinaryOperation):
            left, right = self.cpu_value(expr.left), self.cpu_value(expr.right)
            if left is not None and (right is not None or syntax.is_number_literal(expr.right)):
                found = left
            elif right is not None and syntax.is_number_literal(expr.left):
                found = right
        elif isinstance(expr, cst.Call):
            found = self._tokenized(expr) or self._next_batch(expr)
        return None if found is None or reductions else found

    def _tokenized(self, call: cst.Call) -> Optional["CpuValue"]:
        """`tokenizer(text, return_tensors="pt")`."""
        arg = syntax.keyword(call, "return_tensors")
        return CpuValue(TOKENIZER, whole=True, origin=call) if arg is not None and syntax.string_value(arg.value) == "pt" else None

    def _next_batch(self, call: cst.Call) -> Optional["CpuValue"]:
        """`next(iter(loader))`, `next(batches)` with `batches = iter(loader)`."""
        if isinstance(call.func, cst.Name) and call.func.value == "next" and call.args:
            if self.is_loader(call.args[0].value):
                return CpuValue(LOADER, whole=True, origin=call)
        return None

    def is_loader(self, expr: cst.BaseExpression) -> bool:
        """A DataLoader built here (not handed to a framework that moves its batches), or a name
        ending in `loader`, possibly wrapped (`tqdm(loader)`, `iter(loader)`)."""
        while isinstance(expr, cst.Call) and syntax.last_name(expr.func) in names.ITERATION_WRAPPERS and expr.args:
            expr = expr.args[0].value
        if isinstance(expr, cst.Call):
            return self._cpu_loader_call(expr)
        if isinstance(expr, cst.Name) and expr.value in self.loaders:
            return self.loaders[expr.value]
        last = syntax.last_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        return last is not None and last.lower().endswith("loader")

    def _loader_given_a_device(self, call: cst.Call) -> bool:
        """`MpDeviceLoader(loader, device)`, `DeviceDataLoader(dl, device=d)`: a call handed a
        loader and the device a module here went to (or any device other than the CPU) wraps
        the loader to yield its batches on that device."""
        arguments = [a.value for a in call.args]
        if not any(self.is_loader(a) for a in arguments if not isinstance(a, cst.Call) or self._is_data_loader(a)):
            return False
        moved_with = [p.device for p in self.placed.values() if p.device is not None]
        for argument in arguments:
            for device in (e.value for e in argument.elements) if isinstance(argument, (cst.List, cst.Tuple)) else (argument,):
                if syntax.string_value(device) == "cpu" or (isinstance(device, cst.Name) and device.value in self.cpu_devices):
                    continue
                if is_device_expression(device, self.facts, self.devices) or any(device.deep_equals(m) for m in moved_with):
                    return True
        return False

    def _is_data_loader(self, call: cst.Call) -> bool:
        qualified = self.facts.resolve(call.func) or ""
        return qualified == "torch.utils.data.DataLoader" or syntax.last_name(call.func) == "DataLoader"

    def _cpu_loader_call(self, call: cst.Call) -> bool:
        if not self._is_data_loader(call):
            return False
        if syntax.keyword(call, "pin_memory_device") or _collate_moves(self.facts, syntax.keyword(call, "collate_fn")):
            return False
        dataset = syntax.keyword(call, "dataset") or next(iter(syntax.positional(call)), None)
        if dataset is not None:
            value = dataset.value
            if isinstance(value, cst.Name) and self.datasets.get(value.value) is False:
                return False
            if isinstance(value, cst.Call) and self._is_dataset(value) and self._placed_dataset(value):
                return False
        return True

    def _is_dataset(self, call: cst.Call) -> bool:
        """A torchvision data set, a class named `*Dataset`, or a class of this file deriving
        from one (`class RandomGrids(torch.utils.data.Dataset)`)."""
        qualified = self.facts.resolve(call.func) or ""
        last = syntax.last_name(call.func) or ""
        if qualified.startswith("torchvision.datasets.") or last.endswith("Dataset"):
            return True
        return any((base or "").endswith("Dataset") for info in self._classes_called(call) for base in info.base_names)

    def _placed_dataset(self, call: cst.Call) -> bool:
        """A data set built from tensors this code placed, given a device to build its items
        on (`PdeDataset(..., device=device)`; not `device="cpu"`), or one whose class, defined
        in this file, places what its `__getitem__` makes (`torch.rand(n, device="cuda")`,
        `.cuda()`, `.to(d)`). A `TensorDataset` counts too unless one of its tensors is known to be
        on the CPU: its items are rows of its tensors, wherever those live (a function's
        parameters, here)."""
        if _places(call, self.facts):
            return True
        if (self.facts.resolve(call.func) or syntax.last_name(call.func)) in _TENSOR_DATASETS \
                and not any(self.cpu_value(a.value) is not None for a in call.args):
            return True
        if any(self.placement_of(a.value) is not None for a in call.args):
            return True
        return any(
            _places(node, self.facts)
            for info in self._classes_called(call)
            for method in info.methods.get("__getitem__", ())
            for node in syntax.walk(method.body) if isinstance(node, cst.Call)
        )

    def _classes_called(self, call: cst.Call) -> list:
        """The classes of this file that the call constructs (by the name it calls)."""
        name = syntax.dotted_name(call.func)
        return [info for info in self.facts.classes.values() if info.name == name]

    # --- the scan ----------------------------------------------------------------------------
    def replay(self, scope: cst.CSTNode, events: list, on_call: list[Callable[["ScopeScan", cst.Call], None]],
               on_operator: tuple = (), outer: Optional[dict] = None, attributes: Optional[dict] = None,
               self_name: Optional[str] = None, outer_loaders: frozenset = frozenset()) -> "ScopeScan":
        """Follow the scope's recorded events in evaluation order; each call is also handed to
        `on_call` (the rules' own questions), with the scan as it stands at that call. For a
        function, `outer` and `outer_loaders`: the modules the module level placed and the loaders
        it built to yield moved batches; for a method, `self_name` and
        `attributes`: its `self` and the modules its class placed (devlint.analysis.outer_placements)."""
        self.root = scope
        if isinstance(scope, cst.FunctionDef):
            self._enter_function(scope, events, outer or {}, outer_loaders)
            self.self_name, self.attributes = self_name, attributes or {}
        # names the scope calls (`model(x)`): a tensor is not callable, so one moved is a module
        self.called = {node.func.value for kind, node in events if kind == "call" and isinstance(node.func, cst.Name)}
        for position, (kind, node) in enumerate(events):
            self.order[node] = position
            if kind == "call":
                for listener in on_call:
                    listener(self, node)
            elif kind == "bind" and node.value is not None:
                self._bind(node)
            elif kind == "expr":
                self._move_in_place(node.value)
            elif kind == "for":
                self._iterate(node)
            elif kind == "operator":
                for listener in on_operator:
                    listener(self, node)
        return self

    def _enter_function(self, function: cst.FunctionDef, events: list, outer: dict, outer_loaders: frozenset) -> None:
        """What a function knows before its first statement: the modules the module level placed
        and the loaders it built to yield moved batches, that it reads as globals (it binds no name
        of theirs), the modules its class placed as
        `self.NAME`, and which names are modules (a parameter annotated as one, a name given
        nn.Module's own methods: `model.eval()`)."""
        local = {p.name.value for p in syntax.all_params(function.params)}
        for kind, node in events:
            if kind == "bind":
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                local.update(n.value for t in targets for n in syntax.unpacked_targets(t) if isinstance(n, cst.Name))
            elif kind == "for":
                local.update(n.value for n in syntax.unpacked_targets(node.target) if isinstance(n, cst.Name))
            elif kind == "call" and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) \
                    and node.func.attr.value in _MODULE_ONLY_METHODS:
                self.module_names.add(node.func.value.value)
        for name, placement in outer.items():
            if name not in local:
                self.outer[name] = self.placed[name] = placement
                self.modules.add(name)
        for name in outer_loaders - local:
            self.loaders[name] = False
        for param in syntax.all_params(function.params):
            if param.annotation is not None and self._module_annotation(param.annotation.annotation):
                self.module_names.add(param.name.value)

    def _module_annotation(self, annotation: cst.BaseExpression) -> bool:
        """`nn.Module`, a torch.nn class, or a module class of this file."""
        qualified = self.facts.resolve(annotation) or ""
        if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1][:1].isupper():
            return True
        name = syntax.dotted_name(annotation)
        return any(info.is_module and info.name == name for info in self.facts.classes.values())

    def _moved_by_helper(self, call: cst.Call) -> None:
        """`batch_to_device(batch, device)` as a statement: a helper given a CPU value and a
        device moves it in place (the callee is not known: the value is forgotten)."""
        arguments = [a.value for a in call.args]
        devices = [syntax.last_name(call.func) or ""] + [
            syntax.last_name(v) or "" for v in arguments if isinstance(v, (cst.Name, cst.Attribute))
        ]
        if any("device" in text.lower() for text in devices):
            for value in arguments:
                if isinstance(value, cst.Name):
                    self.cpu.pop(value.value, None)
            return
        # `input_cuda(batch)` with a same-file `def input_cuda(input): input["x"] = input["x"].cuda()`
        if isinstance(call.func, cst.Name):
            for function in self.facts.module_functions(call.func.value):
                params = syntax.param_names(function.params)
                for position, arg in enumerate(syntax.positional(call)):
                    if position < len(params) and isinstance(arg.value, cst.Name) \
                            and _moves_items_in_place(function, params[position], self.facts):
                        self.cpu.pop(arg.value.value, None)

    def _iterate(self, node: cst.For) -> None:
        """`for x, y in loader:`, `for i, batch in enumerate(tqdm(loader)):`."""
        source, target = node.iter, node.target
        if isinstance(source, cst.Call) and syntax.last_name(source.func) == "enumerate" and source.args:
            source = source.args[0].value
            if isinstance(target, cst.Tuple) and len(target.elements) == 2:
                self._forget(target.elements[0].value)
                target = target.elements[1].value
        self._bind_target(target, CpuValue(LOADER, whole=True, origin=node.iter) if self.is_loader(source) else None)

    def _bind_target(self, target: cst.BaseExpression, value: Optional["CpuValue"]) -> None:
        """Bind a loop or unpacking target to a CPU value (its parts to the value's items)."""
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(element.value, value.item() if value is not None else None)
        elif isinstance(target, cst.Name):
            self._forget(target)
            if value is not None:
                self.cpu[target.value] = value

    def _forget(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._forget(element.value)
            return
        if not isinstance(target, cst.Name):
            return
        name = target.value
        for table in (self.placed, self.factories, self.cpu, self.loaders, self.datasets, self.dataset_calls,
                      self.tensor_devices):
            table.pop(name, None)
        for group in (self.modules, self.losses, self.cpu_devices, self.tensors, self.scalars, self.devices, self.loaded):
            group.discard(name)

    def _torch_tensor_result(self, value: cst.BaseExpression) -> bool:
        """`torch.cat(parts, 0)`: what a torch function returns is a tensor, not a module."""
        return isinstance(value, cst.Call) and names.returns_tensors(self.facts.resolve(value.func) or "")

    def _move_in_place(self, expr: cst.BaseExpression) -> None:
        """`model.cuda()`, `model.to(device).eval()` as a statement: a module moves in place (a
        tensor's move as a statement moves nothing: DEV010)."""
        if isinstance(expr, cst.Call) and self.cpu:
            self._moved_by_helper(expr)
        moves = []
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in names.PLACING_METHODS:
                moves.append(expr)
            expr = expr.func.value
        if not moves or not isinstance(expr, cst.Name) or expr.value in self.factories or expr.value in self.tensors:
            return
        if expr.value in self.cpu:  # `inputs.to(device)`: a tokenizer's output moves in place
            if moves[0].func.attr.value != "cpu":
                del self.cpu[expr.value]
            return
        last = moves[0]  # the outermost move decides
        if last.func.attr.value == "cpu" or (last.func.attr.value == "to" and values.to_cpu(self.facts, last)):
            self.placed.pop(expr.value, None)
        else:
            placement = self.placement_of(last)
            if placement is not None:
                self.placed[expr.value] = placement
                self.modules.add(expr.value)

    def _bind(self, node) -> None:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            self._assign(target, node.value, node)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression, node) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements) and not any(
                isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements)
            ):
                for t, v in zip(target.elements, value.elements):  # `x, y = x.to(d), y.to(d)`
                    self._assign(t.value, v.value, node)
                return
            cpu = self.cpu_value(value)
            self._bind_target(target, cpu if cpu is not None and cpu.kind != FACTORY else None)
            if values.unpacks_shape(target, value):  # `n, c, h, w = x.shape`
                self.scalars.update(e.value.value for e in target.elements)
            return
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value in self.cpu:
            # `batch[k] = v.to(device)`, `batch["x"] = batch["x"].cuda()`: the items are written back moved
            if isinstance(value, cst.Call) and values.is_move(value, self.facts) and not values.to_cpu(self.facts, value):
                del self.cpu[target.value.value]
            return
        if not isinstance(target, cst.Name):
            return
        name = target.value
        self.tensors.discard(name)
        self.scalars.discard(name)
        placement = self.placement_of(value)
        factory = self.device_less_factory(value)
        cpu = self.cpu_value(value) if placement is None and factory is None else None
        self._forget(target)
        call = value if isinstance(value, cst.Call) else None
        qualified = (self.facts.resolve(call.func) or "") if call is not None else ""
        if placement is not None:
            self.placed[name] = placement
            if _module_placement(value, self.modules) or name in self.called:
                self.modules.add(name)
        elif call is not None and qualified in names.LOADERS and not (
            syntax.keyword(call, "map_location") or len(syntax.positional(call)) > names.LOADERS[qualified]
            or round_trips.round_trip(call, self.root)  # what this process wrote comes back where it was
        ):
            self.placed[name] = Placement(None, at=call)
            self.modules.add(name)
            self.loaded.add(name)
        elif call is not None and _device_map(call) is not None:
            self.placed[name] = _device_map(call)
            self.modules.add(name)
        elif factory is not None:
            self.factories[name] = factory
            self.factory_names[factory] = name
            self.order.setdefault(factory, self.order.get(node, 0))
        elif cpu is not None:
            self.cpu[name] = cpu
        elif call is not None:
            method = syntax.last_name(call.func)
            if method in names.LOADER_PREPARING_METHODS or self._loader_given_a_device(call):
                self.loaders[name] = False
            elif self._cpu_loader_call(call) or (method == "iter" and call.args and self.is_loader(call.args[0].value)):
                self.loaders[name] = True
            elif self._is_data_loader(call):
                self.loaders[name] = False  # over accelerator tensors, or moving its batches: whatever its name
            elif self._is_dataset(call):
                self.datasets[name] = not self._placed_dataset(call)
                self.dataset_calls[name] = call
                if name.lower().endswith("loader"):
                    self.loaders[name] = False
            elif qualified.startswith("torch.nn.") and qualified.endswith("Loss"):
                self.losses.add(name)
            elif qualified == "torch.device" and call.args and syntax.string_value(call.args[0].value) == "cpu":
                self.cpu_devices.add(name)
        elif syntax.string_value(value) == "cpu":
            self.cpu_devices.add(name)
        if placement is None and factory is None and (
                _tensor_result(value, self.facts) or self._torch_tensor_result(value)):
            self.tensors.add(name)
        elif is_device_expression(value, self.facts, self.devices):
            self.devices.add(name)
            if isinstance(value, cst.Attribute) and value.attr.value == "device" and isinstance(value.value, cst.Name) \
                    and value.value.value not in _SETTINGS:
                self.tensor_devices[name] = (value.value.value, self.placed.get(value.value.value))
        elif values.is_python_scalar(value, self.facts, lambda: frozenset(self.scalars)):
            self.scalars.add(name)


# nn.Module's own methods that no tensor has: a name given one holds a module
_MODULE_ONLY_METHODS = frozenset(
    "eval parameters named_parameters state_dict load_state_dict modules named_modules children named_children".split()
)


_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "norm", "amax", "amin"})
# Names that hold settings, not tensors: `args.device` names a device.
_SETTINGS = frozenset({"self", "args", "cfg", "config", "conf", "opt", "opts", "options", "hparams", "params",
                       "settings", "accelerator", "trainer", "fabric", "training_args", "FLAGS", "flags"})
def _places(call: cst.Call, facts) -> bool:
    """A call given a device other than the CPU (`device=d`, not `device="cpu"` or None), or a
    move that is not to the host (`.cuda()`, `.to(d)`)."""
    device = syntax.keyword(call, "device")
    if device is not None:
        return syntax.string_value(device.value) != "cpu" and syntax.dotted_name(device.value) != "None"
    return values.is_move(call, facts) and not values.is_host_call(call, facts)


FACTORY, LOADER, DATASET, TOKENIZER, HOST = "factory", "loader", "dataset", "tokenizer", "host"
_TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "TensorDataset"})


@dataclass(frozen=True)
class CpuValue:
    """A CPU value: how it was made (`kind`), the factory call when it is one, and whether it is
    a whole batch or data set item (a tuple or dict that `.to()` may not move)."""

    kind: str
    factory: Optional[cst.Call] = None
    whole: bool = False
    origin: Optional[cst.CSTNode] = field(default=None, compare=False)  # where it was made (the evidence)

    def item(self) -> "CpuValue":
        return CpuValue(self.kind, origin=self.origin)


def _is_reduction(expr: cst.BaseExpression) -> bool:
    """`x.sum()`, `x.mean().detach()`: a whole-tensor reduction, a 0-dim tensor."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in _REDUCTIONS and not expr.args:
            return True
        if expr.func.attr.value not in ("detach", "float", "double", "half", "clone"):
            return False
        expr = expr.func.value
    return False


def is_device_expression(expr: cst.BaseExpression, facts, device_names=frozenset()) -> bool:
    """A device for sure: `torch.device(...)`, a device string (`"cuda:0"`, an f-string naming
    one), `x.device`, a conditional between such, or a name in `device_names` (bound to one)."""
    if isinstance(expr, cst.IfExp):
        return is_device_expression(expr.body, facts, device_names) and is_device_expression(expr.orelse, facts, device_names)
    if isinstance(expr, cst.Name):
        return expr.value in device_names
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "device"
    if isinstance(expr, cst.Call):
        return facts.resolve(expr.func) == "torch.device"
    value = syntax.string_value(expr)
    return (value is not None and syntax.DEVICE_LITERAL.fullmatch(value) is not None) or syntax.fstring_starts_with_cuda(expr)


# Tensor methods no module has, whose result is a tensor: a name bound to one holds no device.
TENSOR_RESULT_METHODS = names.tensor_methods(names.RESHAPES, names.COMPUTES) - {
    "to", "cuda", "cpu", "type", "float", "half", "double", "bfloat16", "apply", "train", "eval", "zero_grad",
    "share_memory", "requires_grad_", "register_buffer",
}


def _tensor_result(value: cst.BaseExpression, facts) -> bool:
    """`x.clone().reshape(-1, n)`: a tensor method's result (not a device, not a module)."""
    return (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and facts.resolve(value.func) is None and value.func.attr.value in TENSOR_RESULT_METHODS)


def _moves_items_in_place(function: cst.FunctionDef, param: str, facts) -> bool:
    """Whether the function's body writes the parameter's items back moved
    (`batch["x"] = batch["x"].cuda()`, `batch[k] = v.to(device)`): the caller's value is moved."""
    for node in syntax.walk_expressions(function.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and values.is_move(node.value, facts):
            for target in node.targets:
                base = target.target
                if isinstance(base, cst.Subscript) and isinstance(base.value, cst.Name) and base.value.value == param:
                    return True
    return False


def _module_placement(value: cst.BaseExpression, modules: set) -> bool:
    """`Net().to(d)`, `model.cuda()` with `model` a module: a module was moved, not a tensor."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in (
        names.PLACING_METHODS | names.MODULE_RETURNING_METHODS
    ):
        value = value.func.value
    if isinstance(value, cst.Name):
        return value.value in modules
    if isinstance(value, cst.Call):
        last = syntax.last_name(value.func) or ""
        return last[:1].isupper() or last == "from_pretrained"
    return False


def _device_map(call: cst.Call) -> Optional[Placement]:
    """`from_pretrained(..., device_map=D)` with D not the CPU: the device, or Placement(None)
    where it is a strategy (`"auto"`) or a map."""
    if syntax.last_name(call.func) != "from_pretrained":
        return None
    arg = syntax.keyword(call, "device_map")
    if arg is None:
        return None
    text = syntax.string_value(arg.value)
    if text == "cpu" or isinstance(arg.value, cst.Name) and arg.value.value == "None":
        return None
    if text in ("auto", "balanced", "balanced_low_0", "sequential") or isinstance(arg.value, cst.Dict):
        return Placement(None, at=call)
    return Placement(arg.value if isinstance(arg.value, (cst.Name, cst.SimpleString)) else None, at=call)


def _collate_moves(facts, arg: Optional[cst.Arg]) -> bool:
    """A collate function that moves the batch: a lambda with a move, or a same-file function
    that makes one."""
    if arg is None:
        return False
    value = arg.value
    if isinstance(value, cst.Name):
        bodies = facts.module_functions(value.value)
    elif isinstance(value, cst.Lambda):
        bodies = [value]
    else:
        return False
    return any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("to", "cuda")
        for body in bodies for n in syntax.walk(body)
    )
