"""A meta-device sweep's points analysed in forked workers: the same figures, really forked.

Autograd refuses to run in a child forked after its parent ran a backward, and this
test process has run many: the sweeps that fork run in a fresh interpreter, which
forks before its own first backward, as a user's script does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
import torch

import fxinspect
from fxinspect.errors import InputError
from fxinspect.planning.workers import DEFAULT_MOST, Workers, worker_count

_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch, fxinspect
    from fxinspect.planning import workers

    taken = []  # what each worker handed back: a result, or None (then analysed in this process)
    result = workers.Job.result
    workers.Job.result = lambda job: taken.append(result(job)) or taken[-1]

    sys.path.insert(0, sys.argv[2])  # the tests' folder
    from test_planning import _SingleApart as SingleApart  # symbolic tracing fails on its branch: export

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 2))
    cases = [
        (SingleApart(), [1, 2, 3, 4, 8], True),   # the line: batch 1 off it, 2 and 8 its ends
        (SingleApart(), [1, 2, 5], False),
        (mlp, [1, 2, 4, 8], True),                # symbolic: batch 1 served by the capture
    ]
    model, batches, derive = cases[int(sys.argv[1])]
    options = dict(backward=True, optimizer=torch.optim.AdamW, timing=False, device="meta")
    inputs = lambda b: torch.randn(b, 16)
    from reference import assert_same_state, state_fingerprint
    before = state_fingerprint(model)
    # workers first: nothing here has run a backward yet
    forked = fxinspect.sweep(model, inputs, batches, derive=derive, workers=2, **options)
    try:
        assert_same_state(before, state_fingerprint(model))
        untouched = True
    except AssertionError:
        untouched = False
    used = sum(type(t).__name__ == "Analysed" for t in taken)  # (not can_fork's probe)
    alone = fxinspect.sweep(model, inputs, batches, derive=derive, workers=0, **options)
    same = forked.points == alone.points and forked.notes == alone.notes
    workers._autograd_forks = None  # (asked afresh: this process has run a backward on fake tensors now)
    print(json.dumps({"same": same, "untouched": untouched, "used": used, "notes": forked.notes, "forks_now": workers.can_fork("meta")}))
    """
)


def _forked(tmp_path, case: int) -> dict:
    script = tmp_path / "sweep_workers.py"
    script.write_text(_SCRIPT)
    tests = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, str(script), str(case), tests], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["same"], found  # figures and notes, point for point
    assert found["untouched"], found  # the user's model as it was (parameters, buffers, grads, flags, hooks)
    assert found["forks_now"] is False  # once a backward ran on fake tensors here, a forked child cannot
    return found


_LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork: Linux only")


@_LINUX
def test_a_derived_sweep_in_workers_equals_one_asked_in_turn(tmp_path):
    found = _forked(tmp_path, 0)
    # batch 1 captured on its own beside the export, then 3 (the middle) and 2 on it in
    # two workers while this process counts 8; batch 1 is off the line through 1 and 8,
    # so 2 is asked for
    assert found["used"] == 3, found
    assert "batches 1, 2, 3, 8 analysed; batch 4 derived from the line through batches 2 and 8" in found["notes"][1]


@_LINUX
def test_every_point_in_workers_equals_every_point_asked_in_turn(tmp_path):
    found = _forked(tmp_path, 1)
    assert found["used"] == 2, found  # 1 beside the capture, 2 on it; 5 is the capture's own count


@_LINUX
def test_a_capture_that_serves_batch_1_stops_the_worker_capturing_it_alone(tmp_path):
    found = _forked(tmp_path, 2)
    # a symbolic capture serves batch 1: the worker that began capturing it on its own is
    # stopped, and 1 and 4 are analysed ahead on the capture; 8 is its count
    assert found["used"] == 2, found
    assert "one symbolic capture served batches 1, 4, 8" in found["notes"][2]


def test_a_worker_returns_its_value_or_nothing_and_is_killed_when_left():
    with Workers() as pool:
        value = pool.start(os.getpid).result()
        failed = pool.start(lambda: 1 / 0).result()  # the caller then computes it itself, and raises there
        left = pool.start(time.sleep, 60)
    assert value != os.getpid() and failed is None
    with pytest.raises(ChildProcessError):  # killed and reaped when the block ended
        os.waitpid(left.pid, os.WNOHANG)
    assert not os.path.exists(left.path)


def test_a_fork_the_system_refuses_leaves_the_point_to_the_caller(monkeypatch, tmp_path):
    def refuse():
        raise BlockingIOError("Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with Workers() as pool:
        assert pool.start(os.getpid) is None
    assert list(tmp_path.iterdir()) == []  # its result file is gone too


_AFTER_A_FAKE_BACKWARD = """
import torch, fxinspect
from fxinspect.planning.workers import can_fork
model = torch.nn.Linear(8, 2)
fxinspect.analyze(model, torch.randn(2, 8), device="meta", backward=True, timing=False)  # a fake backward
assert can_fork("meta") is False
assert can_fork("cpu") is False  # real tensors: never forked
model = torch.nn.Linear(8, 2)
s = fxinspect.sweep(model, lambda b: torch.randn(b, 8), [1, 2, 4, 8], backward=True, workers=4)
assert [p.macs for p in s.points] == [b * (8 * 2 + 8 * 2) for b in (1, 2, 4, 8)]  # forward + weight grad
"""


def test_no_worker_is_forked_where_autograd_could_not_run_in_it():
    # in a fresh process: whether a child forked here can run a backward depends on what
    # this process ran before (the tests before this one), not only on the fake backward
    done = subprocess.run([sys.executable, "-c", _AFTER_A_FAKE_BACKWARD], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_workers_must_be_a_count():
    assert worker_count(3) == 3 and worker_count(0) == 0 and 1 <= worker_count(None) <= DEFAULT_MOST
    for bad in (-1, 1.5, True):
        with pytest.raises(InputError, match="workers= expects an int >= 0"):
            fxinspect.sweep(torch.nn.Linear(2, 2), lambda b: torch.randn(b, 2), [1, 2], workers=bad)
