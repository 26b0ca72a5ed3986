"""PyTorch Lightning: ``Trainer(callbacks=[MFUCallback()])`` logs MFU, HFU, throughput and step time.

The callback drives a :class:`~fxinspect.integrations.meter.StepMeter` from Lightning's
hooks: the module's first training forward is analysed (on the inputs
``training_step`` calls it with), each batch from ``on_train_batch_start`` to
``on_train_batch_end`` (forward, backward and, on the last batch of an accumulation,
the optimizer step) is a step, and its figures go to the module's loggers through
``pl_module.log_dict`` (``fxinspect/mfu``, ``fxinspect/hfu``, ``fxinspect/step_time``,
``fxinspect/tokens_per_second``, ``fxinspect/samples_per_second``) at the steps whose
logs Lightning writes (``log_every_n_steps``), each the steps since the last one merged
(:func:`~fxinspect.integrations.meter.merged`); every step's record is in
``callback.meter.history``. :func:`fxinspect.watch` runs every ``watch_every``
steps (``callback.meter.watcher``).

Where ``training_step`` calls another module than the LightningModule's own forward,
name it: ``MFUCallback(module=lambda pl_module: pl_module.model)``; or give the inputs
from the batch: ``MFUCallback(inputs=lambda batch: batch["x"])`` (a dict is keyword
arguments). Needs ``lightning`` (``pip install fxinspect[integrations]``); the
``pytorch_lightning`` package's ``Callback`` is used when ``lightning`` is not installed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    try:
        from pytorch_lightning import Callback
    except ImportError as exc:
        raise ImportError(
            "fxinspect.integrations.lightning needs lightning: pip install fxinspect[integrations]"
        ) from exc

from .meter import StepMeter, merged, unseen_forward

__all__ = ["MFUCallback"]


class MFUCallback(Callback):
    """Per-step MFU, HFU, throughput and time, and ``watch``, in a Lightning ``Trainer``.

    ``module(pl_module)``: the module to analyse and watch (default: ``pl_module``).
    ``inputs(batch)``: the analysed inputs (default: what the module's first training
    forward is called with). Other keywords as :class:`StepMeter`'s.
    """

    def __init__(
        self,
        *,
        module: Callable[[Any], torch.nn.Module] | None = None,
        inputs: Callable[[Any], Any] | None = None,
        device_spec: Any = None,
        watch_every: int | None = 100,
        watch_options: dict | None = None,
        loss_fn: Callable[[Any], torch.Tensor] | None = None,
        analysis: dict | None = None,
    ) -> None:
        super().__init__()
        self.module, self.inputs = module, inputs
        self.options = dict(device_spec=device_spec, watch_every=watch_every, watch_options=watch_options)
        self.options.update(loss_fn=loss_fn, analysis=analysis)  # (StepMeter's keywords, made when training starts)
        self.meter: StepMeter | None = None
        self._tried = False  # (inputs= given: the first batch analysed, or its failure warned)
        self._since_log: list[dict[str, float]] = []
        self._logged = True

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        target = pl_module if self.module is None else self.module(pl_module)
        self.meter = StepMeter(target, capture=self.inputs is None, **self.options)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.meter.flops is None and self.inputs is not None and not self._tried:
            self._tried = True
            given = self.inputs(batch)
            if isinstance(given, dict):
                self.meter.try_analyse((), given)
            else:
                self.meter.try_analyse(given)
        # whether Lightning writes this step's logs (asked before the step, as its own
        # connector allows): the steps between are merged into the one logged
        connector = getattr(trainer, "_logger_connector", None)
        self._logged = getattr(connector, "should_update_logs", True)
        self.meter.begin()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        record = self.meter.end()
        if self.meter.flops is None:
            if len(self.meter.history) == 1 and self.meter.pending:
                warnings.warn(unseen_forward(type(self.meter.model).__name__), stacklevel=2)
            return
        self._since_log.append(record)
        if self._logged:  # (a call of log_dict costs about a millisecond: once per written log)
            figures, self._since_log = merged(self._since_log), []
            pl_module.log_dict(figures, on_step=True, on_epoch=False, batch_size=self.meter.flops.samples)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.meter is not None:
            self.meter.close()
