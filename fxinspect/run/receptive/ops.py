"""The aten ops that change a receptive field, each with its rule (see :mod:`.fields`).

A rule takes the tracker (:class:`~.tracker.FieldTracker`), the op's arguments
and its (first) output and returns the output's field: a :class:`~.receptive.Field`,
:data:`~.receptive.GLOBAL` or ``None`` (unknown); a rule in ``SPLITS`` takes all the
outputs and returns a field each. Views, reshapes and splits are in
:mod:`.views`. Ops not named here pass a field on when they keep their inputs'
broadcast shape (pointwise ops) and lose it otherwise.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from typing import Any

import torch

from .fields import GLOBAL, Field, Window, _join, _signals
from .views import SPLITS, VIEWS

__all__ = ["HANDLERS", "SPLITS", "WINDOW_OPS"]


def _spatial(tracker: Any, t: Any, n: int) -> Field | str | None:
    """``t``'s field when its positions lie on its trailing ``n`` dimensions, one each (a
    trailing dimension with none: the 1 that ``max_pool1d`` adds to run a 2-D kernel).
    A flat input read as an image (see ``_read_as``) keeps the positions the kernel
    slides over; its channels are channels."""
    state = tracker.state(t)
    if isinstance(state, Field):
        first = t.dim() - n
        if state.candidate and len(state.windows) > 1:
            kept = [(w, a, e) for w, a, e in zip(state.windows, state.axes, state.extents) if a >= first]
            if kept and len(kept) < len(state.windows):
                windows, axes, extents = zip(*kept)
                state = replace(state, windows=windows, axes=axes, extents=extents)
        if len(set(state.axes)) != len(state.axes) or any(a < first for a in state.axes):
            return None  # positions moved or merged: a window op on them is not one we can follow
    return state


def _ints(value: Any, n: int, default: int) -> list[int]:
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return [default] * n
    if isinstance(value, int):
        return [value] * n
    return list(value) if len(value) == n else [value[0]] * n


def _windowed(field: Any, out: torch.Tensor, kernel, stride, padding, dilation, transposed: bool = False) -> Any:
    """The field after a window op with these per-dimension figures over ``out``'s
    trailing ``len(kernel)`` dimensions; each window takes those of its own dimension."""
    if not isinstance(field, Field):
        return field
    step = Window.transposed if transposed else Window.strided
    first = out.dim() - len(kernel)
    windows = []
    for w, a in zip(field.windows, field.axes):
        i = a - first
        windows.append(step(w, kernel[i], stride[i], padding[i], dilation[i]))
    return Field(tuple(windows), field.axes, tuple(out.shape[a] for a in field.axes))


def convolution(tracker, args, kwargs, out):
    x, weight = args[0], args[1]
    n = weight.dim() - 2
    field = _spatial(tracker, x, n)
    stride, padding, dilation = (_ints(args[i] if len(args) > i else None, n, d) for i, d in ((3, 1), (4, 0), (5, 1)))
    transposed = bool(args[6]) if len(args) > 6 else False
    return _windowed(field, out, list(weight.shape[2:]), stride, padding, dilation, transposed)


def pool(tracker, args, kwargs, out):
    """max_pool / avg_pool: (input, kernel, stride, padding[, dilation | ceil_mode, ...])."""
    x = args[0]
    n = x.dim() - 2
    kernel = _ints(args[1], n, 1)
    stride = _ints(args[2] if len(args) > 2 else None, n, 0)
    stride = [s or k for s, k in zip(stride, kernel)]  # an empty stride is the kernel
    padding = _ints(args[3] if len(args) > 3 else None, n, 0)
    dilation = _ints(args[4], n, 1) if len(args) > 4 and not isinstance(args[4], bool) else [1] * n
    return _windowed(_spatial(tracker, x, n), out, kernel, stride, padding, dilation)


def adaptive_pool(tracker, args, kwargs, out):
    """Adaptive pooling: a window fixed by the shapes when the output size divides the
    input's, along each dimension that holds positions."""
    x = args[0]
    n = len(args[1]) if isinstance(args[1], (list, tuple)) else x.dim() - 2
    field = _spatial(tracker, x, n)
    if not isinstance(field, Field):
        return field
    sizes_in, sizes_out = [x.shape[a] for a in field.axes], [out.shape[a] for a in field.axes]
    if all(o == 1 for o in sizes_out):
        return GLOBAL
    if any(i % o for i, o in zip(sizes_in, sizes_out)):
        return None  # windows of different sizes: no one window says it
    steps = [1] * n  # (a dimension without positions: any window, as a channel's)
    for a, i, o in zip(field.axes, sizes_in, sizes_out):
        steps[a - (x.dim() - n)] = i // o
    return _windowed(field, out, steps, steps, [0] * n, [1] * n)


