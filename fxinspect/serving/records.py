"""The records a generation answers with: one decode step's cost, and the peak's parts."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DecodeCost", "GenerationMemory"]


@dataclass(frozen=True)
class DecodeCost:
    """One decode step at ``context`` cached tokens for ``batch`` sequences: exact counts
    (``bytes``: read and written), the time model's seconds (``None`` without a device
    spec) and the most memory held while it runs (weights and cache included)."""

    batch: int
    context: int
    flops: int
    macs: int
    bytes: int
    seconds: float | None
    peak: int


@dataclass(frozen=True)
class GenerationMemory:
    """The generation's peak and what it is made of: the weights as stored, the cache at
    that point, and the rest (activations, and a new cache's copies while they are made)."""

    peak: int
    weights: int
    kv_cache: int
    activations: int
    phase: str  # "prefill" or "decode": which one holds the peak
    loop: int = 0  # generate()'s own tensors between decode steps (see :mod:`.fits`)
