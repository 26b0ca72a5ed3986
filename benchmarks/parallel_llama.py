"""One rank of Llama-2-70B's training step, parallel, on the meta device (issue 23, item 4).

Run: ``python benchmarks/parallel_llama.py [--layers 80] [--layout fsdp|2d|both]``.

``fsdp``: FSDP2 over 64 ranks (``fully_shard`` per decoder layer and on the root).
``2d``: FSDP over 8 ranks x tensor parallel over 8 (the Megatron plan: q, k, v, gate
and up column-wise, o and down row-wise; then ``fully_shard`` per layer on the data
dimension). AdamW, batch 1 per rank, sequence 2048, fp32 as the model is built.

Prints the wall time and the process's peak resident memory, the rank's memory and
communication, and beside them the closed forms: the parameters', gradients' and
AdamW's shards (P x 4 B / n, the same, 2 x that), and per step the all-gathers (P x 4 B
for the forward, the same again in the backward less the root, which FSDP2 keeps
gathered) and the reduce-scatter (P x 4 B), each sent at (n-1)/n.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch
from llama_training_meta import SIZES, closed_form_params, meta_model

import fxinspect
from fxinspect.formatting import units

_PLAN = {
    "self_attn.q_proj": "col",
    "self_attn.k_proj": "col",
    "self_attn.v_proj": "col",
    "self_attn.o_proj": "row",
    "mlp.gate_proj": "col",
    "mlp.up_proj": "col",
    "mlp.down_proj": "row",
}


def fsdp_2d(dp: int, tp: int) -> fxinspect.Parallel:
    """FSDP over ``dp`` ranks of tensor-parallel groups of ``tp``."""

    def apply(model: torch.nn.Module, mesh) -> None:
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        plan = {k: ColwiseParallel() if v == "col" else RowwiseParallel() for k, v in _PLAN.items()}
        for layer in model.model.layers:
            parallelize_module(layer, mesh["tp"], plan)
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])

    return fxinspect.Parallel((("dp", dp), ("tp", tp)), apply, label=f"FSDP {dp} x TP {tp} (Megatron plan per layer)")


def run(layers: int, spec: fxinspect.Parallel, dp: int) -> None:
    hidden, intermediate, _, heads, kv_heads = SIZES["70b"]
    model = meta_model("70b", layers)
    ids = torch.zeros(1, 2048, dtype=torch.long, device="meta")
    start = time.perf_counter()
    report = fxinspect.analyze(
        model,
        {"input_ids": ids, "use_cache": False},
        backward=True,
        optimizer=torch.optim.AdamW,
        loss_fn=lambda out: out.logits.float().sum(),
        parallel=spec,
    )
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    m, comm = report.memory, report.communication
    params = closed_form_params(hidden, intermediate, layers, heads, kv_heads)
    shard = params * 4 / spec.world_size
    print(f"\n{spec.label}, {layers} layers: {seconds:.0f} s, {units.nbytes(rss)} peak resident memory of this process")
    print(report.summary())
    print(report.communication_table())
    by = comm.by_kind()
    gathered = sum(t for (phase, kind), (_, t, _) in by.items() if kind == "all_gather")
    reduced = sum(t for (phase, kind), (_, t, _) in by.items() if kind == "reduce_scatter")
    tp = spec.world_size // dp
    root = 2 * 32000 * hidden + hidden  # embeddings, lm_head, the last norm: the root's, not tensor parallel
    blocks = params - root
    print(
        f"closed forms (P = {params:,} parameters, {blocks:,} in the layers, n = {spec.world_size}, tp = {tp}):\n"
        f"  parameter shard P x 4 B / n ~ {units.nbytes(shard)}   (fxinspect: {units.nbytes(m.params)})\n"
        f"  gradient shard              ~ {units.nbytes(shard)}   (fxinspect: {units.nbytes(m.gradients)})\n"
        f"  AdamW state 2 x shard       ~ {units.nbytes(2 * shard)}   (fxinspect: {units.nbytes(m.optimizer_state)})\n"
        f"  all-gathered per step: layers 2 x 4 B x blocks / tp + root 4 B x root = "
        f"{units.nbytes(8 * blocks / tp + 4 * root)}   (fxinspect: {units.nbytes(gathered)})\n"
        f"  reduce-scattered: 4 B x blocks / tp + 4 B x root = {units.nbytes(4 * blocks / tp + 4 * root)}"
        f"   (fxinspect: {units.nbytes(reduced)})\n"
        f"  sent: each at (n_dp - 1) / n_dp = {dp - 1}/{dp}; tensor-parallel all-reduces at 2 (tp - 1) / tp"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=80)
    parser.add_argument("--layout", choices=["fsdp", "2d", "both"], default="both")
    args = parser.parse_args()
    if args.layout in ("fsdp", "both"):
        run(args.layers, fxinspect.Parallel.fsdp(64), 64)
    if args.layout in ("2d", "both"):
        run(args.layers, fsdp_2d(8, 8), 8)


if __name__ == "__main__":
    main()
