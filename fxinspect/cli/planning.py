"""The command line's planning modes: ``--sweep``, ``--max-batch`` and ``--checkpoint-plan``.

Each replaces the analysis the command line prints otherwise, and runs on the meta device
(``--device-spec`` prices the steps on a device); the analysis options given
(``--backward``, ``--optimizer``, ...) go to the planning call as they would to
``analyze``, the others keep the planning call's defaults. The batch is the first dimension of
every ``--input-shape`` and ``--input`` (``--kwargs`` stay as they are);
``--png``/``--svg`` draw the sweep's or the plan's plot instead of the diagram.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from ..errors import InputError
from ..planning import Budget, checkpoint_plan, max_batch, sweep

__all__ = ["add_planning_options", "check_planning", "run_planning"]


def _batches(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected batch sizes such as 1,2,4,8, got {text!r}") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"batch sizes are >= 1, got {text!r}")
    return values


def add_planning_options(parser: argparse.ArgumentParser) -> None:
    """The planning options, in a group of their own in ``--help``."""
    group = parser.add_argument_group(
        "planning (each replaces the analysis and runs on the meta device; the batch is every input's dim 0)"
    )
    group.add_argument("--sweep", type=_batches, metavar="B1,B2,...", help="analyse one step per batch size")
    group.add_argument("--max-batch", metavar="BUDGET", help="the largest batch whose step fits, e.g. 24GiB")
    group.add_argument(
        "--checkpoint-plan", metavar="BUDGET", help="which modules to checkpoint for the step to fit, e.g. 24GiB"
    )
    group.add_argument("--budget", metavar="BYTES", help="with --sweep: mark the points that fit, e.g. 24GiB")
    group.add_argument(
        "--workers",
        type=int,
        default=None,
        help="with --sweep: forked workers on the meta device (default: one a core, at most 4)",
    )
    group.add_argument("--reserve", default="0", help="bytes (or a fraction below 1) kept back from the budget")


def check_planning(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> None:
    """The planning options that can be wrong, before the model is built."""
    modes = [m for m in ("sweep", "max_batch", "checkpoint_plan") if getattr(opts, m)]
    if len(modes) > 1:
        parser.error(f"give one of --sweep, --max-batch, --checkpoint-plan, not {len(modes)}")
    if modes and opts.input_shape and opts.input:
        parser.error("--sweep, --max-batch and --checkpoint-plan take --input-shape or --input, not both")
    backward = getattr(opts, "backward", False)  # (a flag of fxinspect.cli.flags: absent when not given)
    if getattr(opts, "optimizer", None) is not None and not backward:
        parser.error("--optimizer needs --backward (its step follows a backward)")
    if opts.budget is not None and not (opts.sweep or getattr(opts, "generate", False)):
        parser.error("--budget goes with --sweep or --generate (--max-batch and --checkpoint-plan take theirs)")
    if opts.workers is not None and not opts.sweep:
        parser.error("--workers goes with --sweep")
    if opts.workers is not None and opts.workers < 0:
        parser.error(f"--workers expects a count of processes, 0 or more, got {opts.workers}")
    if opts.checkpoint_plan and opts.fsdp:
        parser.error("--checkpoint-plan does not plan a parallel step yet: use it without --fsdp")
    if opts.checkpoint_plan and not backward:
        parser.error("--checkpoint-plan plans a training step: add --backward")
    if modes:
        ignored = [f"--{o.replace('_', '-')}" for o in ("json", "csv", "html") if getattr(opts, o)]
        ignored += [
            f for f, o in (("--no-memory", "memory"), ("--measure-memory", "measure_memory")) if hasattr(opts, o)
        ]
        if ignored:
            parser.error(f"{', '.join(ignored)} do not go with --{modes[0].replace('_', '-')} (they write an analysis)")
    if opts.max_batch and (opts.png or opts.svg):
        parser.error("--max-batch draws nothing: --png and --svg go with --sweep or --checkpoint-plan")
    budgets = [getattr(opts, n) for n in ("max_batch", "checkpoint_plan", "budget") if getattr(opts, n) is not None]
    if opts.reserve != "0" and not budgets:
        parser.error("--reserve goes with a budget (--max-batch, --checkpoint-plan or --budget)")
    for budget in budgets:  # (the reserve with it)
        try:
            Budget.of(budget, _reserve(opts.reserve))
        except InputError as exc:
            parser.error(str(exc))


def run_planning(model: torch.nn.Module, make_inputs: Any, opts: argparse.Namespace, given: dict) -> Any | None:
    """Run the planning mode asked for with the analysis options ``given`` (those of the
    flags given), print its result and return it (``None`` if none)."""
    if not (opts.sweep or opts.max_batch or opts.checkpoint_plan):
        return None
    options: dict[str, Any] = dict(given)
    if opts.input_shape and opts.kwargs:  # the batched inputs are positional: the rest go as keywords
        options["kwargs"] = opts.kwargs
    reserve = _reserve(opts.reserve)
    if opts.sweep:
        result = sweep(
            model,
            make_inputs,
            opts.sweep,
            budget=opts.budget,
            reserve=reserve,
            workers=opts.workers,
            **options,
        )
    elif opts.max_batch:
        result = max_batch(model, make_inputs, opts.max_batch, reserve=reserve, **options)
    else:
        with torch.device("meta"):  # (planned on meta: the inputs need no memory either)
            batch = make_inputs(None)
        options.pop("backward", None)  # (always on in a plan)
        result = checkpoint_plan(model, batch, opts.checkpoint_plan, reserve=reserve, **options)
    print(result)
    for path in (opts.png, opts.svg):
        if path:
            result.plot(path)
    return result


def _reserve(text: str) -> int | float | str:
    """``--reserve``: a fraction below 1 (a float), whole bytes (an int), or bytes with a unit."""
    try:
        value = float(text)
    except ValueError:
        return text  # bytes with a unit: the budget parser says if it is not
    return value if value < 1 or not value.is_integer() else int(value)
