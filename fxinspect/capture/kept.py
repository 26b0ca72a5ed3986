"""Calls symbolic tracing keeps as one node, so that the program's backward is the model's.

Traced through, these would leave a graph whose forward computes the same values but
whose backward does not: a user-defined ``torch.autograd.Function`` would lose its own
``backward``, and ``torch.utils.checkpoint`` would lose its recomputation (and so every
activation it frees). While tracing, each call on proxies becomes one ``call_function``
node whose target makes the real call at run time:

* :class:`FunctionCall`: ``cls.apply(...)`` of a ``Function`` defined outside torch
  (torch's own, such as reentrant checkpointing's, compute what their forward does);
* :class:`CheckpointCall`: ``torch.utils.checkpoint.checkpoint(function, ...)``, found
  as ``torch.utils.checkpoint.checkpoint``, as a name the model's modules imported, and
  as the ``functools.partial`` of it that Hugging Face models keep
  (``_gradient_checkpointing_func``). The node is charged to ``function``'s module when
  it is one of the model's, and its backward includes the recomputation.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx as fx
import torch.utils.checkpoint
from torch.utils import _pytree as pytree

from .base import MODULE_KEY, type_name

__all__ = [
    "CheckpointCall",
    "FunctionCall",
    "checkpoint_name",
    "opaque_checkpoints",
    "checkpoints_traced_through",
    "kept_calls",
    "lost_checkpoint_notes",
]

_CHECKPOINT = torch.utils.checkpoint.checkpoint
_OPTIONS = frozenset({"use_reentrant", "context_fn", "determinism_check", "debug", "early_stop", "preserve_rng_state"})


class FunctionCall:
    """Calls a custom ``torch.autograd.Function`` (``cls.apply``)."""

    def __init__(self, function: type):
        self.function = function
        self.__name__ = f"{function.__name__}_apply"
        self.__module__ = function.__module__  # (readable names: "mymodule.Clip.apply")
        self.__qualname__ = f"{function.__qualname__}.apply"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function.apply(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{self.function.__qualname__}.apply"


class CheckpointCall:
    """Calls ``torch.utils.checkpoint.checkpoint(function, *args, **options, **kwargs)``."""

    def __init__(self, function: Any, options: dict[str, Any]):
        self.function, self.options = function, options
        # (named for the graph; a module outside torch, or fx's code generation would
        # import torch.utils.checkpoint.checkpoint by that name in its place)
        self.__name__ = self.__qualname__ = "checkpoint"
        self.__module__ = __name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _CHECKPOINT(self.function, *args, **self.options, **kwargs)

    def __repr__(self) -> str:
        return f"checkpoint({getattr(self.function, '__qualname__', type(self.function).__name__)})"


def _owner(function: Any, paths: dict[int, str]) -> torch.nn.Module | None:
    """The model's module a checkpointed function runs, or ``None``.

    The module itself, its bound ``forward`` or ``__call__``, or (transformers)
    ``partial(forward, module)``.
    """
    inner = function.func if isinstance(function, functools.partial) else function
    owners = (inner, getattr(inner, "__self__", None), *getattr(function, "args", ())[:1])
    return next((o for o in owners if id(o) in paths), None)


def checkpoint_name(function: Any, paths: dict[int, str]) -> str:
    """How notes name a checkpointed function: its module's quoted path, or its name."""
    owner = _owner(function, paths)
    inner = function.func if isinstance(function, functools.partial) else function
    return repr(paths[id(owner)]) if owner is not None else getattr(inner, "__qualname__", repr(inner))


def opaque_checkpoints(graph: fx.Graph) -> list[str]:
    """The checkpointed calls ``graph`` keeps as one node each (their ops not nodes)."""
    return [repr(n.target) for n in graph.nodes if n.op == "call_function" and isinstance(n.target, CheckpointCall)]


def _has_proxy(value: Any) -> bool:
    return any(isinstance(a, fx.Proxy) for a in pytree.tree_leaves(value))


