"""Value statistics: the batched small-tensor path and the per-tensor path agree with torch."""

from __future__ import annotations

import math

import pytest
import torch

from fxinspect.run.findings import nonfinite_tensors
from fxinspect.run.values import SMALL, TINY, ValueReader


def _reference(t: torch.Tensor) -> tuple[float, float, float, float, int, int]:
    x = t.detach().double().reshape(-1)
    finite = x[torch.isfinite(x)]
    if finite.numel() < x.numel():  # non-finite: min/max/mean are NaN or +-Inf, counts exact
        return (math.nan,) * 4 + (int(torch.isnan(x).sum()), int(torch.isinf(x).sum()))
    return (x.min().item(), x.max().item(), x.mean().item(), x.std(correction=0).item(), 0, 0)


SIZES = [1, 7, SMALL, SMALL + 1, 10_000]  # both sides of the batching threshold


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_statistics_match_torch_on_both_paths(dtype):
    torch.manual_seed(0)
    tensors = [(torch.randn(n) * 3 + 1).to(dtype) for n in SIZES] + [torch.randn(4, 5, 6).to(dtype)[:, ::2]]
    reader = ValueReader()
    slots = [reader.read(t) for t in tensors]
    stats = reader.finish()
    for t, slot in zip(tensors, slots):
        lo, hi, mean, std, _, _ = _reference(t)
        got = stats[slot]
        assert (got.min, got.max) == (lo, hi)
        assert got.mean == pytest.approx(mean, rel=1e-5, abs=1e-6)
        assert got.std == pytest.approx(std, rel=1e-4, abs=1e-6)
        assert (got.nan_count, got.inf_count) == (0, 0)


@pytest.mark.parametrize("n", [100, SMALL + 1, 100_000])
def test_nearly_constant_tensors_get_an_accurate_std(n):
    # a saturated sigmoid: 0.5 +- 1e-7. E[x²] - E[x]² in float32 cancels to noise of
    # about 1e-4 here; both paths must give the std around the mean (to 0.1 %)
    torch.manual_seed(0)
    t = (0.5 + 1e-7 * torch.randn(n)).float()
    reader = ValueReader()
    slot = reader.read(t)
    got = reader.finish()[slot]
    _, _, mean, std, _, _ = _reference(t)
    assert got.std == pytest.approx(std, rel=1e-3) and got.mean == pytest.approx(mean, rel=1e-7)


