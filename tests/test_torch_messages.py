"""`devlint explain`'s table against what torch says: `bench/torch-messages.tsv` holds the device
messages of the installed torch (and what users paste), each with the kind explain gives it."""
import importlib.util
import re

import pytest

from helpers import ROOT

SPEC = importlib.util.spec_from_file_location("torch_messages", ROOT / "bench" / "torch_messages.py")
messages = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(messages)
VERSION, TABLE = messages.read_table()
EXPORT_AND_COMPILE = ("torch/_dynamo/", "torch/_export/", "torch/export/", "torch/_inductor/", "torch/onnx/",
                      "torch/_subclasses/fake")


def test_the_table_is_what_the_installed_torch_says():
    torch = pytest.importorskip("torch")
    if torch.__version__ != VERSION:
        pytest.skip(f"the table is of torch {VERSION}, torch {torch.__version__} is installed")
    table, read = messages.rows(messages._torch_root())
    assert [row[3] for row in table] == [row[3] for row in TABLE]  # the same messages
    assert messages.render(VERSION, table, read) == messages.TARGET.read_text()


def test_every_message_is_recognised_as_the_kind_the_table_says():
    assert len(TABLE) > 200
    for topic, kinds, source, text in TABLE:
        assert messages.kinds(text) == kinds, text
        assert kinds != "-" and "," not in kinds, f"{text!r} is recognised as {kinds!r}, not as one kind"


def test_every_kind_recognises_a_message_of_the_table():
    from devlint.frontends.error_kinds import KINDS
    assert {row[1] for row in TABLE} == {kind.id for kind in KINDS}


def test_each_kind_names_rules_or_where_to_look():
    from devlint.frontends.error_kinds import KINDS
    from devlint.rules import BY_CODE
    for kind in KINDS:
        assert all(code in BY_CODE for code in kind.rules), kind.id
        assert bool(kind.rules) != bool(kind.look_for), f"{kind.id}: rules, or where to look when no rule finds it"
        assert not kind.refines or kind.refines in {k.id for k in KINDS}


def test_export_and_compile_messages_point_at_devlint_export():
    from devlint.frontends.error_kinds import kinds_of
    # Two devices meeting while exporting or compiling: the tensor the model's code made on the
    # wrong device is what `devlint export` finds.
    raised = [row for row in TABLE if row[2].startswith(EXPORT_AND_COMPILE) and row[0] in ("two-devices", "fake-tensor")]
    assert len(raised) >= 5
    for topic, kinds, source, text in raised:
        (kind,) = kinds_of(text)
        assert kind.id == "cpu-tensor-required" or any("`devlint export`" in cause for cause in kind.causes), (kind.id, text)


def test_the_docs_list_every_kind_with_its_count():
    docs = messages.DOCS.read_text()
    assert messages.docs_with(messages.kinds_section(VERSION, TABLE), docs) == docs
    from devlint.frontends.error_kinds import KINDS
    listed = re.findall(r"^\| `([\w-]+)` \|", docs, re.M)
    assert listed == [kind.id for kind in KINDS]
