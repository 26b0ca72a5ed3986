"""fxinspect inside the training loops people already run: MFU and HFU from exact counts.

* :func:`step_flops` / :class:`StepFlops`: a step's model and hardware FLOPs, ``mfu()``
  and ``hfu()`` against a device's peak (:mod:`.flops`);
* :class:`StepMeter`: the plain-loop form, one ``meter.step()`` per iteration (:mod:`.meter`);
* ``fxinspect.integrations.lightning.MFUCallback`` (PyTorch Lightning) and
  ``fxinspect.integrations.hf_trainer.MFUCallback`` (Hugging Face ``Trainer``), imported
  from their modules: neither framework is imported by ``import fxinspect``
  (``pip install fxinspect[integrations]``).
"""

from .flops import StepFlops, peak_of, step_flops
from .meter import StepMeter

__all__ = ["StepFlops", "StepMeter", "peak_of", "step_flops"]
