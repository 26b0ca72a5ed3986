"""``StepMeter``: MFU, HFU, throughput and step time per training step of a plain loop.

The callbacks of :mod:`.lightning` and :mod:`.hf_trainer` are this meter driven by their
framework's hooks. It:

* analyses the model's first training forward, on the inputs it is called with (a
  forward pre-hook catches the call; the analysis runs before it, and the step's clock
  starts after it): :func:`~fxinspect.integrations.flops.step_flops`, which leaves the
  model as it was. Later steps are taken to be the same work: a batch of another shape
  is not analysed again;
* counts the model's training forwards in each step (gradient accumulation runs several),
  so that a step's FLOPs are ``forwards × the analysed forward and backward``;
* times each step (CUDA synchronised at its ends) and keeps one record per step in
  ``history``: ``fxinspect/step_time`` (seconds), ``fxinspect/mfu``, ``fxinspect/hfu``,
  ``fxinspect/tokens_per_second`` and ``fxinspect/samples_per_second`` (where the
  batch's tokens and samples are known);
* runs :func:`fxinspect.watch` on the model (``watch_every`` steps; ``None``: no
  watch), as ``meter.watcher``.

Example: one line in the loop (``meter.step()`` ends a step and starts the next)

>>> import torch, fxinspect
>>> from fxinspect.integrations import StepMeter
>>> model = torch.nn.Linear(8, 4, bias=False)
>>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
>>> spec = fxinspect.timemodel.DeviceSpec("toy", {"float32": 1e9}, 1e9)
>>> meter = StepMeter(model, device_spec=spec, watch_every=None)
>>> for _ in range(3):
...     model(torch.randn(2, 8)).sum().backward(); opt.step(); opt.zero_grad()
...     record = meter.step()
>>> meter.close()
>>> meter.flops.model_flops, len(meter.history)      # 2 * (2*8*4 forward + 2*8*4 weight-gradient MACs)
(256, 3)
>>> abs(record["fxinspect/mfu"] - 256 / (record["fxinspect/step_time"] * 1e9)) < 1e-12
True
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..guard import in_analysis
from ..timemodel import devices
from ..training.watch import watch
from .flops import StepFlops, default_spec, step_flops

__all__ = ["StepMeter", "merged"]

PREFIX = "fxinspect/"


class StepMeter:
    """Per-step MFU/HFU, throughput and time of ``model``'s training (see the module).

    ``device_spec``: the peak's device (a preset name, a ``DeviceSpec``, ``"measured"``;
    ``None``: this GPU's preset, else this CPU measured). ``loss_fn``: the analysed
    step's loss of the model's output (default: its ``loss``, else fxinspect's).
    ``analysis``: options for :func:`~fxinspect.integrations.flops.step_flops`.
    ``watch_options``: keywords for :func:`fxinspect.watch` beside ``every``.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        device_spec: Any = None,
        watch_every: int | None = 100,
        watch_options: dict | None = None,
        loss_fn: Callable[[Any], torch.Tensor] | None = None,
        analysis: dict | None = None,
        capture: bool = True,
    ) -> None:
        self.model = model
        self.spec = default_spec() if device_spec is None else devices.get(device_spec)
        self.loss_fn, self.analysis = loss_fn, dict(analysis or {})
        self.flops: StepFlops | None = None
        self.history: list[dict[str, float]] = []
        self.forwards = 0  # training forwards of the model in the current step
        self._start: float | None = None
        self._analysing = False
        self.pending = capture  # the first training forward, on its own inputs, is still to be analysed
        self._sync = any(p.is_cuda for p in model.parameters())
        self._hook = model.register_forward_pre_hook(self._forward, with_kwargs=True)
        self.watcher = None if watch_every is None else watch(model, every=watch_every, **(watch_options or {}))

    # ------------------------------------------------------------------ the loop
    def analyse(self, args: Any = (), kwargs: dict | None = None) -> StepFlops:
        """Analyse one training step on these inputs (the first step's, or the user's)."""
        self._analysing, self.pending = True, False
        try:
            self.flops = step_flops(self.model, args, kwargs=kwargs, loss_fn=self.loss_fn, **self.analysis)
        finally:
            self._analysing = False
        return self.flops

    def try_analyse(self, args: Any = (), kwargs: dict | None = None) -> StepFlops | None:
        """:meth:`analyse`, where a failure is a warning: the training goes on, its steps
        timed without MFU (a model the analysis cannot run still trains)."""
        try:
            return self.analyse(args, kwargs)
        except Exception as exc:
            warnings.warn(
                f"fxinspect: the first training step of {type(self.model).__name__} could not be analysed "
                f"({type(exc).__name__}: {exc}); its steps are timed without MFU",
                stacklevel=3,
            )
            return None

    def begin(self) -> None:
        """A step starts (its clock and its forward count)."""
        self.forwards = 0
        self._start = self._now()

    def end(self) -> dict[str, float] | None:
        """The step ends: its record (kept in ``history``), or ``None`` before any step began."""
        if self._start is None:
            return None
        seconds = self._now() - self._start
        self._start = None
        record = {PREFIX + "step_time": seconds}
        if self.flops is not None:
            forwards = max(self.forwards, 1)  # (a step whose forwards were not seen: one)
            record.update(figures(self.flops, forwards, seconds, self.spec))
        self.history.append(record)
        return record

    def step(self) -> dict[str, float] | None:
        """The plain loop's one line: end this step (its record) and begin the next."""
        record = self.end()
        self.begin()
        return record

    def close(self) -> None:
        """Take the meter's hook and the watch's hooks off the model (records stay)."""
        self._hook.remove()
        if self.watcher is not None:
            self.watcher.remove()

    def __enter__(self) -> StepMeter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _forward(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if self._analysing or in_analysis() or not module.training:
            return
        if self.pending:
            self.try_analyse(args, kwargs)
            self._start = self._now()  # (the analysis is not the step's time)
        elif self._start is None:  # the plain loop's first step: it starts with its forward
            self._start = self._now()
        self.forwards += 1

    def _now(self) -> float:
        if self._sync:
            torch.cuda.synchronize()
        return time.perf_counter()


def unseen_forward(name: str) -> str:
    """The warning for a step in which the watched module's forward never ran."""
    return (
        f"fxinspect: {name}'s forward did not run in the first training step, so no step was analysed and "
        "no MFU is logged; name the module the step calls (module=lambda pl_module: pl_module.model) or "
        "the inputs to analyse (inputs=lambda batch: ...)"
    )


def figures(flops: StepFlops, forwards: int, seconds: float, spec: Any) -> dict[str, float]:
    """A step's figures: ``forwards`` analysed forward-and-backwards in ``seconds``."""
    out = {
        PREFIX + "mfu": forwards * flops.mfu(seconds, spec),
        PREFIX + "hfu": forwards * flops.hfu(seconds, spec),
    }
    if flops.tokens is not None:
        out[PREFIX + "tokens_per_second"] = forwards * flops.tokens / seconds
    if flops.samples is not None:
        out[PREFIX + "samples_per_second"] = forwards * flops.samples / seconds
    return out


def merged(records: list[dict[str, float]]) -> dict[str, float]:
    """Several steps' records as one: the mean step time, and each rate over their whole time."""
    key = PREFIX + "step_time"
    seconds = sum(r[key] for r in records)
    out = {key: seconds / len(records)}
    for name in records[0]:
        if name != key:
            out[name] = sum(r[name] * r[key] for r in records) / seconds
    return out
