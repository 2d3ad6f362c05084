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

# Methods that move a tensor to another device (`.to(dtype)` is checked separately).
MOVES = frozenset({"to", "type_as", "cuda"})
# Attributes that are the tensor itself, seen another way (transposed, detached, a part).
TENSOR_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})
# Methods and attributes whose result is not a tensor.
NON_TENSOR_METHODS = frozenset(
    "item tolist numpy size dim numel nelement element_size get_device data_ptr is_contiguous"
    " stride storage_offset is_floating_point is_complex ndimension".split()
)
NON_TENSOR_ATTRIBUTES = frozenset(
    "shape dtype device ndim is_cuda requires_grad is_leaf layout names grad_fn is_sparse".split()
)
NON_TENSOR_BUILTINS = frozenset({"len", "int", "float", "bool", "str", "repr", "isinstance", "type", "id", "print"})
# Attributes and methods only tensors have: a parameter used with one is a tensor parameter.
TENSOR_ONLY_MEMBERS = frozenset(
    "shape device dtype size dim view to ndim numel unsqueeze squeeze reshape permute transpose"
    " contiguous type_as new_zeros new_ones new_empty new_full new_tensor masked_fill expand expand_as"
    " is_cuda detach clone index_select gather scatter scatter_add flatten unflatten float half long"
    " bool int double bfloat16 item tolist numpy cpu matmul bmm softmax log_softmax sigmoid".split()
)
# Methods on a tensor that keep it where it is and take no other tensor.
SHAPE_METHODS = frozenset(
    "view reshape repeat unsqueeze squeeze expand expand_as view_as reshape_as permute transpose t"
    " contiguous flatten unflatten tril triu flip roll narrow split chunk select movedim type"
    " float double half bfloat16 long int short bool byte char clone detach requires_grad_ fill_ zero_"
    " cumsum cumprod sum mean prod max min amax amin argmax argmin sort topk norm pow abs exp log sqrt"
    " neg sign round floor ceil clamp clamp_ softmax log_softmax sigmoid tanh relu".split()
)
# Methods whose result lives where their receiver does (for following a placed value).
PLACEMENT_KEEPING_METHODS = frozenset(
    "eval train requires_grad_ detach squeeze unsqueeze float double half long int bool clone contiguous view reshape flatten permute"
    " transpose softmax log_softmax sigmoid argmax argmin max min sum mean round abs exp".split()
)
# Methods that place a module or a tensor, as a statement (`model.cuda()`, `model.to(device).eval()`).
PLACING_METHODS = frozenset({"cuda", "to", "cpu"})
# Calls that make a scope worth scanning for placements.
SCAN_TRIGGERING_METHODS = frozenset({"cuda", "to", "numpy"})
DTYPE_NAMES = frozenset(
    "torch." + name
    for name in (
        "float float16 float32 float64 half double bfloat16 int int8 int16 int32 int64 uint8 long"
        " short bool complex64 complex128 cfloat cdouble"
    ).split()
)
MODULE_BASE_SUFFIXES = (
    "Module", "Model", "Layer", "Block", "Net", "Head", "Encoder", "Decoder", "Attention", "Loss",
    "Embedding", "Embeddings",
)
FRAMEWORK_MODULE_BASES = frozenset(
    {"LightningModule", "PreTrainedModel", "ModelMixin", "BaseModule", "Metric", "HyperModule",
     "ModuleList", "ModuleDict", "Sequential"}
)
