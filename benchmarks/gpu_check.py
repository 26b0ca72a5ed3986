"""One prepared GPU check: the time and memory models against the device, on eight workloads.

Run, on a machine with CUDA (at most about 8 minutes on one H100)::

    python benchmarks/gpu_check.py [--out gpu_check.json] [--workloads resnet50-train,llama-decode]

Without CUDA it prints that there is no GPU and exits 0. ``--device cpu --tiny`` runs the
same code on tiny models on this CPU (``tests/test_gpu_check.py`` does).

Each workload is analysed once (``fxinspect.analyze``, ``timing=False``; a training step
with ``backward=True``, its loss included) and then run as a plain eager step: the step's
median of ``--repeats`` (CUDA events, after warm-up), its aten ops' own kernel time per
op class (``torch.profiler``, self device time, over a few steps) and the allocator's
peak growth over one step (``AllocatorWatch``: ``torch.cuda.max_memory_allocated``
after ``reset_peak_memory_stats``). Each aten call the analysis counted is priced twice,
on the datasheet preset of the card (``fxinspect.devices.get(torch.cuda.get_device_name())``)
and on ``device_spec="measured"`` (this device's roofs, measured and cached), and grouped
by :func:`gpu_check_stats.op_class`. Printed: one table of predicted ÷ measured per
workload and op class, the memory estimate (storages in the allocator's 512-byte blocks)
against the measured peak, and the goals, PASS or MISS (a miss never fails the run);
written: the same as JSON. A workload that raises is recorded with its error and the
rest go on; past ``--budget`` seconds the rest are skipped, said so.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import platform
import statistics
import sys
import time
import traceback
from datetime import datetime, timezone

import torch
from gpu_check_stats import goal_lines, goals, op_class, rounded_peak, table
from gpu_check_workloads import WORKLOADS, Workload

WARMUP, REPEATS, PROFILED = 3, 10, 3
NOTES = (
    "step = what the workload's call runs: the forward, and for training the loss and its backward "
    "(gradients set to None first, no optimizer step: the time model does not price one); a loss "
    "computed outside the model (the vision workloads' cross-entropy) is measured but not predicted "
    "(the analysis prices the model's nodes)",
    "measured per op class: each aten op's self device time under torch.profiler (CPU time on a CPU), "
    "summed by class; the whole step: CUDA events around it, so launch gaps count there only",
    "memory estimate: report.memory.peak (growth over what was allocated before the step); on CUDA "
    "(estimate_blocks) each storage alive at the peak in the block the caching allocator gives it from a "
    "fresh segment: 512-byte rounding, and from 10 MiB a 2 MiB-rounded segment kept whole when under 1 MiB "
    "is left; blocks reused from the cache may hold up to 1 MiB more (2 MiB small-pool and 20 MiB "
    "large-pool segments change memory_reserved only)",
    "cuBLAS's workspace (32 MiB on Hopper, CUBLAS_WORKSPACE_CONFIG) is taken at the process's first matmul "
    "and kept: it lies in resident_measured (allocated as the step starts) of the first workload, not in the "
    "peak growth; a workspace torch takes and gives back inside one matmul would be in the growth, unmodelled",
)


def _autocast(device: torch.device, on: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16) if on else contextlib.nullcontext()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _drop_grads(model: torch.nn.Module) -> None:
    for p in model.parameters():
        p.grad = None


class Step:
    """One workload's plain eager step and its inputs, as a training loop runs them."""

    def __init__(self, work: Workload, model, inputs, loss_fn, device: torch.device) -> None:
        self.work, self.model, self.inputs, self.loss_fn, self.device = work, model, inputs, loss_fn, device

    def fresh(self):
        """The inputs of one call: a copy where the call fills a cache in them."""
        return copy.deepcopy(self.inputs) if self.work.stateful else self.inputs

    def __call__(self, inputs) -> None:
        _drop_grads(self.model)  # (zero_grad(set_to_none=True): part of a training step)
        args, kwargs = ((), inputs) if isinstance(inputs, dict) else (inputs, {})
        with _autocast(self.device, self.work.autocast), torch.set_grad_enabled(self.work.train):
            out = self.model(*args, **kwargs)
            if self.work.train:
                self.loss_fn(out).backward()

    def times(self, warmup: int, repeats: int) -> list[float]:
        """Seconds of ``repeats`` calls after ``warmup`` (CUDA events on a GPU)."""
        for _ in range(warmup):
            self(self.fresh())
        cuda, found = self.device.type == "cuda", []
        for _ in range(repeats):
            inputs = self.fresh()
            _sync(self.device)
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                self(inputs)
                end.record()
                end.synchronize()
                found.append(start.elapsed_time(end) / 1e3)
            else:
                began = time.perf_counter()
                self(inputs)
                found.append(time.perf_counter() - began)
        return found

    def class_times(self, steps: int) -> dict[str, float]:
        """Seconds per step of each op class's aten ops (self device time; CPU time on a CPU)."""
        from torch.profiler import ProfilerActivity, profile, schedule

        cuda = self.device.type == "cuda"
        calls = [self.fresh() for _ in range(steps + 1)]  # (copied before: a copy's ops are no part of the step)
        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
        # (the first step traced is the profiler's warm-up, not counted: its start costs the first ops)
        with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
            for inputs in calls:
                self(inputs)
                _sync(self.device)
                prof.step()
        found: dict[str, float] = {}
        for event in prof.key_averages():
            if event.key.startswith("aten::"):
                us = _self_device_us(event) if cuda else event.self_cpu_time_total
                found[op_class(event.key)] = found.get(op_class(event.key), 0.0) + us / 1e6 / steps
        return found

    def peak(self) -> tuple[int, int | None]:
        """The allocator's peak growth over one call, and (CUDA) what was allocated as it began."""
        from fxinspect.run.memory.allocator import AllocatorWatch

        inputs = self.fresh()
        _drop_grads(self.model)  # (before the watch: the old gradients' free is no part of the step)
        gc.collect()
        with AllocatorWatch(self.device) as watch:
            resident = torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else None
            self(inputs)
        return watch.peak, resident


