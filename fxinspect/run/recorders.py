"""Recorders: what one run of the instrumented program observes, and the loss it differentiates.

A recorder watches one run (:func:`fxinspect.run.passes.one_run.run_once`) and returns
its figures. Every hook is optional: the base class's do nothing, and the run calls only
those a recorder overrides, so a recorder pays for what it watches and nothing else.

* ``before(name)`` / ``after(name, out)``: at each probe point, as op node ``name``
  starts and once its value ``out`` is made (forward only).
* ``op(func, args, kwargs, out)``: after each aten op the forward dispatches;
  ``backward_op(...)`` the same in the backward, where the run's ``owners.running()``
  names the fx node whose autograd node runs it.
* ``differentiating(loss)``: the loss is made and its backward is about to run (hook the
  autograd nodes behind it); ``differentiated()``: the backward ran, the loss still alive.
* ``running()``: a context around the whole run (forward, loss and backward).
* ``result(run) -> PassResult``: the figures, once the run is over (``run.stats(reader)``
  finishes a value reader once, for every recorder sharing it).

Dispatch: the first recorder whose ``mode()`` is not ``None`` is the forward's dispatch
mode (the counting mode prices each op), and the first whose ``backward_mode()`` is not
``None`` the backward's; each calls the other recorders' ``op``/``backward_op`` through
its ``observe`` (with no leader, a plain mode calls them). The loss is computed under the first ``loss_mode()``: the memory model
follows its storages, nothing counts it. A recorder that needs to know which fx node
made each autograd node without a backward (the allocator's watch) sets ``owned``.

:func:`loss_for` is the one place the loss is worked out from the options;
:func:`fresh_grads` the step a run with a backward models (after ``zero_grad()``).

Example: a recorder that counts the aten ops each node issues

>>> import torch, fxinspect
>>> from fxinspect.run.passes import PassResult
>>> from fxinspect.run.passes.one_run import run_once
>>> class OpsPerNode(Recorder):
...     def __init__(self):
...         self.node, self.ops = None, {}
...     def before(self, name):
...         self.node = name
...     def op(self, func, args, kwargs, out):
...         self.ops[self.node] = self.ops.get(self.node, 0) + 1
...     def result(self, run):
...         return PassResult(nodes={n: {"ops": k} for n, k in self.ops.items()})
>>> program = fxinspect.instrument(torch.nn.Linear(3, 2), torch.randn(4, 3))
>>> run_once(program, [OpsPerNode()]).nodes["linear"]       # aten.t, aten.addmm
{'ops': 2}
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from ..errors import InputError
from ..tensors import tensors_in
from .virtual import meta_on_host

__all__ = ["Recorder", "default_loss", "fresh_grads", "loss_for", "overrides", "unseen"]

Loss = Callable[[Any], torch.Tensor]


def default_loss(output: Any) -> torch.Tensor:
    """The sum of every floating output that requires grad (each summed in float32 or wider)."""
    parts = [t.sum() for t in tensors_in(output) if t.is_floating_point() and t.requires_grad]
    if not parts:
        raise InputError(
            "backward=True: no output of the model requires grad (are its parameters frozen, "
            "or does it detach its outputs?); pass loss_fn= to choose what to differentiate"
        )
    return torch.stack([p.float() if p.dtype in (torch.float16, torch.bfloat16) else p for p in parts]).sum()


def loss_for(backward: bool, loss_fn: Loss | None = None) -> Loss | None:
    """The loss a run differentiates: ``None`` without a backward, else the user's
    ``loss_fn`` (real ``meta`` tensors it holds standing for host ones on a virtual run:
    :func:`~.virtual.meta_on_host`) or :func:`default_loss`."""
    if not backward:
        return None
    return meta_on_host(loss_fn) if loss_fn is not None else default_loss


@contextlib.contextmanager
def fresh_grads(params: list[torch.Tensor]) -> Iterator[None]:
    """Every ``.grad`` of ``params`` is ``None`` inside (as after ``zero_grad()``: a backward
    allocates them afresh) and the user's own afterwards, the same tensors."""
    kept = [(p, p.grad) for p in params]
    try:
        for p in params:
            p.grad = None
        yield
    finally:
        for p, grad in kept:
            p.grad = grad


class Recorder:
    """What a run observes: override the hooks you need (see the module)."""

    owned = False  # needs the autograd owners though the run has no backward

    def mode(self) -> Any:
        """The dispatch mode this recorder runs the forward under, if it leads it."""
        return None

    def backward_mode(self) -> Any:
        """The dispatch mode for the backward, if this recorder leads it."""
        return None

    def loss_mode(self) -> Any:
        """A dispatch mode to compute the loss under (watched, never counted)."""
        return None

    def start(self, run: Any) -> None:
        """The run is made (``run.owners``, ``run.program``); nothing has run yet."""

    def running(self) -> AbstractContextManager:
        """A context around the whole run."""
        return nullcontext()

    def before(self, name: str) -> None:
        """Op node ``name`` starts."""

    def after(self, name: str, out: Any) -> None:
        """Op node ``name`` made ``out``."""

    def op(self, func: Any, args: tuple, kwargs: dict | None, out: Any) -> None:
        """An aten op of the forward ran."""

    def backward_op(self, func: Any, args: tuple, kwargs: dict | None, out: Any) -> None:
        """An aten op of the backward ran."""

    def differentiating(self, loss: Any) -> None:
        """``loss`` (or the outputs a live step differentiates) is about to be differentiated."""

    def differentiated(self) -> None:
        """The backward ran."""

    def result(self, run: Any) -> Any:
        """The figures of the run: a :class:`~fxinspect.run.passes.PassResult`, or ``None``
        for none (``run``: the :class:`~fxinspect.run.passes.one_run.OneRun`)."""
        return None


def overrides(recorder: Recorder, hook: str) -> bool:
    """Whether ``recorder`` overrides the base class's ``hook``, in its class or as an
    attribute of its own (a tracker's method, called with no step between; else the
    hook is not called)."""
    found = getattr(recorder, hook)
    return getattr(found, "__func__", found) is not getattr(Recorder, hook)


def unseen(recorder: Recorder) -> Recorder:
    """``recorder`` with its probe hooks run where no other recorder sees their ops.

    A recorder added from outside (``register_figure(recorder=...)``) reads values at a
    probe with ops of its own (``out.eq(0).sum()``): under the counting and memory
    modes they would be counted as the model's work and its memory. Its ``before`` and
    ``after`` run without gradients and below every dispatch mode instead.
    """
    for hook in ("before", "after"):
        if overrides(recorder, hook):
            call = getattr(recorder, hook)

            def quiet(*args: Any, _call: Callable = call) -> None:
                with torch.no_grad(), torch._C._DisableTorchDispatch():
                    _call(*args)

            setattr(recorder, hook, quiet)
    return recorder
