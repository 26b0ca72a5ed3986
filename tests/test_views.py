"""Views of hand-built reports: formatting, tables, summary, exports, networkx.

The reports here are assembled from records with known figures (no analyzer), so a
failure points at a view. Golden tables live in tests/golden/; regenerate them with
``FXINSPECT_REGEN_GOLDEN=1 pytest tests/test_views.py`` and review the diff.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from pathlib import Path

import pytest

from fxinspect import formatting as fmt
from fxinspect.graph import to_networkx
from fxinspect.records import (
    SCHEMA_VERSION,
    CaptureInfo,
    Environment,
    NodeRecord,
    NonFinite,
    SharedParameter,
    TensorMeta,
    TimingInfo,
    Totals,
    UncountedOp,
    ValueStats,
)
from fxinspect.records.fields import FIELDS, Aggregate, Unit
from fxinspect.report import Report
from fxinspect.run.assemble import aggregate_modules, sum_nodes
from fxinspect.run.params import ModuleInfo
from fxinspect.views import exports as export
from fxinspect.views.rows import module_rows
from fxinspect.views.table import By, Column, columns_for, table

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("FXINSPECT_REGEN_GOLDEN") == "1"
NAN = float("nan")


# ------------------------------------------------------------------ a hand-built report
#
# Net: features (Stem: conv 3->16 k3 p1, relu, own mean over 8x8), blocks (two identical
# Blocks: fc 16->16, relu), head (Linear 16->4); optionally a root-owned square (x * x).


def _t(*shape: int, stats: ValueStats | None = None) -> TensorMeta:
    return TensorMeta(shape, "torch.float32", "cpu", 4 * math.prod(shape), stats)


def _node(name, label, module, mtype, args, ins, outs, flops=0, macs=0, read=0, written=0, op="call_module"):
    return NodeRecord(name, op, module or label, label, module, mtype, args, ins, outs, flops, macs, read, written)


NODES = (
    _node("x", "x", "", "", (), (), (_t(1, 3, 8, 8),), op="placeholder"),
    # macs: 16*8*8 outputs * 3*3*3 = 27648; read 768 B input + 448*4 B params
    _node(
        "conv",
        "Conv2d",
        "features.0",
        "Conv2d",
        ("x",),
        (_t(1, 3, 8, 8),),
        (_t(1, 16, 8, 8),),
        2 * 27648,
        27648,
        768 + 1792,
        4096,
    ),
    _node("relu", "ReLU", "features.1", "ReLU", ("conv",), (_t(1, 16, 8, 8),), (_t(1, 16, 8, 8),), 1024, 0, 4096, 4096),
    _node(
        "mean",
        "mean",
        "features",
        "Stem",
        ("relu",),
        (_t(1, 16, 8, 8),),
        (_t(1, 16),),
        1024,
        0,
        4096,
        64,
        op="call_method",
    ),
    # macs: 16*16 = 256; read 64 B input + 272*4 B params
    _node("fc0", "Linear", "blocks.0.fc", "Linear", ("mean",), (_t(1, 16),), (_t(1, 16),), 512, 256, 1152, 64),
    _node("act0", "ReLU", "blocks.0.act", "ReLU", ("fc0",), (_t(1, 16),), (_t(1, 16),), 16, 0, 64, 64),
    _node("fc1", "Linear", "blocks.1.fc", "Linear", ("act0",), (_t(1, 16),), (_t(1, 16),), 512, 256, 1152, 64),
    _node("act1", "ReLU", "blocks.1.act", "ReLU", ("fc1",), (_t(1, 16),), (_t(1, 16),), 16, 0, 64, 64),
    # macs: 16*4 = 64; read 64 B + 68*4 B params
    _node("head", "Linear", "head", "Linear", ("act1",), (_t(1, 16),), (_t(1, 4),), 128, 64, 336, 16),
)
SQUARE = _node(
    "square", "mul", "", "Net", ("head", "head"), (_t(1, 4), _t(1, 4)), (_t(1, 4),), 4, 0, 32, 16, op="call_function"
)
LATENCY = {
    "conv": 1.2e-4,
    "relu": 3e-6,
    "mean": 2e-6,
    "fc0": 5e-6,
    "act0": 1e-6,
    "fc1": 5e-6,
    "act1": 1e-6,
    "head": 4e-6,
    "square": 5e-7,
}

# (path, type, params, trainable) ; features.0 is frozen
MODULES = (
    ("", "Net", 448 + 2 * 272 + 68, 2 * 272 + 68),
    ("features", "Stem", 448, 0),
    ("features.0", "Conv2d", 448, 0),
    ("features.1", "ReLU", 0, 0),
    ("blocks", "Sequential", 2 * 272, 2 * 272),
    ("blocks.0", "Block", 272, 272),
    ("blocks.0.fc", "Linear", 272, 272),
    ("blocks.0.act", "ReLU", 0, 0),
    ("blocks.1", "Block", 272, 272),
    ("blocks.1.fc", "Linear", 272, 272),
    ("blocks.1.act", "ReLU", 0, 0),
    ("head", "Linear", 68, 68),
)


def make_report(*, root_op=False, timed=False, uncounted=False, nonfinite=False) -> Report:
    """The Net report; each flag turns on one feature of the record model."""
    ops = NODES + ((SQUARE,) if root_op else ())
    last = ops[-1].name
    nodes = [*ops, _node("output", "output", "", "", (last,), (_t(1, 4),), (), op="output")]
    if timed:
        nodes = [dataclasses.replace(n, latency=LATENCY[n.name]) if n.is_op else n for n in nodes]
    if nonfinite:  # head's output went NaN on finite inputs; square inherits it
        bad = ValueStats(NAN, NAN, NAN, NAN, nan_count=2, inf_count=0)
        good = ValueStats(-1.5, 2.0, 0.25, 1.0, 0, 0)
        nodes = [
            dataclasses.replace(
                n,
                nan_count=2 if n.name in ("head", "square") else 0,
                inf_count=0,
                outputs=tuple(
                    dataclasses.replace(t, stats=bad if n.name in ("head", "square") else good) for t in n.outputs
                ),
            )
            if n.is_op
            else n
            for n in nodes
        ]
    infos = [
        ModuleInfo(
            path,
            mtype,
            params,
            trainable,
            0,
            params if mtype in ("Conv2d", "Linear") else 0,
            0,
            tuple(p for p, *_ in MODULES if p and p.rpartition(".")[0] == path and p != path),
        )
        for path, mtype, params, trainable in MODULES
    ]
    modules = aggregate_modules(nodes, infos, calls={p: 1 for p, *_ in MODULES}, measured=("latency",) if timed else ())
    totals = Totals(
        params=MODULES[0][2],
        trainable_params=MODULES[0][3],
        buffers=0,
        param_bytes=4 * MODULES[0][2],
        buffer_bytes=0,
        **{k: sum_nodes(nodes)[k] for k in ("flops", "macs", "bytes_read", "bytes_written")},
        latency=sum(LATENCY[n.name] for n in nodes if n.is_op) if timed else None,
        predicted_latency=None,  # no time model
        partial=uncounted,
        # no backward ran: its figures are unknown, not zero
        backward_flops=None,
        backward_macs=None,
        backward_bytes_read=None,
        backward_bytes_written=None,
        backward_latency=None,
        backward_predicted_latency=None,
        output_bytes=None,
        saved_bytes=None,
        measured_growth=None,  # nor the memory pass
        comm_bytes=None,  # nor a parallel step
    )
    head = next(n for n in nodes if n.name == "head")  # its input's stats are those of act1's output
    head_inputs = tuple(
        dataclasses.replace(t, stats=next(n for n in nodes if n.name == "act1").outputs[0].stats) for t in head.inputs
    )
    return Report(
        nodes=tuple(nodes),
        modules=modules,
        totals=totals,
        capture=CaptureInfo("symbolic", notes=("leaves: Conv2d, Linear, ReLU",)),
        uncounted=(UncountedOp("aten.mean.dim", 1, ("mean",), ("features",)),) if uncounted else (),
        nonfinite=NonFinite("head", "head", "Linear", "nan", head_inputs, ("square",) if root_op else ())
        if nonfinite
        else None,
        shared=(SharedParameter("head.weight", ("blocks.0.fc.weight",), 64),) if root_op else (),
        inputs=(_t(1, 3, 8, 8),),
        outputs=(_t(1, 4),),
        timing=TimingInfo(
            "cpu",
            3,
            10,
            forward=2.1e-4,
            plain_forward=1.6e-4,
            node_sum=totals.latency,
            batch_size=1,
            throughput=1 / 1.6e-4,
        )
        if timed
        else None,
        environment=Environment("2.14.1", "3.11.7", "linux", "cpu", 4),
    )


VARIANTS = {
    "plain": {},
    "timed": {"timed": True},
    "root_op": {"root_op": True},
    "uncounted": {"uncounted": True},
    "nonfinite": {"nonfinite": True},
    "everything": {"root_op": True, "timed": True, "uncounted": True, "nonfinite": True},
}


@pytest.fixture(params=sorted(VARIANTS), ids=sorted(VARIANTS))
def any_report(request) -> Report:
    return make_report(**VARIANTS[request.param])


def _golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if REGEN:  # writing is not testing: comparing the file with itself could never fail
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
        pytest.skip(f"wrote {path}; review the diff and run again without FXINSPECT_REGEN_GOLDEN")
    assert path.exists(), f"missing golden {path}; run with FXINSPECT_REGEN_GOLDEN=1 to create it"
    assert text + "\n" == path.read_text(encoding="utf-8")


def _cells(text: str, column: int) -> list[str]:
    """One column of a ``tablefmt="tsv"`` table, header and totals row excluded."""
    lines = [line for line in text.splitlines() if "\t" in line]
    return [line.split("\t")[column].strip() for line in lines[1:-1]]


# ------------------------------------------------------------------ formatting


@pytest.mark.parametrize(
    "func, value, expected",
    [
        (fmt.count, 0, "0"),
        (fmt.count, 999, "999"),
        (fmt.count, 1000, "1.00 K"),
        (fmt.count, 999_994, "999.99 K"),
        (fmt.count, 999_995, "1.00 M"),  # rounds up into the next unit, never "1000.00 K"
        (fmt.count, 11_689_512, "11.69 M"),
        (fmt.count, 1.5e9, "1.50 G"),
        (fmt.count, 3.2e12, "3.20 T"),
        (fmt.count, None, "—"),
        (fmt.nbytes, 0, "0 B"),
        (fmt.nbytes, 1023, "1023 B"),
        (fmt.nbytes, 1024, "1.00 KiB"),
        (fmt.nbytes, 5 * 2**20, "5.00 MiB"),
        (fmt.nbytes, 2**30 + 2**29, "1.50 GiB"),
        (fmt.seconds, 0, "0 s"),
        (fmt.seconds, 1.5e-9, "1.50 ns"),
        (fmt.seconds, 999e-9, "999.00 ns"),
        (fmt.seconds, 1e-6, "1.00 µs"),
        (fmt.seconds, 2.5e-4, "250.00 µs"),
        (fmt.seconds, 0.0123, "12.30 ms"),
        (fmt.seconds, 3.0, "3.00 s"),
        (fmt.seconds, None, "—"),
        (fmt.percent, 0.1234, "12.3%"),
        (fmt.percent, None, "—"),
        (fmt.shape, (1, 3, 224, 224), "1×3×224×224"),
        (fmt.shape, (), "scalar"),
        (fmt.shapes, [(1, 4), (4,)], "1×4, 4"),
        (fmt.shapes, [(2,)] * 4, "2, 2, 2, … (+1)"),
        (fmt.dtype, "torch.float32", "f32"),
        (fmt.dtype, "torch.bfloat16", "bf16"),
        (fmt.dtype, "torch.int64", "i64"),
        (fmt.dtype, "torch.float8_e5m2", "float8_e5m2"),
    ],
)
def test_formatting(func, value, expected):
    assert func(value) == expected


@pytest.mark.parametrize("func", [fmt.count, fmt.nbytes])
def test_partial_mark(func):
    assert func(2048, partial=True) == func(2048) + fmt.PARTIAL


# ------------------------------------------------------------------ tables: golden


GOLDEN_TABLES = {
    "module": ({}, {}),
    "module_depth1": ({}, {"depth": 1}),
    "module_unfolded": ({}, {"fold": False}),
    "module_timed_partial": ({"timed": True, "uncounted": True}, {}),
    "module_github": (
        {"root_op": True},
        {"tablefmt": "github", "columns": ["name", "type", "calls", "params", "flops", "intensity", "share"]},
    ),
    "op_sorted": ({"timed": True, "root_op": True}, {"by": "op", "sort": "flops"}),
    "node_nonfinite": ({"nonfinite": True, "root_op": True}, {"by": "node"}),
    "node_top": ({"timed": True}, {"by": "node", "sort": "latency", "top": 3}),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_TABLES))
def test_table_golden(name):
    variant, options = GOLDEN_TABLES[name]
    _golden(f"table_{name}", table(make_report(**variant), **options))


@pytest.mark.parametrize("variant", ["plain", "everything"])
def test_summary_golden(variant):
    report = make_report(**VARIANTS[variant])
    _golden(f"summary_{variant}", report.summary())
    assert str(report) == report.summary()


@pytest.mark.parametrize("ops, listed", [(1, 1), (5, 5), (7, 5)])  # at most 5 listed, the rest counted
def test_summary_lists_few_uncounted_ops(ops, listed):
    uncounted = tuple(UncountedOp(f"aten.op{i}", 1, ("mean",), ("features",)) for i in range(ops))
    text = dataclasses.replace(make_report(uncounted=True), uncounted=uncounted).summary()
    assert sum(f"aten.op{i}:" in text for i in range(ops)) == listed
    assert (f"… and {ops - listed} more ops" in text) == (ops > listed)


# ------------------------------------------------------------------ tables: behaviour


@pytest.mark.parametrize("root_op", [False, True])
@pytest.mark.parametrize("fold", [False, True])
def test_depth1_rows_sum_to_total(root_op, fold):
    report = make_report(root_op=root_op)
    rows = module_rows(report, depth=1, fold=fold, indent=True, uncounted=set())
    own = sum(n.flops for n in report.nodes if n.is_op and n.module_path == "")  # square: 4
    assert [r.values[Column.NAME] for r in rows] == ["features", "blocks", "head"]
    assert sum(r.values[Column.FLOPS] for r in rows) + own == report.totals.flops
    assert sum(r.values[Column.PARAMS] for r in rows) == report.totals.params


def test_fold_sums_repeated_blocks():
    report = make_report()
    rows = {
        r.values[Column.NAME].strip(): r.values
        for r in module_rows(report, depth=None, fold=True, indent=True, uncounted=set())
    }
    assert rows["blocks.0–1"][Column.TYPE] == "2 × Block"
    assert rows["blocks.0–1"][Column.FLOPS] == 2 * (512 + 16)
    assert rows["blocks.0–1.fc"][Column.MACS] == 2 * 256
    # the child row stands for both blocks' fc: it says so, and gives one block's share
    assert rows["blocks.0–1.fc"][Column.TYPE] == "2 × Linear"
    assert rows["blocks.0–1.fc"][Column.PER_BLOCK] == rows["blocks.0–1.fc"][Column.FLOPS] // 2 == 2 * 256
    assert "blocks.0" not in rows


@pytest.mark.parametrize(
    "by, sort, column, expected",
    [
        ("op", "flops", 0, ["Conv2d", "Linear", "ReLU", "mean"]),  # 55296, 1152, 1056, 1024
        ("op", "count", 0, ["ReLU", "Linear", "Conv2d", "mean"]),  # 3, 3, 1, 1; ties keep first-seen order
        ("op", "op", 0, ["Conv2d", "Linear", "ReLU", "mean"]),  # text columns sort ascending
        ("node", "bytes", 0, ["relu", "conv", "mean", "fc0", "fc1"]),  # 8192, 6656, 4160, 1216, 1216 ...
        ("module", "params", 0, ["blocks", "blocks.0–1", "blocks.0–1.fc", "features", "features.0"]),  # 544 x3, 448
    ],
)
def test_sort_is_numeric_and_descending(by, sort, column, expected):
    text = table(make_report(), by=by, sort=sort, tablefmt="tsv")
    assert _cells(text, column)[: len(expected)] == expected


@pytest.mark.parametrize("top", [0, 2, 100])
def test_top_keeps_rows_after_sort(top):
    text = table(make_report(), by="node", sort="flops", top=top, tablefmt="tsv", columns=["name"])
    names = ["conv", "relu", "mean", "fc0", "fc1", "head", "act0", "act1"]  # by FLOPs, ties in graph order
    assert [line.strip() for line in text.splitlines()[1 : 1 + min(top, 8)]] == names[:top]
    assert ("rows shown" in text) == (top < 8)


@pytest.mark.parametrize("columns", [["name", "flops"], [Column.NAME, Column.FLOPS], ("name", Column.FLOPS)])
def test_columns_strings_and_enums_agree(columns):
    report = make_report()
    assert table(report, columns=columns) == table(report, columns=["name", "flops"])
    assert table(report, columns=columns).splitlines()[0].split() == ["name", "FLOPs"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"by": "layer"}, "'module', 'op', 'node'"),
        ({"columns": ["name", "flop"]}, "valid columns: name, type"),
        ({"by": "op", "columns": ["params"]}, "unknown column 'params' for by='op'"),
        ({"sort": "speed"}, "sort: unknown column"),
        ({"by": "op", "depth": 1}, "by='module' only"),
        ({"top": -1}, "non-negative"),
    ],
)
def test_bad_options_raise(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        table(make_report(), **options)


def test_by_accepts_enum_and_string():
    report = make_report()
    assert table(report, by=By.OP) == table(report, by="op") == report.table(by="op")


@pytest.mark.parametrize("timed", [False, True])
def test_latency_column_only_when_measured(timed):
    report = make_report(timed=timed)
    assert ("latency" in table(report).splitlines()[0]) == timed
    explicit = table(report, columns=["name", "latency"], tablefmt="tsv")
    latencies = _cells(explicit, 1)
    assert all(cell == fmt.MISSING for cell in latencies) != timed
    assert "0 s" not in latencies


SUMMED = [f for f in FIELDS if f.aggregate is not Aggregate.NONE]


def _hand_sum(field, values):
    """What summing ``values`` must give: exact ints, or unknown when any part is."""
    values = list(values)
    if field.aggregate is Aggregate.KNOWN and any(v is None for v in values):
        return None
    return sum(values)


def _as_text(field, raw):
    """A figure's cell as its unit reads (seconds are never marked partial)."""
    return {Unit.BYTE: fmt.nbytes, Unit.SECOND: fmt.seconds}.get(field.unit, fmt.count)(raw)


