"""Capture a model as one ``torch.fx.GraphModule``, trying tiers in order.

``method="auto"`` tries each tier of ``TIERS`` in order and keeps the first that
works; every failure is kept as ``(tier, one-line reason)`` in ``Capture.failures``.
:func:`captures` goes on to the next tiers when asked (``analyze`` asks when the
count of the first is partial).
Methods are :class:`Method` values, plain strings too (``"eager"`` is ``Method.EAGER``).

Example
-------
>>> import torch
>>> cap = capture(torch.nn.Linear(3, 1), (torch.randn(2, 3),), {})
>>> str(cap.method), cap.failures
('symbolic', ())
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from ..errors import CaptureError, add_where
from .base import MODULE_KEY, Capture, Method, module_of, one_line, type_name
from .blame import module_where, plain_call_error, raised_by_model
from .eager import trace_eager
from .exported import trace_export
from .functions import lost_function_error, named
from .hf import prepare_inputs
from .inputs import FlatInputs, check_inputs, normalize
from .kept import opaque_checkpoints
from .quiet import quiet
from .states import held_tensors, rewound
from .symbolic import trace_symbolic

__all__ = [
    "Capture",
    "MODULE_KEY",
    "Method",
    "TIERS",
    "capture",
    "captures",
    "flat_inputs",
    "module_of",
    "normalize",
    "FlatInputs",
]

Tier = Callable[[torch.nn.Module, FlatInputs, Iterable[Any]], Capture]

TIERS: dict[Method, Tier] = {Method.SYMBOLIC: trace_symbolic, Method.EXPORT: trace_export, Method.EAGER: trace_eager}
"""Capture tiers in the order ``method="auto"`` tries them."""


def flat_inputs(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[FlatInputs, list[str]]:
    """The inputs of ``model(*args, **kwargs)`` as the tiers take them, and notes on what
    was added (``use_cache=False`` for a Hugging Face model)."""
    args, kwargs, notes = prepare_inputs(model, args, kwargs)
    return FlatInputs.build(args, kwargs, getattr(model, "forward", None)), notes


def _finish(cap: Capture, model: torch.nn.Module, failures: list[tuple[str, str]], notes: list[str]) -> Capture:
    """The tier's capture with the model, the earlier tiers' failures and the search's notes."""
    earlier = tuple(f for f in failures if f[0] != cap.method)
    return dataclasses.replace(cap, model=model, failures=earlier + cap.failures, notes=(*notes, *cap.notes))


def capture(model: torch.nn.Module, args: tuple, kwargs: dict, **options: Any) -> Capture:
    """Capture ``model(*args, **kwargs)`` with the named tier, or the first that works
    (``method``, ``leaf_modules`` as for :func:`captures`)."""
    return next(captures(model, args, kwargs, **options))


