"""Errors that say what was expected, what was given, and where.

Example
-------
>>> err = NodeExecutionError("conv1", "conv1", "Conv2d", ["1×4×224×224"], "expected 3 channels")
>>> print(err)  # doctest: +NORMALIZE_WHITESPACE
node 'conv1' (module 'conv1', Conv2d) failed on inputs [1×4×224×224]: expected 3 channels
"""

from __future__ import annotations

from typing import Sequence


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
    """

    def __init__(self, node: str, module_path: str, module_type: str, inputs: Sequence[str], cause: str):
        self.node = node
        self.module_path = module_path
        self.module_type = module_type
        self.inputs = list(inputs)
        self.cause = cause
        where = f"module {module_path!r}" if module_path else "the root module"
        super().__init__(
            f"node {node!r} ({where}, {module_type}) failed on inputs [{', '.join(self.inputs)}]: {cause}"
        )
