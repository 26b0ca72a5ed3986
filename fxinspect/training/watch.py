"""``watch``: histograms of activations, gradients and parameters over training steps.

``watcher = fxinspect.watch(model, every=10)`` hooks the model for a training loop that
does not otherwise change. A *step* is one forward of the whole model in training mode
(its backward and optimizer step follow); every ``every`` steps, starting with the
first, each selected module logs, as :mod:`~fxinspect.histograms` (signed log2 bins,
NaN/±Inf/zero counted exactly):

* ``"io"``: its outputs;
* ``"io_grad"``: per-sample gradient norms of its outputs (l2 over all but the batch
  dimension), taken by a hook on the output tensor (in-place ops after it are fine);
* ``"params"``: its own parameters (not its children's), at its forward;
* ``"params_grad"``: their gradients, as they are accumulated.

Steps in eval mode are not logged, and the modules and parameters are hooked for the
logged steps only (from the step's forward until the next step begins): between them
the model runs with two hooks on its root, a step counter and the finite checks. Memory grows with (non-empty bins × logged steps × tensors). ``remove()`` takes
every hook off. ``summary()`` lists findings (:mod:`.watch_findings`), ``plot()`` draws
heat maps, ``save()``/``Watch.load()`` keep a run, ``to_frame()`` tabulates it.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
>>> watcher = fxinspect.watch(model, every=2)
>>> for _ in range(4):
...     model(torch.randn(16, 4)).sum().backward()
>>> watcher.remove()
>>> watcher.steps("0", "io"), watcher.histogram("0", "io", 2).total     # steps 0 and 2; 16 * 8 values
([0, 2], 128)
"""

from __future__ import annotations

import inspect
import json
import re
import weakref
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from ..guard import in_analysis
from ..run.prepare import unwrapped
from ..tensors import tensors_in
from .checks import FiniteChecks
from .histograms import Histogram, PendingHistogram, from_plain, log2_histogram, to_plain
from .quantities import Quantity

__all__ = ["QUANTITIES", "Watch", "watch"]

QUANTITIES = tuple(str(q) for q in Quantity)
"""Every quantity's name (the default of ``log=``)."""


def _merge(found: list[Histogram]) -> Histogram | None:
    out = None
    for h in found:
        out = h if out is None else out.merged(h)
    return out


