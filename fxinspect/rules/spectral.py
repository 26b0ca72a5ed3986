"""Fast Fourier transforms: the classic ``5 N log2 N`` flops of a complex radix-2 FFT.

A transform over dims of total length ``N`` applied to a tensor of ``M`` complex
elements (``M / N`` transforms) costs ``5 * M * log2(N)``; a real-input (``r2c``) or
real-output (``c2r``) transform costs half, ``2.5 * M * log2(N)`` with ``M`` the real
elements. The figure is an estimate of the algorithm, as FFTW's benchmarks use, not of
any kernel's exact arithmetic.
"""

from __future__ import annotations

from math import log2
from typing import Any

from ._util import arg, aten, first_tensor, numel
from .registry import Cost, Rule, register_rule


def fft_flops(elements: int, length: int, per_element: float) -> int:
    """``per_element * elements * log2(length)``, rounded; a length-1 transform is free."""
    return round(per_element * elements * log2(length)) if length > 1 else 0


def _fft_rule(real: str | None) -> Rule:
    """``real``: which side is real (``"input"`` for r2c, ``"output"`` for c2r), or None."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        signal = first_tensor(out) if real == "output" else args[0]
        dims = arg(args, kwargs, 1, "dim")
        length = numel(signal.shape[d] for d in dims)
        return Cost(flops=fft_flops(signal.numel(), length, 2.5 if real else 5.0))

    rule.__name__ = rule.__qualname__ = {"input": "fft_r2c", "output": "fft_c2r"}.get(real, "fft_c2c")
    return rule


register_rule(aten._fft_c2c)(_fft_rule(None))
register_rule(aten._fft_r2c)(_fft_rule("input"))
register_rule(aten._fft_c2r)(_fft_rule("output"))