@pytest.mark.parametrize("timed", [False, True])
@pytest.mark.parametrize("field", SUMMED, ids=[f.name for f in SUMMED])
def test_every_summed_field_is_a_column(field, timed):
    """A figure declared in records/fields.py is a column by its name, titled and formatted by
    its declaration, its rows summed by its aggregate: no view names it."""
    report = make_report(timed=timed, root_op=True)
    ops = [n for n in report.nodes if n.is_op]
    for by in ("node", "op", "module"):
        assert field.name in [str(c) for c in columns_for(by)]
        text = table(
            report, by=by, columns=["op" if by == "op" else "name", field.name], sort=field.name, tablefmt="tsv"
        )
        header, *_, total = [line.split("\t")[1].strip() for line in text.splitlines() if "\t" in line]
        assert header == field.header and total == _as_text(field, getattr(report.totals, field.name))
    by_op = table(report, by="op", columns=["op", field.name], tablefmt="tsv")
    assert _cells(by_op, 1) == [
        _as_text(field, _hand_sum(field, (getattr(n, field.name) for n in ops if n.label == label)))
        for label in dict.fromkeys(n.label for n in ops)
    ]
    by_node = table(report, by="node", columns=["name", field.name], tablefmt="tsv")
    assert _cells(by_node, 1) == [_as_text(field, getattr(n, field.name)) for n in ops]


