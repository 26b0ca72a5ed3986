"""The explorer's data packed as columns: nothing lost, and a repeated block's figures written once."""

from __future__ import annotations

import json

import pytest
import torch
from test_diagram_truth import Loop
from test_explorer import _open, _Shared, browser, gpt2  # noqa: F401 (the fixtures, shared)

import fxinspect
from fxinspect.views.explorer.pack import pack, unpack
from fxinspect.views.explorer.payload import payload


def _text(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Block(torch.nn.Module):
    """A pre-norm MLP block with its residual add."""

    def __init__(self):
        super().__init__()
        self.norm, self.up, self.down = torch.nn.LayerNorm(16), torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _blocks(n: int, backward: bool) -> fxinspect.Report:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[_Block() for _ in range(n)])
    options = {"backward": True, "optimizer": torch.optim.AdamW} if backward else {}
    return fxinspect.analyze(model, torch.randn(4, 16), timing=False, **options)


@pytest.mark.parametrize("model", ["gpt2", "loop", "shared", "training"])
def test_unpack_gives_back_the_payload(model, gpt2):  # noqa: F811
    report = {
        "gpt2": lambda: gpt2,
        "loop": lambda: fxinspect.analyze(Loop(), torch.randn(2, 4), timing=False),
        "shared": lambda: fxinspect.analyze(_Shared(), torch.randn(2, 8), timing=False),
        "training": lambda: _blocks(3, backward=True),
    }[model]()
    data = payload(report)
    packed = pack(data)
    assert unpack(packed) == data  # (2 == 2.0: a whole number written as one is the same number)
    # the same text after a trip through JSON, and a key a node lacks is still lacking
    again = unpack(json.loads(_text(packed)))
    assert again == data and [("stretch" in n) for n in again["nodes"]] == [("stretch" in n) for n in data["nodes"]]


@pytest.mark.parametrize("backward", [False, True])
def test_an_extra_block_adds_its_names_and_wiring_not_its_figures(backward):
    reports = {n: _blocks(n, backward) for n in (3, 4)}
    packed = {n: pack(payload(r)) for n, r in reports.items()}
    # what the fourth block must carry, whatever the packing: what differs from block to
    # block, its nodes' names and the nodes they read, its modules' paths and children
    # lists; and per record, at most an index (and a comma) for each field
    data = payload(reports[4])
    nodes = [n for n in data["nodes"] if n["module"].split(".")[0] == "3"]
    modules = {p: m for p, m in data["modules"].items() if p.split(".")[0] == "3"}
    own = sum(len(_text(n["name"])) + len(_text(n["args"])) for n in nodes)
    own += sum(len(_text(p)) + len(_text(m["children"])) for p, m in modules.items())
    index = len(str(len(data["nodes"]))) + 1  # the widest index and its comma
    fields = len(nodes[0]) + 1, len(data["modules"][""])  # (+1: "stretch", on some nodes)
    bound = own + index * (len(nodes) * fields[0] + len(modules) * fields[1])
    assert len(nodes) == 5 and len(modules) == 4  # (norm, up, gelu, down, the add; 3 and its three children)
    grown = sum(len(_text(packed[4][k])) - len(_text(packed[3][k])) for k in ("nodes", "modules"))
    assert 0 < grown <= bound
    # written per node as before, the block's figures alone would break the bound
    unpacked = sum(
        len(_text(payload(reports[4])[k])) - len(_text(payload(reports[3])[k])) for k in ("nodes", "modules")
    )
    assert unpacked > 2 * bound


def test_a_figures_name_is_written_once_however_many_blocks():
    pages = {n: _blocks(n, backward=True).to_html() for n in (3, 6)}
    data = {n: page.split('id="fxinspect-data">')[1].split("</script>")[0] for n, page in pages.items()}
    for name in ("flops", "backward_bytes_read", "saved"):
        # the nodes' figures, the modules' (as text and as numbers), the labels, colour_by
        # and units: six, not one per node or module
        assert data[3].count(f'"{name}"') == data[6].count(f'"{name}"') <= 6, name


def test_the_page_unpacks_the_same_payload(browser, tmp_path):  # noqa: F811
    report = fxinspect.analyze(_Shared(), torch.randn(2, 8), timing=False)
    page, errors = _open(browser, report, tmp_path)
    shown = page.evaluate(
        "JSON.stringify(fxinspectUnpack(JSON.parse(document.getElementById('fxinspect-data').textContent)))"
    )
    assert json.loads(shown) == payload(report) and errors == []