class Watch:
    """Histograms per (module, quantity, step); see :func:`watch`."""

    def __init__(
        self,
        model: torch.nn.Module | None,
        *,
        every: int = 10,
        log: tuple[str, ...] = QUANTITIES,
        include: str | None = None,
        exclude: str | None = None,
    ) -> None:
        if every < 1:
            raise InputError(f"every= must be at least 1, got {every}")
        unknown = [q for q in log if q not in QUANTITIES]
        if unknown:
            raise InputError(f"log= takes {list(QUANTITIES)}, got {unknown}")
        self.every, self.log = every, tuple(log)
        self.step = -1  # the current training step (-1: none yet)
        self.logging = False
        self.order: list[str] = []  # module names in the order they first ran
        self.types: dict[str, str] = {}
        # module -> (step, what its parameters were): see _fingerprint
        self.fingerprints: dict[str, list[tuple[int, float | str]]] = {}
        self._versions: dict[str, int | None] = {}
        self._records: dict[tuple[str, str], dict[int, list[Any]]] = {}
        self._handles: list[Any] = []  # the hooks on the model, every step
        self._forward_hooks: list[tuple[torch.nn.Module, Any]] = []  # ... and those of logged steps
        self._grad_hooks: list[tuple[torch.Tensor, Any]] = []
        self._step_handles: list[Any] = []
        # histograms binned this step, by tensor id: (weak reference, version, histogram)
        self._binned: dict[int, tuple[weakref.ref, int, Any]] = {}
        self._binned_step = -1
        self.checks = FiniteChecks()  # the model's output and its gradient, every step
        if model is not None:
            self._attach(model, include, exclude)

    # ---------------------------------------------------------------- hooks
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
                    self._keep(name, Quantity.IO, self._once(t))
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

        Their version counters, when an in-place write (an optimizer's step) moved them
        since: no pass over the values (a float64 sum of GPT-2's tied embedding cost more
        than the step). When the counters did not move, the sum of ``|p|`` in float64:
        a write through ``.data``, which no counter sees, still shows.
        """
        try:
            versions = sum(p._version for p in params)
        except RuntimeError:  # inference tensors keep no version
            versions = None
        moved = versions is None or self._versions.get(name, versions) != versions or name not in self._versions
        self._versions[name] = versions
        if versions is not None and moved and name in self.fingerprints:
            return f"written (version {versions})"
        with torch.no_grad():  # one pass, no copy: the sum of |p| in float64
            return sum(float(torch.linalg.vector_norm(p.detach(), 1, dtype=torch.float64)) for p in params)

    def _once(self, t: torch.Tensor) -> Any:
        """``t``'s histogram for this step, binned once whoever holds it: the model's
        output is its last layer's, a tied weight (and its gradient) two modules'. The
        same tensor is known by a weak reference and its version (a tensor written in
        place since, as by an in-place ReLU, is binned again)."""
        if self._binned_step != self.step:
            self._binned, self._binned_step = {}, self.step
        try:
            version = t._version
        except RuntimeError:  # inference tensors keep no version: bin each time
            return log2_histogram(t, pending=True)
        found = self._binned.get(id(t))
        if found is not None and found[0]() is t and found[1] == version:
            return found[2]
        histogram = log2_histogram(t, pending=True)
        self._binned[id(t)] = (weakref.ref(t), version, histogram)
        return histogram

    def _grad_hook(self, name: str, step: int):
        def hook(grad: torch.Tensor) -> None:
            norms = grad.detach().reshape(grad.shape[0], -1).norm(dim=1) if grad.dim() > 1 else grad.detach().abs()
            self._records.setdefault((name, Quantity.IO_GRAD), {}).setdefault(step, []).append(
                log2_histogram(norms, pending=True)
            )

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

    # ---------------------------------------------------------------- reading
    def names(self, quantity: str | None = None) -> list[str]:
        """Modules with histograms (of ``quantity``), in the order they first ran."""
        have = {n for (n, q) in self._records if quantity is None or q == quantity}
        return [n for n in self.order if n in have] + sorted(have - set(self.order))

    def steps(self, name: str, quantity: str) -> list[int]:
        """The logged steps of one module's quantity."""
        return sorted(self._records.get((name, quantity), {}))

    def histogram(self, name: str, quantity: str, step: int) -> Histogram:
        """One module's histogram of ``quantity`` at ``step`` (its output tensors together)."""
        parts = self._records[(name, quantity)][step]
        read = [p.read() if isinstance(p, PendingHistogram) else p for p in parts]
        self._records[(name, quantity)][step] = read  # read once
        return _merge(read)

    def to_frame(self):
        """One row per (module, quantity, step): counts and the typical magnitude (pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("to_frame needs pandas: pip install fxinspect[pandas]") from exc
        rows = []
        for name, quantity in self._records:
            for step in self.steps(name, quantity):
                h = self.histogram(name, quantity, step)
                rows.append(
                    {
                        "module": name,
                        "type": self.types.get(name, ""),
                        "quantity": quantity,
                        "step": step,
                        "total": h.total,
                        "zeros": h.zeros,
                        "nan": h.nan,
                        "inf": h.pos_inf + h.neg_inf,
                        "typical_log2": h.typical_exponent(),
                    }
                )
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """Findings: vanishing or exploding gradients, dead units, frozen weights, first NaN/Inf."""
        from .findings import findings

        found = findings(self)
        return "\n".join(found) if found else "nothing unusual in the logged steps"

    def plot(self, module_or_pattern: str, path: str | Path | None = None, quantities: tuple[str, ...] | None = None):
        """Heat maps over steps of the matching modules' histograms; see ``views.watch_plot``."""
        from .plot import plot_watch

        return plot_watch(self, module_or_pattern, path, quantities)

    def to_html(self, path: str | Path | None = None) -> str:
        """The histograms as one self-contained page (heat maps per module and quantity,
        the findings linked to their modules); also written to ``path``. See
        :mod:`~fxinspect.training.watch_page`."""
        from .watch_page import watch_html

        return watch_html(self, path)

    # ---------------------------------------------------------------- files
    def save(self, path: str | Path) -> None:
        """Write every histogram as JSON (read back with :meth:`Watch.load`)."""
        data = {
            "every": self.every,
            "log": list(self.log),
            "order": self.order,
            "types": self.types,
            "fingerprints": self.fingerprints,
            "checks": self.checks.to_plain(),
            "records": [
                {"module": n, "quantity": q, "step": s, "histogram": to_plain(self.histogram(n, q, s))}
                for (n, q) in self._records
                for s in self.steps(n, q)
            ],
        }
        Path(path).write_text(json.dumps(data))

    @classmethod
    def load(cls, path: str | Path) -> Watch:
        """A watch read from :meth:`save`'s file (not attached to any model)."""
        data = json.loads(Path(path).read_text())
        w = cls(None, every=data["every"], log=tuple(data["log"]))
        w.order, w.types = data["order"], data["types"]
        w.fingerprints = {k: [tuple(x) for x in v] for k, v in data["fingerprints"].items()}
        w.checks = FiniteChecks.from_plain(data.get("checks"))  # (absent in files of older versions)
        for r in data["records"]:
            w._records.setdefault((r["module"], r["quantity"]), {})[r["step"]] = [from_plain(r["histogram"])]
        return w


def watch(model: torch.nn.Module, **options: Any) -> Watch:
    """Watch ``model`` train: histograms every ``every`` steps; see the module's docstring.

    ``log``: any of ``"io"``, ``"io_grad"``, ``"params"``, ``"params_grad"``.
    ``include``/``exclude``: regular expressions searched in module names.
    """
    model, _ = unwrapped(model, "watch()")
    return Watch(model, **options)


watch.__signature__ = inspect.signature(Watch).replace(
    return_annotation="Watch"
)  # help() lists the options with their defaults
