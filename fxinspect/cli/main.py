"""Command line: ``fxinspect MODULE:CALLABLE --input-shape 1,3,224,224``.

``MODULE:CALLABLE`` names what makes the model: a function or class
(``torchvision.models:resnet18``; ``--args`` and ``--factory-kwargs`` give it
arguments), a file (``path/to/file.py:build_model``), or a Hugging Face config class
(``transformers:GPT2Config``, its model built with ``AutoModel.from_config``;
``--config '{"n_layer": 2}'`` sets its fields): see :mod:`fxinspect.factory`, which
names the closest valid name for every misspelt one. Inputs are
positional (``--input-shape``, repeatable) or named (``--input input_ids=1,128``; names
ending in ``ids`` or ``mask`` get integer tokens / ones), with ``--kwargs JSON`` for other
keyword arguments. Prints the summary and a table; ``--json``, ``--csv``, ``--png``,
``--svg`` and ``--html`` (the explorer) write files. ``--sweep``, ``--max-batch`` and
``--checkpoint-plan`` plan instead (:mod:`.planning`); ``--generate`` analyses the
model generating after a prompt (:mod:`.generation`; a ``config.json`` names a Hugging
Face model too). The analysis options' flags
(``--no-timing``, ``--device meta``, ``--backward``, ``--optimizer AdamW``, ...) are made
from :class:`~fxinspect.options.Options` (:mod:`.flags`), and the record passed on is the
one they give. Every option is checked before the model is built; any failure is one
line on stderr and exit status 2 (``--debug`` shows the traceback). On a terminal, work
longer than 2 s shows its progress on stderr (``fxinspect: analyze · timing 3/10``;
:mod:`fxinspect.progress`), and a timed analysis says first that ``--no-timing`` skips
its timed runs; ``--no-progress`` or ``FXINSPECT_PROGRESS=0`` turns it off.

Example
-------
>>> main(["torch.nn:Identity", "--input-shape", "2,3", "--no-timing", "--by", "node"])  # doctest: +ELLIPSIS
Identity · captured by symbolic...
0
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence

import torch

from ..analyze import analyze
from ..capture.base import one_line
from ..errors import FxInspectError, InputError
from ..factory import build, check_keywords
from ..options import Options
from ..parallel import Parallel
from ..views.colouring import colour_figures
from ..views.columns import By, parse_column
from .flags import add_option_flags, given_options, say_timing
from .generation import add_generation_options, check_generation, run_generation
from .planning import add_planning_options, check_planning, run_planning

TABLE_DEPTH = 2
"""The module table's depth without ``--depth``: the blocks a reader looks for, not every module."""

_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int64": torch.int64,
}


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 1,3,224,224, got {text!r}"
        ) from None
    if any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"a shape has no negative sizes, got {text!r}")
    return shape


def _named(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, shape = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=SHAPE such as input_ids=1,128, got {text!r}")
    return name, _shape(shape)


def _json_of(kind: type, example: str):
    """An argparse type: JSON text holding a ``kind`` (a dict or a list), such as ``example``."""

    def parse(text: str):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"not JSON ({exc.msg}): {text!r}") from None
        if not isinstance(value, kind):
            what = "object" if kind is dict else "list"
            raise argparse.ArgumentTypeError(f"expected a JSON {what} such as {example}, got {text!r}")
        return value

    return parse


_json = _json_of(dict, '{"n_layer": 2}')
_json_list = _json_of(list, '["resnet18"]')


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (``fxinspect --help`` shows the usage)."""

    def error(self, message: str):
        self.exit(2, f"fxinspect: {message} (fxinspect --help lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fxinspect", description="Analyse a PyTorch model: every op and module.")
    parser.add_argument(
        "model", help="MODULE:CALLABLE (or file.py:CALLABLE, a transformers config class, a Hugging Face config.json)"
    )
    parser.add_argument(
        "--input-shape",
        type=_shape,
        action="append",
        default=[],
        help="shape of one positional input (repeat for several), e.g. 1,3,224,224",
    )
    parser.add_argument(
        "--input",
        type=_named,
        action="append",
        default=[],
        metavar="NAME=SHAPE",
        help="a keyword input, e.g. input_ids=1,128 (names ending in ids/mask: integer tokens/ones)",
    )
    parser.add_argument("--kwargs", type=_json, default={}, help="other keyword arguments as JSON")
    parser.add_argument("--config", type=_json, default=None, help="fields of a Hugging Face config class, as JSON")
    parser.add_argument("--args", type=_json_list, default=[], help="the factory's positional arguments, as JSON")
    parser.add_argument("--factory-kwargs", type=_json, default={}, help="the factory's keyword arguments, as JSON")
    parser.add_argument(
        "--dtype",
        choices=sorted(_DTYPES),
        default=None,
        help="input dtype, float32 if not given (int64 gives token ids); with --generate, the weights' dtype",
    )
    parser.add_argument("--by", choices=[b.value for b in By], default="module", help="table rows")
    parser.add_argument(
        "--depth",
        type=_positive,
        default=None,
        help=f"module depth shown: the table's (default {TABLE_DEPTH}) and the diagram's (default every op)",
    )
    parser.add_argument(
        "--no-fold", action="store_true", help="every repeated block its own rows and boxes (default: folded)"
    )
    parser.add_argument("--top", type=_positive, default=None, help="keep the first N rows")
    parser.add_argument("--sort", default=None, help="sort rows by a column, e.g. flops")
    parser.add_argument("--train", action="store_true", help="train mode with gradients on (default: eval, no_grad)")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    parser.add_argument("--csv", metavar="PATH", help="also write the table's rows (--by) as CSV")
    parser.add_argument("--png", metavar="PATH", help="also draw the diagram (--depth; every op without it)")
    parser.add_argument("--svg", metavar="PATH", help="the diagram as SVG")
    parser.add_argument(
        "--html",
        metavar="PATH",
        help="also write the explorer: one HTML page to browse the report (with --generate, the prefill's; "
        "the last decode step's in <stem>.decode.html beside it)",
    )
    parser.add_argument(
        "--color-by", choices=sorted(colour_figures()), default="flops", help="what colours the diagram"
    )
    parser.add_argument(
        "--no-edge-labels", action="store_true", help="the diagram's edges bare (default: each names what it carries)"
    )
    parser.add_argument(
        "--fsdp", type=_positive, metavar="N", help="one rank of FSDP2 over N ranks, on a fake process group"
    )
    parser.add_argument("--rank", type=int, default=None, help="with --fsdp: the rank analysed (default 0)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    group = parser.add_argument_group("analysis options (fxinspect.analyze's; one not given keeps the call's default)")
    add_option_flags(group)
    add_planning_options(parser)
    add_generation_options(parser)
    return parser


def _inputs(opts: argparse.Namespace, batch: int | None = None) -> tuple[tuple, dict]:
    """The inputs the options describe; with ``batch``, every shape's first size replaced by it."""
    dtype = _DTYPES[opts.dtype or "float32"]

    def make(shape: tuple[int, ...], name: str = "") -> torch.Tensor:
        if batch is not None and shape:
            shape = (batch, *shape[1:])
        if name.endswith("mask"):
            return torch.ones(shape, dtype=torch.long)
        if dtype == torch.int64 or name.endswith("ids"):
            return torch.randint(0, 100, shape)
        return torch.randn(shape, dtype=dtype)

    return tuple(make(s) for s in opts.input_shape), {**opts.kwargs, **{n: make(s, n) for n, s in opts.input}}


