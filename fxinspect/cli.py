"""Command line: ``fxinspect MODULE:CALLABLE --input-shape 1,3,224,224``.

``MODULE:CALLABLE`` names a function or class that returns (or is) the model, called
with no arguments, e.g. ``torchvision.models:resnet18``. Prints the summary and a table;
``--json`` writes the report.

Example
-------
>>> main(["torch.nn:Identity", "--input-shape", "2,3", "--no-timing", "--by", "node"])  # doctest: +ELLIPSIS
Identity · captured by symbolic...
0
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

import torch

from .analyze import analyze
from .capture import TIERS, Method
from .capture.base import one_line
from .errors import FxInspectError
from .views.table import By

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64, "int64": torch.int64}


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 1,3,224,224, got {text!r}")


def load_model(spec: str) -> torch.nn.Module:
    """``"package.module:factory"`` -> ``factory()`` (or the object itself if a module)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not attr:
        raise FxInspectError(f"expected MODULE:CALLABLE such as torchvision.models:resnet18, got {spec!r}")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    model = obj if isinstance(obj, torch.nn.Module) else obj()
    if not isinstance(model, torch.nn.Module):
        raise FxInspectError(f"{spec} returned {type(model).__name__}, expected a torch.nn.Module")
    return model


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fxinspect", description="Analyse a PyTorch model: every op and module.")
    parser.add_argument("model", help="MODULE:CALLABLE returning the model, e.g. torchvision.models:resnet18")
    parser.add_argument("--input-shape", type=_shape, action="append", required=True,
                        help="shape of one positional input (repeat for several), e.g. 1,3,224,224")
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="float32", help="input dtype (int64 gives token ids)")
    parser.add_argument("--by", choices=[b.value for b in By], default="module", help="table rows")
    parser.add_argument("--depth", type=int, default=None, help="module depth shown (by=module)")
    parser.add_argument("--top", type=int, default=None, help="keep the first N rows")
    parser.add_argument("--sort", default=None, help="sort rows by a column, e.g. flops")
    parser.add_argument("--method", choices=[str(m) for m in (Method.AUTO, *TIERS)], default="auto", help="capture tier")
    parser.add_argument("--train", action="store_true", help="analyse in train mode with gradients on (default: eval, no_grad)")
    parser.add_argument("--no-timing", action="store_true", help="skip the timing runs")
    parser.add_argument("--device", default=None, help="'meta' analyses without allocating weights")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    try:
        model = load_model(opts.model)
        dtype = _DTYPES[opts.dtype]
        inputs = tuple(
            torch.randint(0, 100, shape) if dtype == torch.int64 else torch.randn(shape, dtype=dtype)
            for shape in opts.input_shape
        )
        model.train(opts.train)
        with torch.set_grad_enabled(opts.train):
            report = analyze(model, inputs, method=opts.method, timing=not opts.no_timing, device=opts.device)
    except FxInspectError as exc:
        print(f"fxinspect: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the model's own error, on one line with where it was raised
        where = "; ".join(note.removeprefix("fxinspect: ") for note in getattr(exc, "__notes__", ()))
        print(f"fxinspect: the model raised {one_line(exc, limit=1000)}" + (f" ({where})" if where else ""), file=sys.stderr)
        return 2
    print(report)
    print()
    options = {"depth": opts.depth} if opts.by == "module" else {}
    print(report.table(by=opts.by, top=opts.top, sort=opts.sort, **options))
    if opts.json:
        report.to_json(opts.json)
    return 0