def captures(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict,
    method: Method | str = Method.AUTO,
    leaf_modules: Iterable[Any] = (),
    batch_dims: Iterable[Iterable[int]] | None = None,
    backward: bool = False,
) -> Iterator[Capture]:
    """Captures of ``model(*args, **kwargs)``, best first, each tier tried only when asked.

    The named tier's capture; for ``"auto"``, each tier's that works in ``TIERS`` order,
    except that one which had to hide untraceable modules in leaves, or kept each
    checkpointed module as one node, comes after those of later tiers (they may break
    the whole model down), and those that traced through
    ``torch.utils.checkpoint`` (losing its recomputation) come last. The first is what
    :func:`capture` returns; a caller that finds it wanting (``analyze``: its count is
    partial) takes the next. Raises ``CaptureError`` when no tier captures.
    ``batch_dims`` (per tensor input, the dimensions that follow the batch) asks for a
    capture that serves every batch size (see :attr:`FlatInputs.batch_dims`).
    ``backward``: a backward will run on the capture, so one that traced through a custom
    ``autograd.Function`` (its backward lost: see :mod:`.functions`) is never given; the
    named tier's raises ``CaptureError`` saying so, and ``"auto"`` goes on to the next tier.
    """
    method = Method.parse(method)
    check_inputs(model, args, kwargs)
    inputs, notes = flat_inputs(model, args, kwargs)
    if batch_dims is not None:
        inputs = dataclasses.replace(inputs, batch_dims=tuple(map(tuple, batch_dims)))
    tiers = list(TIERS) if method == Method.AUTO else [method]
    failures: list[tuple[str, str]] = []
    # a state object's tensors (a KV cache) a tier writes by running the model are put back
    states = held_tensors(args, kwargs)
    leaf_modules = tuple(leaf_modules)
    partial: Capture | None = None  # a capture that had to hide untraceable modules in leaves
    opaque: Capture | None = None  # a capture with checkpoints as one node each (their ops hidden)
    lossy: list[Capture] = []  # captures that traced through torch.utils.checkpoint
    unkept: Capture | None = None  # a capture that lost a custom Function's backward (refused)
    found = False
    for position, name in enumerate(tiers):
        said: list[str] = []
        try:
            with quiet() as said, rewound(states):
                cap = TIERS[name](model, inputs, leaf_modules)
        except Exception as exc:  # each tier's failure is a finding, reported below
            # the model's own exception only when a plain call raises it too: a tracer that
            # cannot follow the model (sizes passed to factories) fails inside its code too
            looks_mine = raised_by_model(exc)
            mine = plain_call_error(model, args, kwargs) if looks_mine else None
            if mine is not None:  # no other tier runs the model: it is raised as the user's
                path = module_where(mine, model)
                where = "in the model" if path is None else f"in module {path!r}" if path else "in the root module"
                raise add_where(mine, f"{where}; the {name} tier and a plain call both raised it") from None
            hint = " (a plain call runs: this tier cannot follow the model)" if looks_mine else ""
            failures.append((name, one_line(exc) + hint))
            last = exc
            continue
        finally:  # what a tier printed or logged goes to the capture's notes, not the terminal
            notes += [f"{name} tier said: {line}" for line in said]
        if cap.lost_functions and backward:
            if method != Method.AUTO:
                raise lost_function_error(str(name), cap.lost_functions)
            unkept = unkept or cap
            failures.append(
                (name, f"traced through the custom autograd.Function {named(cap.lost_functions)}: its backward is lost")
            )
            continue
        if cap.auto_leaves and position < len(tiers) - 1 and partial is None:
            # keep it as a fallback, but a later tier may break the whole model down
            partial = cap
            failures.append(
                (name, f"had to make {list(cap.auto_leaves)} leaves; trying the next tier for a full breakdown")
            )
            continue
        hidden = opaque_checkpoints(cap.graph_module.graph) if method == Method.AUTO else []
        if hidden and position < len(tiers) - 1 and opaque is None:
            # right, but each checkpointed module one node: a later tier may keep the
            # checkpoints with every op a node of its module
            opaque = cap
            failures.append(
                (name, f"kept the checkpoints of {', '.join(hidden)} as one node each; trying the next tier")
            )
            continue
        if cap.lost_checkpoints and method == Method.AUTO:
            # a program without the model's recomputation: its memory would be wrong
            lossy.append(cap)
            failures.append((name, f"traced through the checkpoints of {', '.join(cap.lost_checkpoints)}"))
            continue
        found = True
        yield _finish(cap, model, list(failures), list(notes))
    for kept in [c for c in (partial, opaque) if c is not None] + lossy:
        yield _finish(kept, model, list(failures), list(notes))
    if partial is not None or opaque is not None or lossy:
        return
    if found:
        return
    if unkept is not None:  # every tier that captured lost the Function's backward
        raise lost_function_error(str(unkept.method), unkept.lost_functions, failures)
    reasons = "\n".join(f"  {tier}: {reason}" for tier, reason in failures)
    raise CaptureError(
        f"could not capture {type_name(model)} with {'any tier' if method == Method.AUTO else method}:\n{reasons}\n"
        "Try leaf_modules=[...] for an untraceable submodule, kwargs= for keyword inputs, "
        "or method='eager' (always works, one executed path).",
        failures,
    ) from last
