"""What every capture tier produces: one GraphModule over flat tensor inputs.

Example
-------
>>> import torch
>>> from fxinspect.capture import capture
>>> cap = capture(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()), (torch.randn(1, 4),), {})
>>> str(cap.method), [module_of(n) for n in cap.graph_module.graph.nodes if n.op == "call_module"]
('symbolic', [('0', 'Linear'), ('1', 'ReLU')])
>>> cap.method == "symbolic", Method("symbolic") is cap.method
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from ..choices import Choice
from ..errors import InputError
from .attributes import AttributeWrite
from .inputs import FlatInputs

MODULE_KEY = "fxinspect_module"
"""``node.meta[MODULE_KEY] = (dotted module path, class name)`` on every op node."""


class Method(Choice):
    """A capture method: a tier's name, or ``AUTO`` for the first tier that works.

    A ``str``, so it equals the name the CLI and the API take (``Method.EAGER == "eager"``).
    """

    AUTO = "auto"
    SYMBOLIC = "symbolic"
    EXPORT = "export"
    EAGER = "eager"

    @classmethod
    def parse(cls, value: Any) -> Method:
        """``value`` as a method, or an ``InputError`` naming the valid choices."""
        try:
            return cls(value)
        except ValueError:
            tiers = sorted(str(m) for m in cls if m is not cls.AUTO)
            raise InputError(f"method must be 'auto' or one of {tiers}, got {value!r}") from None


@dataclass(frozen=True)
class Capture:
    """A captured program and how it was obtained; built whole, never changed after.

    ``graph_module(*inputs.tensors)`` returns the model's output *leaves* as a tuple
    (see ``out_spec``). ``calls`` counts how often each module path ran; ``leaves`` are
    the module paths captured as one opaque node (their internals are attributed to that
    node). Every op node carries ``node.meta[MODULE_KEY]``. What a later step learns
    about the capture (``analyze`` choosing another tier) is a new record
    (``dataclasses.replace``) or notes kept beside it.
    """

    graph_module: fx.GraphModule
    method: Method
    inputs: FlatInputs
    calls: dict[str, int] = field(default_factory=dict)
    leaves: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()
    out_spec: Any = None
    auto_leaves: tuple[str, ...] = ()  # untraceable modules made leaves
    # checkpointed calls traced through as plain ops (their recomputation lost): see kept.py
    lost_checkpoints: tuple[str, ...] = ()
    # custom autograd.Functions traced through, their backward lost: (class, module path); see functions.py
    lost_functions: tuple[tuple[str, str], ...] = ()
    attr_prefix: str = ""  # prefix of get_attr/call_module targets that the user's model lacks
    model: torch.nn.Module | None = None  # the model captured (its parameters may live outside the graph)
    # buffers the capture itself wrote and the graph does not (path, value after one call):
    # a step answered by the program (``inspect``) writes them as the call would have
    trace_writes: tuple[tuple[str, torch.Tensor], ...] = ()
    # attributes the forward set on its modules (``self.aux_loss = ...``): see attributes.py
    attribute_writes: tuple[AttributeWrite, ...] = ()
    # whether the tier read the model's frames as it ran (``node.meta[HELD_KEY]``: see held.py)
    frames_seen: bool = False

    def __post_init__(self) -> None:
        # tiers build these as lists and sets; the record keeps them immutable
        for name, kind in (
            ("leaves", frozenset),
            ("notes", tuple),
            ("failures", tuple),
            ("auto_leaves", tuple),
            ("lost_checkpoints", tuple),
            ("lost_functions", tuple),
        ):
            object.__setattr__(self, name, kind(getattr(self, name)))

    def user_path(self, target: str) -> str:
        """A graph target as a path in the user's model (``"model.fc"`` -> ``"fc"``)."""
        return strip_prefix(target, self.attr_prefix)


def strip_prefix(path: str, prefix: str) -> str:
    """``("model.fc", "model.")`` -> ``"fc"``; ``("model", "model.")`` -> ``""``."""
    if not prefix:
        return path
    if path == prefix[:-1]:
        return ""
    return path[len(prefix) :] if path.startswith(prefix) else path


def resolve_attr(root: torch.nn.Module, target: str) -> Any:
    """The object at dotted ``target`` below ``root`` (a submodule, tensor or constant)."""
    obj: Any = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def module_of(node: fx.Node) -> tuple[str, str]:
    """``(path, class name)`` of the module that ran ``node``."""
    return node.meta.get(MODULE_KEY, ("", ""))


def type_name(module: torch.nn.Module) -> str:
    return type(module).__name__


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``"TypeError: first line of the message"``, cut to ``limit`` characters."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    line = f"{type(exc).__name__}: {first}"
    return line if len(line) <= limit else line[: limit - 1] + "…"
