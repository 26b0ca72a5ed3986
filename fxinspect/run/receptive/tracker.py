"""Following receptive fields along one run: :class:`FieldTracker` (see :mod:`.fields`).

The counting pass's dispatch mode calls :meth:`FieldTracker.observe` after every aten
op; each op's rule (:mod:`.ops`) gives its output's field from its inputs'.

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

from ...formatting import listing
from ...records.nodes import RECEPTIVE_STOPS
from .fields import GLOBAL, Field, Window, _flat, _join, _plain, _State, _tensors
from .ops import HANDLERS, SPLITS, WINDOW_OPS

__all__ = ["FieldTracker"]


def _start(t: Any) -> Field | None:
    """The field an input starts: ``(N, C, *spatial)`` for a floating tensor of rank 3 to
    5; a candidate along ``T`` for one of rank 2, ``(N, T)`` (see :class:`Field`)."""
    if not (isinstance(t, torch.Tensor) and 2 <= t.dim() <= 5 and t.is_floating_point()):
        return None
    unit = Window(1, 1, 0)  # (ints until a stride divides: Fractions cost more)
    if t.dim() == 2:
        return Field((unit,), (1,), (t.shape[1],), candidate=True)
    return Field((unit,) * (t.dim() - 2), tuple(range(2, t.dim())), tuple(t.shape[2:]))


_NONE = object()
"""An output that has no field (and never had one), as opposed to ``None``, a lost one."""


def _candidate(state: _State) -> bool:
    return isinstance(state, Field) and state.candidate


class FieldTracker:
    """Receptive fields along one run: see the module. ``inputs`` are the model's input
    tensors (floating ones of rank 2 to 5 start a field each); ``node`` is the graph node
    running (the counting pass sets it), to say where a field stops."""

    def __init__(self, inputs: list[Any]) -> None:
        self.inputs = inputs
        self.node: str | None = None
        self._ops: dict[Any, tuple[str, Any, bool]] = {}  # an aten op -> its name, rule, whether it splits
        self._states: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
        self.stops: dict[tuple[str, str | None], None] = {}  # (op, node) where a field was lost
        self.read_as: dict[str | None, tuple[int, ...]] = {}  # node -> the shape a flat input's positions took
        self.promoted = False  # whether a convolution or pooling read an (N, T) input's field
        self.disagree = WeakTensorKeyDictionary()  # outputs of joins whose branches' jumps differ
        # whether a convolution or pooling ran on a field: a rank-3 input read as (N, C, L)
        # that none reaches is a sequence of features (N, T, D), and its fields mean nothing
        self.windowed = False
        self._found: dict[str, dict[str, Any]] = {}  # node -> its figures (record)
        self._apart: list[str] = []  # nodes whose joined branches disagree on the stride
        for t in inputs:
            field = _start(t)
            if field is not None:
                self._states[t] = field

    @staticmethod
    def wanted(inputs: list[Any]) -> bool:
        """Whether any input starts a field (else following ops is not worth its cost)."""
        return any(_start(t) is not None for t in inputs)

    def state(self, t: Any) -> _State:
        return self._states.get(t) if isinstance(t, torch.Tensor) else None

    def tracks(self, t: Any) -> bool:
        """Whether ``t`` carries a field, or carried one that was lost (a value that never
        saw a position, a weight, does not)."""
        return isinstance(t, torch.Tensor) and t in self._states

    def observe(self, func: Any, args: tuple, kwargs: dict | None, out: Any) -> None:
        """Give ``out`` its field from those of ``args`` (the counting mode calls this after every op)."""
        states = self._states
        tensors = [a for a in _tensors(args) if a in states]
        if not tensors:
            return
        outs = _tensors(out if isinstance(out, (list, tuple)) else (out,))
        if not outs:
            return
        given = [states[t] for t in tensors]
        if all(g is None for g in given):  # downstream of a lost field: lost too, said where it was lost
            for o in outs:
                states[o] = None
            return
        known = self._ops.get(func)
        if known is None:
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            splits = name in SPLITS
            known = self._ops[func] = (name, SPLITS[name] if splits else HANDLERS.get(name), splits)
        name, handler, splits = known
        try:
            if any(g == GLOBAL for g in given):
                found = [GLOBAL] * len(outs)  # what reads a value that saw every position has seen them all
            elif splits:
                found = handler(self, args, kwargs or {}, outs)
            else:
                state = handler(self, args, kwargs or {}, outs[0]) if handler else _shaped_alike(self, tensors, outs[0])
                if name in WINDOW_OPS and isinstance(state, Field) and not state.candidate:
                    self.windowed = True
                    self.promoted |= any(_candidate(g) for g in given)  # an (N, T) input is a signal
                # an op with a rule gives its first output's field (the others, as max
                # pooling's indices, have none); one without, a pointwise op's, gives it to
                # every output of the same rank
                found = [state if o is outs[0] or (not handler and o.dim() == outs[0].dim()) else _NONE for o in outs]
        except Exception:  # (a nested tensor has no sizes, ...): the field is lost, never the analysis
            found = [None] * len(outs)
        if all(g is None or _candidate(g) for g in given):  # a vector of features, not a signal:
            found = [f if isinstance(f, Field) else _NONE for f in found]  # mixed, it is dropped
        elif any(f is None for f in found) and not any(g is None for g in given):
            self.stops[(name, self.node)] = None  # (a join with a branch lost before: named there)
        for o, f in zip(outs, found):
            if f is _NONE:
                states.pop(o, None)
            else:
                states[o] = f

    def record(self, name: str, out: Any) -> None:
        """Keep node ``name``'s figures, from its first output tensor: the field's size per
        dimension (whole input positions touched), its jump and its effective padding."""
        first = next((t for t in _flat(out) if isinstance(t, torch.Tensor)), None)
        found = self.field_of(first)
        if found is None or _candidate(self.state(first)):
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

    def named(self) -> set[str | None]:
        """The nodes the notes name (their modules are wanted by ``results``)."""
        return {node for _, node in self.stops} | set(self.read_as)

    def results(self, modules: dict[str, str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """The nodes' figures and the notes on them (``modules``: each node's module
        path); nothing when no convolution or pooling read a field (see ``windowed``)."""
        if not self.windowed:
            return {}, []
        notes = []
        if self._apart:
            notes.append(
                f"receptive field: the branches joined at {', '.join(self._apart)} have different effective "
                "strides (the field given is their union, at the larger stride)"
            )
        if self.read_as and self.promoted:
            shapes = [
                f"{'×'.join(map(str, shape))} at node {node} (module {modules.get(node) or 'the root'})"
                for node, shape in self.read_as.items()
            ]
            notes.append(
                f"receptive field: a flat input's positions are counted as the model reshapes them: {listing(shapes)}"
            )
        if self.stops:
            places = [
                f"{op} (node {node}, module {modules.get(node) or 'the root'})" if node else f"{op} (outside any node)"
                for op, node in self.stops
            ]
            notes.append(f"{RECEPTIVE_STOPS}{listing(places)}; not followed past, None after")
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