@pytest.mark.parametrize("timed", [False, True])
@pytest.mark.parametrize("field", SUMMED, ids=[f.name for f in SUMMED])
def test_every_summed_field_is_a_member_sum(field, timed):
    """Each figure of a module-level graph node: the sum over its op nodes."""
    report = make_report(timed=timed, root_op=True)
    groups = {
        "features": ("conv", "relu", "mean"),
        "blocks": ("fc0", "act0", "fc1", "act1"),
        "head": ("head",),
        "": ("square",),
    }
    g = to_networkx(report, by="module", depth=1)
    for key, names in groups.items():
        hand = _hand_sum(field, (getattr(report.node(n), field.name) for n in names))
        got = g.nodes[key][field.name]
        assert got == hand or math.isclose(got, hand)
    over_graph = _hand_sum(field, (g.nodes[k][field.name] for k in groups))
    total = getattr(report.totals, field.name)
    assert over_graph == total or math.isclose(over_graph, total)


def test_partial_totals_are_marked():
    text = table(make_report(uncounted=True), by="op", tablefmt="tsv")
    mean = next(line for line in text.splitlines() if line.startswith("mean"))
    assert mean.split("\t")[2].strip() == "1.02 K+"  # 1024 FLOPs, partial
    assert text.splitlines()[-2].split("\t")[2].strip().endswith(fmt.PARTIAL)  # totals row
    assert "no FLOP rule for aten.mean.dim" in text


