"""Autograd's check of saved tensors, kept under ``saved_tensors_hooks``.

Autograd refuses a backward that would read a saved tensor modified in place after it
was saved (its version counter moved): "one of the variables needed for gradient
computation has been modified by an inplace operation". It checks only tensors it saves
itself: once ``saved_tensors_hooks`` are on (the memory model's, which mark what
autograd keeps), it trusts the hooks and checks nothing, so an instrumented backward
would run where the user's own fails. :func:`packed` keeps the version each tensor had
when it was saved; :func:`unpacked` makes autograd's check as the backward reads it back
and raises autograd's own error, a ``RuntimeError`` with PyTorch's message.

Example
-------
>>> from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
>>> x = torch.ones(3, requires_grad=True)
>>> with torch.autograd.graph.saved_tensors_hooks(packed, unpacked):
...     y = x.exp()              # exp saves its output
>>> _ = y.view(-1).mul_(2)       # ... which is modified through a view
>>> try:
...     y.sum().backward()
... except RuntimeError as e:
...     print(str(e).split(": ")[1].split(" Hint")[0])
[torch.FloatTensor [3]], which is output 0 of Exp, is at version 1; expected version 0 instead.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ...records.memory import Phase, Saves

__all__ = ["Saved", "SavesMarker", "modified_error", "packed", "unpacked"]

_current_node = torch._C._current_autograd_node
_BACKWARD_NAME = re.compile(r"(.*)Backward(\d*)")


class Saved:
    """A saved tensor as autograd keeps it: the tensor, its version and where it came from."""

    __slots__ = ("tensor", "version", "output_nr", "creator")

    def __init__(self, t: torch.Tensor) -> None:
        self.tensor = t
        self.version = t._version
        self.output_nr = t.output_nr
        fn = t.grad_fn  # (its sequence number, not the node: a node saving its own output would hold itself)
        self.creator = fn._sequence_nr() if fn is not None else None


def packed(t: torch.Tensor) -> Saved:
    """``saved_tensors_hooks`` pack: ``t`` itself, with the version it has now."""
    return Saved(t)


def unpacked(saved: Saved) -> torch.Tensor:
    """``saved_tensors_hooks`` unpack: the tensor, unless it was modified in place since
    it was saved (then autograd's own error)."""
    t = saved.tensor
    if t._version != saved.version:
        raise modified_error(saved)
    return t


class SavesMarker:
    """The storage tracker's ``saved_tensors_hooks``: they mark the storages autograd keeps
    for the backward, and per forward node what it kept, and keep autograd's check.

    A part of :class:`~fxinspect.run.memory.storages.StorageTracker`, whose ``allocation``,
    ``node``, ``phase`` and ``current_node`` it reads.
    """

    # per forward node, what autograd saved while it ran: "own" (a storage it made),
    # "inputs" (only what existed before it); None until saving_hooks() is entered
    saves: dict[str, str] | None = None

    def saving_hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        """The ``saved_tensors_hooks`` that mark what autograd keeps (and who kept it)."""
        self.saves = {}
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def pack(self, t: torch.Tensor) -> Saved:
        """``saved_tensors_hooks`` pack: mark ``t``'s storage as saved, keep ``t`` (and its version)."""
        entry = self.allocation(t)
        if entry is not None:
            entry.saved = True
        node = self.node
        if node is not None and self.phase is Phase.FORWARD and self.saves is not None:
            if entry is not None and entry.node == node:
                self.saves[node] = Saves.OWN
            else:
                self.saves.setdefault(node, Saves.INPUTS)
        return packed(t)

    def unpack(self, saved: Saved) -> torch.Tensor:
        """``saved_tensors_hooks`` unpack: the saved tensor, checked as autograd checks
        what it saves without hooks."""
        try:
            return unpacked(saved)
        except RuntimeError as error:  # the user's own error, with where it happened
            error.add_note(f"fxinspect: in the backward of node {self.current_node()!r}")
            raise


def modified_error(saved: Saved) -> RuntimeError:
    """The error autograd raises for ``saved`` (its message, word for word: what autograd
    prints for a tensor saved without hooks, in the backward of the node running now)."""
    t = saved.tensor
    sizes = "" if t.is_nested else f" {list(t.shape)}"
    message = (
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{t.type()}{sizes}]"
    )
    if saved.creator is not None:  # (a leaf, or a tensor that needs no gradient, names no node)
        running = _current_node()
        # a node that saved its own output names itself (the tensor's grad_fn is now the
        # in-place op's); one that saved an input names that input's grad_fn as it is now
        own = running is not None and running._sequence_nr() == saved.creator
        fn = running if own else t.grad_fn
        if fn is not None:
            message += f", which is output {saved.output_nr} of {_node_name(_eager_name(t, fn, own))},"
    message += f" is at version {t._version}; expected version {saved.version} instead."
    if torch.is_anomaly_enabled():
        message += (
            " Hint: the backtrace further above shows the operation that failed to compute its gradient. "
            "The variable in question was changed in there or anywhere later. Good luck!"
        )
    else:
        message += (
            " Hint: enable anomaly detection to find the operation that failed to compute its gradient, "
            "with torch.autograd.set_detect_anomaly(True, check_nan=False)."
        )
    return RuntimeError(message)


def _eager_name(t: torch.Tensor, fn: Any, own: bool) -> str:
    """The name of ``fn`` as the user's eager run gives it. Once a view's family is written
    in place, autograd remakes the view's node: a real strided tensor gets
    ``AsStridedBackward0``, but a fake one (``device="meta"``: a tensor subclass, which
    autograd does not take as strided) replays its view op (``TBackward0``)."""
    remade = not own and t._is_view() and not torch._C._is_view_replay_enabled()
    if remade and isinstance(t, FakeTensor) and not t.is_nested:
        return "AsStridedBackward0"
    return fn.name()


def _node_name(name: str) -> str:
    """An autograd node's name as autograd's message writes it: ``SigmoidBackward0`` is
    ``Sigmoid``, ``SqueezeBackward3`` ``Squeeze3``, ``MyFnBackward`` ``MyFn``."""
    match = _BACKWARD_NAME.fullmatch(name)
    if match is None:
        return name  # (torch::autograd::CopySlices)
    return match[1] + (match[2] if match[2] not in ("", "0") else "")
