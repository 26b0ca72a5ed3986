"""The one registry of aten-level cost formulas.

A rule is a pure function of an aten call's arguments and result (real, meta or fake
tensors: only shapes and dtypes are read) returning a :class:`Cost`. Rules are keyed by
``OpOverloadPacket`` (``aten.mm``) or by one ``OpOverload`` (``aten.add.Tensor``); an
overload's own rule wins over its packet's. Registering a key twice is an error unless
``replace=True`` says it is meant.

Every aten op the counting run sees is exactly one of:

* counted  -- a rule gives its FLOPs and MACs (possibly 0, e.g. a copy);
* free     -- views and metadata ops: no arithmetic, no bytes moved;
* uncounted -- no rule: listed in ``report.uncounted``, totals marked partial.

Example
-------
>>> import torch
>>> from fxinspect.rules import Cost, register_rule, lookup
>>> @register_rule(torch.ops.aten.cosh, replace=True)   # user formula: 1 flop/element
... def cosh(args, kwargs, out):
...     return Cost(flops=out.numel())
>>> lookup(torch.ops.aten.cosh.default) is cosh
True
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Union

import torch

OpKey = Union[torch._ops.OpOverloadPacket, torch._ops.OpOverload]


class Cost(NamedTuple):
    """What one aten call costs.

    ``bytes_read``/``bytes_written`` are ``None`` to mean "the sizes of the tensor
    arguments / results" (the default for every counted op); a rule sets them when an op
    touches less than whole tensors (an embedding lookup reads rows, not the table).
    (A named tuple: rules run once per aten call, and it builds in a third of the time
    of a frozen dataclass.)
    """

    flops: int = 0
    macs: int = 0
    bytes_read: int | None = None
    bytes_written: int | None = None

    @staticmethod
    def matmul(macs: int) -> "Cost":
        """A matmul-like op: ``flops = 2 * macs`` (bias additions are not counted)."""
        return Cost(flops=2 * macs, macs=macs)


Rule = Callable[[tuple, dict, Any], Cost]

FREE: Rule = lambda args, kwargs, out: Cost(bytes_read=0, bytes_written=0)  # noqa: E731 - identity matters
"""The rule of views and metadata ops; compare with ``is``."""

_RULES: dict[OpKey, Rule] = {}


def _check_key(op: Any) -> None:
    if not isinstance(op, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        raise TypeError(
            f"register_rule expects aten ops such as torch.ops.aten.mm or torch.ops.aten.add.Tensor, got {op!r}"
        )


def register_rule(*ops: OpKey, replace: bool = False) -> Callable[[Rule], Rule]:
    """Decorator: make ``fn(args, kwargs, out) -> Cost`` the rule of ``ops``.

    Raises ``ValueError`` when an op already has a rule, unless ``replace=True``.
    """

    def decorate(fn: Rule) -> Rule:
        for op in ops:
            _check_key(op)
            if op in _RULES and not replace:
                raise ValueError(
                    f"{op} already has the rule {_RULES[op].__name__!r}; pass replace=True to override it"
                )
        for op in ops:
            _RULES[op] = fn
        return fn

    return decorate


def register_free(*ops: OpKey, replace: bool = False) -> None:
    """Declare ``ops`` free: views and metadata, no arithmetic and no bytes moved."""
    register_rule(*ops, replace=replace)(FREE)


_LOADERS: dict[str, Callable[[], Any]] = {}


def register_namespace_loader(namespace: str, loader: Callable[[], Any]) -> None:
    """Call ``loader()`` when an op of ``namespace`` has no rule yet: for libraries
    whose ops exist only once imported (torchvision's ``nms``, ``roi_align``, ...)."""
    _LOADERS[namespace] = loader


def lookup(func: torch._ops.OpOverload) -> Rule | None:
    """The rule for one aten overload: its own, else its packet's, else ``None``."""
    rule = _RULES.get(func) or _RULES.get(func.overloadpacket)
    if rule is None and func.namespace in _LOADERS:
        _LOADERS[func.namespace]()
        rule = _RULES.get(func) or _RULES.get(func.overloadpacket)
    return rule


def registered_ops() -> dict[OpKey, Rule]:
    """A copy of the registry, for listing and tests."""
    return dict(_RULES)