# ------------------------------------------------------------------ JSON, DataFrame, CSV


def test_json_round_trip_is_equal(any_report, tmp_path):
    text = any_report.to_json(tmp_path / "r.json")
    json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} is not strict JSON"))
    for source in (text, tmp_path / "r.json", str(tmp_path / "r.json")):
        back = Report.from_json(source)
        assert back == any_report
        assert back.to_json() == text


def test_json_restores_types():
    back = export.from_json(make_report(nonfinite=True, root_op=True).to_json())
    node = back.node("head")
    assert type(node.args) is tuple and type(node.outputs[0].shape) is tuple
    assert isinstance(node.outputs[0], TensorMeta) and math.isnan(node.outputs[0].stats.mean)
    assert node.latency is None and back.timing is None
    assert isinstance(back.modules["blocks.0"].children, tuple)
    assert list(back.modules) == [p for p, *_ in MODULES]  # model order kept


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, None])
def test_json_rejects_other_schema(version):
    data = make_report().to_dict()
    if version is None:
        del data["schema_version"]
    else:
        data["schema_version"] = version
    with pytest.raises(ValueError, match=f"schema_version is {version!r}"):
        export.from_json(json.dumps(data))


@pytest.mark.parametrize(
    "by, rows, column",
    [
        ("node", len(NODES) + 1, "output_shapes"),  # + the output node
        ("module", len(MODULES), "frozen_params"),
    ],
)
def test_dataframe(by, rows, column):
    pytest.importorskip("pandas")
    report = make_report()
    frame = report.to_dataframe(by=by)
    assert len(frame) == rows and column in frame.columns
    total = frame["flops"].sum() if by == "node" else frame.set_index("path").loc["", "flops"]
    assert total == report.totals.flops


