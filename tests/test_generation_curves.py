"""Exact cost curves (fxinspect.serving.curves): closed forms in batch and context.

Synthetic figures have hand-computed coefficients; real ones are checked against
analyses at sizes the fit never saw (an analysis is the truth).
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

import fxinspect
from fxinspect.errors import InputError
from fxinspect.serving.curves import PeakCurve, UnverifiedCurveError, basis, design, fit
from fxinspect.serving.figures import report_figures
from fxinspect.serving.terms import Term, power_sum

UNSEEN = [(3, 100), (5, 257), (1, 1000), (5, 9)]


def counted(f):
    """``f`` as an evaluator that records its calls."""
    calls = []

    def evaluate(b, c):
        calls.append((b, c))
        return f(b, c)

    return evaluate, calls


def test_prefill_like_polynomial_is_exact_and_verified():
    # 2·b·c² (attention scores) + 64·b·c (per token) + 3·c (a position table) + 7: 4 of the
    # 6 terms of basis(1, 2), so 2 of the 6 analysed points check the other 4
    evaluate, calls = counted(lambda b, c: {"flops": 2 * b * c * c + 64 * b * c + 3 * c + 7})
    curve = fit(evaluate, basis(1, 2))["flops"]
    assert len(calls) == 6 and curve.verified and len(curve.checked_at) == 2
    assert str(curve) == "b·(2·c² + 64·c) + 3·c + 7"
    assert curve(5, 1000) == 10_323_007  # 2·5·1000² + 64·5·1000 + 3·1000 + 7
    assert all(isinstance(k, Fraction) for k in curve.coefficients)


def test_rational_coefficients_stay_exact():
    # b·c·(c+1)/2 (a causal mask's kept half): coefficients 1/2, exact integers at every size
    curve = fit(lambda b, c: {"x": b * c * (c + 1) // 2}, basis(1, 2))["x"]
    assert curve.verified and str(curve) == "b·(1/2·c² + 1/2·c)"
    assert curve(7, 12_345) == 7 * 12_345 * 12_346 // 2 and isinstance(curve(7, 12_345), int)


def test_every_term_needed_is_unverified_and_says_so():
    # 1 + c + c² + b + b·c + b·c²: six terms, six points, no point left to check
    curve = fit(lambda b, c: {"x": (1 + b) * (1 + c + c * c)}, basis(1, 2))["x"]
    assert not curve.verified and "take all 6 analysed points" in curve.why
    with pytest.raises(UnverifiedCurveError, match="exact only at those"):
        curve.require()


@pytest.mark.parametrize(
    "figure",
    [
        lambda b, c: 64 * b * math.ceil(c / 8),  # padding to multiples of 8
        lambda b, c: max(1000 + 10 * b * c, 40 * b * c),  # a peak that switches between two lines
        lambda b, c: b * c * c.bit_length(),  # c·log c
    ],
    ids=["ceil", "max-of-lines", "clog"],
)
def test_non_polynomial_figure_is_caught(figure):
    # basis(1, 1): 4 terms, 6 points: 2 spares, which miss
    curve = fit(lambda b, c: {"x": figure(b, c)}, basis(1, 1))["x"]
    assert not curve.verified and curve.mismatch
    b, c, evaluated, predicted = curve.mismatch[0]
    assert evaluated == figure(b, c) != predicted and f"analysed {evaluated:,}" in curve.why


def test_sliding_window_breakpoint():
    # a decode step: windowed layers read min(c, 16) cached tokens, global ones c:
    # b·(100·min(c,16) + 30·c) + 7; contexts on both sides of 16 tell min(c,16) from c
    f = lambda b, c: 100 * b * min(c, 16) + 30 * b * c + 7  # noqa: E731
    terms = basis(1, 1, (16,))
    curve = fit(lambda b, c: {"x": f(b, c)}, terms, contexts=(5, 11, 24, 40))["x"]
    assert curve.verified and str(curve) == "b·(30·c + 100·min(c,16)) + 7"
    assert [curve(b, c) for b, c in UNSEEN] == [f(b, c) for b, c in UNSEEN]
    # a breakpoint at 30 where the kink is at 16 does not fit: c = 5, 11, 24 are all below 30,
    # where the curve is a line in c, and 100·min(c,16) + 30·c is not (650, 1430, 2320 at b=1)
    wrong = fit(lambda b, c: {"x": f(b, c)}, basis(1, 1, (30,)), contexts=(5, 11, 24, 40))["x"]
    # (all six terms come out non-zero: no analysed point is left to check, and it says so)
    assert not wrong.verified and "take all 6 analysed points" in wrong.why and wrong(1, 16) != f(1, 16)
    # a check on each side of the breakpoint: 3 terms solved from 3 points, one checked
    # below 16 and one above
    assert {c <= 16 for _, c in curve.checked_at} == {True, False}
    # 7 + 5·min(c,16) + b·c: above 16 the 1 and min(c,16) columns are alike (16 = 16·1),
    # so the one point below 16 is needed to solve, and nothing checks the curve there
    g = lambda b, c: 7 + 5 * min(c, 16) + b * c  # noqa: E731
    points = [(1, 5), (1, 24), (2, 24), (1, 40), (2, 40), (3, 64)]
    few = (Term(), Term(m=1, w=16), Term(b=1, c=1), Term(b=1, m=1, w=16))
    below = fit(lambda b, c: {"x": g(b, c)}, few, points)["x"]
    assert not below.verified and "c <= 16: not checked there" in below.why
    assert below.checked_at and all(c > 16 for _, c in below.checked_at)
    # (a breakpoint between the same two sampled contexts as the true one, 12 for 16 here,
    # cannot be told from it: contexts must not leave a gap around a breakpoint)


def test_design_refuses_sizes_that_cannot_tell_terms_apart():
    # every context below 128: min(c,128) is c there, so only 1, c, b, b·c are told apart
    with pytest.raises(InputError, match="tell only 4 of the 6 terms"):
        design(basis(1, 1, (128,)), batches=(1, 2), contexts=(8, 16, 32))
    with pytest.raises(InputError, match="calls=4"):
        design(basis(1, 2), batches=(1, 2), contexts=(8, 16, 32), calls=4)


def test_non_integer_figure_is_refused():
    # a predicted time is a float (a sum of per-op maxima): fit the counts, then price them;
    # the first size analysed is b=1, c=11: 0.5·1·11 = 5.5
    with pytest.raises(InputError, match=r"figure .time. at b=1, c=11 is 5.5: a curve is exact for integers"):
        fit(lambda b, c: {"time": 0.5 * b * c}, basis(1, 1))


def test_peak_as_max_of_candidates_exact_past_the_crossing():
    # two events: 100,000 + 10·b·c and b·c². At the analysed sizes (c <= 64, b <= 3) the
    # first is always higher (b·c² <= 3·64² = 12,288); at b=5, c=257 the second
    # (5·257² = 330,245 > 100,000 + 12,850) is: the max of the fitted events follows it
    events = lambda b, c: (100_000 + 10 * b * c, b * c * c)  # noqa: E731
    peak = fit(lambda b, c: {"peak": events(b, c)}, basis(1, 2))["peak"]
    assert isinstance(peak, PeakCurve) and peak.verified
    assert peak(5, 257) == 330_245 and peak.at(5, 257).name == "peak[1]"
    assert peak(3, 64) == 101_920  # 100,000 + 10·3·64


def test_peak_fallback_when_events_do_not_line_up():
    # one more event from c > 30 on (a branch the model takes): the maximum is fitted as
    # one curve, right here (10·5·257 = 12,850) but never verified: past the analysed sizes
    # another event could overtake it
    events = lambda b, c: (10 * b * c,) + ((1,) if c > 30 else ())  # noqa: E731
    peak = fit(lambda b, c: {"peak": events(b, c)}, basis(1, 1))["peak"]
    assert peak.fallback is not None and not peak.verified and "do not line up" in str(peak)
    assert peak(5, 257) == 12_850 and peak.unverified == ("peak",)
    with pytest.raises(UnverifiedCurveError, match="peak: its candidates do not line up"):
        peak.require()


def test_peak_events_renamed_across_sizes_line_up_by_position():
    # the same two events named after nodes the graph renames at b >= 2 ("expand" then
    # "expand_1"): as many at every size, so lined up by position and each one checked
    def events(b, c):
        node = "expand" if b == 1 else "expand_1"
        return {f"{node}#0": 7 * b * c, f"{node}#1": 100 + b * c}

    peak = fit(lambda b, c: {"peak": events(b, c)}, basis(1, 1))["peak"]
    assert peak.verified and peak(5, 257) == 8_995  # 7·5·257
    assert [k.name for k in peak.candidates] == ["peak[expand#0]", "peak[expand#1]"]


@pytest.mark.parametrize("p", range(6))
def test_power_sum_against_brute_force(p):
    assert [power_sum(p, n) for n in range(-1, 40)] == [sum(c**p for c in range(n + 1)) for n in range(-1, 40)]


@pytest.mark.parametrize("first,last", [(0, 0), (1, 15), (10, 16), (16, 17), (3, 200), (40, 90)])
def test_mean_over_contexts_closed_form(first, last):
    # TPOT's mean over the contexts prompt..prompt+new-1, across the breakpoint 16
    f = lambda b, c: 3 * b * c * c + 100 * b * min(c, 16) * c + 5 * min(c, 16) + 11  # noqa: E731
    terms = (Term(), Term(m=1, w=16), Term(b=1, c=2), Term(b=1, c=1, m=1, w=16))
    curve = fit(lambda b, c: {"x": f(b, c)}, terms, contexts=(5, 11, 24, 40))["x"]
    assert curve.verified
    brute = sum(f(4, c) for c in range(first, last + 1))
    assert curve.total(4, first, last) == brute
    assert curve.mean(4, first, last) == Fraction(brute, last - first + 1)


def _tiny(family: str, **extra) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM

    sizes = {"gpt2": dict(n_embd=64, n_layer=2, n_head=4, n_positions=2048)}.get(
        family,
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2),
    )
    config = AutoConfig.for_model(family, vocab_size=128, **sizes, **extra)
    return AutoModelForCausalLM.from_config(config).eval()


def _prefill(model):
    def evaluate(b, c):
        with torch.no_grad():
            inputs = {"input_ids": torch.zeros(b, c, dtype=torch.long), "use_cache": False}
            return report_figures(fxinspect.analyze(model, kwargs=inputs, device="meta"))

    return evaluate


EXACT = ("flops", "macs", "bytes_read", "bytes_written", "bytes", "resident")


@pytest.mark.parametrize(
    "family,extra,contexts",
    [
        ("llama", {}, (11, 24, 37, 53, 64)),
        pytest.param("gpt2", {}, (11, 24, 37, 53, 64), marks=pytest.mark.slow),
        # a window of 16: above it the model builds a sliding mask (a b·c² tensor) that it
        # does not build below it, so the fit is of the contexts above the window
        pytest.param("mistral", {"sliding_window": 16}, (21, 30, 37, 53, 64), marks=pytest.mark.slow),
    ],
)
def test_prefill_curves_exact_at_unseen_sizes(family, extra, contexts):
    model = _tiny(family, **extra)
    evaluate, calls = counted(_prefill(model))
    curves = fit(evaluate, basis(1, 2), contexts=contexts)
    assert len(calls) == 6 and max(c for _, c in calls) <= 64
    assert all(curves[name].verified for name in EXACT), {n: str(curves[n]) for n in EXACT}
    for b, c in [(5, 257)]:  # (more unseen sizes, 1000 among them, in the lead's report)
        truth = _prefill(model)(b, c)
        assert {name: curves[name](b, c) for name in EXACT} == {name: truth[name] for name in EXACT}
