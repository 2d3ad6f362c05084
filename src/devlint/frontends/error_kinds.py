"""The kinds of device error `devlint explain` recognises: for each, the words of torch's messages
that name it, what usually causes it, the rules that find the cause (or where to look), and the
kind it refines. The table of `docs/explain.md` is made from it (`bench/torch_messages.py`)."""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ErrorKind:
    id: str
    title: str
    patterns: tuple[str, ...]
    causes: tuple[str, ...]
    # The rules whose findings can cause this error on the machine that raises it (each rule's doc
    # names the errors it prevents), most likely first; findings of other rules are not causes.
    rules: tuple[str, ...]
    # Where no rule finds the cause: what to look for instead.
    look_for: str = ""
    # The kind this one is a case of: where both match, only this one is named.
    refines: str = ""

    def matches(self, text: str) -> bool:
        return any(re.search(p, text) for p in self.patterns)


# The patterns are written against what torch says: `bench/torch_messages.py` lists the device
# messages of the installed torch (and older wordings users paste) with the kinds they match, and
# `tests/test_torch_messages.py` asks that each is recognised, as one kind.
KINDS = (
    ErrorKind(
        "cuda-checkpoint-on-cpu-host",
        "a checkpoint saved on a GPU, loaded where there is none",
        (r"deserialize object on (a )?\S+ device but torch\.\S+\.is_available\(\) is False",
         r"device module is not registered\. If you are running on a CPU-only machine"),
        ("`torch.load(path)` without `map_location` puts every tensor back on the GPU it was saved from;"
         " on a CPU-only machine (or one with fewer GPUs) that fails. Load with `map_location=\"cpu\"`"
         " (or the device you want) and let `load_state_dict` copy the weights onto the model's device.",),
        ("DEV002",),
    ),
    ErrorKind(
        "map-location-on-load-state-dict",
        "`map_location` given to `load_state_dict`",
        (r"unexpected keyword argument 'map_location'",),
        ("`map_location` belongs to `torch.load`: `model.load_state_dict(torch.load(p), map_location=d)`"
         " should be `model.load_state_dict(torch.load(p, map_location=d))`.",),
        ("DEV006",),
    ),
    ErrorKind(
        "map-location-value",
        "a `map_location` this loader does not take",
        (r"map_location should be either", r"(callable|dict) map_location", r"map_location not supported"),
        ("`torch.load` takes a device string, a `torch.device`, a dict from saved to wanted device or a"
         " function; `torch.jit.load` and safetensors files take a device string or a `torch.device` only.",),
        (),
        "the `map_location=` of the failing call, and where its value comes from",
    ),
    ErrorKind(
        "cuda-not-available",
        "CUDA asked for on a machine without it",
        (r"Torch not compiled with CUDA enabled", r"Found no NVIDIA driver", r"No CUDA GPUs are available",
         r"CUDA driver initialization failed", r"module 'torch\._C' has no attribute '_cuda_\w+'",
         r"requires CUDA support", r"Tried to instantiate dummy base class", r"(compiled|built) without CUDA",
         r"not compiled with CUDA", r"without ATen_cuda library", r"CUDA library has not been loaded",
         r"(?<!memory )(?<!memory)requires CUDA\b", r"NVIDIA driver on your system is too old",
         r"Profiler was requested to be enabled with CUDA", r"CUDA is not available, disabling",
         r"^CUDA is not available$"),
        ("A hardcoded `.cuda()` call runs on every machine, GPU or not: use `.to(device)` with a device"
         " chosen once (`torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")`, or"
         " `torch.accelerator.current_accelerator()` from torch 2.6, which also finds MPS and XPU).",
         "A `\"cuda\"` device string (`torch.device(\"cuda\")`, `device=\"cuda\"`, a `--device` default)"
         " does the same: take the device from the data, a parameter, or `torch.cuda.is_available()`.",
         "A `torch.cuda` call that needs a GPU (`synchronize`, `set_device`, `get_device_name`, ...;"
         " `set_device` fails with `module 'torch._C' has no attribute '_cuda_setDevice'`) outside a"
         " `torch.cuda.is_available()` test.",
         "A `self.device` recorded in `__init__` on a GPU machine still names CUDA in a module pickled whole"
         " and loaded here."),
        ("DEV001", "DEV005", "DEV011", "DEV012"),
    ),
    ErrorKind(
        "accelerator-not-available",
        "MPS, XPU or another accelerator asked for on a machine without it",
        (r"without ATen_(xpu|mps) library", r"MPS backend was selected", r"\bMPS is not available",
         r"No XPU are available", r"(compiled|built) without (XPU|MPS)", r"not compiled with (XPU|MPS)",
         r"without MPS backend", r"no accelerator (support is found|device is detected)",
         r"accelerator device when none is available", r"requires XPU\b", r"for XPU without XPU data",
         r"needs a non-CPU accelerator device", r"without torch_xla library"),
        ("A device string naming `\"mps\"` or `\"xpu\"` (or code that assumes some accelerator, such as FSDP"
         " or an integer `device_id`) runs on a machine that has none: choose the device with"
         " `torch.accelerator.current_accelerator()` (torch 2.6 and later) and fall back to the CPU.",),
        (),
        "device strings that name `mps` or `xpu`, and `torch.mps` / `torch.xpu` calls outside an"
        " `is_available()` test",
    ),
    ErrorKind(
        "no-kernel-for-device",
        "an operator with no kernel for the device its tensors are on",
        (r"Could not run '\S+' with arguments from the '\w+' backend", r"not currently implemented for the MPS device"),
        ("An extension built for another device than torch: a CPU-only `torchvision` (or custom-op package)"
         " beside a CUDA torch fails on its first CUDA tensor (`torchvision::nms`); install builds that match.",
         "A device this torch was not built for (`device=\"mps\"` on Linux fails as `'aten::empty.memory_format'`"
         " from the 'MPS' backend).",
         "An operator MPS does not implement yet: `PYTORCH_ENABLE_MPS_FALLBACK=1` runs it on the CPU."),
        (),
        "the device the failing operator's tensors are on, and whether torch and its extensions are builds"
        " for it (`python -m torch.utils.collect_env`)",
    ),
    ErrorKind(
        "invalid-device-ordinal",
        "a GPU index that this machine does not have",
        (r"invalid device ordinal", r"deserialize object on \S+ device \S+ but torch\.\S+\.device_count\(\) is",
         r"devices are available but device index", r"Please use a device index less than",
         r"Invalid device id\b", r"on a different CUDA device index", r"expected 0 <= device index"),
        ("A hardcoded `\"cuda:1\"`, an integer device (`.to(1)`, `device=1`, `map_location=1`) or"
         " `torch.cuda.set_device(rank)` names a GPU that exists on the machine the code was written on."
         " Take the index from the launcher (`LOCAL_RANK`) and check it against `torch.cuda.device_count()`.",
         "A checkpoint saved from `cuda:1` and loaded without `map_location` asks for that GPU again."),
        ("DEV005", "DEV011", "DEV002"),
    ),
    ErrorKind(
        "invalid-device-string",
        "a device string or device type torch does not take",
        (r"Invalid device string", r"device type at start of device string", r"in device string '",
         r"Could not parse device index", r"cannot parse device type", r"Invalid device type\b",
         r"Invalid device, must be \S+ device", r"device_type string to not have a device index",
         r"does not have an explicit index"),
        ("A device written in a form torch does not parse (`\"gpu\"`, `\"cuda0\"`, `\"cuda:\"`), often read"
         " from a config file or a flag; or a device of one type given to another backend's call"
         " (`torch.cuda.set_device(\"cpu\")`).",
         "A device without an index where each process owns one GPU (FSDP's `device_id=torch.device(\"cuda\")`):"
         " pass `torch.device(\"cuda\", local_rank)`."),
        (),
        "where the device string is built or read, and print it before it is used",
    ),
    ErrorKind(
        "input-weight-type-mismatch",
        "an input on one device, the layer's weights on another",
        (r"Input type \(.*\) and (weight|bias) type \(.*\) should be the same",),
        ("The model was moved to the GPU and the input was made on the CPU (often a dummy input for"
         " `torch.onnx.export` or `torch.jit.trace`): create it with `device=` or move it.",
         "Or the other way: weights kept as plain attributes stayed on the CPU when the model moved, or a"
         " layer built inside `forward` (`nn.Linear(...)(x)`) made new CPU weights at the call."),
        ("DEV007", "DEV015", "DEV014", "DEV004", "DEV003", "DEV010", "DEV009", "DEV013", "DEV012"),
        refines="device-mismatch",
    ),
    ErrorKind(
        "rnn-hidden-state-device",
        "an RNN's input, hidden state or weights on two devices",
        (r"Input and (hidden|parameter) tensors are not at the same device", r"tensors are not at the same device, found"),
        ("The initial hidden state is made without `device=` (`torch.zeros(layers, batch, hidden)`):"
         " make it where the input is (`device=x.device`).",
         "Or the input itself was never moved to the model's device, or the hidden state is made with a"
         " `self.device` captured in `__init__`."),
        ("DEV003", "DEV007", "DEV012", "DEV010"),
        refines="device-mismatch",
    ),
    ErrorKind(
        "data-parallel-parameters-not-on-device",
        "`DataParallel` over a module whose weights are not on the first GPU",
        (r"module must have its parameters and buffers on device \S+ \(device_ids\[0\]\)",),
        ("The model must be on `device_ids[0]` before `nn.DataParallel(model)`: move it first.",
         "Submodules kept in a plain `list`/`dict` and tensors kept as plain attributes are not moved by"
         " `model.to(device)`, so part of the model stays on the CPU."),
        ("DEV015", "DEV009", "DEV004"),
        refines="device-mismatch",
    ),
    ErrorKind(
        "fake-tensor-device-propagation",
        "two devices met while exporting, tracing or compiling (torch.export, ONNX, torch.compile, Torch-TensorRT)",
        (r"Unhandled FakeTensor Device Propagation for \S+, found two different devices",
         r"FakeTensorDeviceMismatchError", r"Tensor device mismatch", r"FakeTensor is wrapped to wrong device",
         r"Device mismatch between fake input and example input", r"Mixed-device constants"),
        ("A CPU constant inside the model: a tensor made in `forward` without `device=`, or a table kept"
         " as a plain attribute instead of a buffer; the tracer meets it beside the GPU input."
         " `devlint export` exports each module for a GPU (a fake one where there is none) and names the"
         " line that made the CPU tensor as well as the line where the devices meet.",
         "Or an operator whose fake kernel propagates devices wrongly (seen with"
         " `torchvision.deform_conv2d`): a newer torch / Torch-TensorRT fixes some; exporting with"
         " `torch.export.export(..., strict=False)` first and compiling the exported program avoids others."),
        ("DEV003", "DEV004", "DEV007"),
        refines="device-mismatch",
    ),
    ErrorKind(
        "device-mismatch",
        "tensors on two devices in one operation",
        (r"Expected all tensors to be on the same device", r"(?<!not at the )same (devices?|GPU|type of device)\b",
         r"Tensor on device \S+ is not on the expected device", r"Expected object of (device type|backend)",
         r"(?<!to a )different devices?\b(?! mesh)", r"two (types of )?devices", r"located on different GPUs",
         r"device type of \w+ \(", r"^(Input \S+ )?is on device$|Input \S+ is on device", r"(found|got) tensor on device",
         r"storage of a tensor on device",
         r"to (be a |be )?CPU tensor, but got (a )?(CUDA )?tensor", r"is on (CPU|GPU), but expected it to be on",
         r"device index mismatch", r"to have the same device as"),
        ("A tensor made inside `forward` or a helper without `device=` (`torch.zeros`, `torch.arange`...)"
         " stays on the CPU while the model's tensors are on the GPU.",
         "A tensor stored on a module as a plain attribute instead of `register_buffer` is left behind by"
         " `model.to(device)`.",
         "An input, a batch from a loader or a tokenizer's output is passed to a model moved to the GPU"
         " without being moved itself (often the labels: `criterion(model(x.to(device)), y)`).",
         "`x.to(device)` as a statement: tensors do not move in place, the moved copy is thrown away.",
         "Submodules kept in a plain `list`/`dict` instead of `nn.ModuleList`/`nn.ModuleDict` are not"
         " moved by `model.to(device)`.",
         "A layer built inside `forward` (`nn.BatchNorm2d(c)(x)`) makes its weights on the CPU at every call.",
         "A module set on the model after `model.to(device)` (a new classifier head: `model.fc = nn.Linear(...)`)"
         " stays on the CPU.",
         "A module the script built beside the model (a loss given class weights, `nn.CrossEntropyLoss("
         "weight=torch.tensor(w))`, a head) and never moved: `model.to(device)` moves the model alone.",
         "A `self.device` captured in `__init__` still names the old device after `model.to(other)`.",
         "Inside `optimizer.step()`: the optimizer was built before `model.to(device)`, or its state was"
         " loaded from a checkpoint saved on another device; build it after moving the model.",
         "Raised while exporting or compiling, `devlint export` names the line that made the CPU tensor."),
        ("DEV003", "DEV004", "DEV007", "DEV015", "DEV014", "DEV010", "DEV009", "DEV013", "DEV012"),
    ),
    ErrorKind(
        "cpu-tensor-required",
        "a tensor torch reads on the CPU was moved to an accelerator",
        (r"must be a CPU tensor", r"1D CPU int64 tensor", r"to be on cpu, but", r"Expected scalars to be on CPU",
         r"[Oo]nly (dense )?CPU (tensors|memory) can be pinned", r"only implemented (on|for) CPU tensors",
         r"move your tensors to CPU", r"expects CPU tensor input", r"too many CPU scalars to non-CPU kernel",
         r"must be a scalar tensor and on CPU", r"was not a CPU tensor", r"quantize a CUDA tensor",
         r"over RPC\. Found tensor on device", r"RPC detected that a user-function output tensor on device"),
        ("`pack_padded_sequence(x, lengths)` needs `lengths` on the CPU (a list or a CPU int64 tensor): a"
         " batch moved whole with `.to(device)` moves the lengths too; pass `lengths.cpu()`.",
         "`DataLoader(..., pin_memory=True)` over a dataset that returns CUDA tensors: only CPU tensors can"
         " be pinned; keep the dataset on the CPU and move each batch in the loop.",
         "Other arguments torch reads on the host (`tensor_split` indices, `GradScaler` state,"
         " `Tensor.apply_`) must stay on the CPU too."),
        (),
        "`.to(device)` or `.cuda()` applied to a whole batch or dataset, including the lengths or indices"
        " torch reads on the CPU",
    ),
    ErrorKind(
        "accelerator-tensor-required",
        "an operation that runs only on an accelerator got a CPU tensor",
        (r"only supports CUDA tensors", r"must be (a )?CUDA tensors?\b", r"need to be on CUDA",
         r"not implemented for CPU tensors", r"requires them to be on GPU", r"expected input tensor to be on GPU",
         r"to be on GPUs, but input \S+ is on CPU", r"Only CUDA tensors are currently supported",
         r"on non-CUDA tensor type"),
        ("The model or its input was never moved to the GPU (a batch from a loader, an input made without"
         " `device=`); `nn.DataParallel`, `SyncBatchNorm` and FSDP need the model on the GPU first.",
         "Or part of the model stayed behind: submodules in a plain `list`/`dict`, tensors kept as plain"
         " attributes."),
        ("DEV007", "DEV015", "DEV009", "DEV004", "DEV003"),
    ),
    ErrorKind(
        "generator-device",
        "a random generator on one device, the tensor asked for on another",
        (r"device type for generator but found", r"generator device but found"),
        ("`torch.rand(..., generator=g, device=...)` needs `g` on that device: a `torch.Generator()`"
         " made without `device=` is a CPU generator. Make the generator on the tensor's device, or"
         " draw on the CPU and move the result.",),
        ("DEV003", "DEV005"),
    ),
    ErrorKind(
        "meta-tensor",
        "a model built on the meta device used as if it had weights",
        (r"Cannot copy out of meta tensor", r"to_empty\(\) instead of", r"materialized from meta device",
         r"module on meta device", r"should be materialized on CPU"),
        ("A model made on the `meta` device (`torch.device(\"meta\")`, `init_empty_weights()`,"
         " `low_cpu_mem_usage=True`, deferred initialisation) holds no data: `.to(device)` cannot copy it."
         " Use `model.to_empty(device=...)`, then load or initialise the weights.",),
        (),
        "where the model is built on the meta device, and the `.to()` that moves it",
    ),
    ErrorKind(
        "numpy-on-device-tensor",
        "`.numpy()` on a tensor on an accelerator",
        (r"can't convert \S+ device type tensor to numpy", r"device type tensor to numpy",
         r"\.numpy\(\) is not supported for tensor subclasses"),
        ("`.numpy()` works only on CPU tensors: call `.cpu()` first (`out.detach().cpu().numpy()`).",),
        ("DEV008",),
    ),
    ErrorKind(
        "state-dict-module-prefix",
        "a checkpoint saved from `DataParallel` / `DistributedDataParallel`, loaded into a bare model",
        (r"(Missing|Unexpected) key\(s\) in state_dict:.*\"module\.",),
        ("The wrapper saves its model under `module.`: save `model.module.state_dict()`, or strip the"
         " prefix when loading (`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd,"
         " \"module.\")`).",
         "Missing keys without that prefix can also mean submodules kept in a plain `list`/`dict`, which"
         " `state_dict()` never saved."),
        ("DEV009",),
    ),
    ErrorKind(
        "autocast-without-cuda",
        "autocast or `GradScaler` asked for CUDA on a machine without it (a warning: it is turned off)",
        (r"User provided device_type of '\w+', but CUDA is not available",
         r"CUDA is not available or torch_xla is imported\. Disabling autocast",
         r"GradScaler is enabled, but CUDA is not available"),
        ("`torch.autocast(\"cuda\")` / `torch.cuda.amp.autocast()` on a CPU-only machine silently runs"
         " in full precision: pass the device type of the data (`torch.autocast(x.device.type)`);"
         " `torch.cuda.amp.GradScaler()` likewise: use `torch.amp.GradScaler(device.type)`.",),
        (),
        "`autocast(\"cuda\")`, `torch.cuda.amp` and `GradScaler()` written for CUDA alone",
    ),
    ErrorKind(
        "pin-memory-without-accelerator",
        "`pin_memory=True` on a machine without an accelerator (a warning: memory is not pinned)",
        (r"'pin_memory' argument is set as true but no accelerator is found",
         r"pin_memory=True requires a CUDA or other accelerator", r"Pinned memory requires CUDA",
         r"pinning memory ?requires CUDA"),
        ("Pinned memory only helps copies to a GPU: pass `pin_memory=torch.cuda.is_available()`.",),
        (),
        "`pin_memory=True` in `DataLoader(...)` calls and tensor factories",
    ),
    ErrorKind(
        "weights-only-load",
        "`torch.load` refused to unpickle an object (torch 2.6 and later load weights only by default)",
        (r"Weights only load failed",),
        ("From torch 2.6, `torch.load` defaults to `weights_only=True` and rejects pickled objects"
         " other than tensors and plain containers. For a checkpoint you trust, pass"
         " `weights_only=False`, or allow its classes with `torch.serialization.add_safe_globals([...])`;"
         " keep `map_location` on the same call.",),
        (),
        "the `torch.load` call that reads the checkpoint",
    ),
)


def kinds_of(text: str) -> list[ErrorKind]:
    """The kinds of device error `text` shows, in KINDS order, less those a more specific one refines."""
    found = [k for k in KINDS if k.matches(text)]
    refined = {k.refines for k in found}
    return [k for k in found if k.id not in refined]