def test_dataframe_without_pandas_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # makes `import pandas` raise ImportError
    with pytest.raises(ImportError, match=r"pip install fxinspect\[pandas\]"):
        export.to_dataframe(make_report())


@pytest.mark.parametrize("by", ["node", "module"])
def test_csv(by, tmp_path):
    import csv

    text = export.to_csv(make_report(), tmp_path / "r.csv", by=by)
    rows = list(csv.DictReader((tmp_path / "r.csv").open(encoding="utf-8")))
    assert text == (tmp_path / "r.csv").read_text(encoding="utf-8")
    report = make_report()
    assert len(rows) == (len(report.nodes) if by == "node" else len(report.modules))
    if by == "node":
        assert json.loads(rows[1]["input_shapes"]) == [[1, 3, 8, 8]]
        assert sum(int(r["flops"]) for r in rows) == report.totals.flops
    else:
        assert rows[0]["latency"] == ""  # not measured: empty, not 0


# ------------------------------------------------------------------ networkx


def test_networkx_nodes_carry_records():
    report = make_report(root_op=True, timed=True)
    g = report.to_networkx()
    assert list(g.nodes) == [n.name for n in report.nodes]
    assert g.nodes["conv"] == dataclasses.asdict(report.node("conv"))
    assert g.nodes["conv"]["inputs"][0]["shape"] == (1, 3, 8, 8)


