"""DEV007, DEV008 and DEV012 name their evidence: a finding that says two things meet names
where each came from (the `related` locations every output format carries)."""
import textwrap

from helpers import lint

SOURCE = textwrap.dedent('''\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, device):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.device = device

        def forward(self, x):
            return self.fc(x + torch.randn(3, device=self.device))


    def evaluate(loader, device):
        model = Net(device).to(device)
        for x, y in loader:
            out = model(x)
            print(out.numpy())
        return torch.ones(3) + out
''')


def _related(code):
    return [
        [(r.row, r.clause()) for r in f.related]
        for f in lint(SOURCE, select=(code,))
    ]


def test_dev007_names_where_the_batch_and_the_placement_come_from():
    assert _related("DEV007") == [
        [(17, "the batch comes from `loader` at line 17 (CPU)"), (16, "`Net(device)` is moved to the accelerator at line 16")],
        [(16, "`Net(device)` is moved to the accelerator at line 16")],
    ]


def test_dev008_names_where_the_module_was_placed():
    assert _related("DEV008") == [[(16, "`Net(device)` is moved to the accelerator at line 16")]]


def test_dev012_names_where_the_attribute_was_set():
    found = lint(SOURCE, select=("DEV012",))
    assert [[(r.row, r.clause()) for r in f.related] for f in found] == [
        [(9, "`self.device` is set in `__init__` at line 9")]
    ]
    assert "(`self.device` is set in `__init__` at line 9)" in found[0].text
