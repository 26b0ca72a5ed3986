"""The training tools: analyse, stash and watch the user's own training steps.

* :func:`inspect` — the report of the model's call and its backward inside the user's
  own step (:mod:`.step`);
* :func:`track` — stash selected activations and the gradients reaching them
  (:mod:`.track`);
* :func:`watch` — histograms of outputs, gradients and parameters over training steps,
  their findings and heat maps (:mod:`.watch`, :mod:`.histograms`, :mod:`.findings`,
  :mod:`.plot`), written to TensorBoard or Weights & Biases as well with ``to=``
  (:class:`TensorBoardWriter`, :class:`WandbWriter`: :mod:`.writers`).

Each wraps the user's model without changing it and is reached as ``fxinspect.inspect``,
``fxinspect.track`` and ``fxinspect.watch``.
"""

from .step import Inspection, inspect
from .track import Event, Stash, Tracker, track
from .watch import Watch, watch
from .writers import TensorBoardWriter, WandbWriter

__all__ = [
    "Event",
    "Inspection",
    "Stash",
    "TensorBoardWriter",
    "Tracker",
    "WandbWriter",
    "Watch",
    "inspect",
    "track",
    "watch",
]
