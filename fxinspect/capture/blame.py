"""Whose exception: the model's own, or a capture tier's failure to follow it.

A tier that cannot follow a model (a tracer meeting data-dependent control flow, an
exporter meeting an unsupported op) raises from inside torch, or about a ``Proxy``;
then the next tier is tried. An exception raised in the model's own code may still be
the tracer's doing (``torch.zeros(x.shape[0], 32)`` given a traced size raises a
``TypeError`` in the model's forward), so it is the model's only when a plain call on
the same inputs raises it too (:func:`plain_call_error`): then that exception is
raised at once, as the model's, with a note saying in which module, and no other tier
runs the model.

Example
-------
>>> import torch
>>> class Picky(torch.nn.Module):
...     def forward(self, x):
...         raise ValueError("mine")
>>> try:
...     Picky()(torch.ones(1))
... except ValueError as exc:
...     raised_by_model(exc), module_where(exc, Picky())
(True, None)
"""

from __future__ import annotations

import os
import sysconfig
from types import TracebackType

import torch

from ..guard import preserved

__all__ = ["module_where", "plain_call_error", "raised_by_model"]

# code that is not the model's: torch (tracers, exporters, kernels), fxinspect, the stdlib
_NOT_MODEL = tuple(os.path.dirname(p) + os.sep for p in (torch.__file__, os.path.dirname(__file__), os.__file__)) + (
    sysconfig.get_paths()["stdlib"] + os.sep,
)
_TRACING_WORDS = ("Proxy", "symbolically traced", "torch.fx", "FakeTensor", "fake tensor", "data-dependent", "SymInt")


def _frames(tb: TracebackType | None):
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def raised_by_model(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by the model's own code and not about tracing."""
    if type(exc).__module__.split(".")[0] == "torch":  # torch's own error types: capture failures
        return False
    frames = list(_frames(exc.__traceback__))
    if not frames or frames[-1].f_code.co_filename.startswith(_NOT_MODEL):
        return False
    text = str(exc)
    return not any(word in text for word in _TRACING_WORDS)


def module_where(exc: BaseException, model: torch.nn.Module) -> str | None:
    """The dotted path of the innermost module of ``model`` whose code was running
    when ``exc`` was raised (``""`` for the root), or ``None``."""
    paths = {id(m): p for p, m in model.named_modules()}
    found = None
    for frame in _frames(exc.__traceback__):
        owner = frame.f_locals.get("self")
        if isinstance(owner, torch.nn.Module) and id(owner) in paths:
            found = paths[id(owner)]
    return found


def plain_call_error(model: torch.nn.Module, args: tuple, kwargs: dict) -> BaseException | None:
    """The exception a plain call ``model(*args, **kwargs)`` raises, or ``None`` when it
    runs; the model is left as it was either way (:func:`fxinspect.guard.preserved`)."""
    try:
        with preserved(model), torch.no_grad():
            model(*args, **kwargs)
    except Exception as exc:
        return exc
    return None
