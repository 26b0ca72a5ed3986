"""Kernel scratch: memory an op takes and gives back inside one call, learnt by probing it.

CPU kernels allocate working memory that never becomes a tensor of the program: a oneDNN
convolution reorders its input and weights into blocked layouts, its backward keeps
per-thread buffers, batch norm's and layer norm's backwards and the CPU flash attention
take temporaries. The allocator sees them, the storage model
(:class:`~fxinspect.run.memory.storages.StorageTracker`) does not. So each op that may take
some is *probed*: run alone, once, on fresh CPU tensors of the same shapes, strides and
dtypes, under the allocator's watch (:class:`~fxinspect.run.memory.allocator.AllocatorWatch`);
its scratch is the most it held above where it started, less what it returned
(``rise - growth``). The tracker adds that on top of what is alive, just after the
op's outputs, for an instant (a ``scratch`` allocation: born and freed at the op).

* Which ops: every ``aten`` (and ``torchao``) op that returns a new tensor and is not
  pointwise (views, in-place and ``out=`` ops, factories and elementwise kernels take none).
* Key: the op, every argument (a tensor by shape, strides, offset and dtype), the
  thread count (oneDNN's per-thread buffers grow with it) and the grad mode (a
  recurrent kernel returns its workspace only with gradients on); fresh tensors never
  require gradients, so a probe builds no graph. Learnt once per process, in
  one profiler session after the run, outside every dispatch mode: a later run with
  the same shapes probes nothing. ``learnt()`` is that table.
* On the meta device the scratch is this host's CPU's for the same op, shapes and dtypes
  (probed with CPU tensors when the op's tensors take at most :data:`PROBE_LIMIT` and its
  work at most :data:`PROBE_WORK`; none above, said in the notes). A GPU's kernels (cuDNN's workspace) take other amounts,
  and on CUDA none is modelled: the notes say both. An output a meta kernel leaves empty
  where the CPU kernel's is not (the LSTM's ``workspace``, kept for the backward) gets
  the CPU's bytes (:meth:`Scratch.output_bytes`); an op reading such an empty buffer is
  not probed on meta (its CPU kernel would read past its end), and the notes say so.

Example
-------
>>> import torch
>>> table = Scratch()
>>> op = torch.ops.aten.convolution.default
>>> key = table.key(op, (torch.ones(1, 8, 16, 16), torch.ones(8, 8, 3, 3), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), None)
>>> table.key(torch.ops.aten.relu.default, (torch.ones(4),), None) is None     # pointwise: none
True
>>> sizes = table.learn([key]); sizes[key] >= 0
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from ...rules import lookup
from . import probe

__all__ = ["NEGLIGIBLE", "PROBED_NAMESPACES", "PROBE_LIMIT", "PROBE_WORK", "Scratch", "learnt", "probe_threads"]

PROBE_LIMIT = 256 << 20
"""Bytes of an op's tensor arguments up to which a run on the meta device probes it on
this host's CPU: a virtual run allocates no more than one such op at a time (above it,
no scratch is assumed, and the notes say so)."""

PROBED_NAMESPACES = frozenset({"aten", "torchao"})
"""Whose ops are probed: aten's, and torchao's (``dequantize_affine`` runs as one op a
chain of casts and multiplies whose temporaries, twice the dense weight, no tensor of
the program holds). Other libraries' ops are not: theirs read values (torchvision's
``nms``, transformers' expert offsets) that fresh tensors would not have."""

NEGLIGIBLE = 256
"""Scratch under ``1 / NEGLIGIBLE`` of the op's own tensors (arguments and results, alive
while it runs) is taken as none: a reduction's per-thread partials (8 to 12 bytes beside
a tensor of megabytes) move no peak measurably, and they come and go with the thread
split rather than the shapes, which would make a step's memory not affine in the batch
where it otherwise is (a sweep then derives no point)."""

