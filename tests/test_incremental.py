"""The language server's reparse: the module built from reused chunks is the tree a whole-file
parse gives, and a check on it reports the same findings, through a sequence of edits."""
import random
from pathlib import Path

import libcst as cst
import pytest

from devlint.engine.incremental import ChunkParser
from devlint.workspace.config import Selection, Settings
from devlint.workspace.linter import Linter

from helpers import ROOT, fixture_target

FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))

EDGE_CASES = {
    "crlf": "import torch\r\n\r\n\r\ndef f(x):\r\n    return x.cuda()\r\n\r\n# end\r\n",
    "tabs": "import torch\n\nclass M:\n\tdef f(self):\n\t\treturn torch.load('p')\n",
    "two_space_then_four": "import torch\nif torch:\n  a = 1\n\ndef f():\n    return torch.load('p')\n",
    "semicolons_across_lines": "import torch\nx = (1,\n 2); y = torch.load('p')\nz = 3\n",
    "decorated": "import torch\n\n# about f\n@torch.no_grad()\n\n@other\ndef f(x):\n    return x.cuda()\n",
    "no_final_newline": "import torch\nx = torch.load('p')",
    "trailing_comments": ("import torch\ndef f():\n    x = 1\n    # inside\n\n  # odd\n# outside\n\n\n"
                          "y = torch.load('p')\n\n# last\n"),
    "header_only_comments": "# a\n\n# b\nimport torch\n\n\nx = torch.load('p')\n",
    "form_feed": "import torch\n\x0c\ndef f():\n    return torch.load('p')\n",
    "suite_then_block": "import torch\nif x: a = 1\nelse:\n        b = 2\ndef f():\n    return torch.load('p')\n",
    "blank_then_outdented_comment_at_end": "import torch\nif T:\n    import x\n\n  # c\n",
}


def full(source: str):
    try:
        return cst.parse_module(source)
    except Exception:  # noqa: BLE001 - the edit broke the syntax
        return None


def assert_same_tree(parser: ChunkParser, source: str) -> None:
    expected = full(source)
    module = parser._parse(source)  # None: falls back to the whole-file parse
    if module is None:
        return
    assert expected is not None, "a chunked parse of code libcst rejects"
    assert module.code == source
    assert module.deep_equals(expected)
    assert (module.default_indent, module.default_newline, module.has_trailing_newline) == (
        expected.default_indent, expected.default_newline, expected.has_trailing_newline)


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_parse_as_a_whole(name):
    assert_same_tree(ChunkParser(), EDGE_CASES[name])


def test_chunks_are_reused_and_the_cache_follows_the_buffer():
    source = (ROOT / "examples" / "train.py").read_text(encoding="utf-8")
    parser = ChunkParser()
    parser.parse(source)
    first = parser.parsed
    assert first > 3 and parser.reused == 0
    edited = source.replace("\ndef ", "\n# note\ndef ", 1)
    assert parser.parse(edited).code == edited
    assert parser.parsed == first + 1 and parser.reused == first - 1
    assert len(parser._chunks) == first


EDITS = ["# note\n", "\n", "    # indented note\n", "x = 1\n", "\tpass\n", "def g():\n  return 1\n", "@dec\n",
         "y = (1,\n 2); z = torch.load(p)\n", "\x0c\n", "  # c\n", "if x: a\nelse:\n\tb\n", "model.cuda()\n"]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_random_edits_give_the_trees_and_findings_of_a_whole_parse(path):
    source = path.read_text(encoding="utf-8")
    settings = Settings(root=Path("."), layers=[Selection(select=["DEV"])], target_torch_setting=fixture_target(source))
    parser = ChunkParser()
    rng = random.Random(path.name)
    for step in range(12):
        lines = source.splitlines(keepends=True) or [""]
        k = rng.randrange(len(lines))
        op = rng.random()
        if op < 0.4:
            lines.insert(k, rng.choice(EDITS))
        elif op < 0.6:
            del lines[k]
        else:
            lines[k] = lines[k].rstrip("\r\n") + "  # c\n"
        if step == 6:
            lines = [line.replace("\n", "\r\n") for line in lines]
        source = "".join(lines)
        assert_same_tree(parser, source)
        if full(source) is not None:
            expected = Linter(settings, Path("m.py")).check(source)
            assert Linter(settings, Path("m.py"), parse=parser.parse).check(source) == expected


def test_a_chunk_libcst_cannot_print_back_alone_is_parsed_with_the_next():
    # parsed alone, `if T:` ... `  # c` loses its blank line (libcst); with `y = ...` after it, it does not
    source = "import torch\nif T:\n    import x\n\n  # c\ny = torch.load('p')\nz = 1\n"
    parser = ChunkParser()
    module = parser._parse(source)
    assert module is not None and module.code == source and module.deep_equals(cst.parse_module(source))
    assert "if T:\n    import x\n\n  # c\n" in parser._chunks and parser._chunks["if T:\n    import x\n\n  # c\n"] is None


def test_the_same_statement_twice_gets_nodes_of_its_own():
    # one finding per node: a chunk's tree shared by two places would hide the second finding
    source = "import torch\nx = torch.load(p)\ny = 1\nx = torch.load(p)\n"
    settings = Settings(root=Path("."), layers=[Selection(select=["DEV"])])
    parser = ChunkParser()
    module = parser.parse(source)
    assert module.body[1] is not module.body[3]
    findings = Linter(settings, Path("m.py"), parse=parser.parse).check(source)
    assert [(f.code, f.row) for f in findings] == [("DEV002", 2), ("DEV002", 4)]
