"""What the views promise on real models: folded tables that add up, diffs, tables that
fit 100 columns, the CLI's table equal to the API's."""

from __future__ import annotations

import pytest
import torch
import torchvision

import fxinspect
from fxinspect.cli import main
from fxinspect.views.columns import Column
from fxinspect.views.rows import module_rows


def _gpt2(layers: int = 12):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, n_embd=64, n_head=4, vocab_size=256, n_positions=64)
    return GPT2LMHeadModel(config), {"input_ids": torch.randint(0, 256, (1, 16))}


def _bert():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=256
    )
    return BertModel(config), {
        "input_ids": torch.randint(0, 256, (1, 16)),
        "attention_mask": torch.ones(1, 16, dtype=torch.long),
    }


def test_gpt2_table_folds_its_12_blocks_into_one_row_that_adds_up():
    model, inputs = _gpt2()
    r = fxinspect.analyze(model, inputs, timing=False, memory=False)
    folded = {row.values[Column.NAME].strip(): row.values for row in module_rows(r, None, True, True, set())}
    unfolded = {row.values[Column.NAME].strip(): row.values for row in module_rows(r, None, False, True, set())}
    row = folded["transformer.h.0–11"]
    assert row[Column.TYPE] == "12 × GPT2Block"
    blocks = [unfolded[f"transformer.h.{i}"] for i in range(12)]
    for column in (Column.FLOPS, Column.MACS, Column.PARAMS, Column.BYTES_READ):
        assert row[column] == sum(b[column] for b in blocks), column
    assert row[Column.PER_BLOCK] * 12 == sum(b[Column.FLOPS] for b in blocks)
    assert "transformer.h.0–11" in r.table(width=None) and "transformer.h.5" not in r.table(width=None)


def test_resnet34_diff_resnet18_shows_the_extra_blocks_and_the_flop_difference():
    x = torch.randn(1, 3, 64, 64)
    r34 = fxinspect.analyze(torchvision.models.resnet34(weights=None), x, timing=False, memory=False)
    r18 = fxinspect.analyze(torchvision.models.resnet18(weights=None), x, timing=False, memory=False)
    d = r34.diff(r18)
    extra = [p for p, m in d.modules.items() if m.types[1] is None]
    assert "layer1.2" in extra and "layer3.5" in extra and "layer4.2" in extra  # 3-4-6-3 against 2-2-2-2 blocks
    flops = d.modules[""].flops
    assert flops[1] - flops[0] == r18.totals.flops - r34.totals.flops
    assert "removed" in d.table() and "layer3.5" in d.table(depth=None)


@pytest.mark.parametrize("name", ["resnet50", "vit_b_16", "gpt2", "bert"])
def test_default_module_and_op_tables_fit_100_columns(name):
    if name == "gpt2":
        model, inputs = _gpt2()
    elif name == "bert":
        model, inputs = _bert()
    else:
        model, inputs = torchvision.models.get_model(name, weights=None), torch.randn(1, 3, 224, 224)
    r = fxinspect.analyze(model.eval(), inputs, warmup=1, repeats=1, memory=False)
    for by in ("module", "op"):
        widest = max(len(line) for line in r.table(by=by).splitlines())
        assert widest <= 100, (by, widest)
    assert max(len(line) for line in r.table(width=None).splitlines()) >= widest  # nothing is cut without a width