def upsample(extra: int):
    """Upsampling that reads ``extra + 1`` input positions per dimension (nearest 0,
    linear 1, cubic 3). Output ``o`` reads from input ``floor(x)`` on, ``x = o / s`` for
    nearest and ``(o + 0.5) / s - 0.5`` (less one for cubic) otherwise: not a linear
    function of ``o``. The window keeps the exact size (the most positions one output
    reads), the mean stride (the input's over the scale) and output 0's exact start;
    later outputs' starts are those of this mean stride, within one input stride."""

    def rule(tracker, args, kwargs, out):
        x = args[0]
        field = _spatial(tracker, x, x.dim() - 2)
        if not isinstance(field, Field):
            return field
        windows = []
        for w, a in zip(field.windows, field.axes):
            i, o = x.shape[a], out.shape[a]
            scale = Fraction(o, i)
            first = math.floor(Fraction(1, 2) / scale - Fraction(1, 2)) - extra // 2 if extra else 0
            windows.append(Window(w.size + extra * w.jump, w.jump / scale, w.start + first * w.jump))
        return replace(field, windows=tuple(windows), extents=tuple(out.shape[a] for a in field.axes))

    return rule


def pad(tracker, args, kwargs, out):
    """constant_pad_nd(input, pad) and the reflection and replication pads: pairs from the last dimension."""
    x, pads = args[0], list(args[1])
    field = tracker.state(x)
    if not isinstance(field, Field):
        return field
    windows = list(field.windows)
    for k, axis in enumerate(field.axes):
        pair = x.dim() - 1 - axis  # pads[2 * pair] is before this dimension
        if 2 * pair < len(pads):
            w = windows[k]
            windows[k] = Window(w.size, w.jump, w.start - pads[2 * pair] * w.jump)
    return replace(field, windows=tuple(windows), extents=tuple(out.shape[a] for a in field.axes))


def cat(tracker, args, kwargs, out):
    tensors = [t for t in args[0] if isinstance(t, torch.Tensor) and t.numel()]
    dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % out.dim()
    carrying = [t for t in tensors if tracker.tracks(t)]  # (a lost field among them: the join's is lost)
    states, carrying = _signals([tracker.state(t) for t in carrying], carrying)
    if any(isinstance(s, Field) and s.axes.count(dim) == 1 for s in states):
        return None  # joined along one spatial dimension
    # (along merged positions, as a class token joins patch tokens, each keeps its window)
    state, disagree = _join(states, out.dim(), [t.dim() for t in carrying])
    if disagree:
        tracker.disagree[out] = True
    return state


def stack(tracker, args, kwargs, out):
    """stack(tensors, dim): a new dimension, no position's, and the join of the fields."""
    dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % out.dim()
    carrying = [t for t in args[0] if tracker.tracks(t)]
    states = [tracker.state(t) for t in carrying]
    states = [s.moved(tuple(a + (a >= dim) for a in s.axes)) if isinstance(s, Field) else s for s in states]
    state, disagree = _join(states, out.dim(), [out.dim()] * len(states))
    if disagree:
        tracker.disagree[out] = True
    return state


def reduced(tracker, args, kwargs, out):
    """Reductions and softmax over ``dim``: global when a spatial axis is reduced."""
    x = args[0]
    field = tracker.state(x)
    if not isinstance(field, Field):
        return field
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return GLOBAL  # over everything
    dims = {d % x.dim() for d in (dims if isinstance(dims, (list, tuple)) else [dims])}
    if dims & set(field.axes):
        return GLOBAL
    if out.dim() == x.dim():
        return field
    return field.moved(tuple(a - sum(1 for d in dims if d < a) for a in field.axes))


