"""What kind of kernel an aten call runs where its name does not tell: a convolution's, a batch norm's.

A convolution's name says nothing of its groups, and a depthwise one (one input
channel a group) runs other kernels than a dense one, far below them on a CPU at the
same FLOPs per byte. A batch norm's says nothing of whether it computes its batch's
statistics (training) or reads the running ones, a pass over the input more. The
counting keeps the kind on each call (:attr:`~fxinspect.records.nodes.AtenCall.kind`)
for the time model to price it on its kind's curve
(:mod:`fxinspect.timemodel.kernel_classes`).

Example
-------
>>> import torch
>>> x, w = torch.randn(1, 32, 8, 8), torch.randn(32, 1, 3, 3)
>>> call_kind("aten.convolution.default", (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 32))
'depthwise'
>>> call_kind("aten.native_batch_norm.default", (x, None, None, None, None, True, 0.1, 1e-5))
'train'
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["call_kind", "kind_reader"]

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
# where a batch norm's ``training`` flag is among its arguments, per op name
_NORM_ARGS = {
    "native_batch_norm": 5,
    "_native_batch_norm_legit": 5,
    "_native_batch_norm_legit_functional": 5,
    "cudnn_batch_norm": 5,
    "native_batch_norm_backward": 7,
}


def kind_reader(op: Any) -> Callable[[tuple], str] | None:
    """What reads the kind of aten ``op``'s calls from their arguments (worked out once
    per op: the counting asks it of every call), ``None`` for an op whose calls have none."""
    name, _, overload = str(op).removeprefix("aten.").partition(".")
    where = _CONV_ARGS.get(name)
    if where is not None:
        return functools.partial(_conv_kind, weight_at=where[0], groups_at=where[1])
    flag = _NORM_ARGS.get(name)
    if flag is None:
        return None
    return functools.partial(_norm_kind, flag_at=3 if overload.startswith("no_stats") else flag)


def call_kind(op: Any, args: tuple) -> str:
    """The kind of aten ``op``'s call with ``args``: a convolution's ``"depthwise"`` (one
    input channel a group, more than one group), ``"grouped"`` or ``"dense"``; a batch
    norm's ``"train"`` when it computes its batch's statistics (``.no_stats``: one
    argument fewer); else ``""``."""
    reader = kind_reader(op)
    return reader(args) if reader is not None else ""


def _norm_kind(args: tuple, flag_at: int) -> str:
    return "train" if len(args) > flag_at and args[flag_at] is True else ""


def _conv_kind(args: tuple, weight_at: int, groups_at: int) -> str:
    if len(args) <= groups_at:
        return ""
    weight, groups = args[weight_at], args[groups_at]
    if not isinstance(groups, int) or getattr(weight, "ndim", 0) < 3:
        return ""
    if groups > 1 and weight.shape[1] == 1:
        return "depthwise"
    return "grouped" if groups > 1 else "dense"
