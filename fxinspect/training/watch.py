"""``watch``: histograms of activations, gradients and parameters over training steps.

``watcher = fxinspect.watch(model, every=10)`` hooks the model for a training loop that
does not otherwise change. A *step* is one forward of the whole model in training mode
(its backward and optimizer step follow); every ``every`` steps, starting with the
first, each selected module logs, as :mod:`~fxinspect.histograms` (signed log2 bins,
NaN/±Inf/zero counted exactly):

* ``"io"``: its outputs;
* ``"io_grad"``: per-sample gradient norms of its outputs (l2 over all but the batch
  dimension), taken by a hook on the output tensor (in-place ops after it are fine);
* ``"params"``: its own parameters (not its children's), as they were in the step's
  forward (binned as its backward ends: nothing writes them before);
* ``"params_grad"``: their gradients as the step's backward ends (before an optimizer
  or a clipping reads them); a gradient the backward did not write is not logged.

Steps in eval mode are not logged, and the modules are hooked for the logged steps only
(one global forward hook, from the step's forward until the next step begins; no
parameter is ever hooked): between them the model runs with two hooks on its root, a
step counter and the finite checks (:mod:`.checks`), and a step runs no op of
fxinspect's unless its output is large. Memory grows with (non-empty bins × logged
steps × tensors). ``remove()`` takes every hook off. ``summary()`` lists findings
(:mod:`.findings`), ``plot()`` draws heat maps, ``save()``/``Watch.load()`` keep a
run, ``to_frame()`` tabulates it. ``to=`` writes each logged step, as it ends, to
TensorBoard and Weights & Biases too (``to=["tensorboard:runs/exp1", wandb.run]``: the
exact bins, NaN/Inf counts and findings; :mod:`.writers`). What a logged step costs, and
why it is laid out so, is in :mod:`.watch_hooks`.

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
import weakref
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from ..optional import pandas
from ..run.prepare import unwrapped
from .binning import SmallBatch
from .checks import FiniteChecks
from .fingerprints import ParameterSamples
from .histograms import Histogram, from_plain, to_plain
from .quantities import Quantity
from .watch_hooks import WatchHooks
from .writers import Written, destinations, write

__all__ = ["QUANTITIES", "Watch", "watch"]

QUANTITIES = tuple(str(q) for q in Quantity)
"""Every quantity's name (the default of ``log=``)."""


def _merge(found: list[Histogram]) -> Histogram | None:
    out = None
    for h in found:
        out = h if out is None else out.merged(h)
    return out


class Watch(WatchHooks):
    """Histograms per (module, quantity, step); see :func:`watch`."""

    def __init__(
        self,
        model: torch.nn.Module | None,
        *,
        every: int = 10,
        log: tuple[str, ...] = QUANTITIES,
        include: str | None = None,
        exclude: str | None = None,
        to: Any = None,
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
        self._seen: set[str] = set()  # (the same, to look up)
        # module -> (step, what its parameters were): see ParameterSamples
        self.fingerprints: dict[str, list[tuple[int, float | str]]] = {}
        self._samples = ParameterSamples()
        self._records: dict[tuple[str, str], dict[int, list[Any]]] = {}
        self._handles: list[Any] = []  # the hooks on the model, every step
        self._selected: dict[int, tuple[torch.nn.Module, str]] = {}  # id(module) -> (module, its name)
        self._step_handles: list[Any] = []
        # the modules with parameters that ran in the logged step _ran_step, and their gradients before its backward
        self._ran: dict[str, list[torch.Tensor]] = {}
        self._ran_step = -1
        self._grads_before: dict[int, tuple[torch.Tensor, int]] = {}
        self._grad_hooked: dict[int, tuple[weakref.ref, int, list[str]]] = {}  # id(tensor) -> (it, version, names)
        self._params_pending: list[tuple[str, list[torch.Tensor]]] = []  # parameters to bin as the backward ends
        # histograms binned this step, by tensor id: (weak reference, version, histogram)
        self._binned: dict[int, tuple[weakref.ref, int, Any]] = {}
        self._binned_step = -1
        self._scratch: dict = {}  # log2_histogram's buffers (see WatchHooks._unhook_step)
        self._small = SmallBatch()  # a logged step's small tensors, binned as its backward ends
        self._in_forward = False  # inside a logged step's forward (of the model itself)
        self._backward_queued = False  # binning the small tensors queued for this backward's end
        self.checks = FiniteChecks()  # the model's output and its gradient, every step
        self._writers = destinations(to)
        self._written = Written()  # what has been written to them
        if model is not None:
            self._attach(model, include, exclude)

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
        read = [p if isinstance(p, Histogram) else p.read() for p in parts]  # (pending on the device)
        self._records[(name, quantity)][step] = read  # read once
        return _merge(read)

    def to_frame(self):
        """One row per (module, quantity, step): counts and the typical magnitude (pandas)."""
        pd = pandas("to_frame")
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

    # ---------------------------------------------------------------- writers
    def flush(self) -> None:
        """Write the logged steps not written yet, and the findings, to the ``to=``
        destinations (a step is written as the next one begins: this writes the last;
        call it between steps)."""
        write(self, self._writers, self._written)

    def write(self, to: Any) -> None:
        """Write every logged step and the findings to ``to`` (destinations as ``to=``
        takes them: a saved run read back with :meth:`load`, written after the fact)."""
        writers = destinations(to)
        try:
            write(self, writers, Written())
        finally:
            for writer in writers:
                writer.close()

    def _unhook_step(self) -> None:
        super()._unhook_step()
        if self._writers:  # the logged step has ended: write it (findings when due: see writers.write)
            write(self, self._writers, self._written, final=False)

    def remove(self) -> None:
        """Take every hook off the model (the histograms stay), write what is left to the
        ``to=`` destinations and close those the watch opened."""
        super().remove()
        self.flush()
        writers, self._writers = self._writers, []
        for writer in writers:
            writer.close()

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
    ``to``: where each logged step is written as well, one destination or a list:
    ``"tensorboard:<logdir>"``, ``"wandb"`` (the active run), a TensorBoard
    ``SummaryWriter``, a ``wandb`` run, or a ``TensorBoardWriter``/``WandbWriter``
    (:mod:`~fxinspect.training.writers`; ``pip install fxinspect[tensorboard]`` or
    ``fxinspect[wandb]``).
    """
    model, _ = unwrapped(model, "watch()")
    return Watch(model, **options)


watch.__signature__ = inspect.signature(Watch).replace(
    return_annotation="Watch"
)  # help() lists the options with their defaults