PROBE_WORK = 10**10
"""FLOPs of one op (as the rules count them) up to which a run on the meta device probes
it: a probe computes, and a large model's matmuls (a 70B layer's take 10**11 and more)
would cost seconds each on this CPU for a figure that is the CPU's, not the target's
(above it, no scratch is assumed, and the notes say so)."""

# (op, arguments, keywords, threads, grad mode) -> bytes of scratch; None: the probe failed.
# A memo of a pure function of its key (the kernels this process runs), like a
# functools.cache: it is read, never changed, by a run that finds its keys in it.
_LEARNT: dict[tuple, int | None] = {}
_OUTPUTS: dict[tuple, tuple[int, ...]] = {}  # key -> each output tensor's storage bytes on the CPU


_PROBE_THREADS: list[int] = []  # set in a forked sweep worker: its caller's thread count


def probe_threads(threads: int) -> None:
    """Key scratch by ``threads`` threads, whatever this process computes on: a sweep's
    forked worker runs on one thread, and its points must be the caller's. A probe it
    then needs runs in a fresh process (OpenMP starts no more threads in a forked child)."""
    _PROBE_THREADS[:] = [threads]


def learnt() -> dict[tuple, int | None]:
    """A copy of what this process has learnt: ``{key: bytes or None}``."""
    return dict(_LEARNT)


def _probed(func: Any) -> bool:
    """Whether ``func`` may take scratch: an op of :data:`PROBED_NAMESPACES` with tensor
    arguments that returns a new tensor and is not pointwise."""
    schema = getattr(func, "_schema", None)
    if schema is None or getattr(func, "namespace", None) not in PROBED_NAMESPACES or torch.Tag.pointwise in func.tags:
        return False
    if any(r.alias_info is not None for r in schema.returns):  # views, in-place and out= variants
        return False
    takes = any("Tensor" in str(a.type) for a in schema.arguments)
    returns = any("Tensor" in str(r.type) for r in schema.returns)
    return takes and returns


_OPAQUE = frozenset({"workspace", "reserve"})


def _empty_buffer(func: Any, args: tuple) -> bool:
    """Whether a kernel's opaque buffer argument (a recurrent layer's ``workspace``) is
    empty, as a meta kernel leaves it: the CPU kernel would read past its end."""
    named = zip(func._schema.arguments, args)
    return any(a.name in _OPAQUE and isinstance(v, torch.Tensor) and v.numel() == 0 for a, v in named)


