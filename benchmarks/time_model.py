"""The time model against the clock: predicted ÷ measured forward, per op and per kernel class.

Run: ``python benchmarks/time_model.py [--repeats 10] [--held-out] [--train] [--cached]``.
It calibrates this host now (``fxinspect.devices.calibrate(refresh=True)``: its roofs and
its kernel classes' efficiencies, each the best of short trials; ``--cached``: the
cached calibration, which on a shared machine may have been taken in a faster or slower
spell), then analyses each model with that spec and timing on, in eval mode under no_grad. Then the
plain models are clocked in turn, 5 calls each a round for ``--rounds`` rounds
and for at least a minute (:func:`interleaved`). Printed per model: the predicted forward
(``report.totals.predicted_latency``) over the median of its plain calls and over their
10th percentile (the machine's fastest spell, which the calibration's best trials
saw), over the ops' own latencies the distribution of predicted ÷ measured per op node
(median, p10, p90), and per kernel
class (:func:`fxinspect.timemodel.kernel_classes.kernel_class`) its predicted and
measured milliseconds: a node's measured latency shared among its aten calls as their
predictions are (exact where a node runs one class, as most do).

``--held-out``: models the calibration and the classes were not shaped on
(EfficientNet-B0, RegNetY-400MF, Swin-T, DenseNet-121, ConvNeXt-Tiny, DistilBERT).
``--train``: in training mode with a backward, predicted ÷ measured plain backward
(``backward_predicted_latency`` over the plain backward of the summed outputs) too.
The target (issue 44): predicted ÷ measured within 0.8–1.25.
"""

from __future__ import annotations

import argparse
import builtins
import functools
import statistics
import time

import torch
import torchvision

import fxinspect
from fxinspect.records.device_spec import priced_dtype
from fxinspect.run.recorders import default_loss
from fxinspect.timemodel.kernel_classes import kernel_class, priced_class
from fxinspect.timemodel.pricing import call_seconds


def _models(held_out: bool):
    from transformers import BertConfig, BertModel, DistilBertConfig, DistilBertModel, GPT2Config, GPT2LMHeadModel

    image = torch.randn(1, 3, 224, 224)
    ids = torch.randint(0, 30000, (1, 128))
    if held_out:
        tv = torchvision.models
        return [
            ("efficientnet_b0", tv.efficientnet_b0(weights=None), image),
            ("regnet_y_400mf", tv.regnet_y_400mf(weights=None), image),
            ("swin_t", tv.swin_t(weights=None), image),
            ("densenet121", tv.densenet121(weights=None), image),
            ("convnext_tiny", tv.convnext_tiny(weights=None), image),
            ("DistilBERT", DistilBertModel(DistilBertConfig()), {"input_ids": ids}),
        ]
    return [
        ("resnet50", torchvision.models.resnet50(weights=None), image),
        ("vit_b_16", torchvision.models.vit_b_16(weights=None), image),
        ("mobilenet_v3_large", torchvision.models.mobilenet_v3_large(weights=None), image),
        ("GPT-2, 4 layers", GPT2LMHeadModel(GPT2Config(n_layer=4)), {"input_ids": ids}),
        ("BERT-base", BertModel(BertConfig()), {"input_ids": ids}),
    ]


def by_class(report, spec, backward: bool = False) -> dict[str, list[float]]:
    """Per kernel class, ``[predicted, measured]`` seconds over the timed op nodes."""
    out: dict[str, list[float]] = {}
    for n in report.nodes:
        latency = n.backward_latency if backward else n.latency
        calls = n.backward_aten if backward else n.aten
        if not (n.is_op and latency):
            continue
        dtype = priced_dtype(n.outputs)
        shares = []
        for c in calls:
            if c.status.value == "free":
                continue
            moved = c.bytes_read + c.bytes_written
            seconds = call_seconds(spec, c.op, c.flops, moved, c.calls, dtype, c.kind)
            shares.append((priced_class(kernel_class(c.op)), seconds))
        total = sum(s for _, s in shares)
        for kernel, seconds in shares:
            got = out.setdefault(kernel, [0.0, 0.0])
            got[0] += seconds
            got[1] += latency * seconds / total if total else 0.0
    return out


