"""One op run alone on fresh CPU tensors, under the allocator's watch: what it takes.

:mod:`.scratch` keys each op call by its arguments' specs (:func:`spec`: a tensor by
shape, strides, offset and dtype) and learns its scratch from :func:`measure`: the most
the op held above where it started, less what it returned. A process that cannot run
the key's thread count (a forked sweep worker, on one thread) measures in a fresh one
(:func:`measure_elsewhere`).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import torch

from ...tensors import forked_rng, tensors_in
from .allocator import AllocatorWatch

__all__ = ["ProbedTensor", "Unkeyable", "fresh", "measure", "measure_elsewhere", "resolved", "spec", "tensor_bytes"]


class ProbedTensor(NamedTuple):
    """A tensor argument as the key holds it: all a fresh one needs."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype

    @property
    def span(self) -> int:
        """Elements of storage its strides reach (0 when empty)."""
        if any(s == 0 for s in self.shape):
            return 0
        return self.offset + 1 + sum((n - 1) * st for n, st in zip(self.shape, self.stride))


class Unkeyable(Exception):
    """An argument the key cannot hold (a symbolic size, an unhashable object)."""


def spec(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.layout is not torch.strided or value.is_nested:
            raise Unkeyable
        shape, stride = tuple(value.shape), value.stride()
        if not all(type(n) is int for n in (*shape, *stride)):
            raise Unkeyable  # (a symbolic size)
        return ProbedTensor(shape, stride, value.storage_offset(), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(spec(v) for v in value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise Unkeyable
    if isinstance(value, torch.device):
        return torch.device("cpu")  # (probed on this host's CPU, whatever the run's device)
    try:
        hash(value)
    except TypeError as e:
        raise Unkeyable from e
    return value


def fresh(spec: Any) -> Any:
    """An argument made from its spec: a CPU tensor, of zeros where its values may index
    (integers, booleans); a floating one is left unwritten (values do not change what a
    kernel allocates, and pages only read are never resident: a large probe costs RSS
    only for what it writes)."""
    if isinstance(spec, ProbedTensor):
        unwritten = spec.dtype.is_floating_point or spec.dtype.is_complex
        base = (torch.empty if unwritten else torch.zeros)(spec.span, dtype=spec.dtype, device="cpu")
        return base.as_strided(spec.shape, spec.stride, spec.offset)
    if isinstance(spec, tuple):
        return [fresh(s) for s in spec]
    return spec


def tensor_bytes(spec: Any) -> int:
    if isinstance(spec, ProbedTensor):
        return spec.span * spec.dtype.itemsize
    if isinstance(spec, tuple):
        return sum(tensor_bytes(s) for s in spec)
    return 0


def measure(keys: list[tuple]) -> list[tuple[int | None, tuple[int, ...] | None]]:
    """Run each key's op once on fresh CPU tensors under one allocator watch: its
    scratch (``None`` where it failed) and its outputs' storage bytes."""
    from torch.utils._python_dispatch import _disable_current_modes

    watch = AllocatorWatch(torch.device("cpu"))
    outputs: dict[int, tuple[int, ...]] = {}
    failed: set[int] = set()
    with _disable_current_modes(), forked_rng(), watch:  # (dropout's probe draws: not from the user's stream)
        for i, (func, args, kwargs, _, grad) in enumerate(keys):
            try:
                made, named = fresh(args), {k: fresh(v) for k, v in kwargs}
            except (RuntimeError, TypeError, ValueError):
                failed.add(i)
                continue
            watch.enter(str(i))
            try:
                with torch.set_grad_enabled(grad):  # (a kernel may keep a workspace for the backward only then)
                    out = func(*made, **named)
                outputs[i] = tuple(t.untyped_storage().nbytes() for t in tensors_in(out))
            except Exception:  # a kernel that refuses zeros (or these strides): nothing learnt
                out = None
                failed.add(i)
            finally:
                watch.exit(str(i))
            del out, made, named  # (freed outside the probe's range: its growth is its outputs)
    rises, growths = watch.rise, watch.growth
    return [
        (None if i in failed else max(0, rises.get(str(i), 0) - growths.get(str(i), 0)), outputs.get(i))
        for i in range(len(keys))
    ]


def measure_elsewhere(keys: list[tuple], threads: int) -> list[tuple[int | None, tuple[int, ...] | None]]:
    """:func:`measure` in a fresh Python process on ``threads`` threads (a forked sweep
    worker computes on one: OpenMP starts no more threads in a forked child)."""
    import pickle
    import subprocess
    import sys

    named = [(str(k[0].namespace), k[0]._schema.name.split("::")[-1], k[0]._overloadname, *k[1:]) for k in keys]
    code = (
        "import pickle, sys, torch; from fxinspect.run.memory import probe; "
        f"torch.set_num_threads({int(threads)}); "
        "sys.stdout.buffer.write(pickle.dumps(probe.measure(probe.resolved(pickle.load(sys.stdin.buffer)))))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], input=pickle.dumps(named), capture_output=True, env=env, check=True
        )
        return pickle.loads(done.stdout)
    except (OSError, subprocess.CalledProcessError, pickle.UnpicklingError):  # (none learnt: said as not probed)
        return [(None, None)] * len(keys)


def resolved(named: list[tuple]) -> list[tuple]:
    """Keys sent to a fresh process, their ops looked up again (an op is not pickled)."""
    return [(getattr(getattr(getattr(torch.ops, ns), op), overload), *rest) for ns, op, overload, *rest in named]
