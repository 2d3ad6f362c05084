"""`name_bound_at`: whether a name is bound where, and when, a piece of code runs (what a fix may write)."""
import libcst as cst
import pytest

from devlint.core import syntax
from devlint.semantic.bindings import bound_values, name_bound_at


def _bound_at_marker(source: str, name: str = "device") -> bool:
    """name_bound_at for the node `HERE` in source."""
    module = cst.parse_module(source)
    stack = [(module, [module])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, cst.Name) and node.value == "HERE":
            return name_bound_at(name, path)
        stack.extend((child, path + [child]) for child in syntax.children(node))
    raise AssertionError("no HERE in the source")


BOUND = {
    "module-level, before the function": "device = 1\ndef f():\n    HERE\n",
    "module-level, before the code": "device = 1\nHERE\n",
    "imported": "from cfg import device\ndef f():\n    HERE\n",
    "parameter": "def f(device):\n    HERE\n",
    "parameter of the enclosing function": "def g(device):\n    def f():\n        HERE\n",
    "earlier local": "def f():\n    device = 2\n    HERE\n",
    "tuple target": "def f():\n    device, rank = 1, 2\n    HERE\n",
    "loop variable": "def f(xs):\n    for device in xs:\n        HERE\n",
    "with ... as": "def f(a):\n    with a as device:\n        HERE\n",
    "the same __main__ block": "if __name__ == '__main__':\n    device = 1\n    HERE\n",
    "a function in the same __main__ block": "if __name__ == '__main__':\n    device = 1\n    def f():\n        HERE\n",
    "a method, global before the class": "device = 1\nclass C:\n    def m(self):\n        HERE\n",
    "a class body's own earlier binding": "class C:\n    device = 1\n    x = HERE\n",
    "global declaration": "device = 1\ndef f():\n    global device\n    HERE\n    device = 3\n",
    "every arm of an if": "def f(a):\n    if a:\n        device = 1\n    elif a > 1:\n        device = 2\n    else:\n        device = 3\n    HERE\n",
    "every arm, nested": "def f(a, b):\n    if a:\n        if b:\n            device = 1\n        else:\n            device = 2\n    else:\n        import device\n    HERE\n",
    "inside the same arm": "def f(a):\n    if a:\n        device = 1\n        HERE\n",
    "inside the same loop": "def f(xs):\n    for x in xs:\n        device = x\n        HERE\n",
    "a try body": "try:\n    import device\nexcept ImportError:\n    pass\ndef f():\n    HERE\n",
    "every arm at module level": "if a:\n    device = 1\nelse:\n    device = 2\ndef f():\n    HERE\n",
}
UNBOUND = {
    "global bound later in the file": "def f():\n    HERE\ndevice = 1\n",
    "one arm of an earlier if": "def f(a):\n    if a:\n        device = 1\n    HERE\n",
    "another arm": "def f(a):\n    if a:\n        device = 1\n    else:\n        HERE\n",
    "an if without else": "def f(a):\n    if a:\n        device = 1\n    elif a > 1:\n        device = 2\n    HERE\n",
    "a loop body that may not run": "def f(xs):\n    for x in xs:\n        device = x\n    HERE\n",
    "a while body": "def f(n):\n    while n:\n        device = n\n        n -= 1\n    HERE\n",
    "an except block": "def f():\n    try:\n        pass\n    except OSError:\n        device = 1\n    HERE\n",
    "one arm at module level": "if a:\n    device = 1\ndef f():\n    HERE\n",
    "global bound only under __main__": "def f():\n    HERE\nif __name__ == '__main__':\n    device = 1\n",
    "global under __main__ above the function": "if __name__ == '__main__':\n    device = 1\ndef f():\n    HERE\n",
    "module-level code before the binding": "HERE\ndevice = 1\n",
    "a later local shadows the global": "device = 1\ndef f():\n    HERE\n    device = 2\n",
    "the value of its own binding": "device = 0\ndef f():\n    device = HERE\n",
    "a tuple display is not a target": "def f():\n    x = (device, 1)\n    HERE\n",
    "annotation without a value": "def f():\n    device: str\n    HERE\n",
    "a class attribute seen from a method": "class C:\n    device = 1\n    def m(self):\n        HERE\n",
    "a default, global bound later": "def f(x=HERE):\n    pass\ndevice = 1\n",
    "never bound": "def f():\n    HERE\n",
}


