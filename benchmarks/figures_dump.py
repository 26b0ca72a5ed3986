"""Dump every figure of a fixed set of analyses, to compare a restructuring's before and after.

Run: ``python benchmarks/figures_dump.py OUT.json`` on each side, then
``python benchmarks/figures_dump.py --compare BEFORE.json AFTER.json`` (exit status 1 and
the differing keys when they differ). The set covers the capture tiers, the forward and
the training step, the meta device, the planning calls and the time model: small
torchvision, timm-free and Hugging Face models with fixed seeds, ``timing=False`` (no
measured latency, which no two runs share).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

import torch
import torchvision

import fxinspect


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128)), {
        "input_ids": torch.randint(0, 128, (2, 32))
    }


def _llama():
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    )
    config.vocab_size = 100
    return LlamaModel(config), {"input_ids": torch.randint(0, 100, (2, 64))}


def _resnet():
    return torchvision.models.resnet18(num_classes=10), torch.randn(2, 3, 64, 64)


def _vit():
    model = torchvision.models.VisionTransformer(32, 8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64)
    return model, torch.randn(2, 3, 32, 32)


def _lstm():
    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = torch.nn.LSTM(16, 32, batch_first=True), torch.nn.Linear(32, 5)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    return Tagger(), torch.randn(4, 12, 16)


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, Any]]] = {
    "resnet18": _resnet,
    "vit": _vit,
    "gpt2": _gpt2,
    "llama": _llama,
    "lstm": _lstm,
}

_FIXED = dict(timing=False, check_finite=False)  # (measured latency and values differ run to run)
CASES = {  # name: analyze options
    "forward": _FIXED,
    "train": dict(_FIXED, backward=True, optimizer=torch.optim.AdamW),
    "meta_train": dict(_FIXED, backward=True, device="meta"),
    "symbolic": dict(_FIXED, method="symbolic"),
    "eager": dict(_FIXED, method="eager", backward=True),
    "time_model": dict(_FIXED, device_spec="h100-sxm"),
}


def _plain(value: Any) -> Any:
    """JSON-able, stable: floats rounded to 9 significant digits, no value statistics."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):  # (value statistics depend on the random data: left out)
        return {str(k): _plain(v) for k, v in value.items() if k != "stats"}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def dump() -> dict[str, Any]:
    """Every case's report (as ``to_dict``) and the planning calls' figures."""
    out: dict[str, Any] = {}
    for name, make in MODELS.items():
        for case, options in CASES.items():
            torch.manual_seed(0)
            model, inputs = make()
            model.train(options.get("backward", False))
            try:
                with torch.no_grad() if not options.get("backward") else torch.enable_grad():
                    report = fxinspect.analyze(model, inputs, **options)
                out[f"{name}/{case}"] = _plain(report.to_dict())
            except Exception as exc:  # a failure is a figure too: it must stay the same
                out[f"{name}/{case}"] = f"{type(exc).__name__}: {exc}"
    torch.manual_seed(0)
    model, x = _vit()
    out["vit/max_batch"] = fxinspect.max_batch(
        model.train(), lambda b: torch.randn(b, 3, 32, 32), "64MiB", backward=True
    ).batch
    plan = fxinspect.checkpoint_plan(model, x, 3_400_000)
    out["vit/checkpoint_plan"] = _plain([plan.fits, plan.peak, list(plan.modules), list(plan.notes)])
    return out


def compare(before: dict, after: dict, where: str = "") -> list[str]:
    """The keys (paths) whose values differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = sorted(set(before) | set(after))
        return [d for k in keys for d in compare(before.get(k), after.get(k), f"{where}/{k}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (a, b) in enumerate(zip(before, after)) for d in compare(a, b, f"{where}[{i}]")]
    return [] if before == after else [f"{where}: {str(before)[:80]} -> {str(after)[:80]}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()
    if args.compare:
        before, after = (json.load(open(p)) for p in args.paths)
        differences = compare(before, after)
        print("\n".join(differences[:60]) or "the same figures")
        print(f"{len(differences)} differences")
        sys.exit(1 if differences else 0)
    with open(args.paths[0], "w") as f:
        json.dump(dump(), f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
