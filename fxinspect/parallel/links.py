"""How long a rank's collectives take on a device's links: bytes sent over bandwidth.

The time model's device spec (a :class:`~fxinspect.records.DeviceSpec`, the one that
prices the step's ops: :mod:`fxinspect.timemodel`) names its links' bandwidths in
``interconnect``: the presets give the datasheet's NVLink (or Infinity Fabric) total,
both directions together, and PCIe. A ring collective sends ``wire_bytes`` from each
rank over one direction of its link, so its time here is ``wire_bytes`` over half the
datasheet's figure. A group whose ranks all sit in one node (``ranks_per_node``
consecutive ranks, 8 by default) uses the node's fastest link; a group that spans nodes
is as fast as the network, which no datasheet preset gives: pass a spec with
``interconnect={"network": bytes_per_second}`` (one direction, per GPU: 400 Gb/s
InfiniBand is ``50e9``), otherwise those collectives have no predicted time, and the
note says so. Latency per message, protocol overhead and overlap with compute are left
out: these are lower bounds on the time the wire is busy.

Example
-------
>>> from fxinspect.records import Collective, Communication
>>> from fxinspect.timemodel import get
>>> c = Collective("all_gather", "c10d._allgather_base_", "forward", "", None, 8, "torch.bfloat16", 8 * 10**9, 7 * 10**9, "(n-1)/n", tuple(range(8)))
>>> priced(Communication(0, 8, (("dp", 8),), (c,)), get("h100-sxm")).predicted_time   # 7 GB at 450 GB/s
0.015555555555555555
"""

from __future__ import annotations

import dataclasses

from ..records import DeviceSpec
from ..records.communication import Communication

__all__ = ["priced"]

_NODE_LINKS = ("nvlink", "infinity_fabric", "pcie")  # fastest first


def priced(comm: Communication, spec: DeviceSpec, ranks_per_node: int = 8) -> Communication:
    """``comm`` with each collective's predicted seconds on ``spec``'s links."""
    inside = next(((name, spec.interconnect[name] / 2) for name in _NODE_LINKS if name in spec.interconnect), None)
    network = spec.interconnect.get("network")
    timed = []
    across = False  # whether some group spans nodes
    for c in comm.collectives:
        one_node = len({r // ranks_per_node for r in c.ranks}) <= 1
        across = across or not one_node
        rate = (inside[1] if inside else None) if one_node else network
        timed.append(dataclasses.replace(c, predicted_time=c.wire_bytes / rate if rate else None))
    said = [f"{spec.name}: groups within a node of {ranks_per_node} ranks"]
    said.append(f"on {inside[0]} at {inside[1] / 1e9:g} GB/s a direction" if inside else "have no link in the spec")
    if across:
        said.append(
            f"groups across nodes on the network at {network / 1e9:g} GB/s"
            if network
            else "groups across nodes not predicted (the spec has no 'network' bandwidth)"
        )
    note = "; ".join(said) + "; ring algorithms, no latency or overlap: a lower bound"
    return dataclasses.replace(comm, collectives=tuple(timed), link_note=note)
