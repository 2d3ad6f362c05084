"""Every fix kind is right, not just well-formed: real modules built with torch before and after
each fix behave as the rules promise.

Every source is fixed with the library's own fixer, then both versions are executed and the
resulting modules, checkpoints and loaders are compared with real torch (CPU only: the "meta"
device stands in for the accelerator that `model.to(device)` should reach, and a checkpoint whose
storages claim `cuda:0` stands in for one saved on a GPU box).
"""
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from devlint.engine import fixer
from devlint.workspace.config import Settings  # noqa: E402
from devlint.workspace.linter import Linter  # noqa: E402

CUDA_ERROR = "Attempting to deserialize object on a CUDA device"


def _check():
    return Linter(Settings(root=Path(".")), Path("m.py")).check


def fix(source, unsafe=False):
    result = fixer.fix_text(source, _check(), unsafe)
    assert result.problem is None
    return result


def findings(source, code=None):
    return [f for f in _check()(source) if code is None or f.code == code]


def codes(found):
    return [f.code for f in found]


def load_source(source):
    namespace = {}
    exec(compile(source, "m.py", "exec"), namespace)
    return namespace


def _registry_is_clean():
    """No package registered outside torch (a custom tagger/deserializer would change torch.load)."""
    registry = getattr(torch.serialization, "_package_registry", [])
    return all(
        (getattr(getattr(tagger, "func", tagger), "__module__", None) or "").startswith("torch")
        for _, tagger, _ in registry
    )


# --------------------------------------------------------------------------------------------
# DEV004: the fix turns a plain tensor attribute into a non-persistent buffer
# --------------------------------------------------------------------------------------------

POSITIONAL_ENCODING = '''\
import math

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.pe = pe

    def forward(self, x):
        return self.proj(x) + self.pe[: x.size(0)]
'''

LAZY_MASK = '''\
import torch
from torch import nn


class MaskedMix(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        n = x.size(0)
        if not hasattr(self, "mask") or self.mask.size(0) < n:
            self.mask = torch.ones(n, n, dtype=torch.long).tril()
        return self.mask[:n, :n].float() @ self.proj(x)
'''


def _fixed_dev004(source, expected_line, applicability="unsafe"):
    assert "DEV004" in codes(findings(source))
    result = fix(source, unsafe=applicability == "unsafe")
    assert "DEV004" in codes(result.fixed)
    assert all(f.fix.applicability == applicability for f in result.fixed)
    assert expected_line in result.text
    assert "DEV004" not in codes(result.remaining)
    return result.text


def _assert_checkpoint_compatible(before, after, tmp_path):
    assert list(before.state_dict().keys()) == list(after.state_dict().keys())
    path = tmp_path / "before.pt"
    torch.save(before.state_dict(), path)
    state = torch.load(path, map_location="cpu", weights_only=True)
    missing, unexpected = after.load_state_dict(state, strict=True)
    assert missing == [] and unexpected == []
    for (name, a), (_, b) in zip(before.state_dict().items(), after.state_dict().items()):
        assert torch.equal(a, b), name


def test_dev004_positional_encoding_moves_with_the_module(tmp_path):
    fixed = _fixed_dev004(POSITIONAL_ENCODING, 'self.register_buffer("pe", pe, persistent=False)')
    before_cls = load_source(POSITIONAL_ENCODING)["PositionalEncoding"]
    after_cls = load_source(fixed)["PositionalEncoding"]

    torch.manual_seed(0)
    before = before_cls(8)
    torch.manual_seed(1)  # different weights: the checkpoint must carry them over
    after = after_cls(8)

    # A buffer now, but not persistent: the checkpoint format does not change.
    assert "pe" in dict(after.named_buffers()) and "pe" not in after.state_dict()
    assert "pe" not in dict(before.named_buffers())
    _assert_checkpoint_compatible(before, after, tmp_path)

    torch.manual_seed(2)
    x = torch.randn(5, 8)
    assert torch.equal(before.pe, after.pe)
    assert torch.equal(before(x), after(x))

    # What the rule is about: model.to(device) left the plain attribute behind.
    before.to("meta")
    after.to("meta")
    assert before.proj.weight.device.type == "meta" and after.proj.weight.device.type == "meta"
    assert before.pe.device.type == "cpu"
    assert after.pe.device.type == "meta"


def test_dev004_lazy_cache_in_forward_moves_with_the_module(tmp_path):
    fixed = _fixed_dev004(
        LAZY_MASK, 'self.register_buffer("mask", torch.ones(n, n, dtype=torch.long).tril(), persistent=False)', "safe"
    )
    before_cls = load_source(LAZY_MASK)["MaskedMix"]
    after_cls = load_source(fixed)["MaskedMix"]

    torch.manual_seed(0)
    before = before_cls(4)
    torch.manual_seed(1)
    after = after_cls(4)
    _assert_checkpoint_compatible(before, after, tmp_path)

    torch.manual_seed(2)
    x = torch.randn(3, 4)
    assert torch.equal(before(x), after(x))
    # Calling forward again (re-registering, or reusing, the cache) keeps working and agreeing.
    y = torch.randn(5, 4)
    assert torch.equal(before(y), after(y))
    assert torch.equal(before(x), after(x))
    assert torch.equal(before.mask, after.mask) and before.mask.shape == (5, 5)

    # The cache does not enter the checkpoint: a state_dict saved after forward still loads.
    assert "mask" not in after.state_dict() and "mask" in dict(after.named_buffers())
    _assert_checkpoint_compatible(before, after, tmp_path)

    before.to("meta")
    after.to("meta")
    assert before.mask.device.type == "cpu"
    assert after.mask.device.type == "meta"


