"""Parallel training, one rank: FSDP2 and tensor parallelism, on one CPU process.

Run: ``python examples/parallel_training.py [OUT_DIR]`` (writes the PNG named below).

``fxinspect.analyze(model, inputs, backward=True, optimizer=..., parallel=...)`` runs
one rank's training step as your script would, with torch's own ``fully_shard`` and
``parallelize_module``, on fake tensors over torch's ``fake`` process group: no GPU, no
other process and no weight is needed, whatever the world size. The report is that
rank's: its memory (sharded parameters, gradients and optimizer state, FSDP's gathered
parameters while they live, the local activations) and every collective it issued
(``report.communication``), with the bytes each rank sends by the ring algorithm and,
with a ``device_spec``, the time they keep the link busy.

``Parallel.fsdp(n)`` shards each layer of a ``ModuleList`` and the root;
``Parallel.tp(n, plan)`` applies a ``parallelize_module`` plan; ``Parallel(mesh, apply)``
takes your own ``apply(model, mesh)`` on a 1-D or 2-D mesh, as below. The figures were
checked against real runs over gloo on 2, 3 and 4 processes (``tests/test_parallel.py``).
Where a dimension does not divide among the ranks, the report's notes name the ranks
whose shards differ and what differs: FSDP2 pads each shard to the largest (a
``Linear(10, 10)`` weight over 3 ranks: 4, 4 and 2 rows, each rank allocating 4), so
only the optimizer state, made like the unpadded shard, differs; analyse such a rank
with ``Parallel.fsdp(n, rank=k)``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import fxinspect


def fsdp_and_tp(dp: int, tp: int) -> fxinspect.Parallel:
    """FSDP over ``dp`` ranks of tensor-parallel groups of ``tp`` (the Megatron plan)."""

    def apply(model: torch.nn.Module, mesh) -> None:
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        plan = {f"self_attn.{p}_proj": ColwiseParallel() for p in "qkv"} | {
            "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(),
            "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(),
        }
        for layer in model.model.layers:
            parallelize_module(layer, mesh["tp"], plan)
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])

    return fxinspect.Parallel((("dp", dp), ("tp", tp)), apply, label=f"FSDP {dp} x TP {tp}")


def main(out_dir: Path = Path(".")) -> str:
    config = LlamaConfig(
        hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8
    )
    torch.manual_seed(0)
    with torch.device("meta"):  # nothing allocated: one process stands in for any rank
        model = LlamaForCausalLM(config).train()
        ids = torch.zeros(2, 512, dtype=torch.long)  # one rank's batch
    step = dict(
        backward=True,
        optimizer=torch.optim.AdamW,
        loss_fn=lambda out: out.logits.float().sum(),
        device_spec="h100-sxm",  # (collectives priced on its NVLink)
    )
    lines = []
    for spec in (fxinspect.Parallel.fsdp(8), fsdp_and_tp(2, 4)):
        report = fxinspect.analyze(model, {"input_ids": ids, "use_cache": False}, parallel=spec, **step)
        m = report.memory
        lines.append(f"{spec.label}, rank {spec.rank} of {spec.world_size}:")
        lines.append(
            f"  parameters {m.params:,} B, gradients {m.gradients:,} B, AdamW state {m.optimizer_state:,} B; "
            f"step peak {m.total_peak:,} B"
        )
        lines.append(report.communication_table())
        lines.append("")
    report.plot(out_dir / "llama_fsdp_tp_communication.png", depth=2, color_by="communication")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")))