def _batched_inputs(opts: argparse.Namespace):
    """``make_inputs(batch)`` for the planning modes: the positional inputs (``--kwargs``
    then go to the analysis as keywords), or else the keyword ones."""

    def make_inputs(batch: int | None):
        args, kwargs = _inputs(opts, batch)
        return args if opts.input_shape else kwargs

    return make_inputs


def _check(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> None:
    """Every option that can be wrong, before anything is built."""
    check_generation(parser, opts)
    if not opts.input_shape and not opts.input and not opts.kwargs and not opts.generate:
        parser.error("give the model's inputs: --input-shape 1,3,224,224 and/or --input NAME=SHAPE")
    if opts.sort is not None:
        try:
            parse_column(opts.sort, By(opts.by), "--sort")
        except ValueError as exc:
            parser.error(str(exc))
    if opts.csv and opts.by == "op":
        parser.error("--csv writes nodes or modules: use --by node or --by module with it")
    if opts.rank is not None and not opts.fsdp:
        parser.error("--rank chooses a rank of --fsdp N: give --fsdp too")
    if opts.depth is not None and opts.by != "module" and not (opts.png or opts.svg):
        parser.error("--depth applies to --by module tables and to diagrams")
    check_planning(parser, opts)
    try:  # the record the flags give, checked as analyze checks it (the parallel step's spec comes later)
        Options.of("analyze", given_options(opts))
    except InputError as exc:
        parser.error(str(exc))


def options_of(opts: argparse.Namespace) -> dict:
    """The analysis options the flags give (what was not given keeps the entry point's default)."""
    given = given_options(opts)
    if opts.fsdp:  # (one rank's step)
        given["parallel"] = Parallel.fsdp(opts.fsdp, rank=opts.rank or 0)
    return given


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    opts = parser.parse_args(argv)
    _check(parser, opts)
    try:
        if opts.generate:  # (built on meta: any size costs nothing; analysed there)
            with torch.device("meta"):
                model = build(opts.model, opts.config, opts.args, opts.factory_kwargs, generative=True)
            run_generation(model.eval(), opts, options_of(opts), _DTYPES.get(opts.dtype))
            return 0
        model = build(opts.model, opts.config, opts.args, opts.factory_kwargs)
        args, kwargs = _inputs(opts)
        check_keywords(model, kwargs)
        given = options_of(opts)
        train = opts.train or given.get("backward", False)
        model.train(train)
        with torch.set_grad_enabled(train):
            if run_planning(model, _batched_inputs(opts), opts, given) is not None:
                return 0
            say_timing(given)
            report = analyze(model, args, kwargs=kwargs, **given)
        print(report, end="\n\n")
        depth = TABLE_DEPTH if opts.depth is None else opts.depth
        options = {"depth": depth, "fold": not opts.no_fold} if opts.by == "module" else {}
        print(report.table(by=opts.by, top=opts.top, sort=opts.sort, **options))
        if report.communication is not None:
            print("\n" + report.communication_table())
        if opts.json:
            report.to_json(opts.json)
        if opts.csv:
            report.to_csv(opts.csv, by=opts.by)
        if opts.html:
            report.to_html(opts.html)
        for path in (opts.png, opts.svg):
            if path:
                report.plot(
                    path,
                    depth=opts.depth,
                    fold=not opts.no_fold,
                    color_by=opts.color_by,
                    edge_labels=not opts.no_edge_labels,
                )
    except Exception as exc:
        if opts.debug:
            traceback.print_exc()
        if isinstance(exc, FxInspectError):
            print(f"fxinspect: {exc}", file=sys.stderr)
        else:  # the model's own error, on one line with where it was raised
            where = "; ".join(note.removeprefix("fxinspect: ") for note in getattr(exc, "__notes__", ()))
            said = f"fxinspect: the model raised {one_line(exc, limit=1000)}" + (f" ({where})" if where else "")
            print(said, file=sys.stderr)
        return 2
    return 0
