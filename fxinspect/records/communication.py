"""Records of communication: every collective one rank's training step issued.

A collective moves ``tensor_bytes`` (the whole tensor: an all-gather's output, a
reduce-scatter's input, an all-reduce's buffer) among ``group_size`` ranks. What one
rank puts on the wire depends on the algorithm; ``wire_bytes`` is the ring algorithm's,
as NCCL and gloo run these collectives, with the factor stated in ``factor``:
``(n-1)/n`` of the tensor for an all-gather, a reduce-scatter and an all-to-all,
``2(n-1)/n`` for an all-reduce (a reduce-scatter and an all-gather), the whole tensor
for a send, a broadcast or a point-to-point receive.

Example
-------
>>> c = Collective("all_gather", "c10d._allgather_base_", "forward", "layers.0", "empty", 4, "torch.float32", 4096, 3072, "(n-1)/n")
>>> c.wire_bytes / c.tensor_bytes
0.75
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Collective", "Communication"]


@dataclass(frozen=True)
class Collective:
    """One collective call of the step, as one rank issued it."""

    kind: str  # all_gather, reduce_scatter, all_reduce, all_to_all, broadcast, send, recv, ...
    op: str  # the op that issued it ("c10d._allgather_base_", "_c10d_functional.all_reduce")
    phase: str  # forward, backward
    module_path: str  # the module it was issued for ("" for the root)
    node: str | None  # the fx node running when it was issued (forward), or whose backward ran
    group_size: int
    dtype: str
    tensor_bytes: int
    wire_bytes: int  # sent by this rank, by the ring algorithm (see ``factor``)
    factor: str  # wire_bytes / tensor_bytes, as a formula of the group size n
    ranks: tuple[int, ...] = ()  # the group's global ranks
    predicted_time: float | None = None  # seconds on the device spec's link (see Communication.link_note)


@dataclass(frozen=True)
class Communication:
    """What one rank of a parallel step communicated, and on which mesh."""

    rank: int
    world_size: int
    mesh: tuple[tuple[str, int], ...]  # (dimension name, size), outermost first
    collectives: tuple[Collective, ...]
    link_note: str = ""  # how predicted_time was found, when a device spec was given

    @property
    def predicted_time(self) -> float | None:
        """The seconds of every collective on the spec's links, back to back (no overlap
        with compute is assumed); ``None`` without a device spec or a link for some."""
        times = [c.predicted_time for c in self.collectives]
        return None if not times or None in times else sum(times)

    @property
    def tensor_bytes(self) -> int:
        """The bytes of every collective's tensor, summed."""
        return sum(c.tensor_bytes for c in self.collectives)

    @property
    def wire_bytes(self) -> int:
        """The bytes this rank sent in the step (ring algorithms)."""
        return sum(c.wire_bytes for c in self.collectives)

    def by_kind(self) -> dict[tuple[str, str], tuple[int, int, int]]:
        """Per ``(phase, kind)``: calls, tensor bytes, wire bytes."""
        out: dict[tuple[str, str], tuple[int, int, int]] = {}
        for c in self.collectives:
            calls, tensor, wire = out.get((c.phase, c.kind), (0, 0, 0))
            out[(c.phase, c.kind)] = (calls + 1, tensor + c.tensor_bytes, wire + c.wire_bytes)
        return out