@pytest.mark.parametrize(
    "edge, nbytes, reads",
    [
        (("x", "conv"), 768, 1),  # 1*3*8*8 * 4 B
        (("mean", "fc0"), 64, 1),  # 1*16 * 4 B
        (("head", "square"), 16, 2),  # x * x reads head twice, one edge
    ],
)
def test_networkx_edges_carry_tensors(edge, nbytes, reads):
    report = make_report(root_op=True)
    g = to_networkx(report)
    assert g.edges[edge]["tensor"] == report.node(edge[0]).outputs[0]
    assert g.edges[edge]["bytes"] == nbytes and g.edges[edge]["reads"] == reads
    assert g.number_of_edges() == sum(len(set(n.args)) for n in report.nodes)


@pytest.mark.parametrize(
    "depth, nodes, edges",
    [
        (0, ["input", "", "output"], [("input", ""), ("", "output")]),
        (
            1,
            ["input", "features", "blocks", "head", "", "output"],
            [("input", "features"), ("features", "blocks"), ("blocks", "head"), ("head", ""), ("", "output")],
        ),
        (
            2,
            ["input", "features.0", "features.1", "features", "blocks.0", "blocks.1", "head", "", "output"],
            [
                ("input", "features.0"),
                ("features.0", "features.1"),
                ("features.1", "features"),
                ("features", "blocks.0"),
                ("blocks.0", "blocks.1"),
                ("blocks.1", "head"),
                ("head", ""),
                ("", "output"),
            ],
        ),
    ],
)
def test_module_graph_collapse(depth, nodes, edges):
    report = make_report(root_op=True, timed=True)
    g = to_networkx(report, by="module", depth=depth)
    assert list(g.nodes) == nodes and list(g.edges) == edges
    modules = [k for k, kind in g.nodes(data="kind") if kind == "module"]
    # members partition the op nodes, so their sums add up to the totals at any depth
    assert sorted(m for k in modules for m in g.nodes[k]["members"]) == sorted(n.name for n in report.nodes if n.is_op)
    assert sum(g.nodes[k]["flops"] for k in modules) == report.totals.flops
    assert math.isclose(sum(g.nodes[k]["latency"] for k in modules), report.totals.latency)
    assert all(g.nodes[k]["subtree_flops"] == report.modules[k].flops for k in modules)