TABLES = '''\
import torch
from torch import nn


class Tables(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.index = torch.arange(4)
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, 4, 2).float() / 4))

    def forward(self, x):
        return self.proj(x)[..., self.index] * self.inv_freq.sum()
'''


ROTARY_CACHE = textwrap.dedent(
    '''\
    import torch
    from torch import nn


    class RotaryCache(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.cos_cached = torch.ones(n, 4)
            self.sin_cached = torch.zeros(n, 4)

        def rebuild(self, n):
            freqs = torch.outer(torch.arange(n, dtype=torch.float32), torch.ones(4))
            self.cos_cached = freqs.cos()
            self.sin_cached = freqs.sin()

        def forward(self, x):
            return x * self.cos_cached[: x.shape[0]] + x * self.sin_cached[: x.shape[0]]
    '''
)


def test_dev004_fixes_a_cache_rebuilt_in_another_method_in_init_only():
    """Registered in `__init__`, the caches are buffers; the rebuild sets the buffers as they are
    (a `register_buffer` there too would be a second registration)."""
    found = findings(ROTARY_CACHE, "DEV004")
    assert [(f.row, f.fix is not None) for f in found] == [(8, True), (9, True), (13, False), (14, False)]
    fixed = fix(ROTARY_CACHE, unsafe=True).text
    assert fixed.count("register_buffer") == 2 and "self.cos_cached = freqs.cos()" in fixed
    model = load_source(fixed)["RotaryCache"](6)
    model.rebuild(6)
    assert set(dict(model.named_buffers())) == {"cos_cached", "sin_cached"}
    expected = load_source(ROTARY_CACHE)["RotaryCache"](6)
    expected.rebuild(6)
    x = torch.randn(6, 4)
    assert torch.equal(model(x), expected(x))
    model.to("meta")
    assert model.cos_cached.device.type == "meta" and model.sin_cached.device.type == "meta"


def test_dev004_fix_is_safe_for_an_integer_table_and_unsafe_for_a_float_one():
    """A buffer follows `model.half()` where the plain attribute did not: an integer table comes
    out unchanged, a float one loses precision. Only the first fix is safe."""
    by_name = {f.message.split("`")[1]: f.fix.applicability for f in findings(TABLES, "DEV004")}
    assert by_name == {"self.index": "safe", "self.inv_freq": "unsafe"}

    safe_only = fix(TABLES).text
    assert 'self.register_buffer("index", torch.arange(4), persistent=False)' in safe_only
    assert "self.inv_freq = " in safe_only
    both = fix(TABLES, unsafe=True).text
    before = load_source(TABLES)["Tables"]().half()
    after = load_source(both)["Tables"]().half()
    assert after.index.dtype == before.index.dtype == torch.int64
    assert before.inv_freq.dtype == torch.float32
    assert after.inv_freq.dtype == torch.float16  # what makes that fix unsafe


# --------------------------------------------------------------------------------------------
# DEV004: where a buffer would move away from a tensor that stays, the finding has no fix
# --------------------------------------------------------------------------------------------

SIBLING_UNDER_A_FLAG = '''\
import torch
from torch import nn


class Filterbank(nn.Module):
    def __init__(self, f_central, freeze=True):
        super().__init__()
        self.f_central = f_central
        if not freeze:
            self.f_central = nn.Parameter(self.f_central)
        self.all_freqs = torch.linspace(0.0, 1.0, 5).repeat(3, 1)

    def forward(self, x):
        filters = (self.all_freqs.T - self.f_central).abs()
        return x @ filters.to(x.device)
'''

LOADER_TIME = '''\
import torch
from torch import nn
from torch.utils.data import DataLoader


class Walker(nn.Module):
    def __init__(self):
        super().__init__()
        self.offset = torch.arange(3)
        self.step = torch.arange(3)
        self.embedding = nn.Embedding(8, 2)

    def forward(self, batch):
        return self.embedding(batch + self.step)

    def loader(self):
        return DataLoader(range(2), collate_fn=self._sample, batch_size=2)

    def _sample(self, batch):
        return torch.tensor(batch).view(-1, 1) + self.offset.view(1, -1) + self.step
'''


def test_dev004_withholds_a_fix_that_moves_a_table_from_its_sibling():
    (finding,) = findings(SIBLING_UNDER_A_FLAG, "DEV004")
    assert finding.fix is None
    # As written, with the default flag, the host computation runs on a moved module...
    module = load_source(SIBLING_UNDER_A_FLAG)["Filterbank"](torch.ones(3)).to("meta")
    assert module(torch.ones(2, 5, device="meta")).device.type == "meta"
    # ...and with the table registered alone, it meets the sibling that stayed on the CPU.
    would_be = SIBLING_UNDER_A_FLAG.replace(
        "self.all_freqs = torch.linspace(0.0, 1.0, 5).repeat(3, 1)",
        'self.register_buffer("all_freqs", torch.linspace(0.0, 1.0, 5).repeat(3, 1), persistent=False)')
    moved = load_source(would_be)["Filterbank"](torch.ones(3)).to("meta")
    with pytest.raises(RuntimeError, match="device"):
        moved(torch.ones(2, 5, device="meta"))


def test_dev004_leaves_loader_time_tables_and_withholds_their_fix():
    (finding,) = findings(LOADER_TIME, "DEV004")  # `offset` is read only by the collate_fn
    assert "`self.step`" in finding.message and finding.fix is None
    # As written, the loader works on host batches after the module moved...
    module = load_source(LOADER_TIME)["Walker"]().to("meta")
    assert next(iter(module.loader())).device.type == "cpu"
    # ...and with `step` registered, the collate_fn meets a moved table.
    would_be = LOADER_TIME.replace("self.step = torch.arange(3)",
                                   'self.register_buffer("step", torch.arange(3), persistent=False)')
    moved = load_source(would_be)["Walker"]().to("meta")
    with pytest.raises(RuntimeError, match="device"):
        next(iter(moved.loader()))


