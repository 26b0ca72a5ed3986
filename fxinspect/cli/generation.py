"""The command line's ``--generate``: a model generating after a prompt, from its own graph.

``fxinspect MODEL --generate --batch 8 --prompt 2048 --new-tokens 256 --device-spec H100-SXM``
prints :meth:`fxinspect.serving.Generation.table` (the prefill, the first, middle and last
decode steps, the KV cache, the peak and its parts, TTFT/TPOT with a device spec).
``MODEL`` names a Hugging Face config (``transformers:LlamaConfig`` with ``--config``, or a
``config.json`` file: built with its language-modelling head) or a factory of a generative
model; the model is built on the meta device, so a 70B configuration costs no memory, and
``--dtype`` casts its weights. ``--budget`` adds the largest batch and the longest context
that fit it; ``--png``/``--svg`` draw the cost curves and the memory stack
(:meth:`~fxinspect.serving.Generation.plot`), ``--json`` writes the figures. ``--html PATH``
writes two explorers (:mod:`fxinspect.views.explorer`): the prefill's report at ``PATH``
and the last decode step's (its context ``prompt + new_tokens - 2``) at
``<stem>.decode.html`` beside it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from ..serving import Generation, generation
from ..views.explorer import to_html
from .planning import _reserve

__all__ = ["add_generation_options", "check_generation", "decode_page", "run_generation", "write_explorers"]


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens or sequences such as 8, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text}")
    return value


def add_generation_options(parser: argparse.ArgumentParser) -> None:
    """``--generate`` and its sizes, in a group of their own in ``--help``."""
    group = parser.add_argument_group(
        "generation (replaces the analysis: the model's own prefill and decode steps, on the meta device)"
    )
    group.add_argument(
        "--generate", action="store_true", help="analyse generation: prefill, decode steps, KV cache, TTFT/TPOT"
    )
    group.add_argument("--batch", type=_count, default=None, help="with --generate: sequences (default 1)")
    group.add_argument("--prompt", type=_count, default=None, help="with --generate: prompt tokens (default 512)")
    group.add_argument(
        "--new-tokens", type=_count, default=None, help="with --generate: tokens generated (default 128)"
    )
    group.add_argument(
        "--cache",
        choices=["dynamic", "static"],
        default=None,
        help="with --generate: the cache (default: generate()'s)",
    )


_SIZES = ("batch", "prompt", "new_tokens", "cache")
_NOT_WITH = {  # option: why it does not go with --generate
    "input_shape": "the inputs are the prompt's tokens and the cache, made by the model's own generation helpers",
    "input": "the inputs are the prompt's tokens and the cache, made by the model's own generation helpers",
    "kwargs": "the inputs are the prompt's tokens and the cache, made by the model's own generation helpers",
    "train": "generation runs in eval mode without gradients",
    "backward": "generation runs in eval mode without gradients",
    "fsdp": "FSDP shards a training step",
    "csv": "it writes a table of one analysis",
    "memory": "the peak and what fits need the memory model",
}


def check_generation(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> None:
    """The generation options that can be wrong, before the model is built."""
    if not opts.generate:
        given = [f"--{n.replace('_', '-')}" for n in _SIZES if getattr(opts, n) is not None]
        if given:
            parser.error(f"{', '.join(given)} go with --generate")
        return
    for name, why in _NOT_WITH.items():
        value = getattr(opts, name, None)
        given = value is False if name == "memory" else bool(value)  # (--no-memory stores False)
        if given:
            spelled = "--no-memory" if name == "memory" else f"--{name.replace('_', '-')}"
            parser.error(f"{spelled} does not go with --generate ({why})")
    if opts.dtype == "int64":
        parser.error("--dtype int64 does not go with --generate (it casts the weights: a floating dtype)")
    for mode in ("sweep", "max_batch", "checkpoint_plan"):
        if getattr(opts, mode):
            parser.error(f"--{mode.replace('_', '-')} does not go with --generate (give --budget for what fits)")


def run_generation(model: torch.nn.Module, opts: argparse.Namespace, given: dict[str, Any], dtype: Any) -> Generation:
    """Analyse the generation the options describe, print its table (and what fits
    ``--budget``), write the files asked for; the :class:`~fxinspect.serving.Generation`."""
    sizes = {n: getattr(opts, n) for n in ("batch", "prompt", "new_tokens") if getattr(opts, n) is not None}
    gen = generation(model, **sizes, cache=opts.cache, dtype=dtype, **given)
    print(gen.table())
    fits = {}
    if opts.budget is not None:
        budget, reserve = opts.budget, _reserve(opts.reserve)
        fits = {
            "budget": budget,
            "max_batch": gen.max_batch(budget, reserve=reserve),
            "max_context": gen.max_context(budget, reserve=reserve),
        }
        print(
            f"within {budget}: at most {fits['max_batch']} sequences of {gen.prompt:,} + {gen.new_tokens:,} tokens; "
            f"{gen.batch} sequences reach at most {fits['max_context']:,} tokens"
        )
    for path in (opts.png, opts.svg):
        if path:
            gen.plot(path, budget=opts.budget)
    if opts.json:
        with open(opts.json, "w") as file:
            json.dump(figures(gen) | fits, file, indent=1)
    if opts.html:
        print(write_explorers(gen, opts.html))
    return gen


def decode_page(path: str | Path) -> Path:
    """Where ``--html PATH`` writes the decode step's explorer: ``<stem>.decode.html`` beside ``PATH``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.decode{path.suffix or '.html'}")


def write_explorers(gen: Generation, path: str | Path) -> str:
    """The explorer of the prefill at ``path`` and of the last decode step beside it
    (:func:`decode_page`; none with one new token: it comes from the prefill); a line
    saying what is where."""
    to_html(gen.prefill, path, f"prefill of {gen.batch} × {gen.prompt:,} tokens")
    said = f"explorer: the prefill in {path}"
    if gen.new_tokens < 2:
        return said + " (no decode step: the one new token comes from the prefill)"
    context = gen.final_context
    to_html(gen.decode_step(context), decode_page(path), f"decode step of {gen.batch} at {context:,} tokens cached")
    return said + f", the last decode step (at {context:,} tokens cached) in {decode_page(path)}"


def figures(gen: Generation) -> dict[str, Any]:
    """The generation's figures as plain values (bytes, FLOPs, seconds: ``None`` without a device spec)."""
    memory = gen.memory
    steps = [gen.cost(c) for c in dict.fromkeys([gen.prompt, gen.final_context])] if gen.new_tokens > 1 else []
    return {
        "batch": gen.batch,
        "prompt": gen.prompt,
        "new_tokens": gen.new_tokens,
        "kv_bytes_per_token": gen.kv_bytes_per_token,
        "weights_bytes": gen.weights_bytes,
        "prefill": {
            "flops": gen.prefill.totals.flops,
            "bytes": gen.prefill.totals.bytes_moved,
            "seconds": gen.ttft,
            "peak": gen.prefill.memory.total_peak,
        },
        "decode": [
            {"context": s.context, "flops": s.flops, "bytes": s.bytes, "seconds": s.seconds, "peak": s.peak}
            for s in steps
        ],
        "ttft": gen.ttft,
        "tpot": gen.tpot,
        "tokens_per_second": gen.tokens_per_second,
        "peak": {
            "bytes": memory.peak,
            "phase": memory.phase,
            "weights": memory.weights,
            "kv_cache": memory.kv_cache,
            "activations": memory.activations,
        },
    }
