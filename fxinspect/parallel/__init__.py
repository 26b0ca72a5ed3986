"""Parallel training, one rank at a time: FSDP2 and tensor parallelism on a fake world.

``fxinspect.analyze(model, inputs, backward=True, optimizer=..., parallel=Parallel...)``
runs the user's own parallel step (torch's ``fully_shard``, ``parallelize_module``, or
the user's ``apply(model, mesh)``) for one rank, on fake tensors over torch's ``fake``
process group: the report is that rank's, with the memory of its sharded parameters,
gradients and optimizer state, the gathered parameters while they live, its
activations, and every collective it issued (``report.communication``).

:mod:`.spec` says how the step is parallelised, :mod:`.group` makes the world,
:mod:`.step` runs the step and :mod:`.program` probes it op by op, :mod:`.collectives`
logs what it communicates, :mod:`.links` times it on a device's links and
:mod:`.ranks` says when other ranks hold other shards.
"""

from .spec import Parallel

__all__ = ["Parallel"]