class Scratch:
    """The scratch of one run's ops: :meth:`key` as each op runs, :meth:`learn` after."""

    def __init__(self, meta: bool = False) -> None:
        self.meta = meta  # (a run on fake tensors, whatever device they claim)
        self.threads = _PROBE_THREADS[0] if _PROBE_THREADS else torch.get_num_threads()
        self.resized: list[Any] = []  # ops (on meta) whose empty outputs were given the CPU's bytes
        self._probed: dict[Any, bool] = {}
        self._counts: tuple[int, int] | None = None  # (calls that take scratch, calls probed)
        self._failed: list[str] = []
        self._large: list[str] = []
        self._work: dict[tuple, int] = {}  # on meta: each key's FLOPs, which bound what is probed
        self.opaque: set[str] = set()  # ops not probed: given an empty workspace by a meta kernel

    def key(self, func: Any, args: tuple, kwargs: dict | None, out: Any = None) -> tuple | None:
        """The key of one op's call, or ``None`` when it takes no scratch to learn (``out``:
        its result, which prices the probe's work on meta)."""
        probed = self._probed.get(func)
        if probed is None:
            probed = self._probed[func] = _probed(func)
        if not probed:
            return None
        if self.meta and _empty_buffer(func, args):
            self.opaque.add(str(func))
            return None
        try:
            named = tuple(sorted((k, probe.spec(v)) for k, v in kwargs.items())) if kwargs else ()
            key = (func, probe.spec(args), named, self.threads, torch.is_grad_enabled())
        except probe.Unkeyable:
            return None
        if self.meta and key not in self._work:
            self._work[key] = _flops(func, args, kwargs, out)
        return key

    def learn(self, keys: Iterable[tuple]) -> dict[tuple, int]:
        """Bytes of scratch per key, probing the keys not learnt yet (all at once)."""
        wanted = set(keys)
        missing = [k for k in wanted if k not in _LEARNT]
        large = [
            k
            for k in missing
            if self.meta and (probe.tensor_bytes(k[1:3]) > PROBE_LIMIT or self._work.get(k, 0) > PROBE_WORK)
        ]
        _probe([k for k in missing if k not in large])
        self._failed = sorted({str(k[0]) for k in wanted if k not in large and _LEARNT.get(k, 0) is None})
        self._large = sorted({str(k[0]) for k in large})
        sizes = {k: _significant(k) for k in wanted}
        self._counts = (sum(1 for v in sizes.values() if v), len(wanted))
        return sizes

    @property
    def notes(self) -> list[str]:
        """What the run's scratch assumed, for ``MemoryRecord.notes``."""
        notes = []
        if self._counts is not None:
            where = "this host's CPU" + (" (the run is on meta)" if self.meta else "")
            notes.append(
                f"kernel scratch: {self._counts[0]} of {self._counts[1]} distinct op calls take scratch memory "
                f"inside the op on {where}, {self.threads} threads; the peak includes each at its op"
            )
        if self.meta:
            notes.append(
                "kernel scratch on meta is this CPU's for the same ops, shapes and dtypes (oneDNN); "
                "a GPU's kernels (cuDNN's workspace) take other amounts"
            )
        if self._large:
            notes.append(
                f"kernel scratch: op calls with tensors over {PROBE_LIMIT >> 20} MiB or over "
                f"{PROBE_WORK / 1e9:g} GFLOP not probed on meta "
                f"({', '.join(self._large[:4])}): none assumed for them"
            )
        if self._failed:
            notes.append(f"kernel scratch: could not probe {', '.join(self._failed[:4])}: none assumed")
        if self.resized:
            notes.append(
                f"on meta, {', '.join(map(str, self.resized))} returns an empty workspace (the meta kernel's); "
                "its bytes are the CPU kernel's, probed"
            )
        if self.opaque:
            notes.append(
                f"on meta, {', '.join(sorted(self.opaque))} reads a workspace the meta kernel left empty: "
                "its own scratch is not probed (none assumed)"
            )
        return notes

    def output_bytes(self, key: tuple, index: int) -> int:
        """Bytes of output ``index`` of the probed call ``key`` on the CPU (0 if unknown)."""
        sizes = _OUTPUTS.get(key, ())
        if 0 <= index < len(sizes) and sizes[index]:
            if key[0] not in self.resized:
                self.resized.append(key[0])
            return sizes[index]
        return 0


def _significant(key: tuple) -> int:
    """The scratch learnt for ``key``, or 0 when unknown or negligible (:data:`NEGLIGIBLE`)."""
    scratch = _LEARNT.get(key) or 0
    own = probe.tensor_bytes(key[1:3]) + sum(_OUTPUTS.get(key, ()))
    return scratch if scratch * NEGLIGIBLE >= own else 0


def _flops(func: Any, args: tuple, kwargs: dict | None, out: Any) -> int:
    """The FLOPs the rules give one call (0 where no rule prices it, or it fails)."""
    rule = lookup(func)
    if rule is None or out is None:
        return 0
    try:
        return rule(args, kwargs or {}, out).flops
    except Exception:  # (a rule that cannot read these arguments: the bytes bound still holds)
        return 0


def _probe(keys: list[tuple]) -> None:
    """Learn each key's scratch (and its outputs' bytes): probed here, or in a fresh
    process where this one cannot run the key's thread count (see :func:`probe_threads`)."""
    if not keys:
        return
    threads = keys[0][3]  # (a run's keys share its thread count)
    found = probe.measure(keys) if threads == torch.get_num_threads() else probe.measure_elsewhere(keys, threads)
    for key, (scratch, outputs) in zip(keys, found):
        _LEARNT[key] = scratch
        if outputs is not None:
            _OUTPUTS[key] = outputs
