"""Analyse every torchvision model with random weights; one row per model.

Run: ``python benchmarks/sweep_torchvision.py [--method auto|eager|...] [--out rows.jsonl]
[--only NAME ...] [--skip NAME ...] [--category classification ...]``; print the table of
saved runs with ``--table rows.jsonl [more.jsonl ...]``.

Each model of ``torchvision.models.list_models()`` is built with ``weights=None`` (no
download) and analysed with ``fxinspect.analyze(model, inputs, timing=False)`` in eval
mode under ``torch.no_grad()`` at the input size its weights document:

* classification and quantized (built with ``quantize=False``, i.e. the float model
  the quantized one is made from): ``1x3xSxS``, S = the first weights' ``crop_size``
  (ViTs are built with ``image_size=S``, as loading those weights would);
* segmentation: ``1x3xSxS``, S = the weights' ``resize_size`` (520);
* detection: a list of one ``3x480x640`` image (the model resizes it to its
  ``min_size``);
* video: ``1x3x16xSxS``, S = the weights' ``crop_size`` (16 frames for all);
* optical flow: two ``1x3x368x496`` frames (no size documented; FlyingChairs crop).

A row records ok/failed, the capture method and why earlier tiers failed, seconds,
the share of op nodes attributed to a module below the root (goal >= 99%, but a model
whose own ``forward`` runs ops, e.g. ``torch.flatten`` in ResNet, cannot reach it when
it has fewer than 100 op nodes), uncounted aten ops, and, for classification models,
whether ``2 * macs`` equals ``FlopCounterMode`` (corrected for CPU attention,
``tests/reference.py``) and ``round(macs / 1e9, 3)`` equals ``weights.meta["_ops"]``.
Rows are appended to ``--out`` as JSON lines as they finish; a table and totals are
printed at the end.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torchvision
from torchvision import models as tvm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference import reference_flops
from sweep_common import error_fields, print_failed, print_findings, report_fields

import fxinspect
from fxinspect.capture.base import one_line

CATEGORIES = {
    "detection": tvm.detection,
    "segmentation": tvm.segmentation,
    "video": tvm.video,
    "optical_flow": tvm.optical_flow,
    "quantized": tvm.quantization,
}


def category_of(name: str) -> str:
    for category, module in CATEGORIES.items():
        if name in tvm.list_models(module=module):
            return category
    return "classification"


def first_weights(name: str):
    try:
        return next(iter(tvm.get_model_weights(name)))
    except (ValueError, StopIteration):
        return None


def _size(value: Any, default: int) -> int:
    if value is None:
        return default
    return int(value[0]) if isinstance(value, (list, tuple)) else int(value)


def build(name: str, category: str) -> tuple[torch.nn.Module, tuple, str]:
    """``(model in eval, positional inputs, description of the inputs)``."""
    torch.manual_seed(0)
    weights = first_weights(name)
    transforms = weights.transforms() if weights is not None else None
    kwargs: dict[str, Any] = {"weights": None}
    if category == "quantized":
        kwargs["quantize"] = False
    if "weights_backbone" in inspect.signature(tvm.get_model_builder(name)).parameters:
        kwargs["weights_backbone"] = None  # segmentation and detection default to ImageNet backbones
    if category in ("classification", "quantized"):
        s = _size(getattr(transforms, "crop_size", None), 224)
        if name.startswith("vit_") and s != 224:
            kwargs["image_size"] = s  # what loading the weights would set (vit_h_14: 518)
        model = tvm.get_model(name, **kwargs).eval()
        return model, (torch.randn(1, 3, s, s),), f"1x3x{s}x{s}"
    model = tvm.get_model(name, **kwargs).eval()
    if category == "segmentation":
        s = _size(getattr(transforms, "resize_size", None), 520)
        return model, (torch.randn(1, 3, s, s),), f"1x3x{s}x{s}"
    if category == "detection":
        return model, ([torch.rand(3, 480, 640)],), "[3x480x640]"
    if category == "video":
        s = _size(getattr(transforms, "crop_size", None), 112)
        return model, (torch.randn(1, 3, 16, s, s),), f"1x3x16x{s}x{s}"
    if category == "optical_flow":
        h, w = 368, 496
        return model, (torch.randn(1, 3, h, w), torch.randn(1, 3, h, w)), f"2 x 1x3x{h}x{w}"
    raise ValueError(category)


def run_one(name: str, method: str, check_reference: bool) -> dict[str, Any]:
    category = category_of(name)
    row: dict[str, Any] = {"name": name, "category": category, "ok": False}
    try:
        model, args, described = build(name, category)
    except Exception as exc:
        row["error"] = f"build: {one_line(exc, limit=400)}"
        return row
    row["inputs"] = described
    weights = first_weights(name)
    try:
        start = time.perf_counter()
        with torch.no_grad():
            report = fxinspect.analyze(model, args, method=method, timing=False)
        row["seconds"] = round(time.perf_counter() - start, 2)
    except Exception as exc:
        row["seconds"] = round(time.perf_counter() - start, 2)
        row.update(error_fields(exc))
        return row
    row.update(report_fields(report), flops=report.totals.flops, partial=report.totals.partial)
    if check_reference and category in ("classification", "quantized"):
        with torch.no_grad():
            reference = reference_flops(model, args)
        row["reference_flops"] = reference
        row["ref_match"] = 2 * report.totals.macs == reference
        if weights is not None and "_ops" in weights.meta:
            row["published_gmacs"] = weights.meta["_ops"]
            row["gmacs"] = round(report.totals.macs / 1e9, 3)
            row["gmacs_match"] = abs(row["gmacs"] - weights.meta["_ops"]) <= 1e-3 + 1e-9
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    header = f"{'model':36} {'category':14} {'ok':3} {'method':8} {'sec':>7} {'nodes':>6} {'mod%':>6} {'GMACs':>9} {'pub':>9} {'ref':4} {'pub?':4}"
    print(header)
    print("-" * len(header))
    for r in rows:
        ok = "yes" if r["ok"] else "NO"
        share = f"{100 * r['module_share']:.1f}" if "module_share" in r else ""
        gmacs = f"{r['macs'] / 1e9:.3f}" if "macs" in r else ""
        pub = f"{r['published_gmacs']:.3f}" if "published_gmacs" in r else ""
        ref = {True: "=", False: "X"}.get(r.get("ref_match"), "")
        pm = {True: "=", False: "X"}.get(r.get("gmacs_match"), "")
        print(
            f"{r['name']:36} {r['category']:14} {ok:3} {r.get('method', ''):8} {r.get('seconds', 0):7.1f} "
            f"{r.get('op_nodes', ''):>6} {share:>6} {gmacs:>9} {pub:>9} {ref:4} {pm:4}"
        )
    print()
    print_failed(rows)
    print_findings(rows, only_ok=False)
    print("\ntotals:")
    for category in sorted({r["category"] for r in rows}):
        rs = [r for r in rows if r["category"] == category]
        ok = [r for r in rs if r["ok"]]
        methods: dict[str, int] = {}
        for r in ok:
            methods[r["method"]] = methods.get(r["method"], 0) + 1
        print(f"  {category:14} {len(ok)}/{len(rs)} ok  methods {methods}")
    ok = [r for r in rows if r["ok"]]
    if ok:
        shares = [r["module_share"] for r in ok]
        print(
            f"  op nodes under a non-root module: mean {100 * sum(shares) / len(shares):.2f}%, "
            f"min {100 * min(shares):.2f}% ({min(ok, key=lambda r: r['module_share'])['name']}), "
            f"{sum(s >= 0.99 for s in shares)}/{len(ok)} models >= 99%"
        )
        all_nodes = sum(r["op_nodes"] for r in ok)
        under = sum(round(r["module_share"] * r["op_nodes"]) for r in ok)
        print(f"  over all models: {under}/{all_nodes} op nodes = {100 * under / max(all_nodes, 1):.2f}%")
    ref = [r for r in rows if "ref_match" in r]
    pub = [r for r in rows if "gmacs_match" in r]
    print(f"  2*macs == FlopCounterMode: {sum(r['ref_match'] for r in ref)}/{len(ref)}")
    print(f"  round(macs/1e9, 3) == published _ops: {sum(r['gmacs_match'] for r in pub)}/{len(pub)}")
    for r in pub:
        if not r["gmacs_match"] or not r["ref_match"]:
            print(
                f"    {r['name']}: {r['gmacs']} vs published {r['published_gmacs']}; "
                f"2*macs {2 * r['macs']} vs FlopCounterMode {r['reference_flops']}"
            )
    print(f"  seconds: {sum(r.get('seconds', 0) for r in rows):.0f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="auto")
    parser.add_argument("--out", type=Path, default=None, help="append rows as JSON lines")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--skip", nargs="*", default=[])
    parser.add_argument("--category", nargs="*", default=None)
    parser.add_argument("--no-reference", action="store_true", help="skip the FlopCounterMode cross-check")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--table",
        nargs="+",
        type=Path,
        default=None,
        help="only print the table of saved JSON-lines files (a later row of a model wins)",
    )
    opts = parser.parse_args(argv)
    if opts.table:
        saved: dict[str, dict[str, Any]] = {}
        for path in opts.table:
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    saved[row["name"]] = row
        print_table(sorted(saved.values(), key=lambda r: r["name"]))
        return
    if opts.threads:
        torch.set_num_threads(opts.threads)
    names = opts.only or tvm.list_models()
    names = [n for n in names if n not in set(opts.skip)]
    if opts.category:
        names = [n for n in names if category_of(n) in opts.category]
    print(
        f"torch {torch.__version__}, torchvision {torchvision.__version__}, method={opts.method}, "
        f"{len(names)} models, threads {torch.get_num_threads()}",
        flush=True,
    )
    if opts.skip:
        print(f"skipped: {', '.join(opts.skip)}", flush=True)
    rows = []
    for name in names:
        row = run_one(name, opts.method, not opts.no_reference)
        rows.append(row)
        status = "ok" if row["ok"] else f"FAILED {row.get('error')}"
        extra = f" {row.get('method')} {100 * row.get('module_share', 0):.1f}%" if row["ok"] else ""
        print(f"{name:36} {row.get('seconds', 0):7.1f}s {status}{extra}", flush=True)
        if opts.out:
            with opts.out.open("a") as f:
                f.write(json.dumps({k: v for k, v in row.items()}) + "\n")
        gc.collect()
    print()
    print_table(rows)


if __name__ == "__main__":
    main()
