"""Real parallel steps for the parallel tests: ``torch.distributed`` over gloo on loopback.

:func:`real_ranks` starts ``world`` processes that each run the step of one rank for
real (a warm-up step, then the measured one) and reports, per rank:

* ``peak``: the most bytes the step held, resident memory included (the rank's
  parameter shards, buffers, inputs, optimizer state), found by following every storage
  the step allocated, resized storages too (``StorageTracker`` under ``follow_resizes``),
  as the single-device memory tests measure a real step;
* ``params``, ``gradients``, ``optimizer_state``: the bytes of the storages the rank
  holds for them after the step (a shard that is a view of a padded buffer holds the
  whole buffer);
* ``collectives``: ``(kind, tensor bytes, group size)`` of every collective, counted by
  wrapping the Python calls that reach the process group (``dist.all_gather_single``
  and the like, which FSDP2 calls, and the functional collectives DTensor calls), not by
  the dispatcher fxinspect reads.

Every process ends by itself: a bounded gloo timeout, and the parent kills what is left
after ``timeout`` seconds.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def real_ranks(case: str, world: int, timeout: float = 240) -> list[dict[str, Any]]:
    """Run ``case`` (a name in :data:`CASES`) on ``world`` gloo processes; their reports."""
    return spawned_ranks(_rank_main, lambda rank, port, tmp: (case, rank, world, port, tmp), world, case, timeout)


def spawned_ranks(target, arguments, world: int, what: str, timeout: float) -> list[dict[str, Any]]:
    """``target(*arguments(rank, port, tmp))`` in ``world`` spawned processes, bounded in
    time (killed past ``timeout``); the JSON each rank wrote to ``tmp/<rank>.json``."""
    port = _free_port()
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=target, args=arguments(rank, port, tmp)) for rank in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout)
        for p in procs:
            if p.is_alive():
                p.kill()
        codes = [p.exitcode for p in procs]
        if any(c != 0 for c in codes):
            raise RuntimeError(f"the {world} {what} processes ended with codes {codes}")
        return [json.loads((Path(tmp) / f"{rank}.json").read_text()) for rank in range(world)]


def _local(t: Any) -> Any:
    return getattr(t, "_local_tensor", t) if isinstance(t, torch.Tensor) else t


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        value = _local(value)
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def _group_size(group: Any) -> int:
    from torch.distributed._functional_collectives import _resolve_group_name

    if group is None:
        return dist.get_world_size()
    if isinstance(group, dist.ProcessGroup):
        return group.size()
    if isinstance(group, str):
        return dist.distributed_c10d._resolve_process_group(group).size()
    return dist.distributed_c10d._resolve_process_group(_resolve_group_name(group)).size()


_DEPTH = [0]


def _counted(calls: list, kind: str, at: Any, fn: Any) -> Any:
    """``fn`` counting its calls: ``at`` is the index of its tensor parameter, or "out"."""
    import inspect

    signature = inspect.signature(fn)
    names = list(signature.parameters)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _DEPTH[0] += 1  # (a deprecated call that forwards to its successor is counted once)
        try:
            out = fn(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
        if _DEPTH[0]:
            return out
        given = signature.bind(*args, **kwargs).arguments
        tensor = out if at == "out" else given.get(names[at])
        calls.append((kind, _nbytes(tensor), _group_size(given.get("group"))))
        return out

    return wrapper


def _count_collectives(calls: list) -> None:
    """Wrap the calls that reach the process group (for the rest of this process)."""
    from torch.distributed import _functional_collectives as funcol

    for module, name, kind, at in (
        (dist, "all_gather_single", "all_gather", 0),
        (dist, "all_gather_into_tensor", "all_gather", 0),
        (dist, "reduce_scatter_single", "reduce_scatter", 1),
        (dist, "reduce_scatter_tensor", "reduce_scatter", 1),
        (dist, "all_reduce", "all_reduce", 0),
        (funcol, "all_reduce", "all_reduce", 0),
        (funcol, "all_gather_single", "all_gather", "out"),
        (funcol, "all_gather_tensor", "all_gather", "out"),
        (funcol, "reduce_scatter_single", "reduce_scatter", 0),
        (funcol, "reduce_scatter_tensor", "reduce_scatter", 0),
    ):
        fn = getattr(module, name, None)
        if fn is not None:
            setattr(module, name, _counted(calls, kind, at, fn))


def gpt2_like() -> tuple[torch.nn.Module, dict[str, Any], Any]:
    """A small GPT-2 (2 layers, 64 wide, tied embeddings), its inputs and loss."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).train()
    ids = torch.randint(0, 256, (2, 32))
    return model, {"input_ids": ids, "use_cache": False}, lambda out: out.logits.float().sum()


def mlp() -> tuple[torch.nn.Module, dict[str, Any], Any]:
    """A two-layer MLP (64 -> 256 -> 64), its inputs and loss."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    return model, {"input": torch.randn(8, 64)}, lambda out: out.sum()


class LinearStack(torch.nn.Module):
    """Two 10 x 10 layers in a ModuleList and a 10 -> 2 head: no dimension divides by 3."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(10, 10) for _ in range(2)])
        self.head = torch.nn.Linear(10, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x).relu()
        return self.head(x)


