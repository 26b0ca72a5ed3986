"""The one preparation step every entry point takes before it runs anything.

In order: unwrap the model (``DataParallel``, DDP, ``torch.compile``), normalise the
example inputs to ``(args, kwargs)``, materialise lazy modules, guard the user's model
(:func:`~fxinspect.guard.preserved`: everything is put back when the block ends,
also on error), copy the state objects among the inputs (a KV cache:
:func:`~fxinspect.capture.states.held_states`) and, for a virtual run, swap in fake copies
(:func:`~fxinspect.run.virtual.virtual`). ``analyze``, ``instrument`` and ``inspect``
call :func:`prepared`; ``track`` and ``watch``, which only hook the model, call
:func:`unwrapped`, its first stage.

Lazy modules are materialised one of two ways (:class:`Lazy`):

* ``COPY`` (``analyze``, ``instrument``): a copy materialised by one call on copies of
  the inputs is analysed; the user's model stays lazy and its RNG streams untouched.
* ``IN_PLACE`` (``inspect``): the analysed call *is* the user's first call, so the
  user's model is materialised as that call would: a copy makes the call from the
  current RNG state, and the user's lazy tensors take the values it drew (the RNG
  streams end where that call left them). When the forward itself draws random numbers
  (dropout in training), the analysed call's draws follow the initialisation's instead
  of interleaving with them.

Example
-------
>>> import torch
>>> model = torch.nn.Sequential(torch.nn.LazyLinear(4))
>>> with prepared(model, torch.randn(2, 3)) as run:
...     type(run.model[0]).__name__, run.args[0].shape, len(run.notes)
('Linear', torch.Size([2, 3]), 1)
>>> type(model[0]).__name__                       # analysed a copy: the user's is still lazy
'LazyLinear'
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..capture import normalize
from ..capture.states import held_states
from ..choices import Choice
from ..errors import InputError
from ..guard import preserved
from .lazy import materialized, materialized_in_place
from .virtual import fake_inputs, virtual

__all__ = ["Lazy", "Prepared", "prepared", "unwrapped"]


class Lazy(Choice):
    """How lazy modules are materialised (see the module docstring)."""

    COPY = "copy"
    IN_PLACE = "in_place"


@dataclass(frozen=True)
class Prepared:
    """What a run works on: the model and inputs (copies where the step made them)."""

    model: torch.nn.Module  # the unwrapped model, a materialised copy, or a fake copy
    args: tuple
    kwargs: dict
    virtual: bool  # fake tensors: no data, no timing
    notes: tuple[str, ...]  # what the step did, for ``report.capture.notes``
    mode: Any = None  # the FakeTensorMode of a virtual run

    def converted(self, example_inputs: Any, kwargs: dict | None = None) -> tuple[tuple, dict]:
        """Other example inputs as this run takes them: normalised, and fake copies in
        its mode when it is virtual (a sweep runs one prepared model on many sizes)."""
        args, kw = normalize(example_inputs, kwargs)
        return fake_inputs((args, kw), self.mode) if self.mode is not None else (args, kw)


def unwrapped(model: Any, caller: str = "analyze") -> tuple[torch.nn.Module, list[str]]:
    """The model inside ``DataParallel``/DDP/``torch.compile`` wrappers, and notes saying so;
    an ``InputError`` naming ``caller`` when it is not a module."""
    notes = []
    while True:
        if isinstance(model, (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)):
            notes.append(f"unwrapped {type(model).__name__}")
            model = model.module
        elif hasattr(model, "_orig_mod") and isinstance(model._orig_mod, torch.nn.Module):
            notes.append(f"unwrapped {type(model).__name__} (torch.compile)")
            model = model._orig_mod
        else:
            break
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"{caller} expects a torch.nn.Module, got {type(model).__name__}")
    return model, notes


@contextlib.contextmanager
def prepared(
    model: Any,
    example_inputs: Any = None,
    kwargs: dict | None = None,
    *,
    device: torch.device | None = None,
    lazy: Lazy = Lazy.COPY,
    virtual_copy: bool = True,
    caller: str = "analyze",
) -> Iterator[Prepared]:
    """Unwrap, normalise, materialise, guard and (when virtual) fake: see the module.

    ``virtual_copy=False`` runs on the model's own tensors whatever device they are on
    (``instrument`` returns a program over them; ``inspect`` runs the user's step).
    """
    user, notes = unwrapped(model, caller)
    args, kw = normalize(example_inputs, kwargs)
    if lazy is Lazy.IN_PLACE:
        target, lazy_notes = user, materialized_in_place(user, args, kw)
    else:
        target, lazy_notes = materialized(user, args, kw)
    notes += lazy_notes
    # a state object among the inputs (a KV cache) is analysed as a copy whose tensors
    # are inputs: the caller's stays as it was (fxinspect.capture.states)
    with preserved(target), held_states(args, kw) as (args, kw):
        if not virtual_copy:
            yield Prepared(target, args, kw, False, tuple(notes))
            return
        with virtual(target, args, kw, device) as run:
            yield Prepared(run.model, run.args, run.kwargs, run.virtual, tuple(notes + run.notes), run.mode)