def _self_device_us(event) -> float:
    # (torch 2.4 renamed self_cuda_time_total to self_device_time_total)
    return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0.0)


def predicted_classes(report, spec) -> dict[str, float]:
    """Seconds per op class of every aten call (forward and backward) ``report`` counted,
    priced on ``spec`` by the time model's own per-call pricing."""
    from fxinspect.records import OpStatus
    from fxinspect.records.device_spec import priced_dtype
    from fxinspect.timemodel.pricing import TimeModelPricing

    pricing, found = TimeModelPricing(spec), {}
    for node in report.nodes:
        if node.is_op:
            dtype = priced_dtype(node.outputs)
            for call in (*node.aten, *node.backward_aten):
                if call.status is OpStatus.FREE:  # (views: no time, no class)
                    continue
                found[op_class(call.op)] = found.get(op_class(call.op), 0.0) + pricing._seconds((call,), dtype)
    return found


def _ratio(predicted: float | None, measured: float | None) -> float | None:
    return predicted / measured if predicted and measured and measured > 0 else None


def _shapes(inputs) -> dict[str, list[int]]:
    items = inputs.items() if isinstance(inputs, dict) else enumerate(inputs)
    return {str(k): list(v.shape) for k, v in items if isinstance(v, torch.Tensor)}


