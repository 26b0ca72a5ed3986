"""``watch(..., to=...)``: the exact bins in TensorBoard's event files and an offline W&B run.

Each is read back with its own reader: TensorBoard's ``EventAccumulator``, and the offline
run's ``.wandb`` file (records of W&B's protobuf ``Record``, in LevelDB's log layout).
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time

import pytest
import torch

import fxinspect
from fxinspect.training.binning import log2_histogram
from fxinspect.training.writers import buckets, destinations

NAN, INF = float("nan"), float("inf")
KNOWN = [-3.0, 0.0, 0.0, 0.3, 5.0, 7.0, 1.5, NAN, INF, -INF]
# by hand: -3 in (-4, -2]; the two zeros between -2 and 0.3's bin [0.25, 0.5); 1.5 in [1, 2);
# 5 and 7 in [4, 8); [0.5, 1) and [2, 4) empty; NaN and the two Inf apart: 10 - 3 = 7 finite
KNOWN_EDGES = [-4.0, -2.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
KNOWN_COUNTS = [1, 2, 1, 0, 1, 0, 2]


def watched_known(to, steps: int = 1) -> fxinspect.Watch:
    """A watch whose module '0' (an Identity) outputs KNOWN at each step."""
    model = torch.nn.Sequential(torch.nn.Identity())
    watcher = fxinspect.watch(model, every=1, log=("io",), to=to)
    for _ in range(steps):
        model(torch.tensor(KNOWN))
    watcher.remove()
    return watcher


@pytest.mark.parametrize(
    "values, dtype, edges, counts",
    [
        (KNOWN, torch.float32, KNOWN_EDGES, KNOWN_COUNTS),
        ([0.0, -0.0, NAN], torch.float32, [-0.5, 0.5], [2]),  # zeros only: TensorBoard's bucket of equal values
        ([NAN, INF], torch.float32, [], []),  # no finite value: no bucket
        ([0.0, 0.75, 3.0], torch.float32, [0.0, 0.5, 1.0, 2.0, 4.0], [1, 1, 0, 1]),  # a ReLU's: from 0
        ([-0.75, 0.0], torch.float32, [-1.0, -0.5, 0.0], [1, 1]),  # negatives and zeros: to 0
        ([-1.0, 1.0], torch.float32, [-2.0, -1.0, 1.0, 2.0], [1, 0, 1]),  # no zero: the gap empty
        ([1e308], torch.float64, [2.0**1023, sys.float_info.max], [1]),  # 1e308 in [2**1023, 2**1024)
    ],
)
def test_buckets_are_the_log2_bins_counted_by_hand(values, dtype, edges, counts):
    assert buckets(log2_histogram(torch.tensor(values, dtype=dtype))) == (edges, counts)


def _tensorboard(logdir):
    from tensorboard.backend.event_processing.event_accumulator import (
        HISTOGRAMS,
        SCALARS,
        TENSORS,
        EventAccumulator,
    )

    events = EventAccumulator(str(logdir), size_guidance={HISTOGRAMS: 0, SCALARS: 0, TENSORS: 0})
    events.Reload()
    return events


def test_tensorboards_reader_gets_the_exact_bins_nan_inf_and_findings(tmp_path):
    pytest.importorskip("tensorboard")
    watcher = watched_known(f"tensorboard:{tmp_path}", steps=3)
    events = _tensorboard(tmp_path)
    histograms = events.Histograms("watch_io/0")
    assert [e.step for e in histograms] == [0, 1, 2]
    for e in histograms:
        value = e.histogram_value
        # TensorBoard's buckets: min is the first's left edge, bucket_limit the right edges
        assert [value.min, *value.bucket_limit] == KNOWN_EDGES
        assert value.bucket == KNOWN_COUNTS and value.num == 7
        assert (value.min, *value.bucket_limit) == tuple(buckets(watcher.histogram("0", "io", e.step))[0])
    assert [e.value for e in events.Scalars("watch_io_nan/0")] == [1, 1, 1]
    assert [e.value for e in events.Scalars("watch_io_inf/0")] == [2, 2, 2]
    # the first NaN/Inf is a finding: written once, at the step where it is new
    texts = events.Tensors("watch_findings/text_summary")
    assert [t.step for t in texts] == [0]
    assert b"first NaN/Inf: step 0" in texts[0].tensor_proto.string_val[0]


def test_a_saved_run_written_after_the_fact_equals_the_live_one(tmp_path):
    pytest.importorskip("tensorboard")
    watcher = watched_known(f"tensorboard:{tmp_path / 'live'}", steps=2)
    watcher.save(tmp_path / "run.json")
    fxinspect.Watch.load(tmp_path / "run.json").write(f"tensorboard:{tmp_path / 'later'}")
    live, later = _tensorboard(tmp_path / "live"), _tensorboard(tmp_path / "later")
    assert later.Tags()["histograms"] == live.Tags()["histograms"] == ["watch_io/0", "watch_io/(model)"]
    for tag in live.Tags()["histograms"]:
        assert [e.histogram_value for e in later.Histograms(tag)] == [e.histogram_value for e in live.Histograms(tag)]


def test_a_summarywriter_of_the_callers_is_flushed_and_left_open(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    watched_known(writer)
    writer.add_scalar("mine", 1.0, 5)  # still open
    writer.close()
    events = _tensorboard(tmp_path)
    assert events.Histograms("watch_io/0")[0].histogram_value.bucket == KNOWN_COUNTS
    assert [e.step for e in events.Scalars("mine")] == [5]


def _wandb_records(run_dir):
    """The records of an offline run's ``.wandb`` file: a 7-byte header, then 32 KiB blocks
    of chunks (crc32 4 bytes, length 2, type 1: full, first, middle, last)."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run_dir.glob("run-*.wandb")
    raw, pos, block, pending = path.read_bytes(), 7, 32768, b""
    while pos + 7 <= len(raw):
        if block - pos % block < 7:  # (a block's tail too short for a chunk's header: padding)
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        if kind == 0:
            break
        pending += raw[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def test_an_offline_wandb_run_holds_the_exact_bins_and_alerts_and_reaches_no_network(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    # an address nothing listens on, should anything try; no socket but local ones in this process
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    for name, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(name, value)
    tried, connect = [], socket.socket.connect

    def local_only(self, address):
        if self.family != socket.AF_UNIX:
            tried.append(address)
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)
    started = time.monotonic()
    settings = wandb.Settings(console="off", x_disable_stats=True, x_disable_machine_info=True)
    run = wandb.init(project="fxinspect-test", mode="offline", dir=str(tmp_path), settings=settings)
    try:
        watcher = watched_known(run, steps=2)
    finally:
        run.finish()
    assert time.monotonic() - started < 60 and tried == []
    run_dir = next((tmp_path / "wandb").glob("offline-run-*"))
    internal = (run_dir / "logs" / "debug-internal.log").read_text()  # wandb-core's: a failed send logs an error
    assert '"level":"ERROR"' not in internal and "127.0.0.1:9" not in internal
    rows, alerts, summary = [], [], {}
    for record in _wandb_records(run_dir):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
        elif kind == "alert":
            alerts.append((record.alert.title, record.alert.text))
        elif kind == "summary":
            summary.update({i.key: json.loads(i.value_json) for i in record.summary.update if i.key})
    assert [r["watch_step"] for r in rows] == [0, 1]
    for row in rows:
        assert row["watch_io/0/bins"] == KNOWN_EDGES and row["watch_io/0/values"] == KNOWN_COUNTS
        assert buckets(watcher.histogram("0", "io", row["watch_step"])) == (KNOWN_EDGES, KNOWN_COUNTS)
        assert (row["watch_io_nan/0"], row["watch_io_inf/0"]) == (1, 2)
    assert [title for title, _ in alerts] == ["fxinspect watch: first NaN/Inf"]  # once, not at every step
    assert summary["watch_findings"].startswith("first NaN/Inf: step 0")


def test_findings_are_written_when_new_not_again_as_their_text_moves_on(tmp_path):
    pytest.importorskip("tensorboard")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    watcher = fxinspect.watch(model, every=1, log=("io",), to=f"tensorboard:{tmp_path}")
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.zero_()
    for step in range(3):
        if step == 2:  # the second layer dies too: a new finding
            with torch.no_grad():
                model[1].weight.zero_()
                model[1].bias.zero_()
        model(torch.randn(8, 4))
    watcher.remove()
    texts = _tensorboard(tmp_path).Tensors("watch_findings/text_summary")
    # step 0: '0' dead; step 1: the same finding (its last step moved on): nothing; step 2: '1' and the model
    assert [t.step for t in texts] == [0, 2]
    assert texts[-1].tensor_proto.string_val[0].decode().count("dead units") == 3


@pytest.mark.parametrize("to", ["tensorbord:runs", "wandb:project", 42, ["tensorboard:"]])
def test_a_destination_it_does_not_know_is_refused_naming_what_it_takes(to):
    with pytest.raises(fxinspect.InputError, match="'tensorboard:<logdir>'"):
        destinations(to)


@pytest.mark.parametrize(
    "module, make", [("torch.utils.tensorboard", "tensorboard:runs"), ("wandb", "wandb")], ids=["tensorboard", "wandb"]
)
def test_a_missing_integration_names_its_extra(module, make, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    extra = module.split(".")[-1]
    with pytest.raises(ImportError, match=rf"pip install fxinspect\[{extra}\]"):
        destinations(make)


def test_import_fxinspect_imports_no_integration():
    code = (
        "import sys, fxinspect; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorboard', 'wandb', 'lightning', "
        "'pytorch_lightning', 'accelerate', 'tensorboardX') or m.startswith('torch.utils.tensorboard')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
