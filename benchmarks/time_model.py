"""The time model against the clock: predicted ÷ measured forward, and per op.

Run: ``python benchmarks/time_model.py [--repeats 10]``. Each model is analysed with
``device_spec="measured"`` (this host's matmul FLOP/s, copy bandwidth and launch
overhead, each the best of short trials, checked and cached) and timing on, in eval
mode under no_grad. Printed per model: the predicted forward
(``report.totals.predicted_latency``) over the measured plain forward
(``report.timing.plain_forward``), and over the ops' own latencies the distribution of
predicted ÷ measured per op node (median, p10, p90), and the op kinds whose predictions
miss most (their summed predicted and measured time).
The target (issue 21): predicted ÷ measured within 0.8–1.25.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torchvision

import fxinspect


def _models():
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

    image = torch.randn(1, 3, 224, 224)
    ids = torch.randint(0, 30000, (1, 128))
    return [
        ("resnet50", torchvision.models.resnet50(weights=None), image),
        ("vit_b_16", torchvision.models.vit_b_16(weights=None), image),
        ("mobilenet_v3_large", torchvision.models.mobilenet_v3_large(weights=None), image),
        ("GPT-2, 4 layers", GPT2LMHeadModel(GPT2Config(n_layer=4)), {"input_ids": ids}),
        ("BERT-base", BertModel(BertConfig()), {"input_ids": ids}),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(0)
    spec = fxinspect.devices.get("measured")
    print(
        f"{spec.name}: float32 {spec.peak(torch.float32) / 1e9:.1f} GFLOP/s, "
        f"bandwidth {spec.memory_bandwidth / 1e9:.1f} GB/s, launch {spec.launch_overhead * 1e6:.1f} us"
    )
    for name, model, inputs in _models():
        with torch.no_grad():
            report = fxinspect.analyze(model.eval(), inputs, device_spec=spec, repeats=args.repeats, memory=False)
        ratio = report.totals.predicted_latency / report.timing.plain_forward
        per_op = sorted(
            n.predicted_latency / n.latency for n in report.nodes if n.is_op and n.latency and n.predicted_latency
        )
        deciles = statistics.quantiles(per_op, n=10)
        kinds: dict[str, list[float]] = {}
        for n in report.nodes:
            if n.is_op and n.latency and n.predicted_latency is not None:
                got = kinds.setdefault(n.label, [0.0, 0.0])
                got[0] += n.predicted_latency
                got[1] += n.latency
        misses = sorted(kinds.items(), key=lambda kv: -(kv[1][1] - kv[1][0]))[:3]
        miss = ", ".join(f"{k} {p * 1e3:.1f}/{m * 1e3:.1f} ms" for k, (p, m) in misses)
        print(
            f"{name:20} predicted {report.totals.predicted_latency * 1e3:7.1f} ms, measured "
            f"{report.timing.plain_forward * 1e3:7.1f} ms: {ratio:.2f}; per op median "
            f"{statistics.median(per_op):.2f}, p10 {deciles[0]:.2f}, p90 {deciles[-1]:.2f}; most time missed: {miss}",
            flush=True,
        )


if __name__ == "__main__":
    main()
