"""The hooks of :class:`~fxinspect.training.watch.Watch`: what runs inside the user's loop.

Two hooks on the model's root are there every step: the first counts training steps and
decides whether this one is logged, the second checks the model's output (and its
gradient) for NaN/Inf. The selected modules' forward hooks and their parameters'
gradient hooks are put on for a logged step only, and taken off as the next step begins.
A tensor several modules hold (the model's output is its last layer's; a tied weight is
two modules') is binned once a step, and a ``torch.nn.ReLU``'s output is not binned at
all when its input was: its histogram is made from the input's (:meth:`Histogram.relu`).
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import torch

from ..errors import InputError
from ..guard import in_analysis
from ..tensors import tensors_in
from .binning import CHUNK, SMALL, Derived, log2_histogram
from .histograms import Histogram
from .quantities import Quantity

__all__ = ["WatchHooks"]

_SAMPLE = 4096  # values of each parameter compared between logged steps


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
            self._forward_hooks.append((module, self._forward_hook(name)))
            if Quantity.PARAMS_GRAD in self.log:
                for p in module.parameters(recurse=False):
                    if p.requires_grad:
                        self._grad_hooks.append((p, self._param_grad_hook(name)))

    def _hook_step(self) -> None:
        """Hook the selected modules and parameters for this logged step only: the steps
        between run the model without them (a hooked module takes torch's slower call
        path, and every parameter's hook would be called in every backward)."""
        handles = self._step_handles
        for module, hook in self._forward_hooks:
            handles.append(module.register_forward_hook(hook))
        for p, hook in self._grad_hooks:
            handles.append(p.register_post_accumulate_grad_hook(hook))

    def _unhook_step(self) -> None:
        for handle in self._step_handles:
            handle.remove()
        self._step_handles.clear()
        # binning buffers: a CPU's (one chunk) is kept for the next logged step; a GPU's,
        # as large as this step's largest tensor, is let go
        for where, buffer in list(self._scratch.items()):
            if buffer.numel() > CHUNK:
                del self._scratch[where]
        self._small.bin()  # its small tensors, together

    def _new_step(self, module: torch.nn.Module, args: tuple) -> None:
        if in_analysis():  # fxinspect running the model itself (inspect capturing it): not a step
            return
        if not module.training:  # evaluation: nothing logged
            self.logging = False
            return
        self.step += 1
        self.logging = self.step % self.every == 0
        self._unhook_step()  # the last logged step's hooks: its backward has run
        if self.logging:
            self._hook_step()

    def _check_step(self, module: torch.nn.Module, args: tuple, output: Any) -> None:
        if module.training and not in_analysis():
            self.checks.output(self.step, tensors_in(output))

    def _keep(self, name: str, quantity: str, histogram: Any) -> None:
        self._records.setdefault((name, quantity), {}).setdefault(self.step, []).append(histogram)

    def _forward_hook(self, name: str):
        def hook(module: torch.nn.Module, args: tuple, output: Any) -> None:
            if not self.logging or in_analysis():
                return
            if name not in self.order:
                self.order.append(name)
            outputs = [t for t in tensors_in(output) if t.is_floating_point()]
            if Quantity.IO in self.log:
                for t in outputs:
                    self._keep(name, Quantity.IO, self._once(t, module, args))
            if Quantity.IO_GRAD in self.log and torch.is_grad_enabled():
                step = self.step
                for t in outputs:
                    if t.requires_grad:
                        t.register_hook(self._grad_hook(name, step))
            params = [p for p in module.parameters(recurse=False)]
            if Quantity.PARAMS in self.log and params:
                for p in params:
                    self._keep(name, Quantity.PARAMS, self._once(p))
                self.fingerprints.setdefault(name, []).append((self.step, self._fingerprint(name, params)))

        return hook

    def _fingerprint(self, name: str, params: list[torch.Tensor]) -> Any:
        """What tells whether a module's parameters changed since its last logged step.

        A strided sample of their values (at most ``_SAMPLE`` per parameter) is kept from
        one logged step to the next: when it differs, they changed, and no pass over all
        the values is made (a float64 sum of GPT-2's tied 38.6M-value embedding cost more
        than the step). When it does not (frozen parameters, a dead network whose
        optimizer adds zeros), the sum of ``|p|`` in float64 decides, so that a change the
        sample missed still shows; parameters unchanged from their first logged step are
        told from their third on.
        """
        with torch.no_grad():
            flat = [p.detach().reshape(-1) for p in params]
            sample = torch.cat([f[:: max(1, f.numel() // _SAMPLE)] for f in flat])
            before = self._samples.get(name)
            self._samples[name] = sample  # (cat copies: never a view of a parameter)
            if before is None:
                return f"first logged at step {self.step}"
            if before.shape != sample.shape or not torch.equal(before, sample):
                return f"changed by step {self.step}"
            return sum(float(torch.linalg.vector_norm(f, 1, dtype=torch.float64)) for f in flat)

    def _once(self, t: torch.Tensor, module: torch.nn.Module | None = None, args: tuple = ()) -> Any:
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
            return self._bin(t)
        found = self._binned.get(id(t))
        if found is not None and found[0]() is t and found[1] == version:
            return found[2]
        histogram = self._derived(module, args, t) or self._bin(t)
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

    def _bin(self, t: torch.Tensor) -> Any:
        """``t``'s histogram, pending: a small tensor's with the rest of the step's."""
        if t.numel() <= SMALL:
            return self._small.add(t)
        return log2_histogram(t, pending=True, scratch=self._scratch)

    def _grad_hook(self, name: str, step: int):
        def hook(grad: torch.Tensor) -> None:
            norms = grad.detach().reshape(grad.shape[0], -1).norm(dim=1) if grad.dim() > 1 else grad.detach().abs()
            self._records.setdefault((name, Quantity.IO_GRAD), {}).setdefault(step, []).append(self._bin(norms))

        return hook

    def _param_grad_hook(self, name: str):
        def hook(p: torch.Tensor) -> None:
            if self.logging and p.grad is not None and not in_analysis():
                self._keep(name, Quantity.PARAMS_GRAD, self._once(p.grad))

        return hook

    def remove(self) -> None:
        """Take every hook off the model (the histograms stay)."""
        self._unhook_step()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._forward_hooks.clear()
        self._grad_hooks.clear()
