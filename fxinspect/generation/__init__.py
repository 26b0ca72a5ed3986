"""Generation: the prefill and decode steps of a language model, analysed from its own graph.

:func:`prefill_inputs` and :func:`decode_inputs` give the keyword arguments of the
model's own prefill call and of one decode step (with its own cache), as ``generate()``
passes them; ``fxinspect.analyze(model, decode_inputs(model, 8, 1024))`` analyses the step.
"""

from __future__ import annotations

from .inputs import decode_inputs, prefill_inputs

__all__ = ["decode_inputs", "prefill_inputs"]
