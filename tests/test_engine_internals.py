"""The engine's shortcuts agree with the libcst machinery they replace."""
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint import engine
from devlint.api import Analysis
from devlint.core import syntax
from devlint.core.positions import statement_positions
from devlint.rules import ALL_RULES, BY_CODE, NAMES
from helpers import lint

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.py"))
EXAMPLES = sorted((Path(__file__).parent.parent / "examples").rglob("*.py"))

EDGE_CASES = {
    "comments first": "# a comment\n\n# another\nimport torch\nx = torch.zeros(1).cuda()\n",
    "decorators": "import torch\n\n\n# lead\n@decorator(\n    1,\n)\n\n@other\ndef f():\n    return torch.load('p')\n",
    "semicolons": "import torch; a = 1; b = torch.load('p')\nc = 2; d = 'cuda'\n",
    "crlf": "import torch\r\n\r\nx = torch.load('p')\r\ny = 'cuda'\r\n",
    "form feed": "import torch\n\x0c\ndef f():\n    return torch.load('p')\n",
    "continuation": "import torch\nx = 1 + \\\n    2\ny = torch.load(\n    'p'\n)\n",
    "no newline at end": "import torch\nx = torch.load('p')",
    "class": "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    '''doc'''\n\n    def __init__(self):\n        super().__init__()\n        self.t = torch.zeros(3)\n\n    def forward(self, x):\n        return x + torch.ones(3)\n",
}


def _sources():
    for path in FIXTURES + EXAMPLES:
        yield path.name, path.read_text()
    yield from EDGE_CASES.items()


@pytest.mark.parametrize("name,source", list(_sources()), ids=[n for n, _ in _sources()])
def test_children_are_libcsts_without_the_layout(name, source):
    module = cst.parse_module(source)
    stack = [module]
    while stack:
        node = stack.pop()
        expected = [c for c in node.children if not syntax._is_layout(c)]
        assert [id(c) for c in syntax.children(node)] == [id(c) for c in expected], type(node).__name__
        stack.extend(expected)


@pytest.mark.parametrize("name,source", list(_sources()), ids=[n for n, _ in _sources()])
def test_positions_match_libcsts_position_provider(name, source):
    module = cst.parse_module(source)
    fast = statement_positions(module, source, list(module.body))
    slow = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    assert fast is not None
    stack = list(module.body)  # every node of every statement (the module's header and footer hold no code)
    while stack:
        node = stack.pop()
        assert fast[node] == slow[node], (type(node).__name__, module.code_for_node(node))
        stack.extend(node.children)
    # and a whole check reports the same either way
    assert engine.check_module(module, ALL_RULES, source) == engine.check_module(module, ALL_RULES)


def test_positions_fall_back_when_ast_cannot_read_the_source():
    source = "import torch\ntype X = int\nx = torch.load('p')\n"  # 3.12 syntax: ast on 3.11 cannot read it
    module = cst.parse_module(source)
    try:
        compile(source, "<s>", "exec")
    except SyntaxError:
        assert statement_positions(module, source, list(module.body)) is None
    assert [(f.code, f.row) for f in engine.check_module(module, ALL_RULES, source)] == [("DEV002", 3)]


def test_rule_names_without_loading_the_rules_match_the_rules():
    assert NAMES == {rule.code: rule.name for rule in ALL_RULES}


ANALYSED = """\
import torch
from torch import nn


class M(nn.Module):
    def forward(self, x):
        if torch.cuda.is_available():
            x = x.cuda()
        y = torch.zeros(3)
        return self.helper(x) + y.numpy()

    def helper(self, x):
        return x.to("cuda")


model = M().cuda()
state = torch.load("m.pt")
model.load_state_dict(state, map_location="cpu")
"""


def _instantiated_analyses(monkeypatch, rule_classes):
    made = []
    original = Analysis.__init__

    def record(self, ctx):
        made.append(type(self).__name__)
        original(self, ctx)

    monkeypatch.setattr(Analysis, "__init__", record)
    findings = lint(ANALYSED, tuple(rule.code for rule in rule_classes))
    return made, findings


def test_an_analysis_is_made_only_for_the_rules_that_require_it(monkeypatch):
    made, findings = _instantiated_analyses(monkeypatch, [BY_CODE["DEV006"]])
    assert made == []
    assert [f.code for f in findings] == ["DEV006"]
    made, findings = _instantiated_analyses(monkeypatch, [BY_CODE["DEV002"]])
    assert made == ["CudaGuards"]  # whether the load runs only where CUDA is (then no fix)
    assert [f.code for f in findings] == ["DEV002"]

    made, _ = _instantiated_analyses(monkeypatch, [BY_CODE["DEV007"], BY_CODE["DEV008"]])
    assert made == ["ScopePlacements"]  # one, shared
    made, _ = _instantiated_analyses(monkeypatch, [BY_CODE["DEV001"], BY_CODE["DEV003"], BY_CODE["DEV005"]])
    assert sorted(made) == ["CudaGuards", "DeviceContexts", "DeviceNames", "ForwardTime"]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_each_rule_finds_alone_what_it_finds_with_the_others(path):
    """No rule depends on another one being selected: the analyses it requires are enough."""
    source = path.read_text(encoding="utf-8")
    together = lint(source)
    alone = sorted((f for rule in ALL_RULES for f in lint(source, (rule.code,))), key=lambda f: f.sort_key)
    assert together == alone


def test_the_method_sets_the_rules_ask_come_from_the_one_table():
    from devlint.torchinfo import names

    assert names.SHAPE_METHODS | names.MOVES | names.NON_TENSOR_METHODS | {"cpu"} == set(names.TENSOR_METHODS)
    assert names.PLACEMENT_KEEPING_METHODS - names.MODULE_RETURNING_METHODS <= names.SHAPE_METHODS
    assert names.PLACING_METHODS <= set(names.TENSOR_METHODS)
    assert names.TENSOR_VIEW_ATTRIBUTES | names.NON_TENSOR_ATTRIBUTES == set(names.TENSOR_ATTRIBUTES)


def test_a_check_leaves_no_reference_cycle():
    """Workers skip full collections (bench/README.md): reference counting alone must free a
    file's tree, its analyses and its rules."""
    import gc

    sources = [p.read_text(encoding="utf-8") for p in FIXTURES]
    lint(sources[0])  # imports and first-use caches made before counting
    gc.collect()
    gc.disable()
    try:
        for source in sources:
            lint(source)
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert unreachable == 0
