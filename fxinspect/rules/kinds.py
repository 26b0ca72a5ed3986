"""What kind of kernel an aten call runs where its name does not tell: a convolution's.

A convolution's name says nothing of its groups, and a depthwise one (one input
channel a group) runs other kernels than a dense one, far below them on a CPU at the
same FLOPs per byte. The counting keeps the kind on each call
(:attr:`~fxinspect.records.nodes.AtenCall.kind`) for the time model to price it on its
kind's curve (:mod:`fxinspect.timemodel.kernel_classes`).

Example
-------
>>> import torch
>>> x, w = torch.randn(1, 32, 8, 8), torch.randn(32, 1, 3, 3)
>>> conv_kind("aten.convolution.default", (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 32))
'depthwise'
"""

from __future__ import annotations

from typing import Any

__all__ = ["KINDED", "conv_kind"]

# where a convolution's weight and groups are among its arguments, per op name
_CONV_ARGS = {
    "convolution": (1, 8),
    "_convolution": (1, 8),
    "convolution_backward": (2, 9),
    "conv1d": (1, 6),
    "conv2d": (1, 6),
    "conv3d": (1, 6),
    "mkldnn_convolution": (1, 6),
}


def conv_kind(op: Any, args: tuple) -> str:
    """A convolution's kind from its ``args``: ``"depthwise"`` (one input channel a group,
    more than one group), ``"grouped"`` or ``"dense"``; ``""`` for another op, or one
    whose arguments do not say."""
    where = _CONV_ARGS.get(str(op).removeprefix("aten.").partition(".")[0])
    if where is None or len(args) <= where[1]:
        return ""
    weight, groups = args[where[0]], args[where[1]]
    if not isinstance(groups, int) or getattr(weight, "ndim", 0) < 3:
        return ""
    if groups > 1 and weight.shape[1] == 1:
        return "depthwise"
    return "grouped" if groups > 1 else "dense"


KINDED = frozenset(_CONV_ARGS)
"""The op names (without ``aten.`` and the overload) whose calls have a kind."""
