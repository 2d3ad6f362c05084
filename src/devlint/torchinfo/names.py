"""Vocabulary shared by the rules: which torch names are factories, loaders, moves."""

FACTORIES = frozenset(
    "torch." + name
    for name in (
        "zeros ones empty full rand randn randint randperm arange range linspace logspace eye"
        " tensor empty_strided tril_indices triu_indices"
    ).split()
)
LEGACY_CONSTRUCTORS = frozenset(
    "torch." + name
    for name in (
        "Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor ByteTensor CharTensor"
        " ShortTensor IntTensor LongTensor BoolTensor"
    ).split()
)
FROM_NUMPY = "torch.from_numpy"
AS_TENSOR = "torch.as_tensor"
# Every call that builds a new tensor on the default (CPU) device unless told otherwise.
TENSOR_SOURCES = FACTORIES | LEGACY_CONSTRUCTORS | {FROM_NUMPY, AS_TENSOR}

# Loaders and the positional slot (0-based) where they take map_location.
LOADERS = {
    "torch.load": 1,
    "torch.serialization.load": 1,
    "torch.jit.load": 1,
    "torch.hub.load_state_dict_from_url": 2,
    "torch.utils.model_zoo.load_url": 2,
}

# --- what a tensor's methods and attributes give: one table, one role a name -----------------
RESHAPES = "reshapes"  # the same values and dtype, where the receiver is (`view`, `permute`, `clone`)
SPLITS = "splits"  # several tensors, where the receiver is (`split`, `chunk`)
CASTS = "casts"  # the same values in another dtype, where the receiver is (`float`, `long`)
COMPUTES = "computes"  # new values from the receiver alone, where it is (`sum`, `exp`, `clamp`)
MOVES_TO_DEVICE = "moves-to-device"  # `.to(d)`, `.cuda()` (`.to(dtype)` is told apart where it matters)
MOVES_TO_TENSOR = "moves-to-tensor"  # `.type_as(t)`: to where t is
TO_HOST = "to-host"  # `.cpu()`
NON_TENSOR = "non-tensor"  # no tensor comes out
VIEW = "view"  # an attribute that is the tensor itself, seen another way

TENSOR_METHODS: dict[str, str] = {
    **dict.fromkeys(
        (
            "view reshape repeat unsqueeze squeeze expand expand_as view_as reshape_as permute transpose t"
            " contiguous flatten unflatten tril triu flip roll narrow select movedim clone detach requires_grad_"
        ).split(),
        RESHAPES,
    ),
    **dict.fromkeys("split chunk".split(), SPLITS),
    **dict.fromkeys("type float double half bfloat16 long int short bool byte char".split(), CASTS),
    **dict.fromkeys(
        (
            "fill_ zero_ cumsum cumprod sum mean prod max min amax amin argmax argmin sort topk norm pow abs exp log"
            " sqrt neg sign round floor ceil clamp clamp_ softmax log_softmax sigmoid tanh relu"
        ).split(),
        COMPUTES,
    ),
    "to": MOVES_TO_DEVICE,
    "cuda": MOVES_TO_DEVICE,
    "type_as": MOVES_TO_TENSOR,
    "cpu": TO_HOST,
    **dict.fromkeys(
        (
            "item tolist numpy size dim numel nelement element_size get_device data_ptr is_contiguous"
            " stride storage_offset is_floating_point is_complex ndimension"
        ).split(),
        NON_TENSOR,
    ),
}
TENSOR_ATTRIBUTES: dict[str, str] = {
    **dict.fromkeys("T mT H mH data real imag".split(), VIEW),
    **dict.fromkeys(
        "shape dtype device ndim is_cuda requires_grad is_leaf layout names grad_fn is_sparse".split(), NON_TENSOR
    ),
}


def tensor_methods(*roles: str) -> frozenset[str]:
    return frozenset(name for name, role in TENSOR_METHODS.items() if role in roles)


