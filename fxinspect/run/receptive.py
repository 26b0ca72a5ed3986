"""Receptive fields: which input positions each output position of a node can see.

Followed along the aten ops a forward runs (the counting pass's dispatch mode calls
:meth:`FieldTracker.observe` after each), from every spatial input of the model: a
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
  does not makes it unknown (``None``) and is named in :attr:`FieldTracker.unknown`.

Example
-------
>>> import torch
>>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 3), torch.nn.MaxPool2d(2), torch.nn.Conv2d(1, 1, 3, dilation=2))
>>> tracker = FieldTracker([torch.zeros(1, 1, 32, 32)])
>>> from torch.utils._python_dispatch import TorchDispatchMode
>>> class Mode(TorchDispatchMode):
...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
...         out = func(*args, **(kwargs or {}))
...         tracker.observe(func, args, kwargs, out)
...         return out
>>> with Mode(), torch.no_grad():
...     out = net(tracker.inputs[0])
>>> tracker.field_of(out)      # 3, then 2 at jump 1 -> 4, then a dilated 3 (5 wide) at jump 2 -> 4 + 4 * 2
((12, 12), (2, 2), (0, 0))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch
from torch.utils.weak import WeakTensorKeyDictionary

__all__ = ["GLOBAL", "FieldTracker", "Window", "receptive_figures"]

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


class FieldTracker:
    """Receptive fields along one run: see the module. ``inputs`` are the model's input
    tensors (those of rank 3 to 5 and floating start a field each)."""

    def __init__(self, inputs: list[Any]) -> None:
        from .receptive_ops import HANDLERS

        self.inputs = inputs
        self._handlers = HANDLERS
        self._ops: dict[Any, tuple[str, Any]] = {}  # an aten op -> its name and rule
        self._states: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
        self.unknown: dict[str, None] = {}  # ops after which a field was lost
        self.disagree = WeakTensorKeyDictionary()  # outputs of joins whose branches' jumps differ
        # whether a convolution or pooling ran on a field: a rank-3 input read as (N, C, L)
        # that none reaches is a sequence of features (N, T, D), and its fields mean nothing
        self.windowed = False
        for t in inputs:
            if isinstance(t, torch.Tensor) and 3 <= t.dim() <= 5 and t.is_floating_point():
                spatial = t.dim() - 2
                unit = Window(1, 1, 0)  # (ints until a stride divides: Fractions cost more)
                self._states[t] = Field((unit,) * spatial, tuple(range(2, t.dim())), tuple(t.shape[2:]))

    @staticmethod
    def wanted(inputs: list[Any]) -> bool:
        """Whether any input starts a field (else following ops is not worth its cost)."""
        return any(isinstance(t, torch.Tensor) and 3 <= t.dim() <= 5 and t.is_floating_point() for t in inputs)

    def state(self, t: Any) -> _State:
        return self._states.get(t) if isinstance(t, torch.Tensor) else None

    def observe(self, func: Any, args: tuple, kwargs: dict | None, out: Any) -> None:
        """Give ``out`` its field from those of ``args`` (the counting mode calls this after every op)."""
        states = self._states
        tensors = [a for a in _tensors(args) if a in states]
        if not tensors:
            return
        outs = _tensors(out if isinstance(out, (list, tuple)) else (out,))
        if not outs:
            return
        known = self._ops.get(func)
        if known is None:
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            known = self._ops[func] = (name, self._handlers.get(name))
        name, handler = known
        try:
            if any(states.get(t) == GLOBAL for t in tensors):
                state = GLOBAL  # what reads a value that saw every position has seen them all
            elif handler is not None:
                state = handler(self, args, kwargs or {}, outs[0])
                self.windowed |= name in WINDOW_OPS and isinstance(state, Field)
            else:
                state = _shaped_alike(self, tensors, outs[0])
        except Exception:  # (a nested tensor has no sizes, ...): the field is lost, never the analysis
            state = None
        if state is None:
            self.unknown[name] = None
        for o in outs[:1] if handler else outs:
            if o.dim() == outs[0].dim():
                self._states[o] = state

    def field_of(self, t: Any) -> tuple | str | None:
        """``t``'s field: ``(sizes, jumps, starts)``, one per input spatial dimension
        (whole numbers as ints), :data:`GLOBAL`, or ``None`` when unknown or never spatial."""
        state = self.state(t)
        if state is None or state == GLOBAL:
            return state
        plain = [tuple(_plain(getattr(w, part)) for w in state.windows) for part in ("size", "jump", "start")]
        return tuple(plain)


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


def _shaped_alike(tracker: FieldTracker, tensors: list[torch.Tensor], out: torch.Tensor) -> _State:
    """An op without a rule: a join when its output has the broadcast shape of its
    field-carrying inputs (pointwise ops), else unknown."""
    if len(tensors) == 1:  # the common case (an activation, a scale): its input's field
        return tracker.state(tensors[0]) if tensors[0].shape == out.shape else None
    try:
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    except RuntimeError:
        return None
    if tuple(shape) != tuple(out.shape):
        return None
    state, disagree = _join([tracker.state(t) for t in tensors], out.dim(), [t.dim() for t in tensors])
    if disagree:
        tracker.disagree[out] = True
    return state


WINDOW_OPS = frozenset(
    ["convolution"]
    + [f"{kind}_pool{n}d{tail}" for kind in ("max", "avg") for n in (1, 2, 3) for tail in ("", "_with_indices")]
    + [f"{a}adaptive_{k}_pool{n}d" for a in ("", "_") for k in ("avg", "max") for n in (1, 2, 3)]
)
"""Ops that show a tensor's trailing dimensions are positions (see ``windowed``)."""


def receptive_figures(tracker: FieldTracker, out: Any) -> dict[str, Any]:
    """A node's receptive-field figures from its first output tensor: the field's size
    per dimension (whole input positions touched), its jump and its effective padding."""
    first = next((t for t in _flat(out) if isinstance(t, torch.Tensor)), None)
    found = tracker.field_of(first)
    if found is None:
        return {}
    if found == GLOBAL:
        return {"receptive_field": GLOBAL}
    sizes, jumps, starts = found
    figures = {
        "receptive_field": tuple(math.ceil(s) for s in sizes),
        "effective_stride": jumps,
        "effective_padding": tuple(-s for s in starts),
    }
    if first in tracker.disagree:
        figures["strides_disagree"] = True  # (not a record field: the pass turns it into a note)
    return figures
