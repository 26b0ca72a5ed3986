"""Generation and serving: prefill and decode steps analysed from the model's own graph.

:func:`generation` analyses a model generating after a prompt (``fxinspect.generation``):
the prefill and decode reports, the KV cache, exact cost curves, TTFT/TPOT and what fits.
:func:`prefill_inputs` and :func:`decode_inputs` give the keyword arguments of the
model's own prefill call and of one decode step (with its own cache), as ``generate()``
passes them; ``fxinspect.analyze(model, decode_inputs(model, 8, 1024))`` analyses the step.
"""

from __future__ import annotations

from .generation import Generation, generation
from .inputs import decode_inputs, prefill_inputs
from .records import DecodeCost, GenerationMemory

__all__ = ["DecodeCost", "Generation", "GenerationMemory", "decode_inputs", "generation", "prefill_inputs"]