def _line(name: str, predicted: float, measured: float, classes: dict, per_op: list[float] | None, p10=None) -> str:
    text = (
        f"{name:20} predicted {predicted * 1e3:7.1f} ms, measured {measured * 1e3:7.1f} ms: {predicted / measured:.2f}"
    )
    if p10:  # (on a busy machine the fastest forwards are the ones the calibration's best trials match)
        text += f" (÷ its p10 {p10 * 1e3:.1f} ms: {predicted / p10:.2f})"
    if per_op and len(per_op) > 1:
        deciles = statistics.quantiles(per_op, n=10)
        text += f"; per op median {statistics.median(per_op):.2f}, p10 {deciles[0]:.2f}, p90 {deciles[-1]:.2f}"
    top = sorted(classes.items(), key=lambda kv: -kv[1][1])[:6]
    return (
        text
        + "\n    by class (predicted/measured ms): "
        + ", ".join(f"{k} {p * 1e3:.1f}/{m * 1e3:.1f}" for k, (p, m) in top)
    )


def _clocked(model, inputs, train: bool) -> tuple[float, float | None]:
    """One plain forward's seconds (and its backward's, of the default loss, when ``train``)."""
    call = (lambda: model(**inputs)) if isinstance(inputs, dict) else (lambda: model(inputs))
    with torch.set_grad_enabled(train):
        start = time.perf_counter()
        out = call()
        forward = time.perf_counter() - start
        if not train:
            return forward, None
        loss = default_loss(out)
        start = time.perf_counter()
        loss.backward()
        backward = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return forward, backward


def interleaved(
    models: list, train: bool, rounds: int, calls: int, seconds: float = 60.0
) -> list[dict[str, list[float]]]:
    """Each model's plain forward (and backward) seconds, ``calls`` of each per round, the
    models taken in turn for ``rounds`` rounds and for at least ``seconds``: a shared
    machine whose speed drifts for seconds at a time (a 1024² matmul read 145 to 197
    GFLOP/s in half-second windows over 40 s on the 2-core VM, spells of 5 to 15 s)
    then drifts under every model alike, and the fastest tenth of a model's calls is
    taken in the machine's fastest spell, as the calibration's best trials are."""
    times: list[dict[str, list[float]]] = [{"forward": [], "backward": []} for _ in models]
    for _, model, inputs in models:
        _clocked(model, inputs, train)  # (the warm-up)
    started, done = time.perf_counter(), 0
    while done < rounds or time.perf_counter() - started < seconds:
        done += 1
        for got, (_, model, inputs) in zip(times, models):
            for _ in range(calls):
                forward, backward = _clocked(model, inputs, train)
                got["forward"].append(forward)
                if backward is not None:
                    got["backward"].append(backward)
    return times


def _p10(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=8, help="rounds of plain calls over all models")
    parser.add_argument("--held-out", action="store_true", help="the held-out models instead of the README's")
    parser.add_argument("--train", action="store_true", help="training mode with a backward: its ratio too")
    parser.add_argument("--cached", action="store_true", help="the cached calibration, not one taken now")
    args = parser.parse_args()
    print = functools.partial(builtins.print, flush=True)  # (each line as its model ends)
    torch.manual_seed(0)
    # (calibrated now, unless --cached: a shared machine's speed drifts by a fifth over minutes, see interleaved)
    spec = fxinspect.devices.get("measured") if args.cached else fxinspect.devices.calibrate(refresh=True)
    print(
        f"{spec.name}: float32 {spec.peak(torch.float32) / 1e9:.1f} GFLOP/s, "
        f"bandwidth {spec.memory_bandwidth / 1e9:.1f} GB/s, launch {spec.launch_overhead * 1e6:.1f} us, "
        f"{torch.get_num_threads()} threads; {spec.source}"
    )
    models = _models(args.held_out)
    reports = []
    for _, model, inputs in models:
        model.train(args.train)
        with torch.set_grad_enabled(args.train):
            reports.append(
                fxinspect.analyze(
                    model, inputs, device_spec=spec, repeats=args.repeats, memory=False, backward=args.train
                )
            )
    clocks = interleaved(models, args.train, args.rounds, 5)
    for (name, _, _), report, clock in zip(models, reports, clocks):
        per_op = sorted(
            n.predicted_latency / n.latency for n in report.nodes if n.is_op and n.latency and n.predicted_latency
        )
        totals = report.totals
        forward = clock["forward"]
        print(
            _line(
                name,
                totals.predicted_latency,
                statistics.median(forward),
                by_class(report, spec),
                per_op,
                _p10(forward),
            )
        )
        if args.train:
            back, classes = clock["backward"], by_class(report, spec, backward=True)
            print(
                _line(
                    "  backward", totals.backward_predicted_latency, statistics.median(back), classes, None, _p10(back)
                )
            )


if __name__ == "__main__":
    main()
