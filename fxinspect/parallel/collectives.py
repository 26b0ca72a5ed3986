"""Every collective a step issues, read at the dispatcher as the ops run.

``torch.distributed``'s calls reach the dispatcher as ``c10d`` ops (``dist.all_gather_
into_tensor`` is ``c10d._allgather_base_``, what FSDP2 issues) and DTensor's as
functional ones (``_c10d_functional.all_reduce``, what tensor parallelism issues); both
carry their tensors and their process group, so the kind, the group's size, the dtype
and the bytes are read off the call itself, on fake tensors as on real ones.
:class:`CollectiveLog` is a dispatch mode that keeps a
:class:`~fxinspect.records.communication.Collective` for each; :class:`CollectiveRecorder`
keeps it on for a whole run (:mod:`fxinspect.run.recorders`) and makes the report's
:class:`~fxinspect.records.communication.Communication` and each node's ``comm_bytes``.

Which tensor is "the tensor" of a collective: the gathered output of an all-gather,
the input of a reduce-scatter (the tensor that is reduced), the buffer of an
all-reduce or a broadcast, the input of an all-to-all or a send. The bytes on the wire
are the ring algorithm's (see :mod:`fxinspect.records.communication`).

Example
-------
>>> kind_of(torch.ops.c10d._allgather_base_.default), wire(4096, 4, "all_gather")
('all_gather', (3072, '(n-1)/n'))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..records.communication import Collective, Communication
from ..run.passes import PassResult
from ..run.program import InstrumentedProgram
from ..run.recorders import Recorder
from ..tensors import tensors_in
from .links import priced

__all__ = ["CollectiveLog", "CollectiveRecorder", "kind_of", "wire"]

# op name -> (kind, where its tensor is: "out" (returned), or the index of the argument)
_OPS: dict[str, tuple[str, Any]] = {
    "c10d._allgather_base_": ("all_gather", 0),
    "c10d.allgather_": ("all_gather", 0),
    "c10d.allgather_into_tensor_coalesced_": ("all_gather", 0),
    "c10d.allgather_coalesced_": ("all_gather", 0),
    "c10d._reduce_scatter_base_": ("reduce_scatter", 1),
    "c10d.reduce_scatter_": ("reduce_scatter", 1),
    "c10d.reduce_scatter_tensor_coalesced_": ("reduce_scatter", 1),
    "c10d.allreduce_": ("all_reduce", 0),
    "c10d.allreduce_coalesced_": ("all_reduce", 0),
    "c10d.alltoall_base_": ("all_to_all", 1),
    "c10d.alltoall_": ("all_to_all", 1),
    "c10d.broadcast_": ("broadcast", 0),
    "c10d.reduce_": ("reduce", 0),
    "c10d.gather_": ("gather", 1),
    "c10d.scatter_": ("scatter", 1),
    "c10d.send": ("send", 0),
    "c10d.recv_": ("recv", 0),
    "_c10d_functional.all_gather_into_tensor": ("all_gather", "out"),
    "_c10d_functional.all_gather_into_tensor_coalesced": ("all_gather", "out"),
    "_c10d_functional.reduce_scatter_tensor": ("reduce_scatter", 0),
    "_c10d_functional.reduce_scatter_tensor_coalesced": ("reduce_scatter", 0),
    "_c10d_functional.all_reduce": ("all_reduce", 0),
    "_c10d_functional.all_reduce_": ("all_reduce", 0),
    "_c10d_functional.all_reduce_coalesced": ("all_reduce", 0),
    "_c10d_functional.all_to_all_single": ("all_to_all", 0),
    "_c10d_functional.broadcast": ("broadcast", 0),
    "_c10d_functional_autograd.all_to_all_single": ("all_to_all", 0),
    "_c10d_functional_autograd.all_gather_into_tensor": ("all_gather", "out"),
    "_c10d_functional_autograd.reduce_scatter_tensor": ("reduce_scatter", 0),
}

# kind -> (numerator and denominator of the ring algorithm's factor as functions of n, its text)
_FACTORS: dict[str, tuple[Callable[[int], int], Callable[[int], int], str]] = {
    "all_gather": (lambda n: n - 1, lambda n: n, "(n-1)/n"),
    "reduce_scatter": (lambda n: n - 1, lambda n: n, "(n-1)/n"),
    "all_to_all": (lambda n: n - 1, lambda n: n, "(n-1)/n"),
    "all_reduce": (lambda n: 2 * (n - 1), lambda n: n, "2(n-1)/n"),
    "recv": (lambda n: 0, lambda n: 1, "0"),
}


def _name(func: Any) -> str:
    return f"{func.namespace}.{func._opname}"


def kind_of(func: Any) -> str | None:
    """The kind of collective ``func`` issues, or ``None`` for any other op."""
    found = _OPS.get(_name(func)) if isinstance(func, torch._ops.OpOverload) else None
    return found[0] if found is not None else None


def wire(tensor_bytes: int, n: int, kind: str) -> tuple[int, str]:
    """The bytes one rank sends for a collective of ``kind`` over ``n`` ranks, and the factor."""
    num, den, text = _FACTORS.get(kind, (lambda n: 1, lambda n: 1, "1"))
    return tensor_bytes * num(n) // den(n), text


def _group(func: Any, args: tuple, kwargs: dict) -> tuple[int, ...]:
    """The global ranks of the call's process group: a ``ProcessGroup`` argument (boxed
    as a script object at the dispatcher), or a functional collective's group name."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import ProcessGroup, _resolve_process_group

    group = None
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.ScriptObject) and "ProcessGroup" in a._type().qualified_name():
            group = ProcessGroup.unbox(a)
        elif isinstance(a, ProcessGroup):
            group = a
    names = [a.name for a in func._schema.arguments]
    if group is None and "group_name" in names:
        at = names.index("group_name")
        group = _resolve_process_group(args[at] if at < len(args) else kwargs["group_name"])
    return tuple(dist.get_process_group_ranks(group)) if group is not None else (dist.get_rank(),)


