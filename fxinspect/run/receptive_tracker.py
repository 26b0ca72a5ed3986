"""Following receptive fields along one run: :class:`FieldTracker` (see :mod:`.receptive`).

The counting pass's dispatch mode calls :meth:`FieldTracker.observe` after every aten
op; each op's rule (:mod:`.receptive_ops`) gives its output's field from its inputs'.

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
from typing import Any

import torch
from torch.utils.weak import WeakTensorKeyDictionary

from .receptive import GLOBAL, Field, Window, _flat, _join, _plain, _State, _tensors
from .receptive_ops import HANDLERS, WINDOW_OPS

__all__ = ["FieldTracker"]


def _spatial_input(t: Any) -> bool:
    """A tensor read as ``(N, C, *spatial)``: floating, of rank 3 to 5."""
    return isinstance(t, torch.Tensor) and 3 <= t.dim() <= 5 and t.is_floating_point()


class FieldTracker:
    """Receptive fields along one run: see the module. ``inputs`` are the model's input
    tensors (those of rank 3 to 5 and floating start a field each)."""

    def __init__(self, inputs: list[Any]) -> None:
        self.inputs = inputs
        self._ops: dict[Any, tuple[str, Any]] = {}  # an aten op -> its name and rule
        self._states: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
        self.unknown: dict[str, None] = {}  # ops after which a field was lost
        self.disagree = WeakTensorKeyDictionary()  # outputs of joins whose branches' jumps differ
        # whether a convolution or pooling ran on a field: a rank-3 input read as (N, C, L)
        # that none reaches is a sequence of features (N, T, D), and its fields mean nothing
        self.windowed = False
        self._found: dict[str, dict[str, Any]] = {}  # node -> its figures (record)
        self._apart: list[str] = []  # nodes whose joined branches disagree on the stride
        unit = Window(1, 1, 0)  # (ints until a stride divides: Fractions cost more)
        for t in inputs:
            if _spatial_input(t):
                self._states[t] = Field((unit,) * (t.dim() - 2), tuple(range(2, t.dim())), tuple(t.shape[2:]))

    @staticmethod
    def wanted(inputs: list[Any]) -> bool:
        """Whether any input starts a field (else following ops is not worth its cost)."""
        return any(_spatial_input(t) for t in inputs)

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
            known = self._ops[func] = (name, HANDLERS.get(name))
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

    def record(self, name: str, out: Any) -> None:
        """Keep node ``name``'s figures, from its first output tensor: the field's size per
        dimension (whole input positions touched), its jump and its effective padding."""
        first = next((t for t in _flat(out) if isinstance(t, torch.Tensor)), None)
        found = self.field_of(first)
        if found is None:
            return
        if found == GLOBAL:
            self._found[name] = {"receptive_field": GLOBAL}
            return
        sizes, jumps, starts = found
        self._found[name] = {
            "receptive_field": tuple(math.ceil(s) for s in sizes),
            "effective_stride": jumps,
            "effective_padding": tuple(-s for s in starts),
        }
        if first in self.disagree:
            self._apart.append(name)

    def results(self) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """The nodes' figures and the notes on them; nothing when no convolution or
        pooling read a field (see ``windowed``)."""
        if not self.windowed:
            return {}, []
        notes = []
        if self._apart:
            notes.append(
                f"receptive field: the branches joined at {', '.join(self._apart)} have different effective "
                "strides (the field given is their union, at the larger stride)"
            )
        if self.unknown:
            notes.append(f"receptive field: not followed through {', '.join(self.unknown)} (None after them)")
        return self._found, notes

    def field_of(self, t: Any) -> tuple | str | None:
        """``t``'s field: ``(sizes, jumps, starts)``, one per input spatial dimension
        (whole numbers as ints), :data:`GLOBAL`, or ``None`` when unknown or never spatial."""
        state = self.state(t)
        if state is None or state == GLOBAL:
            return state
        plain = [tuple(_plain(getattr(w, part)) for w in state.windows) for part in ("size", "jump", "start")]
        return tuple(plain)


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