class _Nested:
    """A small nested model whose root runs ops of its own (before and after its children)."""

    @staticmethod
    def build():
        import torch

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)
                self.act = torch.nn.ReLU()

            def forward(self, x):
                return self.act(self.fc(x)) + x  # an op of the block itself

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = torch.nn.Linear(4, 8)
                self.blocks = torch.nn.Sequential(Block(), Block())
                self.head = torch.nn.Linear(8, 2)

            def forward(self, x):
                return self.head(self.blocks(self.stem(x * 2))).sum()  # root ops: mul, sum

        return Net(), torch.randn(3, 4)


@pytest.mark.parametrize("depth", [0, 1, 2, None])
def test_module_graph_figures_add_up_with_the_root(depth):
    """The root is a graph node for its own ops; its figures hold only those, so
    summing ``flops`` over all graph nodes gives the totals exactly once."""
    import fxinspect

    report = fxinspect.analyze(*_Nested.build(), timing=False)
    g = to_networkx(report, by="module", depth=depth)
    modules = [k for k, kind in g.nodes(data="kind") if kind == "module"]
    assert sum(g.nodes[k]["flops"] for k in modules) == report.totals.flops
    assert sum(g.nodes[k]["bytes_read"] for k in modules) == report.totals.bytes_read
    assert g.nodes[""]["subtree_flops"] == report.modules[""].flops  # the record: the whole subtree
    own = [n.name for n in report.nodes if n.is_op and (depth == 0 or n.module_path == "")]
    assert list(g.nodes[""]["members"]) == own and len(own) >= 2
    assert g.nodes[""]["flops"] == sum(report.node(n).flops for n in own)