# --------------------------------------------------------------------------------------------
# DEV004: where register_buffer would raise, the finding has no fix
# --------------------------------------------------------------------------------------------

NONE_FIRST = '''\
import torch
from torch import nn


class Cached(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = None

    def forward(self, x):
        if self.mask is None:
            self.mask = torch.ones(3)
        return x * self.mask
'''

BEFORE_BASE_INIT = '''\
import torch
from torch import nn


class Early(nn.Module):
    def __init__(self):
        self.table = torch.arange(4.0)
        super().__init__()

    def forward(self, x):
        return x + self.table
'''


@pytest.mark.parametrize(
    "source, assignment, error, message, cls_name",
    [
        pytest.param(
            NONE_FIRST,
            "self.mask = torch.ones(3)",
            KeyError,
            "attribute 'mask' already exists",
            "Cached",
            id="plain-None-first",
        ),
        pytest.param(
            BEFORE_BASE_INIT,
            "self.table = torch.arange(4.0)",
            AttributeError,
            r"cannot assign buffer before Module.__init__\(\) call",
            "Early",
            id="before-super-init",
        ),
    ],
)
def test_dev004_refuses_a_fix_that_would_raise(source, assignment, error, message, cls_name):
    (finding,) = findings(source, "DEV004")
    assert finding.fix is None
    assert "DEV004" not in codes(fix(source, unsafe=True).fixed)

    # The code as written runs...
    module = load_source(source)[cls_name]()
    module(torch.ones(3) if cls_name == "Cached" else torch.zeros(4))

    # ...and the fix the rule would have made, built by hand, does not.
    name = assignment.split(" = ")[0].split(".")[1]
    value = assignment.split(" = ")[1]
    would_be = source.replace(assignment, f'self.register_buffer("{name}", {value}, persistent=False)')
    assert would_be != source
    would_be_cls = load_source(would_be)[cls_name]
    with pytest.raises(error, match=message):
        would_be_cls()(torch.ones(3) if cls_name == "Cached" else torch.zeros(4))


# Bugs found: the same refusal is missing where the attribute already exists in other ways.

CLASS_LEVEL_DEFAULT = '''\
import torch
from torch import nn


class Cached(nn.Module):
    mask = None  # filled on first use

    def forward(self, x):
        if self.mask is None:
            self.mask = torch.ones(3)
        return x * self.mask
'''

INHERITED_NONE = '''\
import torch
from torch import nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = None


class Child(Base):
    def forward(self, x):
        self.cache = torch.ones(3)
        return x * self.cache
'''


@pytest.mark.parametrize(
    "source, cls_name", [(CLASS_LEVEL_DEFAULT, "Cached"), (INHERITED_NONE, "Child")], ids=["class-level", "inherited"]
)
def test_dev004_fix_keeps_modules_with_an_existing_attribute_working(source, cls_name):
    load_source(source)[cls_name]()(torch.ones(3))  # runs as written
    fixed = fix(source).text
    load_source(fixed)[cls_name]()(torch.ones(3))  # KeyError: attribute '...' already exists


CLASSMETHOD_TABLE = '''\
import torch
from torch import nn


class Lookup(nn.Module):
    @classmethod
    def build_table(cls, n):
        cls.table = torch.arange(float(n))

    def forward(self, x):
        return x + self.table
'''


def test_dev004_leaves_classmethods_alone():
    before = load_source(CLASSMETHOD_TABLE)["Lookup"]
    before.build_table(3)
    assert torch.equal(before()(torch.zeros(3)), torch.arange(3.0))
    after = load_source(fix(CLASSMETHOD_TABLE).text)["Lookup"]
    after.build_table(3)  # TypeError: register_buffer() missing 1 required positional argument
    assert torch.equal(after()(torch.zeros(3)), torch.arange(3.0))


# --------------------------------------------------------------------------------------------
# DEV009: a plain container of modules or parameters becomes an nn container
# --------------------------------------------------------------------------------------------

MIXTURE = '''\
import torch
{nn_import}


class Mixture(nn.Module):
    def __init__(self, dim=4, depth=2):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.layers = [nn.Linear(dim, dim) for _ in range(depth)]
        self.heads = {{"a": nn.Linear(dim, 2), "b": nn.Linear(dim, 2)}}
        self.scales = [nn.Parameter(torch.ones(dim)) for _ in range(depth)]
        self.norms = []
        for _ in range(depth):
            self.norms.append(nn.LayerNorm(dim))

    def forward(self, x):
        x = self.embed(x)
        for layer, norm, scale in zip(self.layers, self.norms, self.scales):
            x = norm(layer(x)) * scale
        return self.heads["a"](x) + self.heads["b"](x)
'''
CONTAINED = ("layers", "heads", "scales", "norms")


def _mixture(nn_import):
    source = MIXTURE.format(nn_import=nn_import)
    return source.replace("nn.", "torch.nn.") if nn_import == "import torch.nn" else source