@contextlib.contextmanager
def kept_calls(tracer: fx.Tracer, model: torch.nn.Module) -> Iterator[None]:
    """While ``tracer`` traces ``model``, keep autograd Functions and checkpoints as nodes."""
    original_apply = torch.autograd.Function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        if cls.__module__.split(".")[0] != "torch" and _has_proxy((args, kwargs)):
            return tracer.create_proxy("call_function", FunctionCall(cls), args, kwargs)
        return original_apply.__get__(None, cls)(*args, **kwargs)  # (a classmethod: in C since torch 2.x)

    paths = {id(m): p for p, m in model.named_modules()}

    def checkpoint(function, *args, **kwargs):
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}
        if not _has_proxy((args, kwargs)):
            return _CHECKPOINT(function, *args, **options, **kwargs)
        proxy = tracer.create_proxy("call_function", CheckpointCall(function, options), args, kwargs)
        owner = _owner(function, paths)
        if owner is not None:  # the checkpointed module's work is its own
            proxy.node.meta[MODULE_KEY] = (paths[id(owner)], type_name(owner))
        return proxy

    undo: list[Callable[[], None]] = []

    def set_attr(owner: Any, name: str, value: Any) -> None:
        old = vars(owner)[name]  # as stored (a classmethod stays one), not as looked up
        setattr(owner, name, value)
        undo.append(lambda: setattr(owner, name, old))

    def set_item(namespace: dict, name: str, value: Any) -> None:
        old = namespace[name]
        namespace[name] = value
        undo.append(lambda: namespace.__setitem__(name, old))

    try:
        set_attr(torch.autograd.Function, "apply", classmethod(apply))
        set_attr(torch.utils.checkpoint, "checkpoint", checkpoint)
        for module_name in {type(m).__module__ for m in model.modules()}:  # `from ... import checkpoint`
            namespace = vars(sys.modules[module_name]) if module_name in sys.modules else {}
            for name, value in list(namespace.items()):
                if value is _CHECKPOINT:
                    set_item(namespace, name, checkpoint)
        for m in model.modules():  # transformers: self._gradient_checkpointing_func = partial(checkpoint, ...)
            for name, value in list(vars(m).items()):
                if isinstance(value, functools.partial) and value.func is _CHECKPOINT:
                    set_attr(m, name, functools.partial(checkpoint, *value.args, **value.keywords))
        yield
    finally:
        for restore in reversed(undo):
            restore()


@contextlib.contextmanager
def checkpoints_traced_through(model: torch.nn.Module) -> Iterator[list[str]]:
    """The modules (or functions) ``torch.utils.checkpoint`` ran while the block traced.

    The eager tier records the ops a checkpointed call runs as ordinary ops: the program
    computes the same values, but keeps what the checkpoint would have freed and never
    recomputes it (the export tier keeps the checkpoints it can as regions:
    :mod:`fxinspect.capture.checkpoints`). A tier says which it lost
    (``Capture.lost_checkpoints``), and ``method="auto"`` prefers a capture that keeps them. Every spelling of ``checkpoint`` (also a
    ``functools.partial`` made before the trace) reaches a private function of
    ``torch.utils.checkpoint`` looked up when called, so it is watched there: the common
    entry of recent torch, or the non-reentrant and reentrant ones of older releases.
    """
    paths = {id(m): p for p, m in model.named_modules()}
    seen: list[str] = []

    def watching(entry: Callable) -> Callable:
        def watched(function, *args, **kwargs):
            name = checkpoint_name(function, paths)
            if name not in seen:
                seen.append(name)
            return entry(function, *args, **kwargs)

        return watched

    module = torch.utils.checkpoint
    undo: list[tuple[Any, str, Any]] = []
    if hasattr(module, "_checkpoint_impl"):  # recent torch: one entry for every mode
        undo.append((module, "_checkpoint_impl", module._checkpoint_impl))
    else:  # older releases: the non-reentrant generator and the reentrant Function
        if hasattr(module, "_checkpoint_without_reentrant_generator"):
            undo.append(
                (module, "_checkpoint_without_reentrant_generator", module._checkpoint_without_reentrant_generator)
            )
        if hasattr(module, "CheckpointFunction"):  # (its apply is Function's, inherited)
            undo.append((module.CheckpointFunction, "apply", None))
    for owner, name, _ in undo:
        if owner is module:
            setattr(owner, name, watching(getattr(owner, name)))
        else:  # CheckpointFunction.apply(function, preserve_rng_state, *args): the function first too
            setattr(owner, name, staticmethod(watching(owner.apply)))
    try:
        yield seen
    finally:
        for owner, name, original in reversed(undo):
            if original is None:
                delattr(owner, name)  # back to the inherited one
            else:
                setattr(owner, name, original)


def lost_checkpoint_notes(tier: str, lost: list[str]) -> list[str]:
    """The note a tier that traced through checkpoints adds to its capture."""
    if not lost:
        return []
    return [
        f"{tier}: torch.utils.checkpoint ran for {', '.join(lost[:4])}{', ...' if len(lost) > 4 else ''} and was "
        "traced through: the program keeps what it would free and never recomputes, so memory and backward "
        "figures are those of the model without checkpointing (the symbolic and export tiers keep checkpoints)"
    ]
