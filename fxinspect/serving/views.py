"""A generation as a table and as two charts: the cost of a decode step, and the memory stack.

Both read a :class:`~.serving.Generation` through its public figures only. The chart is a
matplotlib ``Figure`` built without pyplot (no window opens), written to ``path`` when
given (PNG, SVG or PDF by the extension).
"""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ..formatting import units
from ..views.figures import save_figure

__all__ = ["generation_notes", "generation_table", "plot_generation"]

_WEIGHTS, _KV, _ACTIVATIONS, _TIME, _BUDGET = "#9ab0c8", "#4c78a8", "#f58518", "#54a24b", "#d62728"


def _rank(gen: Any) -> str:
    """``"rank 0 of 8"`` when ``gen``'s figures are one rank's, else ``""``."""
    spec = gen.parallel
    return f"rank {spec.rank} of {spec.world_size}" if spec is not None else ""


def _contexts(gen: Any) -> list[int]:
    """The first, middle and last decode step's contexts (once each)."""
    first, last = gen.prompt, gen.final_context
    return list(dict.fromkeys([first, (first + last) // 2, last])) if gen.new_tokens > 1 else []


def generation_table(gen: Any, tablefmt: str = "simple") -> str:
    """The prefill and the first, middle and last decode steps, then the totals and the memory."""
    rows = []
    prefill = gen.prefill
    rows.append(
        [
            f"prefill ({gen.prompt:,} tokens)",
            units.count(prefill.totals.flops),
            units.nbytes(prefill.totals.bytes_moved),
            units.seconds(gen.ttft),
            units.nbytes(prefill.memory.total_peak),
        ]
    )
    for c in _contexts(gen):
        cost = gen.cost(c)
        rows.append(
            [
                f"decode at {c:,}",
                units.count(cost.flops),
                units.nbytes(cost.bytes),
                units.seconds(cost.seconds),
                units.nbytes(cost.peak),
            ]
        )
    head = ["step", "FLOPs", "bytes moved", "predicted time", "peak"]
    table = tabulate(rows, head, tablefmt=tablefmt, disable_numparse=True)
    memory = gen.memory
    lines = [
        f"batch {gen.batch}, prompt {gen.prompt:,}, {gen.new_tokens:,} new tokens"
        + (f", on {prefill.time_model.name}" if prefill.time_model is not None else "")
        + (f"; every figure is one rank's: {_rank(gen)}, {gen.parallel.label}" if _rank(gen) else ""),
        table,
        f"KV cache: {units.nbytes(gen.kv_bytes_per_token)} per token per sequence; "
        f"weights {units.nbytes(gen.weights_bytes)}",
        f"peak {units.nbytes(memory.peak)} in the {memory.phase}: weights {units.nbytes(memory.weights)}, "
        f"KV cache {units.nbytes(memory.kv_cache)}, activations {units.nbytes(memory.activations)}"
        + (f", generate()'s own {units.nbytes(memory.loop)}" if memory.loop else ""),
    ]
    if gen.ttft is not None:
        lines.append(
            f"TTFT {units.seconds(gen.ttft)}, TPOT {units.seconds(gen.tpot)}, "
            f"{units.number(gen.tokens_per_second)} tokens/s (the batch's, prefill included)"
        )
    return "\n".join(lines + [f"note: {n}" for n in gen.notes])


def generation_notes(gen: Any) -> list[str]:
    """What ``gen``'s figures assume, in words."""
    notes = []
    windows = gen.segments.ranges
    if len(windows) > 1:
        spans = ", ".join(f"{lo}..{hi if hi is not None else ''}" for lo, hi in windows)
        notes.append(
            f"the cache's sliding windows cut the contexts into ranges fitted each on its own ({spans}); "
            "a context next to a window is analysed itself"
        )
    experts = _experts_implementation(gen.model)
    if gen.device.type == "meta" and experts == "batched_mm":
        notes.append(
            "mixture of experts on meta: each token runs through its top-k experts (transformers' batched_mm), "
            "the routed count a real run makes, whatever experts the router picks; batched_mm gathers each "
            "token's expert weights, so a decode step's peak is above what a grouped kernel or the eager loop holds"
        )
    elif experts is not None and gen.device.type != "meta":
        notes.append(
            f"mixture of experts: the model's own experts are analysed (transformers' {experts}), as it runs them"
        )
    if gen.new_tokens > 1:
        notes.append(
            "a decode step's peak adds generate()'s own tensors between steps (greedy): the next-token scores in "
            "float32, twice, and the token ids, old and grown"
        )
    return notes


def _experts_implementation(model: Any) -> str | None:
    """The experts implementation (transformers' ``config._experts_implementation``) of a
    model whose mixture-of-experts layers take one, else ``None``."""
    takes_one = getattr(model, "_can_set_experts_implementation", None)
    chosen = getattr(getattr(model, "config", None), "_experts_implementation", None)
    return chosen if callable(takes_one) and takes_one() and isinstance(chosen, str) else None


def plot_generation(gen: Any, path: Any = None, budget: Any = None):
    """Left: a decode step's predicted time (or bytes moved) against the context. Right:
    the memory at each context, stacked: weights, KV cache, activations; the prefill's peak a
    dot at the prompt's length; ``budget`` a line."""
    from matplotlib.figure import Figure

    from ..planning.budget import Budget

    last = max(gen.final_context, gen.prompt + 1)
    step = max(1, (last - 1) // 64)
    contexts = list(range(1, last + 1, step)) + ([last] if (last - 1) % step else [])
    costs = [gen.cost(c) for c in contexts]
    fig = Figure(figsize=(11, 4.4), dpi=100, layout="constrained")
    left, right = fig.subplots(1, 2)
    timed = all(c.seconds is not None for c in costs)
    values = [c.seconds for c in costs] if timed else [c.bytes for c in costs]
    scale, unit = units.axis_unit(max(values), "second" if timed else "byte")
    left.plot(contexts, [v / scale for v in values], color=_TIME)
    left.axvline(gen.prompt, color="#888888", linewidth=0.8, linestyle=":")
    left.text(gen.prompt, 1.08 * max(values) / scale, "prompt ", ha="right", fontsize="small", color="#666666")
    left.set_xlabel("context (tokens cached)")
    left.set_ylabel(f"{'predicted time' if timed else 'bytes moved'} per step ({unit})")
    left.set_ylim(0, 1.15 * max(values) / scale)
    rank = f", {_rank(gen)}" if _rank(gen) else ""
    left.set_title("a decode step" + (f" on {gen.prefill.time_model.name}" if timed else "") + rank, loc="left")
    weights = gen.weights_bytes
    kv = [gen.kv_bytes(c + 1) for c in contexts]
    rest = [max(0, c.peak - weights - k) for c, k in zip(costs, kv)]
    prefill = gen.prefill.memory.total_peak  # (drawn too: the generation's peak may be the prefill's)
    limit = Budget.of(budget) if budget is not None else None
    largest = max(max(c.peak for c in costs), prefill, limit.total if limit else 0)
    scale, unit = units.axis_unit(largest, "byte")
    right.stackplot(
        contexts,
        [[weights / scale] * len(contexts), [k / scale for k in kv], [r / scale for r in rest]],
        labels=["weights", "KV cache", "activations"],
        colors=[_WEIGHTS, _KV, _ACTIVATIONS],
    )
    right.plot([gen.prompt], [prefill / scale], "o", color="#333333", label=f"prefill peak {units.nbytes(prefill)}")
    if limit is not None:
        right.axhline(limit.total / scale, color=_BUDGET, linewidth=1, label=f"budget {units.nbytes(limit.total)}")
    right.set_xlabel("context (tokens cached)")
    right.set_ylabel(f"memory{' per rank' if rank else ''} ({unit})")
    right.set_ylim(0, 1.3 * largest / scale)
    right.legend(loc="upper left", frameon=False, ncols=3, fontsize="small")
    right.set_title(f"memory of a decode step, batch {gen.batch}{rank}", loc="left")
    if path is not None:
        save_figure(fig, path)
    return fig