def test_module_graph_edge_figures():
    g = to_networkx(make_report(root_op=True), by="module", depth=1)
    assert g.edges["input", "features"] == {"count": 1, "bytes": 768}
    assert g.edges["head", ""] == {"count": 1, "bytes": 16}  # read twice by square, crosses once


@pytest.mark.parametrize("options", [{"by": "op"}, {"by": "node", "depth": 1}, {"by": "module", "depth": -1}])
def test_networkx_bad_options(options):
    with pytest.raises(ValueError):
        to_networkx(make_report(), **options)


# ------------------------------------------------------------------ on a real model


def test_resnet18_table_and_round_trip():
    """The analyzer's own report renders and round-trips."""
    torchvision = pytest.importorskip("torchvision")
    import torch

    import fxinspect

    report = fxinspect.analyze(torchvision.models.resnet18(), torch.randn(1, 3, 224, 224), timing=False)
    text = report.table(depth=1)
    assert "layer1" in text and "total" in text
    assert Report.from_json(report.to_json()) == report
    assert "resnet" in str(report).lower()


def test_op_table_hides_op_types_that_cost_nothing_unless_asked():
    import torch

    import fxinspect

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x.reshape(-1)) * 2

    r = fxinspect.analyze(Net(), torch.randn(4, 8), timing=False, memory=False)
    shown = r.table(by="op")
    assert "reshape" not in shown and "relu" in shown and "mul" in shown
    assert "1 op type that cost nothing (no FLOPs, no bytes) not shown: zeros=True" in shown
    assert "reshape" in r.table(by="op", zeros=True)
    page = r._repr_html_()  # Jupyter: the summary and an HTML table
    assert page.startswith("<pre>Net · captured by symbolic") and "<table>" in page
    assert page.endswith("<p>total includes 3 ops of the root module itself: reshape, relu, mul</p>")


def test_diff_matches_modules_by_path_and_nested_json_is_the_module_tree():
    import json

    import torch

    import fxinspect

    def net(width):
        return torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))

    a = fxinspect.analyze(net(4), torch.randn(3, 8), timing=False, memory=False)
    b = fxinspect.analyze(torch.nn.Sequential(*net(16), torch.nn.Tanh()), torch.randn(3, 8), timing=False, memory=False)
    d = a.diff(b)
    assert d.modules["0"].macs == (3 * 8 * 4, 3 * 8 * 16) and d.modules["0"].params == (8 * 4 + 4, 8 * 16 + 16)
    assert d.modules["3"].types == (None, "Tanh") and d.modules["1"].flops == (3 * 4, 3 * 16)  # ReLU: 1 per element
    text = str(d)
    assert "+300.0%" in text and "added" in text
    assert str(a.diff(a)) == "no module differs" and not any(m.changed for m in a.diff(a).modules.values())
    tree = json.loads(a.to_json(layout="nested"))["model"]
    assert tree["type"] == "Sequential" and [c["path"] for c in tree["children"]] == ["0", "1", "2"]
    assert sum(c["flops"] for c in tree["children"]) == tree["flops"]
    with pytest.raises(ValueError, match="layout"):
        a.to_json(layout="tree")


def test_latency_spread_and_a_busy_machine_warning():
    summary = make_report(timed=True)
    quiet = dataclasses.replace(summary, timing=dataclasses.replace(summary.timing, plain_forward_iqr=0.5e-5))
    busy = dataclasses.replace(summary, timing=dataclasses.replace(summary.timing, plain_forward_iqr=0.4e-4))
    assert "IQR 5.00 µs = 3.1% of the median" in str(quiet) and "busy" not in str(quiet)  # of 160 µs
    assert "IQR 40.00 µs = 25.0% of the median; the machine was busy" in str(busy)