# The questions the rules ask of the table.
MOVES = tensor_methods(MOVES_TO_DEVICE, MOVES_TO_TENSOR)
NON_TENSOR_METHODS = tensor_methods(NON_TENSOR)
# Methods whose result stays where the receiver is and takes no other tensor: neither a use nor a move.
SHAPE_METHODS = tensor_methods(RESHAPES, SPLITS, CASTS, COMPUTES)
TENSOR_VIEW_ATTRIBUTES = frozenset(name for name, role in TENSOR_ATTRIBUTES.items() if role == VIEW)
NON_TENSOR_ATTRIBUTES = frozenset(name for name, role in TENSOR_ATTRIBUTES.items() if role == NON_TENSOR)
# nn.Module methods that return the module itself (`model.cuda().eval()`).
MODULE_RETURNING_METHODS = frozenset({"eval", "train"})
# What DEV007/DEV008 follow from a placed value: the modules' own, and a part of SHAPE_METHODS (the
# rest would widen those rules: `x.cuda().repeat(2).numpy()` is not flagged today).
PLACEMENT_KEEPING_METHODS = MODULE_RETURNING_METHODS | (
    SHAPE_METHODS
    & frozenset(
        "requires_grad_ detach squeeze unsqueeze float double half long int bool clone contiguous view reshape flatten"
        " permute transpose softmax log_softmax sigmoid argmax argmin max min sum mean round abs exp".split()
    )
)
# Methods that place a module or a tensor, as a statement (`model.cuda()`, `model.to(device).eval()`).
PLACING_METHODS = tensor_methods(MOVES_TO_DEVICE, TO_HOST)
# Calls that make a scope worth scanning for placements.
SCAN_TRIGGERING_METHODS = tensor_methods(MOVES_TO_DEVICE) | {"numpy"}

NON_TENSOR_BUILTINS = frozenset({"len", "int", "float", "bool", "str", "repr", "isinstance", "type", "id", "print"})
# Attributes and methods only tensors have: a parameter used with one is a tensor parameter.
TENSOR_ONLY_MEMBERS = frozenset(
    "shape device dtype size dim view to ndim numel unsqueeze squeeze reshape permute transpose"
    " contiguous type_as new_zeros new_ones new_empty new_full new_tensor masked_fill expand expand_as"
    " is_cuda detach clone index_select gather scatter scatter_add flatten unflatten float half long"
    " bool int double bfloat16 item tolist numpy cpu matmul bmm softmax log_softmax sigmoid".split()
)
DTYPE_NAMES = frozenset(
    "torch." + name
    for name in (
        "float float16 float32 float64 half double bfloat16 int int8 int16 int32 int64 uint8 uint16 uint32 uint64 long"
        " short bool complex64 complex128 cfloat cdouble float8_e4m3fn float8_e5m2"
    ).split()
)
MODULE_BASE_SUFFIXES = (
    "Module", "Model", "Layer", "Block", "Net", "Head", "Encoder", "Decoder", "Attention", "Loss",
    "Embedding", "Embeddings",
)
# Imported bases named for what they are and that are never modules: Lightning's
# `LightningDataModule` (despite its `Module`), data sets, loaders, samplers, callbacks, trainers,
# optimizers and schedulers. They win over the module suffixes above.
NOT_MODULE_BASE_SUFFIXES = (
    "DataModule", "Dataset", "DataLoader", "Sampler", "Callback", "Trainer", "Optimizer", "Scheduler",
)
FRAMEWORK_MODULE_BASES = frozenset(
    {"LightningModule", "PreTrainedModel", "ModelMixin", "BaseModule", "Metric", "HyperModule",
     "ModuleList", "ModuleDict", "Sequential"}
)