def matmul(contracted_a: int, contracted_b: int):
    """Matrix products: a field on a contracted dimension, or on both operands, is global."""

    def rule(tracker, args, kwargs, out):
        operands = [a for a in args if isinstance(a, torch.Tensor)][-2:]
        pairs = [(t, c) for t, c in zip(operands, (contracted_a, contracted_b)) if tracker.tracks(t)]
        states, pairs = _signals([tracker.state(t) for t, _ in pairs], pairs)
        if any(s == GLOBAL for s in states):
            return GLOBAL
        if any(s is None for s in states):
            return None  # an operand's field lost before
        carrying = [(t, s, c) for (t, c), s in zip(pairs, states)]
        if len(carrying) != 1:
            return GLOBAL if len(carrying) > 1 else None  # (attention scores: two positions each)
        t, s, contracted = carrying[0]
        if contracted % t.dim() in s.axes:
            return GLOBAL
        return s.moved(tuple(a + out.dim() - t.dim() for a in s.axes))

    return rule


def attention(tracker, args, kwargs, out):
    """scaled_dot_product_attention and its kernels: every query sees every key's position."""
    return GLOBAL if any(tracker.state(t) is not None for t in args[:3]) else None


def passed_on(tracker, args, kwargs, out):
    """Normalisations (their statistics are not a field) and the like: the input's field."""
    return tracker.state(args[0])


HANDLERS: dict[str, Any] = {
    "convolution": convolution,
    **{f"{kind}_pool{n}d{tail}": pool for kind in ("max", "avg") for n in (1, 2, 3) for tail in ("", "_with_indices")},
    **{
        name: adaptive_pool
        for n in (1, 2, 3)
        for name in (f"_adaptive_avg_pool{n}d", f"adaptive_avg_pool{n}d", f"adaptive_max_pool{n}d")
    },
    **{f"upsample_nearest{n}d": upsample(0) for n in (1, 2, 3)},
    **{f"_upsample_nearest_exact{n}d": upsample(0) for n in (1, 2, 3)},
    "upsample_linear1d": upsample(1),
    "upsample_bilinear2d": upsample(1),
    "upsample_trilinear3d": upsample(1),
    "_upsample_bilinear2d_aa": upsample(1),
    "upsample_bicubic2d": upsample(3),
    "constant_pad_nd": pad,
    **{f"{kind}_pad{n}d": pad for kind in ("reflection", "replication") for n in (1, 2, 3)},
    "cat": cat,
    "stack": stack,
    **VIEWS,
    **dict.fromkeys(
        (
            "mean",
            "sum",
            "amax",
            "amin",
            "max",
            "min",
            "var",
            "std",
            "var_mean",
            "std_mean",
            "norm",
            "linalg_vector_norm",
        ),
        reduced,
    ),
    **dict.fromkeys(("_softmax", "_log_softmax", "softmax", "log_softmax", "logsumexp", "cumsum"), reduced),
    "mm": matmul(1, 0),
    "addmm": matmul(1, 0),
    "bmm": matmul(2, 1),
    "baddbmm": matmul(2, 1),
    "matmul": matmul(-1, -2),
    **dict.fromkeys(
        (
            "scaled_dot_product_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_flash_attention",
            "_native_multi_head_attention",
        ),
        attention,
    ),
    **dict.fromkeys(
        (
            "native_batch_norm",
            "_native_batch_norm_legit",
            "_native_batch_norm_legit_no_training",
            "_native_batch_norm_legit_functional",
            "native_layer_norm",
            "native_group_norm",
            "batch_norm",
            "dropout",
            "native_dropout",
            "_to_copy",
            "clone",
            "detach",
        ),
        passed_on,
    ),
}

WINDOW_OPS = frozenset(
    ["convolution"]
    + [f"{kind}_pool{n}d{tail}" for kind in ("max", "avg") for n in (1, 2, 3) for tail in ("", "_with_indices")]
    + [f"{a}adaptive_{k}_pool{n}d" for a in ("", "_") for k in ("avg", "max") for n in (1, 2, 3)]
)
"""Ops that show a tensor's trailing dimensions are positions (see ``windowed``)."""
