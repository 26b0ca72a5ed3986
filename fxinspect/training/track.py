"""``track``: stash selected activations and gradients of the user's own steps.

``with fxinspect.track(model, include=r"layer1") as tracker:`` around the user's
unchanged forward and backward keeps, in call order, one :class:`Stash` per call of
each selected module (its output) and, with ``grad=True``, one per gradient reaching
that output (in the order the backward delivers them). The value kept is
``stash_value(tensor)``: by default a detached copy on the CPU; ``lambda t: t.std()``
keeps a number instead. ``stash=`` replaces the whole record: it receives the
:class:`Event` (module, args, kwargs, output) and returns what to keep.

Gradients are taken with a hook on each output tensor, not a module backward hook, so
in-place ops that follow (``nn.ReLU(inplace=True)``, ``out += identity``) are fine: the
gradient kept is the one with respect to the output as the module returned it.
``register()``/``remove()`` do what entering and leaving the block do (``remove``, as
torch's hook handles, ``watch`` and a checkpoint plan's ``apply`` name it; ``unregister``
is its deprecated name).

With ``ops=True`` the stashes are per op node instead: the model's first call in the
block is captured on its actual arguments (as :func:`fxinspect.inspect` does) and every
call is answered by the instrumented program, whose probe after each node keeps the
nodes whose name or op (``conv2d``, ``add``, ``Conv2d``) the filters select.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
>>> with fxinspect.track(model, include=r"^0$") as tracker:
...     model(torch.ones(2, 4)).sum().backward()
>>> [(s.name, s.kind, tuple(s.value.shape)) for s in tracker.stashes]
[('0', 'output', (2, 3)), ('0', 'grad', (2, 3))]
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..analyze import instrument
from ..errors import InputError, renamed
from ..guard import in_analysis
from ..optional import pandas
from ..run.assemble import node_label
from ..run.forward_patch import ForwardPatch
from ..run.prepare import unwrapped
from ..run.program import Probe
from ..tensors import tensors_in

__all__ = ["Event", "Stash", "Tracker", "track"]


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A detached copy on the CPU (never a view of the live tensor)."""
    t = t.detach()
    return t.to("cpu", copy=True) if t.device.type != "meta" else t


@dataclass(frozen=True)
class Event:
    """What a custom ``stash=`` receives for a module call."""

    name: str
    module: torch.nn.Module
    args: tuple
    kwargs: dict
    output: Any


@dataclass(frozen=True)
class Stash:
    """One kept value: which module, output or gradient, which step and call, the value."""

    name: str  # the module's path, or with ops=True the graph node's name
    type: str  # the module's class, or the node's op
    kind: str  # "output" or "grad"
    step: int  # how many forward calls of the whole model came before this one's
    call: int  # how many calls of this module came before, within the step
    value: Any


def _pattern(value: str | None, option: str) -> re.Pattern | None:
    if value is None:
        return None
    try:
        return re.compile(value)
    except re.error as exc:
        raise InputError(f"{option}= must be a regular expression, got {value!r}: {exc}") from None