# --- DEV007: where CPU values meet accelerator ones -------------------------------------------
# nn.Module's own bookkeeping: a CPU argument to these meets no weights.
MODULE_BOOKKEEPING_METHODS = frozenset(
    (
        "to cuda cpu xpu mps train eval load_state_dict state_dict parameters named_parameters buffers"
        " named_buffers children named_children modules named_modules apply half float double bfloat16 type"
        " zero_grad requires_grad_ share_memory add_module get_submodule get_parameter get_buffer"
        " extra_repr to_empty set_extra_state get_extra_state"
    ).split()
)
# torch functions that combine their tensor arguments (all on one device).
COMBINING_FUNCTIONS = frozenset(
    "torch." + name
    for name in (
        "cat concat concatenate stack hstack vstack dstack where matmul mm bmm einsum add sub subtract mul"
        " multiply div divide true_divide maximum minimum isin cdist dot outer addmm baddbmm lerp cross"
        " eq ne gt ge lt le masked_select index_select gather bucketize searchsorted"
    ).split()
)
LOSS_NAME_SUFFIXES = ("criterion", "loss_fn", "loss_func")
# Calls that hand a loader to a framework that moves its batches.
LOADER_PREPARING_METHODS = frozenset({"prepare", "prepare_data_loader", "setup_dataloaders"})
# Wrappers that iterate their first argument unchanged (`tqdm(loader)`).
ITERATION_WRAPPERS = frozenset({"iter", "tqdm", "trange", "track", "progress_bar", "progressbar"})

# Packages whose classes are never torch modules, whatever their names (`keras.layers.Layer`).
OTHER_FRAMEWORKS = frozenset({
    "tensorflow", "keras", "tf_keras", "flax", "jax", "haiku", "equinox", "mlx", "paddle", "mindspore", "mxnet",
    "oneflow", "sklearn",
})
# Packages of typing bases, besides the standard library's (`typing_extensions.Protocol`): never modules.
TYPING_PACKAGES = frozenset({"typing_extensions"})
# torch.nn classes that are not modules (`class Weight(nn.Parameter)`).
NN_NON_MODULE_CLASSES = frozenset({"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"})
# Framework bases known by a name another package also uses: a module only when imported from this one
# (ignite's `Metric` is not an nn.Module, torchmetrics' is).
FRAMEWORK_BASE_PACKAGES = {"Metric": "torchmetrics"}


# Top-level torch functions that do not return a tensor.
NON_TENSOR_TORCH_FUNCTIONS = frozenset(
    "load compile device Generator no_grad enable_grad inference_mode autocast set_grad_enabled manual_seed"
    " get_default_dtype is_tensor is_grad_enabled Size dtype finfo iinfo save".split()
)


def returns_tensors(qualified: str) -> bool:
    """Whether the torch function `qualified` returns a tensor (or tensors): a top-level
    lowercase `torch.*` function but those of NON_TENSOR_TORCH_FUNCTIONS, or one of
    `torch.nn.functional`, `torch.fft`, `torch.linalg`, `torch.special`."""
    head, _, rest = qualified.partition(".")
    if head != "torch":
        return False
    if rest.startswith(("nn.functional.", "fft.", "linalg.", "special.")):
        return True
    return "." not in rest and rest[:1].islower() and rest not in NON_TENSOR_TORCH_FUNCTIONS


# Tensor methods that make a new tensor on the receiver's device (`x.new_zeros(n)`).
NEW_TENSOR_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})


def makes_nn_object(qualified: str) -> bool:
    """A `torch.nn` class or one of its constructors (`torch.nn.Linear`, `torch.nn.Parameter`,
    `torch.nn.Embedding.from_pretrained`): a module or a parameter, which `model.to()` moves; not
    a function of `torch.nn.functional`, `torch.nn.init` or `torch.nn.utils`."""
    parts = qualified.split(".")
    return parts[:2] == ["torch", "nn"] and any(part[:1].isupper() for part in parts[2:])


def is_legacy_cuda_type(qualified: str) -> bool:
    """`torch.cuda.FloatTensor` and its kin: a legacy CUDA tensor type."""
    return qualified.startswith("torch.cuda.") and qualified.endswith("Tensor")
