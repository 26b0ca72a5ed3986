"""A real tensor-parallel decode step for the generation tests: gloo processes on loopback.

:func:`real_decode_ranks` starts ``world`` processes; each parallelises the tiny Llama of
``tests/generation_zoo.py`` with ``fxinspect.Parallel.tp(world)`` (the model's own plan),
fills its cache with the model's own prefill on ``context`` tokens (``decode_inputs`` on
the real, parallelised model: each rank caches its own key/value heads), then runs one
decode step under ``torch.no_grad()`` (as ``generate()`` does) and reports, per rank:

* ``kv``: the bytes of its cache's tensors before the step;
* ``peak``: the allocator's peak over the step (``AllocatorWatch``: the CPU profiler's
  allocations), the step owning its cache as in ``generate()``: the cache object is the
  only holder of clones of its tensors made inside the watch, so the old keys and values
  are freed as the step replaces them (as ``tests/test_generation_inputs.py`` measures one device);
* ``collectives``: ``(kind, tensor bytes, group size)`` of each collective, counted at
  the Python calls that reach the process group (:mod:`distributed_reference`).

Every process ends by itself: a bounded gloo timeout, and the parent kills what is left.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist


def real_decode_ranks(
    world: int, batch: int, context: int, cache: str | None = None, timeout: float = 240
) -> list[dict[str, Any]]:
    """One decode step at ``context`` cached tokens for ``batch`` sequences on ``world``
    ranks (``cache``: as ``decode_inputs`` takes it, ``"static"`` or ``None``)."""
    from distributed_reference import spawned_ranks

    arguments = lambda rank, port, tmp: (rank, world, batch, context, cache, port, tmp)  # noqa: E731
    return spawned_ranks(_rank_main, arguments, world, "decode", timeout)


def tiny_llama() -> torch.nn.Module:
    """The zoo's Llama (grouped-query: 4 heads, 2 key/value heads of 16), seeded."""
    from generation_zoo import families

    torch.manual_seed(0)
    return next(f for f in families("build") if f.name == "llama").build()


def _rank_main(rank: int, world: int, batch: int, context: int, cache: Any, port: int, out_dir: str) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from distributed_reference import _count_collectives
    from torch.distributed.device_mesh import init_device_mesh

    import fxinspect
    from fxinspect.capture.states import held_states, state_tensors
    from fxinspect.run.memory.allocator import AllocatorWatch
    from fxinspect.serving.inputs import decode_inputs

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    try:
        model = tiny_llama()
        fxinspect.Parallel.tp(world).apply(model, init_device_mesh("cpu", (world,), mesh_dim_names=("tp",)))
        inputs = decode_inputs(
            model, batch, context, cache=cache
        )  # (the real model's own prefill fills the rank's cache)
        filled = inputs.get("past_key_values", inputs.get("cache"))
        held = [t for _, t in state_tensors({"c": filled})]
        kv = sum(t.numel() * t.element_size() for t in held)
        del held
        calls: list = []
        _count_collectives(calls)
        watch = AllocatorWatch(torch.device("cpu"))
        with torch.no_grad(), watch:
            with held_states((), inputs) as (_, owned):  # (the cache object the only holder of clones)
                model(**owned)
                del owned
        report = {"rank": rank, "kv": kv, "peak": watch.peak, "collectives": calls}
        (Path(out_dir) / f"{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()
