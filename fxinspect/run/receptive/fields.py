"""Receptive fields: which input positions each output position of a node can see.

Followed along the aten ops a forward runs (the counting pass's dispatch mode calls
:meth:`.tracker.FieldTracker.observe` after each, and each op's rule is in
:mod:`.ops` and :mod:`.views`; this module holds what they share),
from every spatial input of the model: a floating tensor of rank 3 to 5 read as
``(N, C, *spatial)``, or of rank 2 read as a signal ``(N, T)`` once a convolution or
pooling reads it (a raw waveform unsqueezed in the model; see :class:`Field`'s
``candidate``). Per spatial dimension of that input a tensor carries a :class:`Window`:
output position ``i`` sees the input positions ``start + i * jump`` to
``start + i * jump + size - 1`` (``jump`` is the effective stride, ``-start`` the
effective padding). The field is the theoretical one, not clipped to the input, as in
the literature that tabulates it (Araujo et al., "Computing Receptive Fields of
Convolutional Neural Networks", Distill 2019).

* convolutions (dilated, grouped, transposed: the jump divides by the stride), max and
  average pooling (1-D pooling runs as 2-D on an added dimension of 1, which holds no
  positions), adaptive pooling where the shapes fix it (an input size the output
  size divides), upsampling (nearest: the jump divides; linear: one more position per
  dimension; cubic: three), padding, strided slicing: each changes the window;
* a join of branches (add, mul, cat or stack along channels) takes the union of their
  windows and notes branches that disagree on the jump;
* an op that mixes every position (a mean or softmax over a spatial axis, a matmul that
  contracts one, attention, a branch broadcast back from one position as in
  squeeze-and-excitation) makes the field :data:`GLOBAL`;
* views, reshapes, permutes and splits (``chunk``, ``split``, ``unbind``) follow where
  the spatial axes went; positions merged into one axis keep their window until an op
  mixes along that axis; a part split off along a spatial axis starts later;
* normalisations are pointwise here, as in the literature (batch statistics are not a
  field); any other op that keeps its input's shape passes the field on (but ``flip``
  and ``roll`` of positions), and one that does not makes it unknown (``None``): the op,
  node and module where a field stops are in the tracker's ``stops`` and the notes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import torch

__all__ = ["GLOBAL", "Field", "Window"]

GLOBAL = "global"
"""The field of an output that depends on every input position."""


@dataclass(frozen=True)
class Window:
    """One spatial dimension's field: ``size`` positions from ``start + i * jump``."""

    size: int | Fraction
    jump: int | Fraction
    start: int | Fraction

    def strided(self, kernel: int, stride: int, padding: int, dilation: int = 1) -> Window:
        """After a convolution or a pooling window along this dimension."""
        span = dilation * (kernel - 1) + 1
        return Window(self.size + (span - 1) * self.jump, self.jump * stride, self.start - padding * self.jump)

    def transposed(self, kernel: int, stride: int, padding: int, dilation: int = 1) -> Window:
        """After a transposed convolution: output ``o`` sees inputs ``(o + padding - k * dilation) / stride``."""
        span = dilation * (kernel - 1) + 1
        seen = math.ceil(span / stride)  # input positions one output position can reach
        return Window(
            self.size + (seen - 1) * self.jump,
            Fraction(self.jump) / stride,
            self.start + Fraction(padding - span + 1, stride) * self.jump,
        )


@dataclass(frozen=True)
class Field:
    """A tensor's field: a window per input spatial dimension, the tensor dimension each
    lies along (several on one: positions merged by a reshape), and how many positions
    each has (what tells them apart when a reshape splits a merged dimension again).

    ``candidate``: from an ``(N, T)`` input that no convolution or pooling has read yet:
    a signal if one does (a raw waveform unsqueezed to ``(N, 1, T)``), else a vector of
    features whose "positions" mean nothing, dropped when an op mixes them."""

    windows: tuple[Window, ...]
    axes: tuple[int, ...]
    extents: tuple[int, ...]
    candidate: bool = False

    def moved(self, axes: tuple[int, ...]) -> Field:
        return replace(self, axes=axes)


_State = Field | str | None  # a field, GLOBAL, or unknown


def _signals(states: list[_State], others: list[Any]) -> tuple[list[_State], list[Any]]:
    """``states`` (and what goes with each in ``others``) less the candidates' when one is
    not a candidate: a vector of features joined to a signal (a conditioning input) is no
    position of it."""
    if all(isinstance(s, Field) and s.candidate for s in states):
        return states, others
    kept = [(s, o) for s, o in zip(states, others) if not (isinstance(s, Field) and s.candidate)]
    return [s for s, _ in kept], [o for _, o in kept]


def _join(states: list[_State], rank: int, ranks: list[int]) -> tuple[_State, bool]:
    """The union of branches' fields (aligned from the right, as broadcasting does), and
    whether their jumps disagree."""
    states, ranks = _signals(states, ranks)
    fields = []
    for state, r in zip(states, ranks):
        if state == GLOBAL:
            return GLOBAL, False
        if state is None:
            return None, False
        fields.append(state.moved(tuple(a + rank - r for a in state.axes)))
    first = fields[0]
    if any(f.axes != first.axes or f.extents != first.extents for f in fields):
        return None, False
    windows, disagree = [], False
    for parts in zip(*(f.windows for f in fields)):
        low = min(w.start for w in parts)
        high = max(w.start + w.size for w in parts)
        disagree |= len({w.jump for w in parts}) > 1
        windows.append(Window(high - low, max(w.jump for w in parts), low))
    return replace(first, windows=tuple(windows)), disagree


def _plain(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)


def _tensors(items: Any) -> list[torch.Tensor]:
    """The tensors among ``items`` and in its lists (``cat``'s): the cheap walk, per op."""
    found = []
    for item in items:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            found += [t for t in item if isinstance(t, torch.Tensor)]
    return found


def _flat(items: Any):
    if isinstance(items, (list, tuple)):
        for item in items:
            yield from _flat(item)
    else:
        yield items