def test_cli_prints_the_same_table_as_the_api_and_a_bert_from_the_shell(tmp_path, capsys):
    png, js = tmp_path / "r.png", tmp_path / "r.json"
    code = main(
        [
            "torchvision.models:resnet18",
            "--input-shape",
            "1,3,64,64",
            "--no-timing",
            "--no-memory",
            "--depth",
            "2",
            "--png",
            str(png),
            "--json",
            str(js),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    report = fxinspect.Report.from_json(js)
    assert report.table(depth=2) in out
    api = fxinspect.analyze(
        torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 64, 64), timing=False, memory=False
    )
    assert api.table(depth=2) == report.table(depth=2)
    config = '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}'
    code = main(
        [
            "transformers:BertConfig",
            "--config",
            config,
            "--input",
            "input_ids=1,16",
            "--input",
            "attention_mask=1,16",
            "--no-timing",
            "--no-memory",
            "--depth",
            "3",  # (the layers' run: the default table stops at depth 2, encoder.layer)
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("BertModel · captured by") and "encoder.layer.0–1" in out


def test_sort_keys_read_as_the_headers_and_sort_either_way():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    report = fxinspect.analyze(model, torch.randn(4, 8), timing=False, memory=False)
    assert report.table(sort="FLOPs") == report.table(sort="flops") == report.table(sort=" Flops ")
    assert report.table(by="op", sort="bytes r+w") == report.table(by="op", sort="bytes")
    names = lambda text: [line.split()[0] for line in text.splitlines()[2:5]]  # noqa: E731
    # FLOPs: 0 is 2*4*8*16 + 4*16 = 1088, 1 is 4*16 = 64, 2 is 2*4*16*2 + 4*2 = 264
    assert names(report.table(sort="flops", columns=["name", "flops"])) == ["0", "2", "1"]
    assert names(report.table(sort="flops", ascending=True, columns=["name", "flops"])) == ["1", "2", "0"]
    assert names(report.table(sort="name", ascending=False, columns=["name", "flops"])) == ["2", "1", "0"]


def test_help_shows_the_options_of_the_views_and_depth_0_is_refused_as_the_cli_does():
    import inspect

    assert {"depth", "columns", "sort", "ascending", "width"} <= set(
        inspect.signature(fxinspect.Report.table).parameters
    )
    assert {"depth", "color_by", "direction"} <= set(inspect.signature(fxinspect.Report.plot).parameters)
    assert "ascending :" in fxinspect.Report.table.__doc__ and "matplotlib" in fxinspect.Report.plot.__doc__
    report = fxinspect.analyze(torch.nn.Linear(3, 2), torch.randn(1, 3), timing=False, memory=False)
    with pytest.raises(ValueError, match="at least 1"):
        report.table(depth=0)


def test_summary_wording_says_what_each_figure_is():
    import dataclasses

    from fxinspect import formatting as fmt
    from fxinspect.records import LiveTensor

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    x = torch.randn(16, 64)
    report = fxinspect.analyze(model, x, timing=False)  # grad mode on, no backward
    text = report.summary(width=None)
    assert "KiB of parameters + 0 B of buffers" in text
    assert "for inference, call analyze inside torch.no_grad()" in text  # saved bytes with no backward asked
    with torch.no_grad():
        assert "saved" not in str(fxinspect.analyze(model, x, timing=False))
    empty = LiveTensor("_0", "0", "Linear", (0,), "float32", 0, "activation", "forward")
    shown = dataclasses.replace(report.memory, alive_at_peak=(empty, *report.memory.alive_at_peak))
    assert "_0 0 B" not in str(dataclasses.replace(report, memory=shown))  # an empty tensor is not among the largest
    assert fmt.nbytes(1_024_010) == "0.98 MiB"  # never "1000.01 KiB"
    trained = fxinspect.analyze(model, x, timing=False, backward=True, optimizer=torch.optim.AdamW)
    m = trained.memory
    assert f"optimizer state {fmt.nbytes(m.optimizer_state)}" in str(trained)  # the resident figure's parts
    assert m.resident == m.params + m.buffers + m.inputs + m.optimizer_state


class _Odd(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


class _HasOdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.odd = torch.nn.Linear(4, 4), _Odd()

    def forward(self, x):
        return self.odd(self.fc(x))


def test_a_tier_passed_over_for_a_better_one_is_not_said_to_have_failed():
    report = fxinspect.analyze(_HasOdd(), torch.randn(2, 4), timing=False, memory=False)
    tiers = [line for line in str(report).splitlines() if line.startswith("symbolic")]
    assert report.capture.method != "symbolic" and tiers and tiers[0].startswith("symbolic skipped")
    assert "had to make" in tiers[0] and "failed" not in tiers[0]


def test_a_model_that_is_itself_a_torch_layer_says_how_to_break_it_down():
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    model, x = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval(), torch.randn(2, 5, 32)
    with torch.no_grad():
        whole = fxinspect.analyze(model, x, timing=False, memory=False)
        eager = fxinspect.analyze(model, x, timing=False, memory=False, method="eager")
    assert "method='eager' breaks it down as it ran" in whole.table()
    assert "breaks it down" not in eager.table()
    # as it ran, layer by layer: each layer's projections, attention and feed-forward (batch 2, 5 tokens)
    per_layer = 2 * 5 * (3 * 32 * 32 + 32 * 32 + 2 * 32 * 64) + 2 * 4 * 2 * 5 * 5 * 8
    assert eager.modules["layers.0"].macs == eager.modules["layers.1"].macs == per_layer
    assert whole.totals.macs == eager.totals.macs == 2 * per_layer


def test_op_tables_fold_zero_flop_bookkeeping_into_one_row():
    import transformers

    config = transformers.DistilBertConfig(n_layers=2, dim=64, hidden_dim=128, n_heads=2, vocab_size=100)
    model = transformers.AutoModel.from_config(config).eval()
    with torch.no_grad():
        # (a padded attention_mask: the mask's bookkeeping ops, which its eager call makes too)
        mask = torch.tensor([[1] * 12 + [0] * 4])
        r = fxinspect.analyze(
            model, {"input_ids": torch.randint(0, 100, (1, 16)), "attention_mask": mask}, timing=False, memory=False
        )
    folded = r.table(by="op", columns=["op", "count", "flops", "bytes"], width=None).splitlines()
    full = r.table(by="op", columns=["op", "count", "flops", "bytes"], zeros=True, width=None).splitlines()
    row = next(line for line in folded if line.startswith("bookkeeping ("))
    # every op type with no FLOPs moving under 1 % of the bytes is inside it, and only those
    total = r.totals.bytes_moved
    by_label: dict[str, list] = {}
    for n in r.nodes:
        if n.is_op:
            by_label.setdefault(n.label, []).append(n)
    small = [
        label
        for label, nodes in by_label.items()
        if sum(n.flops for n in nodes) == 0 and 0 < sum(n.bytes_moved for n in nodes) < 0.01 * total
    ]
    assert len(small) >= 2 and row.startswith(f"bookkeeping ({len(small)} ops)")
    assert not any(line.split()[0] in small for line in folded[2:]) and all(
        any(line.split()[0] == label for line in full) for label in small
    )
    assert len(folded) < len(full)
