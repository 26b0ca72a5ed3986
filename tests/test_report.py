"""The report model's bulk constructor builds the same records as ``__init__``."""

from __future__ import annotations

import dataclasses
import math

import pytest

from fxinspect.records import AtenCall, NodeRecord, TensorMeta, ValueStats


def test_of_builds_the_record_init_builds():
    stats = ValueStats.of(-1.0, 2.0, 0.5, math.nan, 3, 0)
    assert stats == ValueStats(-1.0, 2.0, 0.5, math.nan, 3, 0) and not stats.finite
    meta = TensorMeta.of((2, 3), "float32", "cpu", 24, stats)
    call = AtenCall.of("aten.mm.default", 1, 12, 6, 48, 24, "counted", "")
    values = (
        "mm",
        "call_function",
        "torch.mm",
        "mm",
        "fc",
        "Linear",
        ("x",),
        (meta,),
        (meta,),
        12,
        6,
        48,
        24,
        None,
        None,
        2e-6,
        3,
        0,
        24,
        12,
        96,
        48,
        1e-5,
        4e-6,
        24,
        24,
        None,
        None,
        (call,),
        (meta,),
        (call,),
        (0,),
        (7, 7),
        (2, 2),
        (3, 3),
        "own",
        {"energy": 1.5},
    )
    # ..., latency and its IQR, predicted latency, NaN, Inf, backward figures, latency and predicted latency,
    # memory figures, bytes sent in collectives, aten, grads, backward aten, call, receptive field, its stride and padding,
    # saves, registered figures
    record = NodeRecord.of(*values)
    assert record == NodeRecord(*values) and hash(call) == hash(AtenCall(*dataclasses.astuple(call)))
    assert repr(record) == repr(NodeRecord(*values))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.flops = 0  # still frozen
    with pytest.raises(TypeError):
        AtenCall.of("aten.mm.default", 1)  # every field, in order
