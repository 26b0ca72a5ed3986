"""Distributed ops: collectives, FSDP's copies and profiler ranges.

* Collectives (``c10d.*``, ``_c10d_functional.*``) and ``wait_tensor`` are free here,
  for :attr:`~.registry.FreeReason.COMMUNICATION`: their bytes cross the network and
  are reported per collective in ``report.communication``
  (:mod:`fxinspect.parallel.collectives`), with the algorithm's factor; a reduction's
  additions happen inside the collective and are not counted as the rank's FLOPs.
* FSDP2's own ops copy parameters and gradients into and out of its flat communication
  buffers (``fsdp.all_gather_copy_in``, ``fsdp.split_with_sizes_copy``,
  ``fsdp.chunk_cat``): movement, the default bytes, no arithmetic.
* ``profiler._record_function_*`` (FSDP marks its phases with them) open and close a
  profiler's range: free, :attr:`~.registry.FreeReason.MARKER`.

The namespaces exist once ``torch.distributed`` is loaded; the rules are registered
the first time one of their ops is priced.
"""

from __future__ import annotations

import torch

from .registry import Cost, FreeReason, register_free, register_namespace_loader, register_rule, registered_ops

_COLLECTIVES = {
    "c10d": (
        "_allgather_base_",
        "allgather_",
        "allgather_coalesced_",
        "allgather_into_tensor_coalesced_",
        "_reduce_scatter_base_",
        "reduce_scatter_",
        "reduce_scatter_tensor_coalesced_",
        "allreduce_",
        "allreduce_coalesced_",
        "alltoall_",
        "alltoall_base_",
        "broadcast_",
        "reduce_",
        "gather_",
        "scatter_",
        "send",
        "recv_",
        "recv_any_source_",
        "barrier",
        "monitored_barrier_",
    ),
    "_c10d_functional": (
        "all_gather_into_tensor",
        "all_gather_into_tensor_coalesced",
        "all_gather_into_tensor_out",
        "reduce_scatter_tensor",
        "reduce_scatter_tensor_coalesced",
        "all_reduce",
        "all_reduce_",
        "all_reduce_coalesced",
        "all_reduce_coalesced_",
        "all_to_all_single",
        "broadcast",
        "broadcast_",
        "wait_tensor",
    ),
    "_c10d_functional_autograd": ("all_to_all_single", "reduce_scatter_tensor", "all_gather_into_tensor"),
}
_FSDP_COPIES = ("all_gather_copy_in", "split_with_sizes_copy", "chunk_cat")
_MARKERS = ("_record_function_enter", "_record_function_enter_new", "_record_function_exit")


def _packets(namespace: str, names: tuple[str, ...]) -> list:
    ns = getattr(torch.ops, namespace)
    found = []
    for name in names:
        try:
            found.append(getattr(ns, name))
        except (AttributeError, RuntimeError):  # (an op this build of torch does not have)
            continue
    return [p for p in found if p not in registered_ops()]


def _register(namespace: str) -> None:
    if namespace in _COLLECTIVES:
        register_free(*_packets(namespace, _COLLECTIVES[namespace]), reason=FreeReason.COMMUNICATION)
    elif namespace == "fsdp":
        copies = _packets("fsdp", _FSDP_COPIES)
        if copies:
            register_rule(*copies)(_copy)
    elif namespace == "profiler":
        register_free(*_packets("profiler", _MARKERS), reason=FreeReason.MARKER)


def _copy(args, kwargs, out):
    """No arithmetic; the default bytes."""
    return Cost()


for _namespace in (*_COLLECTIVES, "fsdp", "profiler"):
    register_namespace_loader(_namespace, lambda namespace=_namespace: _register(namespace))
