"""The one registry of aten-level cost formulas.

A rule is a pure function of an aten call's arguments and result (real, meta or fake
tensors: only shapes and dtypes are read) returning a :class:`Cost`. Rules are keyed by
``OpOverloadPacket`` (``aten.mm``) or by one ``OpOverload`` (``aten.add.Tensor``); an
overload's own rule wins over its packet's. Registering a key twice is an error unless
``replace=True`` says it is meant.

Every aten op the counting run sees is exactly one of:

* counted  -- a rule gives its FLOPs and MACs (possibly 0, e.g. a copy);
* free     -- no arithmetic, no bytes moved; registered with a :class:`FreeReason`
  (a view, a metadata query, ...) that :func:`free_reason` tells;
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
>>> free_reason(torch.ops.aten.view.default)
<FreeReason.VIEW: 'view'>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from ..choices import Choice

OpKey = torch._ops.OpOverloadPacket | torch._ops.OpOverload


class Cost(NamedTuple):
    """What one aten call costs.

    ``bytes_read``/``bytes_written`` are ``None`` to mean "the sizes of the tensor
    arguments / results" (the default for every counted op; the counting mode adds to
    the results the arguments the op's schema marks written and does not return); a rule
    sets them when an op touches less than whole tensors (an embedding lookup reads rows,
    not the table), and its ``bytes_written`` is then all the op writes.
    (A named tuple: rules run once per aten call, and it builds in a third of the time
    of a frozen dataclass.)
    """

    flops: int = 0
    macs: int = 0
    bytes_read: int | None = None
    bytes_written: int | None = None

    @staticmethod
    def matmul(macs: int) -> Cost:
        """A matmul-like op without a bias: ``flops = 2 * macs``."""
        return Cost(flops=2 * macs, macs=macs)


Rule = Callable[[tuple, dict, Any], Cost]

FREE: Rule = lambda args, kwargs, out: Cost(bytes_read=0, bytes_written=0)  # noqa: E731 - identity matters
"""The rule of every free op; compare with ``is`` (why it is free: :func:`free_reason`)."""


class FreeReason(Choice):
    """Why an op is free: what it does instead of arithmetic or moving data."""

    VIEW = "view"
    """Aliases its input (views, ``detach``, ``lift_fresh``): the result shares its storage."""
    METADATA = "metadata"
    """Reads only sizes, strides, device or dtype, never an element (``sym_size``)."""
    CHECK = "check"
    """Asserts or constrains a value for the tracer (``_assert_async``,
    ``sym_constrain_range``), or orders such checks (``_make_dep_token``)."""
    ALLOCATION = "allocation"
    """Allocates or manages storage without writing an element (``empty*``, ``resize_``,
    ``set_``, ``record_stream``). Fills such as ``zeros`` write their result: they are
    counted (:mod:`.movement`), not free."""
    COMMUNICATION = "communication"
    """Exchanges data between ranks, or waits for an exchange (collectives,
    ``wait_tensor``): what it moves is in ``report.communication``, not in a node's bytes."""
    MARKER = "marker"
    """Opens or closes a profiler's range (``record_function``): touches no tensor."""
    USER = "user"
    """Declared free by user code that gave no reason: the default of
    :func:`register_free` (fxinspect's own free ops always give theirs)."""


_RULES: dict[OpKey, Rule] = {}
_FREE_REASONS: dict[OpKey, FreeReason] = {}  # exactly the keys of _RULES whose rule is FREE


def _check_key(op: Any) -> None:
    if not isinstance(op, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        raise TypeError(
            f"register_rule expects aten ops such as torch.ops.aten.mm or torch.ops.aten.add.Tensor, got {op!r}"
        )


def _store(ops: tuple[OpKey, ...], fn: Rule, replace: bool) -> None:
    """Make ``fn`` the rule of ``ops``; all are checked first, so a refusal changes nothing."""
    for op in ops:
        _check_key(op)
        if op in _RULES and not replace:
            current = _FREE_REASONS.get(op)
            described = f"FREE ({current.value})" if current is not None else repr(_RULES[op].__name__)
            raise ValueError(f"{op} already has the rule {described}; pass replace=True to override it")
    for op in ops:
        _RULES[op] = fn
        _FREE_REASONS.pop(op, None)  # a free op given a rule keeps no stale reason


def register_rule(*ops: OpKey, replace: bool = False) -> Callable[[Rule], Rule]:
    """Decorator: make ``fn(args, kwargs, out) -> Cost`` the rule of ``ops``.

    Raises ``ValueError`` when an op already has a rule, unless ``replace=True``, and for
    :data:`FREE`: free ops go through :func:`register_free`, which records their reason.
    """

    def decorate(fn: Rule) -> Rule:
        if fn is FREE:
            raise ValueError("FREE is not registered as a rule: use register_free(*ops, reason=FreeReason.<NAME>)")
        _store(ops, fn, replace)
        return fn

    return decorate


def register_free(*ops: OpKey, reason: FreeReason = FreeReason.USER, replace: bool = False) -> None:
    """Declare ``ops`` free for ``reason``: no arithmetic and no bytes moved.

    ``reason`` defaults to ``FreeReason.USER`` ("declared free by the user", claiming
    nothing more), so that ``fxinspect.register_free(op)`` keeps working; fxinspect's own
    registrations always pass theirs. Raises ``TypeError`` for a reason that is not a
    :class:`FreeReason` (a plain ``"view"`` too: ``FreeReason("view")`` converts it) and,
    as :func:`register_rule` does, ``ValueError`` for an op that already has a rule,
    unless ``replace=True``.
    """
    if not isinstance(reason, FreeReason):
        names = ", ".join(f"FreeReason.{r.name}" for r in FreeReason)
        raise TypeError(f"register_free expects reason= one of {names}; got {reason!r}")
    _store(ops, FREE, replace)
    for op in ops:
        _FREE_REASONS[op] = reason


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


def free_reason(func: torch._ops.OpOverload) -> FreeReason | None:
    """The reason ``func`` was registered free with, or ``None`` if it is not free.

    "Free" as :func:`lookup` answers it: an overload's own counted rule wins over a free
    packet, as in the counting run."""
    if lookup(func) is not FREE:
        return None
    # From the key lookup answered with: the overload's own registration, else its packet's.
    return _FREE_REASONS[func] if func in _RULES else _FREE_REASONS[func.overloadpacket]


def registered_ops() -> dict[OpKey, Rule]:
    """A copy of the registry, for listing and tests."""
    return dict(_RULES)


def register_defined(namespace: str, rules: dict[str, Rule]) -> bool:
    """Register ``rules`` (op name -> rule) for those of ``torch.ops.<namespace>``'s ops
    that are defined; safe to call again. Returns whether any is (a library's ops are
    defined once it is imported)."""
    ops = getattr(torch.ops, namespace)  # a lazy namespace object: imports nothing
    known = registered_ops()
    found = False
    for name, rule in rules.items():
        try:
            packet = getattr(ops, name)
        except (AttributeError, RuntimeError):  # the library not imported, or a version without it
            continue
        found = True
        if packet not in known:
            register_rule(packet)(rule)
    return found
