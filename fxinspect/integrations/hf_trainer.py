"""Hugging Face ``Trainer``: ``callbacks=[MFUCallback()]`` logs MFU, HFU, throughput and step time.

The callback drives a :class:`~fxinspect.integrations.meter.StepMeter` from the
``Trainer``'s events: the model's first training forward is analysed on the batch the
Trainer gives it (``model(**inputs)``, labels and all: the analysed loss is the model's
own), and each optimizer step, ``on_step_begin`` to ``on_step_end``, is a step (its
FLOPs count every micro-batch of a gradient accumulation). At each of the Trainer's logs
(``logging_steps``) the steps since the last one are added to ``logs`` and to that entry
of ``state.log_history``: ``fxinspect/step_time`` their mean, and ``fxinspect/mfu``,
``fxinspect/hfu``, ``fxinspect/tokens_per_second``, ``fxinspect/samples_per_second``
over their whole time (``sum(value × seconds) / sum(seconds)``). Every step's own record
is in ``callback.meter.history``. :func:`fxinspect.watch` runs every ``watch_every``
steps (``callback.meter.watcher``).

The Trainer calls its reporting callbacks (TensorBoard, W&B, ...) before the ones given
to it; for them to receive these figures too, put this one first:
``trainer.callback_handler.callbacks.insert(0, MFUCallback())``. Needs ``transformers``
(``pip install fxinspect[integrations]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

try:
    from transformers import TrainerCallback
except ImportError as exc:
    raise ImportError(
        "fxinspect.integrations.hf_trainer needs transformers: pip install fxinspect[integrations]"
    ) from exc

from .meter import StepMeter, merged

__all__ = ["MFUCallback"]


class MFUCallback(TrainerCallback):
    """Per-step MFU, HFU, throughput and time, and ``watch``, in a Hugging Face ``Trainer``.

    Keywords as :class:`StepMeter`'s.
    """

    def __init__(
        self,
        *,
        device_spec: Any = None,
        watch_every: int | None = 100,
        watch_options: dict | None = None,
        loss_fn: Callable[[Any], torch.Tensor] | None = None,
        analysis: dict | None = None,
    ) -> None:
        self.options = dict(device_spec=device_spec, watch_every=watch_every, watch_options=watch_options)
        self.options.update(loss_fn=loss_fn, analysis=analysis)  # (StepMeter's keywords, made when training starts)
        self.meter: StepMeter | None = None
        self._since_log: list[dict[str, float]] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self.meter = StepMeter(model, **self.options)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.meter.begin()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        record = self.meter.end()
        if record is not None and self.meter.flops is not None:
            self._since_log.append(record)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if not self._since_log or logs is None:
            return
        figures = merged(self._since_log)
        self._since_log = []
        logs.update(figures)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(figures)  # (the Trainer kept a copy of logs before this call)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.meter is not None:
            self.meter.close()