class Tracker:
    """Hooks on the selected modules of ``model``; ``stashes`` in call order."""

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        include: str | None = None,
        exclude: str | None = None,
        grad: bool = True,
        stash_value: Callable[[torch.Tensor], Any] | None = None,
        stash: Callable[[Event], Any] | None = None,
        ops: bool = False,
    ) -> None:
        self.model, _ = unwrapped(model, "track()")
        self.include, self.exclude = _pattern(include, "include"), _pattern(exclude, "exclude")
        self.grad = grad
        self.stash_value = stash_value or _copy
        self.stash = stash
        self.stashes: list[Stash] = []
        self.step = 0
        self._calls: dict[str, int] = {}
        self._handles: list[Any] = []
        self.ops = ops
        self._program: Any = None

    def selected(self) -> list[tuple[str, torch.nn.Module]]:
        """The ``(name, module)`` pairs the filters keep (the root is named ``""``)."""
        return [
            (name, m)
            for name, m in self.model.named_modules()
            if (self.include is None or self.include.search(name))
            and (self.exclude is None or not self.exclude.search(name))
        ]

    def register(self) -> Tracker:
        """Put the hooks on (entering the ``with`` block does)."""
        if self._handles:
            return self
        self._handles.append(self.model.register_forward_pre_hook(self._new_step))
        if self.ops:
            self._handles.append(ForwardPatch(self.model, self._run_program))
            return self
        for name, module in self.selected():
            self._handles.append(module.register_forward_hook(self._hook(name), with_kwargs=True))
        return self

    def remove(self) -> None:
        """Take every hook off; the stashes stay."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def unregister(self) -> None:
        """The deprecated name of :meth:`remove` (a ``DeprecationWarning``)."""
        renamed("Tracker", "unregister()", "remove()", None)
        self.remove()

    def __enter__(self) -> Tracker:
        return self.register()

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def _run_program(self, args: tuple, kwargs: dict) -> Any:
        """ops=True: answer a call of the model with the instrumented program, probed."""
        if self._program is None:
            self._program = instrument(self.model, args, kwargs=kwargs)
            gm = self._program.graph_module
            self._labels = {
                n.name: node_label(n, type(gm.get_submodule(str(n.target))).__name__ if n.op == "call_module" else "")
                for n in self._program.graph.nodes
            }
        labels = self._labels

        def after(name: str, out: Any) -> None:
            label = labels[name]
            chosen = (self.include is None or self.include.search(name) or self.include.search(label)) and not (
                self.exclude is not None and (self.exclude.search(name) or self.exclude.search(label))
            )
            if chosen:
                self._stash(name, label, None, args, kwargs, out)

        program = self._program
        return program.output_structure(program.run(program.flat_inputs(args, kwargs), Probe(after=after)))

    def _new_step(self, module: torch.nn.Module, args: tuple) -> None:
        if in_analysis():  # fxinspect running the model itself: not one of the user's steps
            return
        if self._calls:
            self.step += 1
        self._calls = {}

    def _hook(self, name: str) -> Callable:
        def hook(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            if not in_analysis():
                self._stash(name, type(module).__name__, module, args, kwargs, output)

        return hook

    def _stash(self, name: str, kind: str, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        call = self._calls[name] = self._calls.get(name, -1) + 1
        tensors = tensors_in(output)
        if self.stash is not None:
            value = self.stash(Event(name, module, args, kwargs, output))
        else:
            values = [self.stash_value(t.detach()) for t in tensors]
            value = values[0] if len(values) == 1 else tuple(values)
        self.stashes.append(Stash(name, kind, "output", self.step, call, value))
        if self.grad and torch.is_grad_enabled():
            step = self.step
            for t in tensors:
                if t.requires_grad:
                    t.register_hook(self._grad_hook(name, kind, step, call))

    def _grad_hook(self, name: str, kind: str, step: int, call: int) -> Callable:
        def keep(grad: torch.Tensor) -> None:
            self.stashes.append(Stash(name, kind, "grad", step, call, self.stash_value(grad.detach())))

        return keep

    def to_frame(self, stat: Callable[[Any], Any] | None = None):
        """The stashes as a pandas DataFrame, ``stat(value)`` in place of each value when given."""
        pd = pandas("to_frame")
        rows = [
            {
                "name": s.name,
                "type": s.type,
                "kind": s.kind,
                "step": s.step,
                "call": s.call,
                "value": stat(s.value) if stat is not None else s.value,
            }
            for s in self.stashes
        ]
        return pd.DataFrame(rows, columns=["name", "type", "kind", "step", "call", "value"])


def track(model: torch.nn.Module, **options: Any) -> Tracker:
    """A :class:`Tracker` of ``model``: use it as a context manager, or ``register()`` it.

    ``include``/``exclude``: regular expressions searched in module names (``""`` is the
    model). ``grad``: also keep the gradients reaching the outputs. ``stash_value``:
    what to keep of each tensor (default: a detached CPU copy). ``stash``: what to keep
    of a whole module call (receives an :class:`Event`; gradients are not kept then
    unless ``grad``). ``ops``: stash per graph node (filters match node names and ops).
    """
    return Tracker(model, **options)


track.__signature__ = inspect.signature(Tracker).replace(
    return_annotation="Tracker"
)  # help() lists the options with their defaults
