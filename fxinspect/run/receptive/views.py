"""Receptive-field rules for the ops that move positions without mixing them (see :mod:`.fields`).

Views, reshapes, permutes, slices and splits: where each spatial dimension of the input
lies after them (and flips and rolls, which no window follows). Positions merged into
one dimension keep their window until an op mixes along it; a dimension split again is
told apart by its extent; a flat ``(N, T)`` input split into several is read as an image.
"""

from __future__ import annotations

from dataclasses import replace

from .fields import Field, Window

__all__ = ["SPLITS", "VIEWS"]


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


def slice_(tracker, args, kwargs, out):
    """slice(input, dim, start, end, step): a spatial dimension sliced moves and strides its window."""
    x = args[0]
    field = tracker.state(x)
    if not isinstance(field, Field):
        return field
    dim = (args[1] if len(args) > 1 else 0) % x.dim()
    begin = args[2] if len(args) > 2 and args[2] is not None else 0
    step = args[4] if len(args) > 4 else 1
    if dim not in field.axes:
        return field
    if field.axes.count(dim) > 1:
        return None
    begin = max(0, begin + x.shape[dim] if begin < 0 else min(begin, x.shape[dim]))
    k = field.axes.index(dim)
    windows = list(field.windows)
    w = windows[k]
    windows[k] = Window(w.size, w.jump * step, w.start + begin * w.jump)
    extents = list(field.extents)
    extents[k] = out.shape[dim]
    return replace(field, windows=tuple(windows), extents=tuple(extents))


def viewed(tracker, args, kwargs, out):
    """Views and reshapes: the spatial axes followed to where they lie now."""
    x = args[0]
    field = tracker.state(x)
    if not isinstance(field, Field):
        return field
    before, after = list(x.shape), list(out.shape)
    moved = _reshaped(field, before, after)
    if moved is None and field.candidate:
        return _read_as(tracker, field, before, after)
    return moved


def _read_as(tracker, field: Field, before: list[int], after: list[int]) -> Field | None:
    """A raw ``(N, T)`` input's positions split over several dimensions (a flat image
    viewed as ``(N, C, H, W)``): read from here on as positions of the reshaped input, a
    window each (a convolution keeps those its kernel slides over; see ``_spatial``)."""
    unit = Window(1, 1, 0)
    (axis,) = field.axes
    if field.windows != (unit,) or field.extents != (before[axis],):
        return None  # not the input's own positions any more: no window says how they split
    groups = _groups(before, after) or []
    taken = next((gj for gi, gj in groups if gi == [axis]), None)
    if taken is None:
        return None  # (merged with the batch: not the input's positions alone)
    real = tuple(d for d in taken if after[d] != 1)
    tracker.read_as[tracker.node] = tuple(after[d] for d in real)
    return Field((unit,) * len(real), real, tuple(after[d] for d in real), candidate=True)


def permuted(tracker, args, kwargs, out):
    x = args[0]
    field = tracker.state(x)
    if not isinstance(field, Field):
        return field
    order = [d % x.dim() for d in args[1]]
    return field.moved(tuple(order.index(a) for a in field.axes))


def transposed(tracker, args, kwargs, out):
    x = args[0]
    field = tracker.state(x)
    if not isinstance(field, Field):
        return field
    a, b = (args[1] % x.dim(), args[2] % x.dim()) if len(args) > 2 else (0, 1)
    return field.moved(tuple(b if d == a else a if d == b else d for d in field.axes))


def expanded(tracker, args, kwargs, out):
    x = args[0]
    field = tracker.state(x)
    if not isinstance(field, Field):
        return field
    return field.moved(tuple(a + out.dim() - x.dim() for a in field.axes))


def _shifted(field: Field, dim: int, offset: int, extent: int) -> Field | None:
    """``field`` of the part of a tensor from ``offset`` on along ``dim``, ``extent`` long."""
    if dim not in field.axes:
        return field  # (a part of the channels, or of any dimension without positions: the same field)
    if field.axes.count(dim) > 1:
        return None  # merged positions cut: no one window says which part each has
    k = field.axes.index(dim)
    windows, extents = list(field.windows), list(field.extents)
    w = windows[k]
    windows[k] = Window(w.size, w.jump, w.start + offset * w.jump)
    extents[k] = extent
    return replace(field, windows=tuple(windows), extents=tuple(extents))


def split(tracker, args, kwargs, outs):
    """split, split_with_sizes (what ``chunk`` runs) and unbind: one field
    per part, each moved to where its part starts along ``dim``."""
    x = args[0]
    field = tracker.state(x)
    if not isinstance(field, Field):
        return [field] * len(outs)
    dropped = all(o.dim() == x.dim() - 1 for o in outs)  # unbind: the dimension goes
    at = 1 if dropped else 2
    dim = (args[at] if len(args) > at else kwargs.get("dim", 0)) % x.dim()
    if dropped:
        if dim in field.axes:
            return [None] * len(outs)  # one position of a spatial dimension each, no dimension to hold it
        return [field.moved(tuple(a - (a > dim) for a in field.axes))] * len(outs)
    found, offset = [], 0
    for o in outs:
        found.append(_shifted(field, dim, offset, o.shape[dim]))
        offset += o.shape[dim]
    return found


def reordered(at: int):
    """flip(input, dims) (``at`` 1) and roll(input, shifts, dims) (``at`` 2): positions
    reordered along a spatial dimension are no window (a rule is needed: the kept shape
    would pass the field on unchanged). A roll without ``dims`` rolls them all."""

    def rule(tracker, args, kwargs, out):
        x = args[0]
        field = tracker.state(x)
        if not isinstance(field, Field):
            return field
        dims = args[at] if len(args) > at else kwargs.get("dims", ())
        dims = [dims] if isinstance(dims, int) else list(dims)
        if not dims or {d % x.dim() for d in dims} & set(field.axes):
            return None
        return field

    return rule


VIEWS = {
    "slice": slice_,
    **dict.fromkeys(("view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "flatten", "alias"), viewed),
    "permute": permuted,
    "transpose": transposed,
    "t": transposed,
    "expand": expanded,
    "flip": reordered(1),
    "roll": reordered(2),
}
"""Rules giving the (first) output's field."""

SPLITS = dict.fromkeys(
    ("split", "split_with_sizes", "unsafe_split", "unbind", "split_copy", "split_with_sizes_copy", "unbind_copy"), split
)
"""Rules giving a field per output (a list)."""
