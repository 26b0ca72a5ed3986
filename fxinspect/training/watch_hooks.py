"""The hooks of :class:`~fxinspect.training.watch.Watch`: what runs inside the user's loop.

Two hooks on the model's root are there every step: the first counts training steps and
decides whether this one is logged, the second checks the model's output (and its
gradient) for NaN/Inf (:mod:`.checks`). A logged step adds one global forward hook,
which logs the selected modules, from its forward until the next step begins.

A logged step does each thing once, and as much as it can together. The Python and the
ops a hook runs between a training step's own ops cost several times what they cost
alone (the step's ops leave the caches cold: the first small op after a convolution
takes 30-100 us here, against 3-5 us in a loop of them), so work that can wait is
gathered where it runs once:

* a module's outputs are binned by the forward hook (later ops may write them in
  place); a tensor several modules hold (the model's output is its last layer's) is
  binned once, and a ``torch.nn.ReLU``'s output is made from its input's
  (:meth:`Histogram.relu`);
* parameters are binned, and compared with the last logged step's
  (:mod:`.fingerprints`), as the step's first backward ends (an autograd callback
  queued by the first gradient hook of the step): nothing writes them before. With no
  backward to wait for, as the forward ends;
* parameter gradients are read then too, with no hook on any parameter: a gradient the
  backward did not write is not logged;
* small tensors (a bias, per-sample norms, the copies of small outputs) are binned
  together then, in a few ops for all (:class:`~.binning.SmallBatch`).
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import torch
from torch.nn.modules.module import register_module_forward_hook

from ..errors import InputError
from ..guard import in_analysis
from ..tensors import tensors_in
from .binning import CHUNK, SMALL, Derived, log2_histogram
from .histograms import Histogram
from .quantities import Quantity

__all__ = ["WatchHooks"]

_ENGINE = torch.autograd.Variable._execution_engine  # (its callbacks run as a backward ends)


def _own_parameters(module: torch.nn.Module) -> list[torch.Tensor]:
    """``module.parameters(recurse=False)``, read from its table (10x faster)."""
    return [p for p in module._parameters.values() if p is not None]


class WatchHooks:
    """Hooking a model for :class:`~fxinspect.training.watch.Watch` (its state is the
    watch's: set up by its ``__init__``)."""

    def _attach(self, model: torch.nn.Module, include: str | None, exclude: str | None) -> None:
        try:
            inc, exc = (re.compile(p) if p is not None else None for p in (include, exclude))
        except re.error as error:
            raise InputError(f"include=/exclude= must be regular expressions: {error}") from None
        self._handles.append(model.register_forward_pre_hook(self._new_step))
        self._handles.append(model.register_forward_hook(self._check_step))  # every step, whatever include says
        for name, module in model.named_modules():
            if (inc and not inc.search(name)) or (exc and exc.search(name)):
                continue
            self.types[name] = type(module).__name__
            self._selected[id(module)] = (module, name)

    def _hook_step(self) -> None:
        """Hook the selected modules for this logged step only: the steps between run the
        model without the hook (a hooked module takes torch's slower call path). One
        global forward hook, put on and taken off, serves every module: one hook per
        module cost a registration and a removal each, every logged step."""
        self._ran, self._ran_step, self._grads_before, self._grad_hooked = {}, self.step, {}, {}
        self._step_handles = [register_module_forward_hook(self._module_ran)]

    def _unhook_step(self) -> None:
        for handle in self._step_handles:
            handle.remove()
        self._step_handles = []
        # binning buffers: a CPU's (one chunk) is kept for the next logged step; a GPU's,
        # as large as this step's largest tensor, is let go
        for where, buffer in list(self._scratch.items()):
            if buffer.numel() > CHUNK:
                del self._scratch[where]
        self._parameters_logged()  # what a step whose forward or backward did not end left
        self._small.bin()

    def _new_step(self, module: torch.nn.Module, args: tuple) -> None:
        if in_analysis():  # fxinspect running the model itself (inspect capturing it): not a step
            return
        if not module.training:  # evaluation: nothing logged, and no hook on every module
            self.logging = False
            if self._step_handles:
                self._unhook_step()
            return
        if self._step_handles:  # the last logged step's hooks: its backward has run
            self._unhook_step()
        self.step += 1
        self.logging = self.step % self.every == 0
        if self.logging:
            self._hook_step()
        self._in_forward = self.logging

    def _check_step(self, module: torch.nn.Module, args: tuple, output: Any) -> None:
        if not module.training or in_analysis():
            return
        outputs, gradient = tensors_in(output), None
        if self._in_forward:  # a logged step's forward ended
            self._in_forward = False
            for params in self._ran.values():
                self._note_gradients(params)
            self._params_pending = list(self._ran.items()) if Quantity.PARAMS in self.log else []
            if torch.is_grad_enabled() and any(t.requires_grad for t in outputs):
                gradient = self._bin_as_backward_ends  # the rest waits for the backward: one pass for all
            else:
                self._backward_ended()
        self.checks.output(self.step, outputs, gradient)

    def _parameters_logged(self) -> None:
        """Bin the parameters of the modules that ran in the logged step, kept uncopied
        (nothing writes them before its backward ends), and compare them with the last
        logged step's: once, as its first backward ends (or, with none, its forward)."""
        pending, self._params_pending = self._params_pending, []
        if not pending:
            return
        step = self._ran_step
        for name, params in pending:
            for p in params:
                self._keep(name, Quantity.PARAMS, self._once(p, copy=False), step)
        for name, found in self._samples.fingerprints(step, dict(pending)).items():
            self.fingerprints.setdefault(name, []).append((step, found))

    def _note_gradients(self, params: list[torch.Tensor]) -> None:
        """Note the gradients ``params`` hold before the backward: those it writes are logged."""
        if Quantity.PARAMS_GRAD in self.log:
            for p in params:
                if p.grad is not None:
                    self._grads_before[id(p)] = (p.grad, p.grad._version)

    def _keep(self, name: str, quantity: str, histogram: Any, step: int | None = None) -> None:
        step = self.step if step is None else step
        self._records.setdefault((name, quantity), {}).setdefault(step, []).append(histogram)

    def _module_ran(self, module: torch.nn.Module, args: tuple, output: Any) -> None:
        """The forward hook of a logged step (every module's: the selected ones are logged)."""
        selected = self._selected.get(id(module))
        if selected is None or selected[0] is not module or not self.logging or in_analysis():
            return
        name = selected[1]
        if name not in self._seen:
            self._seen.add(name)
            self.order.append(name)
        outputs = [t for t in tensors_in(output) if t.is_floating_point()]
        if Quantity.IO in self.log:
            for t in outputs:
                self._keep(name, Quantity.IO, self._once(t, module, args))
        if Quantity.IO_GRAD in self.log and torch.is_grad_enabled():
            for t in outputs:
                if t.requires_grad:
                    self._hook_gradient(name, t)
        if name not in self._ran:  # (a module called again: its parameters are the same)
            params = _own_parameters(module)
            if params:
                self._ran[name] = params
                if not self._in_forward:  # called outside the model's forward: bin them now
                    self._parameters_now(name, params)
                    self._note_gradients(params)

    def _parameters_now(self, name: str, params: list[torch.Tensor]) -> None:
        if Quantity.PARAMS in self.log:
            for p in params:
                self._keep(name, Quantity.PARAMS, self._once(p))
            found = self._samples.fingerprints(self.step, {name: params})[name]
            self.fingerprints.setdefault(name, []).append((self.step, found))

    def _once(self, t: torch.Tensor, module: torch.nn.Module | None = None, args: tuple = (), copy: bool = True) -> Any:
        """``t``'s histogram for this step, binned once whoever holds it: the model's
        output is its last layer's, a tied weight (and its gradient) two modules'. The
        same tensor is known by a weak reference and its version (a tensor written in
        place since, as by an in-place ReLU, is binned again, unless :meth:`_derived`
        makes its histogram from the one before)."""
        if self._binned_step != self.step:
            self._binned, self._binned_step = {}, self.step
        try:
            version = t._version
        except RuntimeError:  # inference tensors keep no version: bin each time
            return self._bin(t, copy)
        found = self._binned.get(id(t))
        if found is not None and found[0]() is t and found[1] == version:
            return found[2]
        histogram = self._derived(module, args, t) or self._bin(t, copy)
        self._binned[id(t)] = (weakref.ref(t), version, histogram)
        return histogram

    def _derived(self, module: torch.nn.Module | None, args: tuple, t: torch.Tensor) -> Derived | None:
        """A ``torch.nn.ReLU``'s output histogram made from its input's, binned this step:
        ``max(x, 0)`` keeps each positive value's bin and turns the rest into zeros, so
        the output is not binned again (0.79 M of the 1.7 M values a logged step of the
        small CNN in ``benchmarks/watch.py`` binned). Only when the input is the very
        tensor binned, unchanged since but for the ReLU itself."""
        if type(module) is not torch.nn.ReLU or not args or not isinstance(args[0], torch.Tensor):
            return None
        source = args[0]
        found = self._binned.get(id(source))
        if found is None or found[0]() is not source or source.shape != t.shape or source.dtype != t.dtype:
            return None
        written = 1 if source is t else 0  # an in-place ReLU wrote its input once
        return Derived(found[2], Histogram.relu) if found[1] + written == source._version else None

    def _bin(self, t: torch.Tensor, copy: bool = True) -> Any:
        """``t``'s histogram, pending: a small tensor's with the rest of the step's (a
        copy of it, unless ``copy=False`` says nothing writes it before they are binned)."""
        if t.numel() <= SMALL:
            return self._small.add(t, copy)
        return log2_histogram(t, pending=True, scratch=self._scratch)

    def _bin_as_backward_ends(self) -> None:
        """Queue :meth:`_backward_ended` for the end of the backward running now."""
        if not self._backward_queued:
            self._backward_queued = True
            _ENGINE.queue_callback(self._backward_ended)

    def _backward_ended(self) -> None:
        """Bin the gradients this backward wrote (before an optimizer, or a clipping, reads
        or writes them) and the per-sample norms, together. A second backward in the same
        step (another loss) logs the gradients as they are after it, in place of the first's."""
        self._backward_queued = False
        self._parameters_logged()
        if Quantity.PARAMS_GRAD in self.log:
            before = self._grads_before
            for name, params in self._ran.items():
                found = []
                for p in params:
                    grad, held = p.grad, before.get(id(p))
                    if grad is None or (held is not None and held[0] is grad and held[1] == grad._version):
                        continue  # not written by this backward
                    before[id(p)] = (grad, grad._version)
                    found.append(self._once(grad, copy=False))
                if found:
                    self._records.setdefault((name, Quantity.PARAMS_GRAD), {})[self._ran_step] = found
        self._small.bin()

    def _hook_gradient(self, name: str, t: torch.Tensor) -> None:
        """Hook ``t``'s gradient once whoever holds it (the model's output is its last
        layer's): one norm for all of them. A tensor written in place since (by an
        in-place ReLU) is another: its gradient is the one after the write."""
        held = self._grad_hooked.get(id(t))
        if held is not None and held[0]() is t and held[1] == t._version:
            held[2].append(name)
            return
        names = [name]
        self._grad_hooked[id(t)] = (weakref.ref(t), t._version, names)
        t.register_hook(self._grad_hook(names, self.step))

    def _grad_hook(self, names: list[str], step: int):
        def hook(grad: torch.Tensor) -> None:
            # (one op: torch.norm's Python and a reshape cost a logged step more than the norm)
            dims = tuple(range(1, grad.dim()))
            norms = torch.linalg.vector_norm(grad.detach(), dim=dims) if dims else grad.detach().abs()
            found = self._bin(norms, copy=False)  # (made here: nothing else holds them)
            for name in names:
                self._records.setdefault((name, Quantity.IO_GRAD), {}).setdefault(step, []).append(found)
            self._bin_as_backward_ends()

        return hook

    def remove(self) -> None:
        """Take every hook off the model (the histograms stay)."""
        self._unhook_step()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._selected.clear()
