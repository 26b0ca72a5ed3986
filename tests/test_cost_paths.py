"""The per-op fast paths of the analysis give what their general forms give."""

from __future__ import annotations

import collections
import copy
import pickle

import pytest
import torch
import torch.fx as fx

from fxinspect.capture.held import _containers, _held_and_containers, _held_nodes
from fxinspect.records import AtenCall, NodeRecord, TensorMeta, ValueStats
from fxinspect.run.passes import PassResult


def _proxies(n: int) -> tuple[list[fx.Proxy], fx.Proxy]:
    graph = fx.Graph()
    x = graph.placeholder("x")
    return [fx.Proxy(graph.call_function(torch.relu, (x,))) for _ in range(n)], fx.Proxy(x)


Pair = collections.namedtuple("Pair", "a b")


def _locals_cases() -> list[dict]:
    (a, b, c, d), x = _proxies(4)
    return [
        {"self": object(), "x": a, "n": 3},  # the common case: proxies and plain values
        {"h": a, "y": b, "inp": x},  # a placeholder's proxy is no op: not held
        {"features": [a, b], "h": c},  # a list: held values and a container to watch
        {"skips": {"k": a}, "out": (b, [c])},  # a dict, a tuple holding a list
        {"pair": Pair(a, b), "od": collections.OrderedDict(k=c)},  # subclasses of tuple and dict
        {"deep": [[[d]]]},  # deeper than read
    ]


@pytest.mark.parametrize("names", _locals_cases())
def test_held_and_containers_reads_what_the_two_reads_give(names):
    held, containers = _held_and_containers(names)
    assert held == _held_nodes(names)
    assert [(id(c), items) for c, items in containers] == [(id(c), items) for c, items in _containers(names)]


def test_held_and_containers_on_plain_locals():
    (a, b), x = _proxies(2)
    held, containers = _held_and_containers({"h": a, "y": b, "inp": x, "k": 1})
    assert held == [a.node, b.node] and containers == []  # x is a placeholder: resident, never held


def test_of_makes_records_of_the_class_itself():
    stats = ValueStats.of(-1.0, 2.0, 0.5, 1.0, 0, 0)
    meta = TensorMeta.of((2, 3), "float32", "cpu", 24, stats)
    call = AtenCall.of("aten.mm.default", 1, 12, 6, 48, 24, "counted", "")
    for record, cls in ((stats, ValueStats), (meta, TensorMeta), (call, AtenCall)):
        assert type(record) is cls and isinstance(record, cls)
        assert copy.copy(record) == record and pickle.loads(pickle.dumps(record)) == record
    record = NodeRecord.of(*(None,) * len(NodeRecord.__slots__))
    assert type(record) is NodeRecord and record.name is None and record.flops is None


def test_pass_result_fields_in_order_of_first_appearance():
    result = PassResult()
    result.nodes = {
        "a": {"outputs": (), "flops": 1, "nan_count": 0},  # outputs: a record field, not a declared figure
        "b": {"bytes_read": 2, "flops": 3, "aten": ()},
        "c": {"macs": 0, "bytes_read": 1},
    }
    assert result.fields == ("flops", "nan_count", "bytes_read", "macs")