def _bytes(value: Any) -> tuple[int, str]:
    tensors = tensors_in(value)
    total = sum(t.numel() * t.element_size() for t in tensors)
    return total, str(tensors[0].dtype) if tensors else ""


class CollectiveLog(TorchDispatchMode):
    """Keeps a :class:`Collective` for every collective op that runs while it is on.

    ``where()`` says, at each call, ``(phase, module path, node)``: who issued it.
    """

    def __init__(self, where: Callable[[], tuple[str, str, str | None]]) -> None:
        super().__init__()
        self.where = where
        self.collectives: list[Collective] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        found = _OPS.get(_name(func)) if isinstance(func, torch._ops.OpOverload) else None
        if found is not None:
            kind, at = found
            tensor_bytes, dtype = _bytes(out if at == "out" else args[at])
            ranks = _group(func, args, kwargs)
            sent, factor = wire(tensor_bytes, len(ranks), kind)
            phase, module, node = self.where()
            self.collectives.append(
                Collective(kind, _name(func), phase, module, node, len(ranks), dtype, tensor_bytes, sent, factor, ranks)
            )
        return out


class CollectiveRecorder(Recorder):
    """Every collective of one run, issued by ``spec``'s rank (``where``: as for
    :class:`CollectiveLog`): the report's ``communication`` (priced on ``device``'s links
    when given) and per op node the bytes it sent (``comm_bytes``; 0 for every other
    node, so that modules sum them)."""

    def __init__(self, program: InstrumentedProgram, where: Callable, spec: Any, device: Any = None) -> None:
        self.program, self.spec, self.device = program, spec, device
        self.log = CollectiveLog(where)

    def running(self) -> CollectiveLog:
        return self.log

    def result(self, run: Any) -> PassResult:
        spec, collectives = self.spec, tuple(self.log.collectives)
        comm = Communication(spec.rank, spec.world_size, spec.mesh, collectives)
        if self.device is not None:
            comm = priced(comm, self.device)
        nodes = {name: {"comm_bytes": 0} for name in self.program.probe_points}
        for c in collectives:
            if c.node is not None:
                nodes[c.node]["comm_bytes"] += c.wire_bytes
        return PassResult(nodes=nodes, report={"communication": comm})
