"""The analysis options' flags, made from their declaration in :class:`~fxinspect.options.Options`.

A field whose metadata declares a flag (``_flag`` in :mod:`fxinspect.options`) gets one:
a boolean a switch (``--no-timing`` for an option on by default, ``--backward`` for one
off), any other a ``--name VALUE`` read by the declared parser, with its choices. A flag
not given is left out of the parsed namespace, so :func:`given_options` returns only
what the user asked for and each entry point (``analyze``, ``sweep``, ...) keeps its own
defaults for the rest.

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_option_flags(parser)
>>> given_options(parser.parse_args(["--no-timing", "--device", "meta", "--repeats", "3"]))
{'timing': False, 'repeats': 3, 'device': 'meta'}
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from ..errors import InputError
from ..options import Options
from ..progress import say

__all__ = ["FLAGGED", "add_option_flags", "given_options", "say_timing"]

FLAGGED = tuple(f for f in dataclasses.fields(Options) if "flag" in f.metadata)
"""The options that have a command-line flag, in their declaration's order."""


def _reader(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse type: its complaint becomes argparse's one-line error."""

    def read(text: str) -> Any:
        try:
            return parse(text)
        except (ValueError, InputError) as exc:
            what = "an integer" if parse is int else None
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}" if what else str(exc)) from None

    read.__name__ = getattr(parse, "__name__", "value")
    return read


def add_option_flags(parser: argparse.ArgumentParser | Any) -> None:
    """Add a flag for every option in :data:`FLAGGED` to ``parser`` (or an argument group)."""
    for f in FLAGGED:
        flag = f.metadata["flag"]
        name = f.name.replace("_", "-")
        if isinstance(f.default, bool):  # a switch, flipping the declared default
            spelled = f"--no-{name}" if f.default else f"--{name}"
            action = "store_false" if f.default else "store_true"
            parser.add_argument(spelled, dest=f.name, action=action, default=argparse.SUPPRESS, help=flag["help"])
            continue
        choices = flag["choices"]() if flag["choices"] is not None else None
        parser.add_argument(
            f"--{name}",
            dest=f.name,
            type=_reader(flag["parse"]),
            choices=choices,
            default=argparse.SUPPRESS,
            metavar=None if choices else name.upper().replace("-", "_"),
            help=flag["help"],
        )


def given_options(namespace: argparse.Namespace) -> dict[str, Any]:
    """The options whose flags were given, by their ``Options`` names, in declaration order."""
    given = vars(namespace)
    return {f.name: given[f.name] for f in FLAGGED if f.name in given}


def say_timing(given: dict) -> None:
    """Before a timed analysis, say on stderr what the timing runs and that ``--no-timing``
    skips it (when progress is shown there: a terminal)."""
    opts = Options.of("analyze", given)
    if opts.timing and opts.progress and opts.device is None and opts.parallel is None:
        what = "step (forward and backward)" if opts.backward else "forward"
        say(
            f"the analysis is followed by {opts.warmup} warm-up and {opts.repeats} timed runs of the {what} "
            "(--no-timing skips them)"
        )