@pytest.mark.parametrize("n", [100, 10_000])
def test_huge_finite_values_do_not_overflow_the_moments(n):
    # an additive attention mask: finfo.min where masked; squares overflow float32
    t = torch.zeros(n)
    t[: n // 4] = torch.finfo(torch.float32).min
    reader = ValueReader()
    slot = reader.read(t)
    got = reader.finish()[slot]
    lo, hi, mean, std, _, _ = _reference(t)  # mean = finfo.min / 4, std = |finfo.min| * sqrt(3) / 4
    assert got.finite and (got.min, got.max) == (lo, hi)
    assert got.mean == pytest.approx(mean, rel=1e-6) and got.std == pytest.approx(std, rel=1e-6)


def test_constant_tensor_has_zero_std():
    reader = ValueReader()
    slots = [reader.read(torch.full((n,), 0.1)) for n in (10, 10_000)]
    stats = reader.finish()
    assert [stats[s].std for s in slots] == [0.0, 0.0]


@pytest.mark.parametrize("n", [5, SMALL + 100])
def test_nan_and_inf_are_counted_exactly(n):
    t = torch.randn(n)
    t[1] = t[3] = math.nan
    t[2] = math.inf
    reader = ValueReader()
    slot = reader.read(t)
    got = reader.finish()[slot]
    assert (got.nan_count, got.inf_count) == (2, 1) and not got.finite and math.isnan(got.max)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_small_tensor_flushed_before_a_write_is_read_as_it_was_when_read(dtype):
    # the small path reduces at the end: a later in-place op must not leak into it
    t = torch.tensor([1.0, 2.0, 3.0], dtype=dtype)
    reader = ValueReader()
    slot = reader.read(t)
    reader.flush()
    t.mul_(100).fill_(math.nan)
    got = reader.finish()[slot]
    assert (got.min, got.max, got.mean, got.nan_count) == (1.0, 3.0, 2.0, 0)


def test_small_tensor_written_without_a_flush_has_no_statistics_not_stale_ones():
    t, u = torch.tensor([1.0, 2.0]), torch.tensor([5.0])
    reader = ValueReader()
    slots = reader.read(t), reader.read(u)
    t.add_(1)  # bypasses flush(): the version counter gives it away
    stats = reader.finish()
    assert stats[slots[0]] is None and stats[slots[1]].max == 5.0


@pytest.mark.parametrize("hold", [True, False])
def test_small_tensors_of_every_layout_are_read_together(hold):
    # the small tensors are flattened into one batch (1-D ones without a view): each
    # keeps its own values whatever its shape or strides; population statistics by hand
    tensors = [
        torch.tensor(2.5),  # 0-D: min = max = mean = 2.5, std 0
        torch.arange(4.0),  # 0..3: mean 1.5, var (2.25+0.25+0.25+2.25)/4 = 1.25
        torch.arange(6.0).reshape(2, 3).t(),  # 0..5, transposed: mean 2.5, var (6.25+2.25+0.25)*2/6
        torch.arange(8.0).reshape(1, 2, 2, 2).contiguous(memory_format=torch.channels_last),  # 0..7: 3.5, 63/12
    ]
    expected = [(2.5, 2.5, 2.5, 0.0), (0.0, 3.0, 1.5, 1.25), (0.0, 5.0, 2.5, 17.5 / 6), (0.0, 7.0, 3.5, 63 / 12)]
    reader = ValueReader(hold)
    slots = [reader.read(t) for t in tensors]
    stats = reader.finish()
    for slot, (lo, hi, mean, var) in zip(slots, expected):
        got = stats[slot]
        assert (got.min, got.max, got.mean) == (lo, hi, mean)
        assert got.std == pytest.approx(math.sqrt(var), rel=1e-12)


def test_small_view_is_copied_when_read():
    # a view is copied at once (a reference would keep its base alive): no flush needed
    base = torch.arange(1000, dtype=torch.float32)
    reader = ValueReader()
    slot = reader.read(base[10:13])
    base.zero_()
    got = reader.finish()[slot]
    assert (got.min, got.max, got.mean) == (10.0, 12.0, 11.0)


def test_counting_mode_flushes_before_every_op_that_writes():
    from fxinspect.run.dispatch import CountingMode

    writes = []
    x = torch.ones(3)
    with CountingMode(before_write=lambda: writes.append(float(x.sum()))):
        y = x * 2  # functional: no flush
        x.add_(1)  # in place: flush first, while x still sums to 3
        torch.mul(y, 2, out=y)  # out=: a write too
    assert writes == [3.0, 6.0]


def test_non_floating_and_empty_tensors_have_no_slot():
    reader = ValueReader()
    assert reader.read(torch.arange(4)) is None and reader.read(torch.empty(0)) is None
    assert reader.finish() == []


def test_nonfinite_weights_are_named_once():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    model[1].weight = model[0].weight  # tied: one tensor, reported under its first name
    with torch.no_grad():
        model[0].bias[1] = math.inf
        model[0].weight[0, 0] = math.nan
    assert nonfinite_tensors(model) == ["0.weight", "0.bias"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_tiny_tensors_not_held_are_read_as_lists_with_the_same_statistics(dtype):
    # a run that may not hold tensors reads tiny 1-D CPU ones with tolist (TINY): its
    # statistics must be bit for bit those of the held path, which copies tensors
    torch.manual_seed(1)
    tensors = [(torch.randn(n) * 5 - 2).to(dtype) for n in (1, 3, TINY)] + [torch.tensor(-1.5, dtype=dtype)]
    tensors.append(torch.tensor([1.0, float("nan"), float("inf")], dtype=dtype))  # NaN and Inf counted exactly
    held, listed = ValueReader(hold=True), ValueReader(hold=False)
    pairs = [(held.read(t), listed.read(t)) for t in tensors]
    assert not listed._pending and len(listed._listed[0]) == len(tensors)  # every one took the list path
    tensors[1].add_(100)  # a list is a copy: a later write leaves what was read
    expected, got = held.finish(), listed.finish()
    for i, (a, b) in enumerate(pairs[:-1]):
        assert got[b] == expected[a] if i != 1 else (expected[a] is None and got[b].max < 50)
    assert (got[pairs[-1][1]].nan_count, got[pairs[-1][1]].inf_count) == (1, 1)