@pytest.mark.parametrize("source", BOUND.values(), ids=BOUND.keys())
def test_bound(source):
    assert _bound_at_marker(source)


@pytest.mark.parametrize("source", UNBOUND.values(), ids=UNBOUND.keys())
def test_unbound(source):
    assert not _bound_at_marker(source)


# --- receiver_may_be_torch_object: a method matched by name is torch's only on a torch object -----
def _receiver_at_marker(source: str) -> bool:
    """receiver_may_be_torch_object for the receiver of the call `<receiver>.HERE(...)`."""
    from devlint.semantic.facts import FileFacts

    module = cst.parse_module(source)
    stack = [(module, [module])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, cst.Attribute) and node.attr.value == "HERE":
            return FileFacts(module).receiver_may_be_torch_object(node.value, path)
        stack.extend((child, path + [child]) for child in syntax.children(node))
    raise AssertionError("no .HERE in the source")


RECEIVERS = {
    "from-import": ("from pkg import dist_util\ndef f(p):\n    dist_util.HERE(p)\n", False),
    "import": ("import utils\ndef f(p):\n    utils.HERE(p)\n", False),
    "import a.b as c": ("import a.b as c\nc.HERE(1)\n", False),
    "import in the function": ("def f(p):\n    from pkg import dist_util\n    dist_util.HERE(p)\n", False),
    "a plain class of the file": ("class Registry:\n    pass\nRegistry.HERE(1)\n", False),
    "a parameter hides the import": ("import utils\ndef f(utils):\n    utils.HERE(1)\n", True),
    "a local hides the import": ("import utils\ndef f(make):\n    utils = make()\n    utils.HERE(1)\n", True),
    "a parameter": ("def f(model):\n    model.HERE(1)\n", True),
    "an attribute chain": ("import utils\nutils.model.HERE(1)\n", True),
    "a module class of the file": ("from torch import nn\nclass Net(nn.Module):\n    pass\nNet.HERE(1)\n", True),
    "an optimizer class of the file": (
        "from torch.optim import Optimizer\nclass Lamb(Optimizer):\n    pass\nLamb.HERE(1)\n", True),
}


@pytest.mark.parametrize("source, expected", RECEIVERS.values(), ids=RECEIVERS.keys())
def test_receiver_may_be_torch_object(source, expected):
    assert _receiver_at_marker(source) is expected


# --- bound_values: what a name holds where the code reads it ----------------------------------------
def _values_at_marker(source: str):
    module = cst.parse_module(source)
    stack = [(module, [module])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, cst.Name) and node.value == "HERE":
            found = bound_values("device", path)
            return None if found is None else [module.code_for_node(v) for v in found]
        stack.extend((child, path + [child]) for child in syntax.children(node))
    raise AssertionError("no HERE in the source")


VALUES = {
    "module level": ('device = "cuda"\ndef f():\n    HERE\n', ['"cuda"']),
    "two module bindings": ('device = "cuda"\ndevice = pick()\ndef f():\n    HERE\n', ['"cuda"', "pick()"]),
    "a local hides the module's": ('device = "cuda"\ndef f():\n    device = pick()\n    HERE\n', ["pick()"]),
    "annotated": ('device: str = "cuda:1"\nHERE\n', ['"cuda:1"']),
    "a parameter": ('device = "cuda"\ndef f(device):\n    HERE\n', None),
    "a loop target": ("def f(xs):\n    for device in xs:\n        HERE\n", None),
    "a tuple target": ("def f():\n    device, rank = 1, 2\n    HERE\n", None),
    "never bound": ("def f():\n    HERE\n", None),
}


@pytest.mark.parametrize("source, expected", VALUES.values(), ids=VALUES.keys())
def test_bound_values(source, expected):
    assert _values_at_marker(source) == expected
