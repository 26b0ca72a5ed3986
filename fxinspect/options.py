"""``Options``: every analysis option, declared, defaulted and validated once.

``analyze``, ``instrument`` and ``inspect`` take their options as keywords after the
model and inputs and build one frozen :class:`Options` from them with :meth:`Options.of`,
which rejects names the entry point does not take (with the closest valid one) and
checks each value; the passes then read the record, never loose parameters. Each entry
point's signature is made from these declarations, so ``help(fxinspect.analyze)``
lists them with their defaults. The planning calls (``sweep``, ``max_batch``,
``checkpoint_plan``) build the same record, with their own defaults for ``device``
(``"meta"``) and ``timing`` in their signatures; the command line makes a flag of each
field that declares one (:mod:`fxinspect.cli.flags`).

Example
-------
>>> Options.of("analyze", {"timing": False, "repeats": 3}).repeats
3
>>> Options.of("analyze", {"timming": False})  # doctest: +ELLIPSIS
Traceback (most recent call last):
fxinspect.errors.InputError: analyze() has no option 'timming' (did you mean 'timing'?); its options are ...
>>> Options.of("instrument", {"timing": False}, CAPTURE_OPTIONS)
Traceback (most recent call last):
fxinspect.errors.InputError: instrument() has no option 'timing' (it is an option of analyze()); its options are method, leaf_modules
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .capture.base import Method
from .errors import InputError

__all__ = ["CAPTURE_OPTIONS", "INSPECT_OPTIONS", "Options", "meta_device", "own_parameters", "signature_of"]


def _flag(help: str, parse: Callable[[str], Any] = str, choices: Callable[[], list[str]] | None = None) -> dict:
    """A field's command-line flag (``fxinspect.cli.flags`` makes it): its help, how its
    text is read (a boolean is a switch: ``--no-NAME`` where it defaults on), its choices."""
    return {"flag": {"help": help, "parse": parse, "choices": choices}}


def _optimizer_named(name: str) -> type:
    """A ``torch.optim`` class from its name (``"AdamW"``); a ``ValueError`` naming the classes if none."""
    found = getattr(torch.optim, name, None)
    if not (isinstance(found, type) and issubclass(found, torch.optim.Optimizer)):
        names = sorted(n for n, v in vars(torch.optim).items() if isinstance(v, type) and n[0].isupper())
        raise ValueError(f"{name!r} is not a torch.optim class; one of {', '.join(names)}")
    return found


@dataclass(frozen=True)
class Options:
    """What to capture, which passes run, and how.

    Capture: ``method`` (``"auto"`` or a capture tier's name), ``leaf_modules`` (module classes,
    instances or dotted paths captured as one node). Passes: ``timing`` with ``warmup``
    and ``repeats``, ``check_finite`` (NaN/Inf and value statistics), ``backward`` with
    ``loss_fn``, ``memory`` with ``measure_memory`` and ``optimizer``. ``device="meta"`` analyses without
    allocating. ``progress=False``: no progress line (:mod:`fxinspect.progress`). See
    :func:`fxinspect.analyze` for what each one does.
    """

    method: Method = field(
        default=Method.AUTO, metadata=_flag("capture tier", choices=lambda: [str(m) for m in Method])
    )
    leaf_modules: tuple[Any, ...] = ()
    timing: bool = field(default=True, metadata=_flag("skip the timing runs"))
    warmup: int = field(default=2, metadata=_flag("timing: warm-up runs before the timed ones", parse=int))
    repeats: int = field(default=10, metadata=_flag("timing: timed runs (latencies are their medians)", parse=int))
    check_finite: bool = field(default=True, metadata=_flag("skip the NaN/Inf checks and value statistics"))
    device: torch.device | None = field(
        default=None, metadata=_flag("'meta' analyses without allocating weights", choices=lambda: ["meta"])
    )
    backward: bool = field(default=False, metadata=_flag("also run a backward (implies --train)"))
    loss_fn: Callable[[Any], torch.Tensor] | None = None
    memory: bool = field(default=True, metadata=_flag("skip the memory model"))
    measure_memory: bool = field(
        default=False, metadata=_flag("also measure the memory with the allocator (one more run)")
    )
    optimizer: Any = field(
        default=None,
        metadata=_flag("a torch.optim class whose state the step holds, e.g. AdamW", parse=_optimizer_named),
    )
    device_spec: Any = field(default=None, metadata=_flag("price steps on a device, e.g. h100-sxm or measured"))
    parallel: Any = None
    progress: bool = field(
        default=True, metadata=_flag("no progress line on stderr (shown on a terminal once work runs 2 s)")
    )

    def __post_init__(self) -> None:
        fix = object.__setattr__  # (frozen) values normalised once, here
        fix(self, "method", Method.parse(self.method))
        fix(self, "device", meta_device(self.device))
        if isinstance(self.leaf_modules, (str, type, torch.nn.Module)) or not isinstance(self.leaf_modules, Iterable):
            raise InputError(f"leaf_modules must be a list of classes, modules or paths, got {self.leaf_modules!r}")
        fix(self, "leaf_modules", tuple(self.leaf_modules))
        for name in ("timing", "check_finite", "backward", "memory", "measure_memory", "progress"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name} must be True or False, got {getattr(self, name)!r}")
        for name, least in (("warmup", 0), ("repeats", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise InputError(f"{name} must be an integer >= {least}, got {value!r}")
        if self.loss_fn is not None and not callable(self.loss_fn):
            raise InputError(f"loss_fn must be a function of the model's output, got {type(self.loss_fn).__name__}")
        if self.measure_memory and not self.memory:
            raise InputError("measure_memory=True measures the memory run beside its model: it needs memory=True")
        if self.optimizer is not None and not (
            isinstance(self.optimizer, torch.optim.Optimizer)
            or (isinstance(self.optimizer, type) and issubclass(self.optimizer, torch.optim.Optimizer))
        ):
            raise InputError(
                f"optimizer= expects a torch.optim.Optimizer class or instance, got {type(self.optimizer).__name__}"
            )
        if self.parallel is not None:  # (what it is, is checked where it is run: fxinspect.parallel.step)
            if not self.memory or self.measure_memory:
                raise InputError("parallel= models one rank's memory: it needs memory=True and measure_memory=False")
            if self.method not in (Method.AUTO, Method.EAGER) or self.leaf_modules:
                raise InputError(
                    "parallel= runs the step itself, recorded op by op by the eager tier: it takes no "
                    f"method={str(self.method)!r} or leaf_modules"
                )
            fix(self, "device", self.device or torch.device("meta"))  # (one process stands in for any rank)
        if self.optimizer is not None and not (self.backward and self.memory):
            raise InputError(
                "optimizer= adds to the training memory: it needs backward=True and memory=True, "
                f"got backward={self.backward}, memory={self.memory}"
            )

    @classmethod
    def of(
        cls, caller: str, given: Mapping[str, Any], allowed: Iterable[str] | None = None, own: Iterable[str] = ()
    ) -> Options:
        """The options ``caller`` was given; names outside ``allowed`` (default: every
        option) are an :class:`~fxinspect.errors.InputError` naming the closest valid one
        (or the closest of ``own``, the caller's other parameters)."""
        names = list(allowed) if allowed is not None else [f.name for f in dataclasses.fields(cls)]
        for name in given:
            if name not in names:
                raise InputError(_unknown(caller, name, names, list(own)))
        return cls(**given)

    def keywords(self) -> dict[str, Any]:
        """The record as the keywords ``analyze`` takes (``analyze(model, x, **opts.keywords())``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


CAPTURE_OPTIONS = ("method", "leaf_modules")
"""The options that decide the capture alone (``instrument`` takes these)."""

INSPECT_OPTIONS = ("method", "leaf_modules", "check_finite")
"""The options of ``inspect`` (the inputs are the model's own call's)."""


def _unknown(caller: str, name: str, names: list[str], own: list[str]) -> str:
    every = [f.name for f in dataclasses.fields(Options)]
    if name in every:
        why = "it is an option of analyze()"
    else:
        close = difflib.get_close_matches(name, names + own, n=1)
        why = f"did you mean {close[0]!r}?" if close else "not an option"
    return f"{caller}() has no option {name!r} ({why}); its options are {', '.join(names)}"


def meta_device(device: Any) -> torch.device | None:
    """``device=`` checked: ``None``, or the ``meta`` device (analyse without allocating)."""
    if device is None:
        return None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        dev = None
    if dev is None or dev.type != "meta":
        raise InputError(
            f"device must be None (run where the model is) or 'meta' (analyse without allocating), got {device!r}"
        )
    return dev


def own_parameters(function: Callable) -> tuple[str, ...]:
    """The names of ``function``'s parameters other than its ``**options``."""
    return tuple(n for n, p in inspect.signature(function).parameters.items() if p.kind is not p.VAR_KEYWORD)


def signature_of(function: Callable, allowed: Iterable[str] | None = None) -> inspect.Signature:
    """``function``'s signature with its ``**options`` spelled out as keyword-only
    parameters (``allowed`` of them), each with its declared default."""
    sig = inspect.signature(function)
    fields = {f.name: f for f in dataclasses.fields(Options)}
    wanted = list(allowed) if allowed is not None else list(fields)
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    have = {p.name for p in params}
    for name in wanted:
        if name not in have:
            f = fields[name]
            default = f.default.value if isinstance(f.default, Method) else f.default  # "auto", as typed
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=f.type))
    return sig.replace(parameters=params)
