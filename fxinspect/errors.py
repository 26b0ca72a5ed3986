"""Errors that say what was expected, what was given, and where.

The model's own exceptions are not wrapped: they reach the user as they were raised,
with a note (:func:`add_where`) saying where in the model they happened.

Example
-------
>>> err = NodeExecutionError("conv1", "conv1", "Conv2d", ["1×4×224×224"], "expected 3 channels")
>>> print(err)  # doctest: +NORMALIZE_WHITESPACE
node 'conv1' (module 'conv1', Conv2d) failed on inputs [1×4×224×224]: expected 3 channels
>>> add_where(ValueError("mine"), "in module 'fc' (Linear)").__notes__
["fxinspect: raised in module 'fc' (Linear)"]
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any


def renamed(caller: str, old: str, new: str, value: Any) -> Any:
    """``value``, given under ``caller``'s old name ``old``, with a ``DeprecationWarning``
    that it is now ``new`` (an old name is kept one release, then removed)."""
    warnings.warn(
        f"{caller}: {old} is now {new} ({old} is kept as an alias for one release)", DeprecationWarning, stacklevel=3
    )
    return value


def add_where(exc: BaseException, where: str) -> BaseException:
    """``exc`` with a note saying where it was raised (Python 3.11+ shows notes with
    the traceback; older versions keep them in ``exc.__notes__`` only)."""
    notes = getattr(exc, "__notes__", None)
    if notes is None:
        try:
            exc.__notes__ = notes = []  # what BaseException.add_note does, on any version
        except AttributeError:  # an exception type that takes no attributes: leave it as it is
            return exc
    notes.append(f"fxinspect: raised {where}")
    return exc


class FxInspectError(Exception):
    """Base class of every error fxinspect raises on purpose."""


class InputError(FxInspectError, ValueError):
    """The example inputs or options are not what ``analyze`` accepts."""


class CaptureError(FxInspectError):
    """No capture tier could turn the model into a graph.

    ``failures`` holds ``(tier, reason)`` for every tier tried.
    """

    def __init__(self, message: str, failures: Sequence[tuple[str, str]] = ()):
        super().__init__(message)
        self.failures = tuple(failures)


class NodeExecutionError(FxInspectError):
    """An op of the captured model raised while fxinspect ran it.

    Names the node, its module path and class, and the shapes of what it was given.
    Raised for failures of fxinspect's own running of a node; an op of the model that
    raises reaches the user as its own exception, with :func:`add_where`'s note.
    """

    def __init__(self, node: str, module_path: str, module_type: str, inputs: Sequence[str], cause: str):
        self.node = node
        self.module_path = module_path
        self.module_type = module_type
        self.inputs = list(inputs)
        self.cause = cause
        where = f"module {module_path!r}" if module_path else "the root module"
        super().__init__(f"node {node!r} ({where}, {module_type}) failed on inputs [{', '.join(self.inputs)}]: {cause}")