def test_dev009_fix_puts_the_contained_modules_in_the_tree():
    source = _mixture("from torch import nn")
    found = findings(source, "DEV009")
    assert [f.message.split("`")[1] for f in found] == [f"self.{name}" for name in CONTAINED]
    assert all(f.fix is not None and f.fix.applicability == "unsafe" for f in found)
    assert "DEV009" not in codes(fix(source).fixed)  # unsafe: not applied by a plain --fix
    result = fix(source, unsafe=True)
    assert "DEV009" not in codes(result.remaining)
    assert "self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])" in result.text
    assert "self.heads = nn.ModuleDict({" in result.text
    assert "self.scales = nn.ParameterList([nn.Parameter(torch.ones(dim)) for _ in range(depth)])" in result.text
    assert "self.norms = nn.ModuleList()" in result.text

    torch.manual_seed(0)
    before = load_source(source)["Mixture"]()
    torch.manual_seed(0)
    after = load_source(result.text)["Mixture"]()
    x = torch.randn(3, 4)
    assert torch.equal(before(x), after(x))  # same weights, same outputs

    # Before the fix the contained modules and parameters are invisible to the module ...
    assert len(list(before.parameters())) == 2  # only `embed`
    assert not any(key.startswith(CONTAINED) for key in before.state_dict())
    # ... after it, parameters() (so the optimizer) and state_dict() hold them.
    n_contained = 2 * 2 + 2 * 2 + 2 + 2 * 2  # layers, heads, scales, norms
    assert len(list(after.parameters())) == 2 + n_contained
    assert {key.split(".")[0] for key in after.state_dict()} == {"embed", *CONTAINED}
    torch.optim.SGD(after.parameters(), lr=0.1)  # every weight now trains

    # model.to(device) left them behind; now they move.
    before.to("meta")
    after.to("meta")
    assert before.embed.weight.device.type == "meta"
    assert before.layers[0].weight.device.type == "cpu" and before.scales[0].device.type == "cpu"
    assert before.heads["a"].weight.device.type == "cpu" and before.norms[0].weight.device.type == "cpu"
    assert {p.device.type for p in after.parameters()} == {"meta"}

    # .train()/.eval() now reach them too.
    after.eval()
    assert not after.norms[0].training and before.eval().norms[0].training


@pytest.mark.parametrize("nn_import, wrapper", [
    ("from torch import nn", "nn.ModuleList("),
    ("import torch.nn as nn", "nn.ModuleList("),
    ("import torch.nn", "torch.nn.ModuleList("),
])
def test_dev009_fix_spells_torch_nn_as_the_file_does(nn_import, wrapper):
    source = _mixture(nn_import)
    result = fix(source, unsafe=True)
    assert wrapper + "[" in result.text and "DEV009" not in codes(result.remaining)
    after = load_source(result.text)["Mixture"]()
    assert len(list(after.parameters())) == 2 + 14


def test_dev009_gives_no_fix_where_the_file_binds_no_torch_nn():
    source = '''"""Layers of mylib, a wrapper around torch."""
from mylib import LinearLayer, Module


class Stack(Module):
    def __init__(self):
        super().__init__()
        self.layers = [LinearLayer(4) for _ in range(2)]

    def forward(self, x):
        return [layer(x) for layer in self.layers]
'''
    (finding,) = findings(source, "DEV009")
    assert finding.fix is None


STACK_IMPORTED_BELOW = {
    "under __main__": ("", 'if __name__ == "__main__":\n    import torch\n    print(Stack())\n'),
    "after the class": ("", "import torch\n"),
}


@pytest.mark.parametrize("where", STACK_IMPORTED_BELOW)
def test_dev009_gives_no_fix_when_torch_nn_is_bound_only_below_the_class(where):
    """A fix inside a method writes only names bound where it runs: an import below the class (or
    only when the file runs as a script) is no such name."""
    _, below = STACK_IMPORTED_BELOW[where]
    source = f'''from torch.nn import Linear, Module


class Stack(Module):
    def __init__(self):
        super().__init__()
        self.layers = [Linear(4, 4) for _ in range(2)]

    def forward(self, x):
        return [layer(x) for layer in self.layers]


{below}'''
    (finding,) = findings(source, "DEV009")
    assert finding.fix is None
    assert len(list(load_source(source)["Stack"]().parameters())) == 0  # runs, as it did


@pytest.mark.parametrize("where", STACK_IMPORTED_BELOW)
def test_dev004_nn_buffer_falls_back_to_register_buffer_when_torch_is_bound_only_below(where):
    """With a target torch of 2.5 the fix writes `nn.Buffer` only where the file names it above
    the class; else `self.register_buffer(...)`, which needs no import, and the fixed class runs."""
    _, below = STACK_IMPORTED_BELOW[where]
    source = f'''from torch import arange, long
from torch.nn import Module


class Index(Module):
    def __init__(self, n=4):
        super().__init__()
        self.index = arange(n, dtype=long)

    def forward(self, x):
        return x[self.index]


{below}'''
    result = fixer.fix_text(source, _check_for((2, 5)), unsafe=False)
    assert result.problem is None and codes(result.fixed) == ["DEV004"]
    assert 'self.register_buffer("index", arange(n, dtype=long), persistent=False)' in result.text
    fixed = load_source(result.text)["Index"]()
    assert torch.equal(fixed(torch.arange(10.0)), torch.arange(4.0))
    assert fixed.to("meta").index.device.type == "meta"


# --------------------------------------------------------------------------------------------
# DEV002 (and DEV006): checkpoints that claim CUDA storages, on a machine without CUDA
# --------------------------------------------------------------------------------------------

# Run in a subprocess: register_package changes a process-wide registry.
CRAFT = textwrap.dedent(
    '''\
    import sys
    import torch
    from torch import nn

    def tagger(obj):
        if isinstance(obj, (torch.storage.UntypedStorage, torch.storage.TypedStorage)):
            return "cuda:0"
        return None

    def deserializer(obj, location):
        return None

    torch.manual_seed(0)
    plain = nn.Linear(4, 3).state_dict()
    torch.save(plain, sys.argv[2])  # before the tagger: an ordinary CPU checkpoint
    torch.serialization.register_package(-100, tagger, deserializer)
    torch.save(plain, sys.argv[1])  # every storage now claims cuda:0
    '''
)


def _expected_model():
    torch.manual_seed(0)
    return nn.Linear(4, 3)  # the same weights the subprocess saved


def _blank_model():
    model = nn.Linear(4, 3)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model


