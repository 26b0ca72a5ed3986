"""Small facts about tensors that every layer asks: which tensors a value holds, and
whether their data can be read; and :class:`DispatchMode`, the base of every layer's
dispatch modes.

Example
-------
>>> import torch
>>> tensors_in((torch.ones(1), [torch.zeros(2), 3], {"a": torch.ones(3)}))[2].shape
torch.Size([3])
>>> has_data(torch.ones(1)), has_data(torch.ones(1, device="meta"))
(True, False)
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass

__all__ = [
    "NOT_WORK",
    "DispatchMode",
    "forked_rng",
    "has_data",
    "holds_dtensors",
    "holds_wrappers",
    "inner_tensors",
    "local_tensor",
    "storage_ids",
    "storage_of",
    "stored_bytes",
    "tensors_in",
    "version",
]


def forked_rng():
    """``torch.random.fork_rng`` over the CPU stream and, once CUDA is in use, the current
    device's: the random streams are as they were when the block ends."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    return torch.random.fork_rng(devices=devices)


_ATOMS = (int, float, bool, str, type(None))


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``: a tensor, nested tuples/lists, or any pytree, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_in(v)]
    if isinstance(value, _ATOMS):
        return []
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """The tensor this process holds: a ``DTensor``'s local shard, any other tensor itself."""
    return getattr(t, "_local_tensor", t) if type(t) is not torch.Tensor else t


def inner_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors that hold ``t``'s data: ``[t]``, or for a wrapper tensor subclass
    (one with ``__tensor_flatten__``: torchao's quantized weights, a ``DTensor``) the inner
    tensors it flattens to, recursively (int8 values and their scales, a local shard)."""
    if type(t) is torch.Tensor or not is_traceable_wrapper_subclass(t):
        return [t]
    names, _ = t.__tensor_flatten__()
    return [i for n in names if isinstance(v := getattr(t, n), torch.Tensor) for i in inner_tensors(v)]


def stored_bytes(tensors: Any) -> int:
    """The bytes of the storages behind ``tensors`` as stored, each storage once: a wrapper
    subclass counts its inner tensors (int8 weights: their int8 values and scales), never
    its ``numel`` times the dtype it poses as."""
    stores: dict[tuple[str, int], int] = {}
    for t in tensors:
        for i in inner_tensors(t):
            s = i.untyped_storage()
            # the StorageImpl's address, distinct per allocation on every device, meta included
            stores[(str(i.device), s._cdata)] = s.nbytes()
    return sum(stores.values())


def storage_of(t: torch.Tensor) -> torch.UntypedStorage | None:
    """The storage holding the data of ``t`` (of a ``DTensor``, its local shard's);
    ``None`` for sparse, nested and other layouts without one."""
    try:
        return local_tensor(t).untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


def storage_ids(args: tuple, kwargs: dict | None) -> set[int]:
    """The ids of the storages of an op's tensor arguments."""
    found = set()
    for a in args:
        if type(a) is torch.Tensor:  # (the common case, without a call)
            try:
                found.add(id(a.untyped_storage()))
            except (RuntimeError, NotImplementedError):
                pass
        elif isinstance(a, (torch.Tensor, list, tuple)):
            found |= {id(st) for t in tensors_in(a) if (st := storage_of(t)) is not None}
    if kwargs:
        found |= {id(st) for t in tensors_in(list(kwargs.values())) if (st := storage_of(t)) is not None}
    return found


NOT_WORK = frozenset({"prim", "profiler"})
"""Namespaces of ops that are no work the model asked for: ``prim`` (fake tensors asking
for their own device or layout) and ``profiler`` (``record_function``'s range markers,
which FSDP opens around its work). No capture records them and no run lists them."""


def holds_dtensors(types: tuple) -> bool:
    """Whether an op's argument types (as a dispatch mode gets them) include a DTensor.

    A dispatch mode sees an op before any tensor subclass does; a mode that returns
    ``NotImplemented`` for DTensor arguments lets DTensor run it as the local ops and
    collectives it stands for, which then reach the mode one by one (``CommDebugMode``
    does the same): the ops, shapes and bytes of what this rank really computes.
    """
    for t in types:  # (per op of every run: a loop over one or two types, no generator)
        if t.__name__ == "DTensor":
            return True
    return False


def holds_wrappers(types: tuple) -> bool:
    """Whether an op's argument types include a wrapper tensor subclass: a ``DTensor``, a
    quantized weight, any type with ``__tensor_flatten__``.

    A mode that prices or tracks ops returns ``NotImplemented`` for them (as for DTensor,
    :func:`holds_dtensors`): the subclass then runs the op as the ops on its inner tensors
    it stands for, which reach the mode one by one (an int8 embedding table dequantised
    whole, then gathered): what really runs, on the bytes really stored.
    """
    for t in types:  # (per op of every run: one or two types, no generator)
        if t is not torch.Tensor and getattr(t, "__tensor_flatten__", None) is not None:
            return True
    return False


def has_data(t: torch.Tensor) -> bool:
    """False for meta and fake tensors (and wrapper subclasses holding one: a DTensor, a
    quantized weight copied for a virtual run), whose values cannot be read."""
    if type(t) is not torch.Tensor and is_traceable_wrapper_subclass(t):
        return all(has_data(i) for i in inner_tensors(t))
    return t.device.type != "meta" and not isinstance(t, torch._subclasses.FakeTensor)


def version(t: torch.Tensor) -> int | None:
    """``t``'s version counter (every in-place write bumps it); ``None`` for inference
    tensors, which have none."""
    return None if t.is_inference() else t._version


class DispatchMode(TorchDispatchMode):
    """A ``TorchDispatchMode`` whose first op does not import ``torch._dynamo``.

    torch wraps every mode's ``__torch_dispatch__`` in ``torch._disable_dynamo``, so that a
    compiled region never traces into a mode; that wrapper imports ``torch._dynamo`` (about
    2 s) the first time it runs, in the middle of the first run of a process. A compiled
    region exists only once ``torch._dynamo`` is imported (``torch.compile`` imports it):
    a subclass's ``__torch_dispatch__`` runs as written until then, and under dynamo's
    ``disable`` after, as torch's wrapper would run it.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # (torch's wrapper off: __init_subclass__ puts the lazy one in its place)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        raw = cls.__dict__.get("__torch_dispatch__")
        if raw is not None and not isinstance(raw, classmethod):
            cls.__torch_dispatch__ = _disabled_once_dynamo_is_in(raw)


def _disabled_once_dynamo_is_in(fn: Callable) -> Callable:
    """``fn``, run under ``torch._dynamo.disable`` once ``torch._dynamo`` is imported, as is
    before (never importing it)."""
    disabled = None

    @functools.wraps(fn)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        nonlocal disabled
        if disabled is None:
            disable = getattr(sys.modules.get("torch._dynamo"), "disable", None)
            if disable is None:  # (not imported: no compiled region can be running)
                return fn(*args, **kwargs)
            disabled = disable(fn, recursive=True, wrapping=False)
        return disabled(*args, **kwargs)

    return dispatch
