"""Small helpers shared by the rule families: argument access, shapes, dtypes, bytes.

Rules run once per aten call of a model, so everything here is plain Python on
``.shape``/``.dtype``/``.numel()``: no torch op is ever called (the tensors may be meta
or fake).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from math import prod
from typing import Any

import torch

from .registry import Cost, Rule

aten = torch.ops.aten


def arg(args: tuple, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    """Argument ``name`` of an aten call, given positionally (at ``index``) or by keyword."""
    if index < len(args):
        return args[index]
    return kwargs.get(name, default)


def tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in an argument or result: a tensor, or a (nested) tuple/list of them."""
    # Not fxinspect.tensors.tensors_in: aten arguments are never dicts or other pytrees, and
    # this runs per aten call, lazily (first_tensor stops at the first).
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors(item)


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor of ``value`` (an op's primary result), or ``None``."""
    if isinstance(value, torch.Tensor):  # the common case, without a generator
        return value
    return next(tensors(value), None)


def is_float(t: torch.Tensor | None) -> bool:
    """Whether arithmetic on ``t``'s elements is floating point (real or complex)."""
    return t is not None and (t.dtype.is_floating_point or t.dtype.is_complex)


def float_numel(t: torch.Tensor | None) -> int:
    """``t.numel()`` if ``t`` is floating point, else 0: integer/bool work is not a flop."""
    return t.numel() if is_float(t) else 0


def nbytes(value: Any) -> int:
    """Bytes of all tensors in ``value`` (a tensor, or nested tuples/lists of them).

    Called for every aten op the counting run sees, so it loops and recurses directly
    rather than through the :func:`tensors` generator."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    total = 0
    if isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, torch.Tensor):
                total += item.numel() * item.element_size()
            elif isinstance(item, (tuple, list)):
                total += nbytes(item)
    return total


def aten_packets(names: Iterable[str], inplace: bool = False) -> list[torch._ops.OpOverloadPacket]:
    """``torch.ops.aten.<name>`` for each name this torch build has (and ``<name>_`` too
    when ``inplace``). Names missing from older builds are skipped; the tests check
    that every name exists in the installed torch, so a typo cannot hide here."""
    found = []
    for name in names:
        for candidate in (name, name + "_") if inplace else (name,):
            if hasattr(aten, candidate):
                found.append(getattr(aten, candidate))
    return found


def missing_names(names: Iterable[str]) -> list[str]:
    """The names of ``names`` that are not aten ops of the installed torch (for tests)."""
    return [name for name in names if not hasattr(aten, name)]


def per_output_element(cost: int) -> Rule:
    """A rule: ``cost`` flops per element of the (first) result, 0 if it is not float."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        return Cost(flops=cost * float_numel(first_tensor(out)))

    rule.__name__ = rule.__qualname__ = f"per_output_element_{cost}"
    return rule


def per_input_element(cost: int) -> Rule:
    """A rule: ``cost`` flops per element of the first tensor argument, 0 if the result
    is not float (reductions: the work grows with what is read, not with what is written)."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        if not is_float(first_tensor(out)):
            return Cost()
        return Cost(flops=cost * first_tensor(args).numel())

    rule.__name__ = rule.__qualname__ = f"per_input_element_{cost}"
    return rule


RANDOM_MASK = "_fxinspect_random_mask"
"""Attribute set on a tensor drawn by ``bernoulli``/``bernoulli_``: a random mask.

Dropout's unfused path (CPU, meta, feature and alpha dropout everywhere) draws its mask
with ``bernoulli_`` and scales it (``div_(1 - p)``; alpha dropout: four scalar ops)
before the one multiply, where CUDA's ``native_dropout`` does it all in one kernel.
Scalar arithmetic on masks alone is part of drawing the mask: free, its result a mask
too, so that dropout costs the multiply (and alpha dropout its add) on every path.
The mark lives on the tensor object, so it dies with the mask (no state in the rules)."""


def mark_random_mask(t: Any) -> None:
    """Mark ``t`` (a freshly drawn random tensor) as a mask: see :data:`RANDOM_MASK`."""
    if isinstance(t, torch.Tensor):
        setattr(t, RANDOM_MASK, True)


def only_random_masks(args: tuple) -> bool:
    """Whether the tensor arguments of a call are all random masks (and there is one)."""
    found = False
    for a in args:
        if isinstance(a, torch.Tensor):
            if not getattr(a, RANDOM_MASK, False):
                return False
            found = True
    return found


def per_output_element_but_masks(cost: int) -> Rule:
    """:func:`per_output_element`, except that arithmetic on random masks alone (and
    scalars) is free and gives a mask: scaling dropout's mask (:data:`RANDOM_MASK`)."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        if only_random_masks(args):
            mark_random_mask(out)
            return Cost()
        return Cost(flops=cost * float_numel(first_tensor(out)))

    rule.__name__ = rule.__qualname__ = f"per_output_element_{cost}"
    return rule


def numel(shape: Iterable[int]) -> int:
    """Number of elements of a shape."""
    return prod(shape)
