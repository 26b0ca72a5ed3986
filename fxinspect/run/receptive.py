"""Receptive fields: which input positions each output position of a node can see.

Followed along the aten ops a forward runs (the counting pass's dispatch mode calls
:meth:`.receptive_tracker.FieldTracker.observe` after each, and each op's rule is in
:mod:`.receptive_ops`; this module holds what they share), from every spatial input of the model: a
floating tensor of rank 3 to 5 read as ``(N, C, *spatial)``. Per spatial dimension of
that input a tensor carries a :class:`Window`: output position ``i`` sees the input
positions ``start + i * jump`` to ``start + i * jump + size - 1`` (``jump`` is the
effective stride, ``-start`` the effective padding). The field is the theoretical one,
not clipped to the input, as in the literature that tabulates it (Araujo et al.,
"Computing Receptive Fields of Convolutional Neural Networks", Distill 2019).

* convolutions (dilated, grouped, transposed: the jump divides by the stride), max and
  average pooling, adaptive pooling where the shapes fix it (an input size the output
  size divides), upsampling (nearest: the jump divides; linear: one more position per
  dimension; cubic: three), padding, strided slicing: each changes the window;
* a join of branches (add, mul, cat along channels) takes the union of their windows
  and notes branches that disagree on the jump;
* an op that mixes every position (a mean or softmax over a spatial axis, a matmul that
  contracts one, attention, a branch broadcast back from one position as in
  squeeze-and-excitation) makes the field :data:`GLOBAL`;
* views, reshapes and permutes follow where the spatial axes went; positions merged into
  one axis keep their window until an op mixes along that axis;
* normalisations are pointwise here, as in the literature (batch statistics are not a
  field); any other op that keeps its input's shape passes the field on, and one that
  does not makes it unknown (``None``) and is named in the tracker's ``unknown``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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
    each has (what tells them apart when a reshape splits a merged dimension again)."""

    windows: tuple[Window, ...]
    axes: tuple[int, ...]
    extents: tuple[int, ...]

    def moved(self, axes: tuple[int, ...]) -> Field:
        return Field(self.windows, axes, self.extents)


_State = Field | str | None  # a field, GLOBAL, or unknown


def _join(states: list[_State], rank: int, ranks: list[int]) -> tuple[_State, bool]:
    """The union of branches' fields (aligned from the right, as broadcasting does), and
    whether their jumps disagree."""
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
    return Field(tuple(windows), first.axes, first.extents), disagree


def _groups(before: list[int], after: list[int]) -> list[tuple[list[int], list[int]]] | None:
    """Dimensions of a shape ``before`` and of the same values reshaped to ``after``,
    grouped where their sizes multiply alike."""
    out, i, j = [], 0, 0
    while i < len(before) or j < len(after):
        gi, gj = [i] if i < len(before) else [], [j] if j < len(after) else []
        a = before[i] if i < len(before) else 1
        b = after[j] if j < len(after) else 1
        i, j = i + 1, j + 1
        while a != b:
            if a < b and i < len(before):
                a, i = a * before[i], i + 1
                gi.append(i - 1)
            elif j < len(after):
                b, j = b * after[j], j + 1
                gj.append(j - 1)
            else:
                return None
        out.append((gi, gj))
    return out


def _reshaped(field: Field, before: list[int], after: list[int]) -> Field | None:
    """``field`` of a tensor of shape ``before`` reshaped to ``after``: merged spatial
    dimensions lie on one, a merged one split again is told apart by its extents."""
    groups = _groups(before, after)
    if groups is None:
        return None
    axes = list(field.axes)
    for gi, gj in groups:
        inside = [k for k, a in enumerate(field.axes) if a in gi]
        if not inside:
            continue
        real = [d for d in gj if after[d] != 1]
        if len(real) <= 1:
            for k in inside:
                axes[k] = real[0] if real else gj[-1]
            continue
        extents = [field.extents[k] for k in inside]
        tail = real[-len(inside) :]
        if len(inside) > len(real) or [after[d] for d in tail] != extents:
            return None  # a spatial dimension split over several: no window says it
        for k, d in zip(inside, tail):
            axes[k] = d
    return field.moved(tuple(axes))


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