def _assert_loaded(model):
    expected = _expected_model()
    for (name, got), (_, want) in zip(model.state_dict().items(), expected.state_dict().items()):
        assert got.device.type == "cpu"
        assert torch.equal(got, want), name


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    folder = tmp_path_factory.mktemp("checkpoints")
    cuda_path, cpu_path = folder / "cuda_tagged.pt", folder / "cpu.pt"
    subprocess.run([sys.executable, "-c", CRAFT, str(cuda_path), str(cpu_path)], check=True, timeout=120)
    # The checkpoint really claims CUDA storages, and the plain one does not.
    def pickled(path):
        with zipfile.ZipFile(path) as archive:
            return archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))

    assert b"cuda:0" in pickled(cuda_path)
    assert b"cuda:0" not in pickled(cpu_path)
    # This process has no custom package: torch.load behaves as on any CPU-only machine.
    assert _registry_is_clean()
    assert not torch.cuda.is_available()
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        torch.load(cuda_path)  # noqa: DEV002 (the failure under test)
    return cuda_path, cpu_path


LOADER = "import torch\n\n\ndef load(model, path):\n    model.load_state_dict(torch.load(path))\n"


def test_dev002_fix_loads_a_gpu_checkpoint_on_a_cpu_machine(checkpoints):
    cuda_path, _ = checkpoints
    assert codes(findings(LOADER)) == ["DEV002"]
    result = fix(LOADER)
    assert codes(result.fixed) == ["DEV002"]
    assert result.fixed[0].fix.applicability == "safe"
    assert 'model.load_state_dict(torch.load(path, map_location="cpu"))' in result.text
    assert result.remaining == []

    before = load_source(LOADER)["load"]
    after = load_source(result.text)["load"]

    model = _blank_model()
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        before(model, cuda_path)
    assert all(torch.count_nonzero(p) == 0 for p in model.parameters())

    after(model, cuda_path)
    _assert_loaded(model)


MAP_LOCATION_ON_LOAD_STATE_DICT = (
    "import torch\n\n\ndef load(model, path):\n"
    '    model.load_state_dict(torch.load(path), map_location="cpu")\n'
)


def test_dev006_and_dev002_fix_moves_map_location_into_torch_load(checkpoints):
    cuda_path, cpu_path = checkpoints
    source = MAP_LOCATION_ON_LOAD_STATE_DICT
    assert sorted(codes(findings(source))) == ["DEV002", "DEV006"]
    result = fix(source)
    assert "DEV006" in codes(result.fixed)
    assert all(f.fix.applicability == "safe" for f in result.fixed)
    assert 'model.load_state_dict(torch.load(path, map_location="cpu"))' in result.text
    assert result.remaining == []

    before = load_source(source)["load"]
    after = load_source(result.text)["load"]

    # Real torch: load_state_dict takes no map_location, even for a CPU checkpoint...
    with pytest.raises(TypeError, match="unexpected keyword argument 'map_location'"):
        before(_blank_model(), cpu_path)
    # ...and a GPU checkpoint fails earlier, in torch.load itself.
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        before(_blank_model(), cuda_path)

    for path in (cpu_path, cuda_path):
        model = _blank_model()
        after(model, path)
        _assert_loaded(model)


# Bug found: with `assign=True`, load_state_dict does not copy the tensors onto the module's
# device, it adopts them; so map_location="cpu" is not a safe change there. A subprocess plays
# the GPU box: storages tagged "cuda" are restored onto "meta", which stands in for the GPU
# (the model lives there too), as torch.load restores them onto cuda:0 on a real GPU box.
GPU_BOX = textwrap.dedent(
    '''\
    import json
    import sys
    import torch
    from torch import nn

    def restore_on_the_gpu(obj, location):
        if location.startswith("cuda"):
            return torch.UntypedStorage(obj.nbytes(), device="meta")
        return None

    torch.serialization.register_package(-100, lambda obj: None, restore_on_the_gpu)
    devices = []
    for source in json.loads(sys.argv[2]):
        namespace = {}
        exec(compile(source, "m.py", "exec"), namespace)
        model = nn.Linear(4, 3).to("meta")  # model.to("cuda")
        namespace["load"](model, sys.argv[1])
        devices.append(sorted({p.device.type for p in model.parameters()}))
    print(json.dumps(devices))
    '''
)

ASSIGN_LOADER = "import torch\n\n\ndef load(model, path):\n    model.load_state_dict(torch.load(path), assign=True)\n"