def linear_stack() -> tuple[torch.nn.Module, dict[str, Any], Any]:
    """:class:`LinearStack`, a batch of 4."""
    torch.manual_seed(0)
    return LinearStack(), {"input": torch.randn(4, 10)}, lambda out: out.sum()


def resnet18() -> tuple[torch.nn.Module, dict[str, Any], Any]:
    """torchvision's ResNet-18 (random weights, train mode: batch norm's statistics), a batch of 2."""
    import torchvision

    torch.manual_seed(0)
    return (
        torchvision.models.resnet18(weights=None).train(),
        {"input": torch.randn(2, 3, 64, 64)},
        lambda out: out.sum(),
    )


def llama_small() -> tuple[torch.nn.Module, dict[str, Any], Any]:
    """A small Llama (2 layers, 128 wide, 4 heads), a batch of 2 x 32 tokens."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=512,
    )
    ids = torch.randint(0, 512, (2, 32))
    return (
        LlamaForCausalLM(config).train(),
        {"input_ids": ids, "use_cache": False},
        lambda out: out.logits.float().sum(),
    )


def llama_checkpointed() -> tuple[torch.nn.Module, dict[str, Any], Any]:
    """The small Llama with activation checkpointing on every layer (transformers' own)."""
    model, inputs, loss_fn = llama_small()
    model.gradient_checkpointing_enable()
    return model, inputs, loss_fn


def llama_tp(model: torch.nn.Module, mesh: Any) -> None:
    """The Megatron plan on every decoder layer: q, k, v, gate, up column-wise; o, down row-wise."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {f"self_attn.{p}_proj": ColwiseParallel() for p in "qkv"} | {
        "self_attn.o_proj": RowwiseParallel(),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(),
    }
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)


def tp_plan() -> dict[str, Any]:
    """Column-wise then row-wise: the Megatron MLP."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {"0": ColwiseParallel(), "2": RowwiseParallel()}


def spec(case: str, world: int, rank: int = 0) -> Any:
    """The ``fxinspect.Parallel`` of a case."""
    import fxinspect

    if case in ("fsdp_gpt2", "fsdp_uneven"):
        return fxinspect.Parallel.fsdp(world, rank=rank)
    if case == "fsdp_llama_checkpointed":
        return fxinspect.Parallel.fsdp(world, rank=rank)
    if case == "fsdp_llama_mixed":  # parameters gathered in bfloat16, gradients reduced in float32
        from torch.distributed.fsdp import MixedPrecisionPolicy

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        return fxinspect.Parallel.fsdp(world, rank=rank, mp_policy=policy)
    if case == "tp_llama":
        return fxinspect.Parallel((("tp", world),), llama_tp, rank=rank, label="tensor parallel (Megatron plan)")
    if case == "fsdp_resnet18":
        import torchvision

        return fxinspect.Parallel.fsdp(world, blocks=torchvision.models.resnet.BasicBlock, rank=rank)
    return fxinspect.Parallel.tp(world, tp_plan(), rank=rank)


CASES = {
    "fsdp_gpt2": gpt2_like,
    "tp_mlp": mlp,
    "fsdp_resnet18": resnet18,
    "tp_llama": llama_small,
    "fsdp_llama_checkpointed": llama_checkpointed,
    "fsdp_llama_mixed": llama_small,
    "fsdp_uneven": linear_stack,
}


def _rank_main(case: str, rank: int, world: int, port: int, out_dir: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    from fxinspect.run.memory.resizes import follow_resizes
    from fxinspect.run.memory.scratch import Scratch
    from fxinspect.run.memory.storages import StorageTracker

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    try:
        model, inputs, loss_fn = CASES[case]()
        the_spec = spec(case, world, rank)
        mesh = init_device_mesh(
            "cpu", tuple(s for _, s in the_spec.mesh), mesh_dim_names=tuple(n for n, _ in the_spec.mesh)
        )
        the_spec.apply(model, mesh)
        opt = torch.optim.AdamW(model.parameters())
        args, kwargs = ((inputs["input"],), {}) if "input" in inputs else ((), inputs)

        def step() -> Any:
            out = model(*args, **kwargs)
            loss = loss_fn(out)
            loss.backward()
            opt.step()
            return out, loss

        step()  # the warm-up step: FSDP's lazy initialisation, the optimizer's state
        opt.zero_grad(set_to_none=True)
        calls: list = []
        _count_collectives(calls)
        state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        resident = [_local(t) for t in (*model.parameters(), *model.buffers(), *args, *kwargs.values(), *state)]
        resident = [t for t in resident if isinstance(t, torch.Tensor)]
        held = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in resident}
        with follow_resizes():
            tracker = StorageTracker(resident, Scratch())  # (kernel scratch probed, as analyze does)
            with tracker:
                kept = step()
            del kept
        tracker.settle()
        report = {"rank": rank, "peak": sum(held.values()) + tracker.peak, "collectives": calls}
        # what the rank holds after the step: its storages (a padded shard's whole storage)
        params = list(model.parameters())
        for key, tensors in (("params", params), ("gradients", [p.grad for p in params]), ("optimizer_state", state)):
            local = [_local(t) for t in tensors if t is not None]
            report[key] = sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in local}.values())
        (Path(out_dir) / f"{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()
