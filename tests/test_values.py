"""Value statistics: the batched small-tensor path and the per-tensor path agree with torch."""

from __future__ import annotations

import math

import pytest
import torch

from fxinspect.values import SMALL, ValueReader, nonfinite_tensors


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
def test_small_tensor_is_read_as_it_was_when_read(dtype):
    # the small path reduces at the end: a later in-place op must not leak into it
    t = torch.tensor([1.0, 2.0, 3.0], dtype=dtype)
    reader = ValueReader()
    slot = reader.read(t)
    t.mul_(100).fill_(math.nan)
    got = reader.finish()[slot]
    assert (got.min, got.max, got.mean, got.nan_count) == (1.0, 3.0, 2.0, 0)


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