def test_dev002_fix_is_not_called_safe_when_load_state_dict_assigns(checkpoints):
    cuda_path, _ = checkpoints
    result = fix(ASSIGN_LOADER)
    out = subprocess.run(
        [sys.executable, "-c", GPU_BOX, str(cuda_path), json.dumps([ASSIGN_LOADER, result.text])],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    before, after = json.loads(out)
    assert before == ["meta"]  # the parameters stay on the "GPU"
    assert after == before  # fails: the fixed code leaves them on the CPU


# Inside `__setstate__` the object restored is whatever the pickle held, and its
# `load_state_dict` need not copy onto a module's device: here it adopts the tensors, so on the
# GPU box the loaded weight lands on the "GPU" before the fix and on the CPU after it.
SETSTATE_LOADER = textwrap.dedent(
    '''\
    import torch


    class Stats:
        def load_state_dict(self, state):
            self.weight = state["weight"]

        def __setstate__(self, state):
            self.load_state_dict(torch.load(state["path"]))


    def load(path):
        stats = Stats.__new__(Stats)
        stats.__setstate__({"path": path})
        return stats.weight.device.type
    '''
)
SETSTATE_BOX = textwrap.dedent(
    '''\
    import json
    import sys
    import torch

    def restore_on_the_gpu(obj, location):
        if location.startswith("cuda"):
            return torch.UntypedStorage(obj.nbytes(), device="meta")
        return None

    torch.serialization.register_package(-100, lambda obj: None, restore_on_the_gpu)
    torch.cuda.is_available = lambda: True  # the GPU box has CUDA
    devices = []
    for source in json.loads(sys.argv[2]):
        namespace = {}
        exec(compile(source, "m.py", "exec"), namespace)
        devices.append(namespace["load"](sys.argv[1]))
    print(json.dumps(devices))
    '''
)


def test_dev002_fix_inside_setstate_keeps_the_gpu_box_and_loads_without_cuda(checkpoints):
    """`map_location="cpu"` would move the restored weight off the GPU box's GPU (its
    `load_state_dict` adopts the tensors); the unsafe fix maps to the CPU only without CUDA."""
    cuda_path, _ = checkpoints
    (finding,) = findings(SETSTATE_LOADER, "DEV002")
    assert finding.fix.applicability == "unsafe"
    assert fix(SETSTATE_LOADER).text == SETSTATE_LOADER  # safe fixes leave it alone
    fixed = fix(SETSTATE_LOADER, unsafe=True).text
    assert 'torch.load(state["path"], map_location=None if torch.cuda.is_available() else "cpu")' in fixed
    out = subprocess.run(
        [sys.executable, "-c", SETSTATE_BOX, str(cuda_path), json.dumps([SETSTATE_LOADER, fixed])],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    before, after = json.loads(out)
    assert before == "meta"  # the weight lands on the "GPU"
    assert after == before  # and still does after the fix
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        load_source(SETSTATE_LOADER)["load"](str(cuda_path))  # this machine has no CUDA
    assert load_source(fixed)["load"](str(cuda_path)) == "cpu"  # the fixed code loads here


# Elsewhere too (a value read from the checkpoint, not put into a module): the GPU box is kept,
# and a machine without CUDA loads what used to fail there.
READER = textwrap.dedent(
    '''\
    import torch


    def load(path):
        return torch.load(path)["weight"].device.type
    '''
)


def test_dev002_unsafe_fix_elsewhere_keeps_the_gpu_box_and_loads_without_cuda(checkpoints):
    cuda_path, _ = checkpoints
    fixed = fix(READER, unsafe=True).text
    assert 'torch.load(path, map_location=None if torch.cuda.is_available() else "cpu")' in fixed
    assert fix(fixed, unsafe=True).text == fixed  # a second fix changes nothing
    out = subprocess.run(
        [sys.executable, "-c", SETSTATE_BOX, str(cuda_path), json.dumps([READER, fixed])],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    assert json.loads(out) == ["meta", "meta"]
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        load_source(READER)["load"](str(cuda_path))
    assert load_source(fixed)["load"](str(cuda_path)) == "cpu"


# DEV007: `.to(X)` at the use puts a loader's batch where the module was moved ("meta" stands in
# for the accelerator); without the fix the same loop fails.
DEV007_LOOP = textwrap.dedent(
    '''\
    import torch
    from torch import nn


    def train_epoch(model, train_loader, device):
        model.to(device)
        criterion = nn.CrossEntropyLoss()
        seen = []
        for x, y in train_loader:
            logits = model(x)
            loss = criterion(logits, y)
            seen.append((logits.device.type, loss.device.type))
        return seen
    '''
)


def test_dev007_fix_moves_the_batch_to_the_modules_device():
    result = fix(DEV007_LOOP, unsafe=True)
    assert "model(x.to(device))" in result.text and "criterion(logits, y.to(device))" in result.text
    assert codes(findings(result.text, "DEV007")) == []
    loader = [(torch.randn(2, 4), torch.tensor([0, 2]))]
    inputs = []
    model = nn.Linear(4, 3)
    model.register_forward_pre_hook(lambda module, args: inputs.append(args[0].device.type))
    with pytest.raises(RuntimeError):
        load_source(DEV007_LOOP)["train_epoch"](model, loader, "meta")
    model = nn.Linear(4, 3)
    model.register_forward_pre_hook(lambda module, args: inputs.append(args[0].device.type))
    inputs.clear()
    seen = load_source(result.text)["train_epoch"](model, loader, "meta")
    assert inputs == ["meta"]
    assert seen == [("meta", "meta")]
    assert all(p.device.type == "meta" for p in model.parameters())


# --------------------------------------------------------------------------------------------
# DEV010: the fix assigns the moved tensor back, so it is on the target device afterwards
# --------------------------------------------------------------------------------------------

DISCARDED_MOVES = '''\
import torch


def prepare(batch, device):
    images, targets = batch
    images.to(device)
    targets.to(device)
    scale = torch.ones(3)
    scale.to(device)
    return images * scale, targets.view(-1)


class Holder:
    def __init__(self, device):
        self.table = torch.arange(4)
        self.table.to(device)
'''


def test_dev010_fix_leaves_the_tensor_on_the_target_device():
    assert codes(findings(DISCARDED_MOVES, "DEV010")) == ["DEV010"] * 4
    result = fix(DISCARDED_MOVES)
    assert codes(result.fixed) == ["DEV010"] * 4 and all(f.fix.applicability == "safe" for f in result.fixed)
    assert "DEV010" not in codes(result.remaining)
    before, after = load_source(DISCARDED_MOVES), load_source(result.text)
    batch = (torch.randn(2, 3), torch.zeros(2, dtype=torch.long))

    images, targets = before["prepare"](batch, "meta")  # the statements did nothing
    assert images.device.type == "cpu" and targets.device.type == "cpu"
    assert before["Holder"]("meta").table.device.type == "cpu"

    images, targets = after["prepare"](batch, "meta")
    assert images.device.type == "meta" and targets.device.type == "meta"
    assert after["Holder"]("meta").table.device.type == "meta"


# --------------------------------------------------------------------------------------------
# DEV012: after the fix, tensors made in forward follow the module through a later `.to()`
# --------------------------------------------------------------------------------------------

STALE_DEVICE = '''\
import torch
from torch import nn


class NoisyEncoder(nn.Module):
    def __init__(self, dim, device="cpu"):
        super().__init__()
        self.proj = nn.Linear(dim, dim, device=device)
        self.device = device

    def forward(self, x):
        noise = torch.zeros(x.shape, device=self.device)
        offset = torch.ones(x.shape[-1]).to(self.device)
        return self.proj(x + noise + offset), noise, offset
'''


def test_dev012_fix_follows_a_later_move_of_the_module():
    assert codes(findings(STALE_DEVICE, "DEV012")) == ["DEV012", "DEV012"]
    assert "DEV012" not in codes(fix(STALE_DEVICE).fixed)  # unsafe only
    result = fix(STALE_DEVICE, unsafe=True)
    assert [f.fix.applicability for f in result.fixed if f.code == "DEV012"] == ["unsafe", "unsafe"]
    assert "DEV012" not in codes(result.remaining)
    before = load_source(STALE_DEVICE)["NoisyEncoder"](4).to("meta")
    after = load_source(result.text)["NoisyEncoder"](4).to("meta")
    x = torch.randn(2, 4, device="meta")

    with pytest.raises(RuntimeError):  # the tensors stayed on the CPU the module was built on
        before(x)
    assert before.device == "cpu"

    out, noise, offset = after(x)
    assert out.device.type == noise.device.type == offset.device.type == "meta"


# DEV012: no fix where the input's device would break a host end (`.tolist()`) or where it
# would write `x.to(x.device)`, a move of `x` to where it already is
HOST_END = '''\
import torch
from torch import nn


class Positions(nn.Module):
    def __init__(self, dim, device="cpu"):
        super().__init__()
        self.proj = nn.Linear(dim, dim, device=device)
        self.device = device

    def forward(self, x):
        order = torch.arange(x.shape[0], device=self.device).tolist()
        scale = torch.ones(x.shape[-1], device=self.device)
        return self.proj(x * scale), order


class Mover(nn.Module):
    def __init__(self, dim, device="cpu"):
        super().__init__()
        self.proj = nn.Linear(dim, dim, device=device)
        self.device = device

    def forward(self, x):
        x = x.to(self.device)
        return self.proj(x)
'''


def test_dev012_fix_is_withheld_at_host_ends_and_where_it_would_move_nothing():
    found = findings(HOST_END, "DEV012")
    assert len(found) == 3
    assert "next(self.parameters()).device" in found[2].message and found[2].fix is None
    result = fix(HOST_END, unsafe=True)
    assert [f.row for f in result.fixed if f.code == "DEV012"] == [found[1].row]  # `scale` only
    assert "x.to(x.device)" not in result.text and "x = x.to(self.device)" in result.text
    assert "torch.arange(x.shape[0], device=self.device).tolist()" in result.text

    namespace = load_source(result.text)
    module = namespace["Positions"](4).to("meta")  # the module and its input on the "accelerator"
    out, order = module(torch.randn(3, 4, device="meta"))
    assert out.device.type == "meta" and order == [0, 1, 2]
    with pytest.raises((NotImplementedError, RuntimeError)):  # what the withheld fix would have run
        torch.arange(3, device=torch.empty(0, device="meta").device).tolist()


# DEV012: no fix on a receiver made from `x` by code that keeps its device (`torch.cat` of it,
# a name computed from it, `x.new_zeros`): `x.device` would move nothing; another input keeps it
DERIVED = '''\
import torch
from torch import nn


class Joiner(nn.Module):
    def __init__(self, dim, device="cpu"):
        super().__init__()
        self.proj = nn.Linear(2 * dim, dim, device=device)
        self.device = device

    def forward(self, x, y):
        xy = torch.cat([x, y], dim=-1).to(self.device)
        std = (1 + torch.sigmoid(x)).to(self.device)
        pad = x.new_zeros(x.shape, device=self.device)
        other = y.to(self.device)
        return self.proj(xy) + std + pad + other
'''


def test_dev012_no_fix_on_a_receiver_derived_from_the_input():
    found = findings(DERIVED, "DEV012")
    assert len(found) == 4
    assert [f.fix is None for f in found] == [True, True, True, False]
    assert all("next(self.parameters()).device" in f.message for f in found[:3])
    result = fix(DERIVED, unsafe=True)
    assert "other = y.to(x.device)" in result.text and "torch.cat([x, y], dim=-1).to(self.device)" in result.text
    namespace = load_source(result.text)
    out = namespace["Joiner"](3)(torch.randn(2, 3), torch.randn(2, 3))  # the fixed code still runs
    assert out.shape == (2, 3)


# --------------------------------------------------------------------------------------------
# DEV003: `device=X.device` puts the new tensor where X is; it is withheld where the value's
# uses reach a host end (`.tolist()`, `.numpy()`, `.item()`, ...) with no `.cpu()` between
# --------------------------------------------------------------------------------------------

HOST_ENDS = '''\
import numpy as np
import torch


def sequence_mask(lengths: torch.Tensor, n: int):
    steps = torch.arange(n)
    return steps[None, :] < lengths[:, None]


def counts_on_host(x: torch.Tensor, n: int):
    bins = torch.arange(n)
    hits = (x[:, None] == bins).sum(0)
    return hits.cpu().tolist()


def counts(x: torch.Tensor, n: int):
    bins = torch.arange(n)
    hits = (x[:, None] == bins).sum(0)
    return hits.tolist()


def shortest(x: torch.Tensor, lens):
    lengths = torch.tensor(lens) * x.new_ones(len(lens), dtype=torch.long)
    return int(np.amin(lengths))
'''


def test_dev003_fix_places_the_factory_and_is_withheld_before_a_host_end():
    found = findings(HOST_ENDS, "DEV003")
    assert [f.row for f in found] == [6, 11, 17, 23]
    assert [f.fix is not None for f in found] == [True, True, False, False]
    assert "DEV003" not in codes(fix(HOST_ENDS).fixed)  # unsafe only
    result = fix(HOST_ENDS, unsafe=True)
    assert [f.row for f in result.remaining if f.code == "DEV003"] == [17, 23]
    assert "bins = torch.arange(n)\n    hits = (x[:, None] == bins).sum(0)\n    return hits.tolist()" in result.text
    before, after = load_source(HOST_ENDS), load_source(result.text)

    lengths, x = torch.tensor([1, 3]), torch.tensor([0, 2, 2, 1])
    assert torch.equal(before["sequence_mask"](lengths, 4), after["sequence_mask"](lengths, 4))  # the CPU
    assert before["counts_on_host"](x, 3) == after["counts_on_host"](x, 3) == after["counts"](x, 3) == [1, 1, 2]

    meta_lengths = torch.empty(2, dtype=torch.long, device="meta")  # "meta" stands in for the GPU
    assert after["sequence_mask"](meta_lengths, 4).device.type == "meta"
    with pytest.raises(RuntimeError):  # the CPU steps meet the device lengths
        before["sequence_mask"](meta_lengths, 4)

    # the withheld fix would have moved the host computation onto the device, and broken `.tolist()`
    would_be = load_source(HOST_ENDS.replace("bins = torch.arange(n)", "bins = torch.arange(n, device=x.device)"))
    with pytest.raises((RuntimeError, NotImplementedError)):
        would_be["counts"](torch.empty(4, dtype=torch.long, device="meta"), 3)


# --------------------------------------------------------------------------------------------
# DEV011: with a target torch of 2.6, the fix calls the torch.accelerator equivalent when an
# accelerator is there; the fixed code runs on the CPU build where the original raises
# --------------------------------------------------------------------------------------------

TIMING = '''\
import time

import torch


def timed(model, batch):
    start = time.perf_counter()
    out = model(batch)
    torch.cuda.synchronize()
    return out, time.perf_counter() - start


def pick(index):
    torch.cuda.set_device(index)
    return index
'''


def _check_for(target):
    return Linter(Settings(root=Path("."), target_torch_setting=target), Path("m.py")).check


@pytest.mark.skipif(torch.cuda.is_available() or torch.accelerator.is_available(), reason="needs a machine without an accelerator")
def test_dev011_fixed_calls_run_where_the_originals_raise():
    assert {f.fix is None for f in _check_for((2, 5))(TIMING) if f.code == "DEV011"} == {True}
    result = fixer.fix_text(TIMING, _check_for((2, 6)), unsafe=True)
    assert result.problem is None and [f.code for f in result.fixed] == ["DEV011", "DEV011"]
    assert "torch.accelerator.synchronize()" in result.text and "torch.accelerator.set_device_index(index)" in result.text
    model = nn.Linear(2, 2)
    original, fixed = load_source(TIMING), load_source(result.text)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        original["timed"](model, torch.zeros(1, 2))
    with pytest.raises(AttributeError):
        original["pick"](0)
    out, _ = fixed["timed"](model, torch.zeros(1, 2))
    assert torch.equal(out, model(torch.zeros(1, 2)))
    assert fixed["pick"](0) == 0
    # the bare replacement would not do: torch.accelerator raises without an accelerator too
    with pytest.raises(RuntimeError, match="none is available"):
        torch.accelerator.synchronize()
    assert not [f for f in _check_for((2, 6))(result.text) if f.code == "DEV011"]


# --------------------------------------------------------------------------------------------
# DEV001, DEV005, DEV008: the fixed code runs where the original raises, and computes the same
# --------------------------------------------------------------------------------------------

HARDCODED = '''\
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def embed(x):
    return x.cuda() * 2


def make(n):
    return torch.zeros(n, device="cuda")


def place(model):
    return model.to("cuda")


def predict(model, x):
    model = model.to(device)
    with torch.no_grad():
        out = model(x.to(device))
    return out.numpy()
'''


@pytest.mark.skipif(torch.cuda.is_available(), reason="the originals raise only where CUDA is missing")
def test_dev001_dev005_dev008_fixed_code_runs_on_the_cpu_and_follows_the_device_name():
    assert codes(findings(HARDCODED)) == ["DEV001", "DEV005", "DEV005", "DEV008"]
    result = fix(HARDCODED, unsafe=True)
    assert codes(result.fixed) == ["DEV001", "DEV005", "DEV005", "DEV008"] and not result.remaining
    before, after = load_source(HARDCODED), load_source(result.text)
    x, model = torch.randn(3), nn.Linear(3, 2)

    for call in (lambda ns: ns["embed"](x), lambda ns: ns["make"](4), lambda ns: ns["place"](model)):
        with pytest.raises((AssertionError, RuntimeError)):  # "Torch not compiled with CUDA enabled"
            call(before)
    assert torch.equal(after["embed"](x), x * 2) and torch.equal(after["make"](4), torch.zeros(4))
    assert after["place"](model) is model
    assert (after["predict"](model, x) == before["predict"](model, x)).all()  # `.cpu()` keeps the values

    # where the file's device name says the meta device (the stand-in accelerator), the fixed
    # placements follow it, as the originals meant to
    after["device"] = torch.device("meta")
    assert after["embed"](x).device.type == "meta" and after["make"](4).device.type == "meta"
    assert next(after["place"](nn.Linear(3, 2)).parameters()).device.type == "meta"