def check(work: Workload, specs: dict, device: torch.device, tiny: bool, repeats: int) -> dict:
    """One workload's row: predicted and measured step and op classes, memory."""
    import fxinspect

    model, inputs, loss_fn = work.build(tiny, device)
    model.train(work.train)
    step = Step(work, model, inputs, loss_fn, device)
    options = dict(timing=False, device_spec=next((s for s in specs.values() if s), None), progress=False)
    if work.train:
        options.update(backward=True, loss_fn=loss_fn)
    with _autocast(device, work.autocast), torch.set_grad_enabled(work.train):
        report = fxinspect.analyze(model, step.fresh(), **options)
    times = step.times(WARMUP, repeats)
    measured = statistics.median(times)
    row = {"inputs": _shapes(inputs), "measured_s": measured, "measured_min_max_s": [min(times), max(times)]}
    try:
        classes = step.class_times(PROFILED)
    except Exception as error:  # (a profiler that cannot start: the whole step still checks)
        classes, row["classes_error"] = {}, f"{type(error).__name__}: {error}"[:300]
    priced = {name: predicted_classes(report, spec) for name, spec in specs.items() if spec is not None}
    row["predicted_s"] = {name: sum(p.values()) for name, p in priced.items()}
    row["ratio"] = {name: _ratio(p, measured) for name, p in row["predicted_s"].items()}
    row["classes"] = {
        cls: {
            "measured_s": classes.get(cls),
            **{f"{name}_s": p.get(cls) for name, p in priced.items()},
            "ratio": {name: _ratio(p.get(cls), classes.get(cls)) for name, p in priced.items()},
        }
        for cls in sorted(set(classes).union(*priced.values()))
    }
    peak, resident = step.peak()
    memory = report.memory
    # (the caching allocator's blocks on CUDA; a CPU's allocator takes what is asked)
    blocks = rounded_peak(t.nbytes for t in memory.alive_at_peak) if device.type == "cuda" else memory.peak
    row["memory"] = {
        "estimate": memory.peak,
        "estimate_blocks": blocks,
        "measured": peak,
        "ratio": _ratio(blocks, peak),
        "resident_estimate": memory.params + memory.buffers + memory.inputs,
        "resident_measured": resident,
    }
    return row


def _specs(device: torch.device) -> tuple[dict, list[str]]:
    """The datasheet preset of the device and the calibrated (measured) spec, each ``None``
    where it cannot be had, with why."""
    import fxinspect

    specs, said = {}, []
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "h100-sxm"
    if device.type != "cuda":
        said.append("datasheet: h100-sxm, a stand-in (a CPU has no datasheet preset): its ratios mean nothing")
    for key, wanted in (("datasheet", name), ("calibrated", "measured")):
        try:
            specs[key] = fxinspect.devices.get(wanted)
        except Exception as error:  # (an unknown card: the other spec still checks)
            specs[key] = None
            said.append(f"{key}: no spec for {wanted!r}: {error}")
    return specs, said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu to run the code path here")
    parser.add_argument("--tiny", action="store_true", help="tiny models and shapes (the CPU test)")
    parser.add_argument("--out", default="gpu_check.json")
    parser.add_argument("--workloads", default="", help="comma-separated names (default: all)")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds of workloads before the rest are skipped")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no GPU here (torch.cuda.is_available() is False): nothing measured, nothing written")
        return 0
    names = [w.name for w in WORKLOADS]
    wanted = args.workloads.split(",") if args.workloads else names
    if set(wanted) - set(names):
        parser.error(f"--workloads: no workload {sorted(set(wanted) - set(names))}; they are {', '.join(names)}")
    chosen = [w for w in WORKLOADS if w.name in wanted]
    began = time.monotonic()
    torch.manual_seed(0)
    specs, said = _specs(device)
    rows = []
    for work in chosen:
        spent = time.monotonic() - began
        if spent > args.budget:
            rows.append({"workload": work.name, "skipped": f"skipped: {spent:.0f} s spent, budget {args.budget:.0f} s"})
            continue
        print(f"gpu_check: {work.name} ({spent:.0f} s in)", file=sys.stderr, flush=True)
        start = time.monotonic()
        try:
            row = {"workload": work.name, **check(work, specs, device, args.tiny, args.repeats), "error": None}
        except Exception as error:  # (recorded; the other workloads go on)
            traceback.print_exc()
            row = {"workload": work.name, "error": f"{type(error).__name__}: {error}"[:500]}
        rows.append({**row, "seconds": time.monotonic() - start})
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    found = goals([r for r in rows if not r.get("error") and not r.get("skipped")])
    result = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "tiny": args.tiny,
        "settings": {"warmup": WARMUP, "repeats": args.repeats, "profiled_steps": PROFILED},
        "specs": {k: s and {"name": s.name, "source": s.source} for k, s in specs.items()},
        "notes": [*said, *NOTES],
        "workloads": rows,
        "goals": found,
        "seconds": time.monotonic() - began,
    }
    print(f"gpu_check on {result['device']}, torch {result['torch']} ({result['date']})")
    print(table(rows))
    print("\n".join(goal_lines(found)))
    print("\n".join(f"note: {n}" for n in result["notes"]))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"written: {args.out} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
