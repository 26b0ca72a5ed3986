"""The counting dispatch mode: every aten op, priced by its rule, charged to one node.

The counting pass sets :attr:`CountingMode.node` to a node's name before it runs;
every aten op the node issues (inside leaf modules too) is charged to that node, and
ops that run while no node does are charged to :data:`UNATTRIBUTED` (the report lists
them). Costs are summed per ``(node, aten overload)``; no tensor is kept alive. An op's
bytes written include the arguments its schema marks written and it does not return
(the rules' conventions, :mod:`fxinspect.rules`). Before an aten op that writes one of
its arguments, ``before_write`` is called (the value reader copies what it has read but
not yet reduced). The outputs of ``empty``-like ops hold no values until an op
writes them: :meth:`CountingMode.unwritten` says so, and their statistics are not read.

Example
-------
>>> import torch
>>> mode = CountingMode()
>>> with mode:
...     mode.node = "matmul"
...     _ = torch.randn(2, 3) @ torch.randn(3, 4)
>>> [(op, c.calls, c.macs) for op, c in mode.costs["matmul"].items() if c.macs]   # 2*3*4
[('aten.mm.default', 1, 24)]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.multiprocessing.reductions import StorageWeakRef

from .. import rules  # noqa: F401 - importing the package registers every formula family
from ..records import OpStatus
from ..rules._util import nbytes
from ..rules.kinds import kind_reader
from ..rules.registry import FREE, lookup
from ..tensors import NOT_WORK, DispatchMode, holds_wrappers

UNATTRIBUTED = None
"""``CountingMode.node`` outside any graph node (ops there are kept apart and reported)."""
IGNORED = "<probes>"
"""``CountingMode.node`` while a probe runs its own ops (reading values): not counted."""

_DEVICE = torch.ops.prim.device.default
_UNINITIALISED = ("empty", "new_empty")  # (empty, empty_like, empty_strided, empty_permuted, new_empty, ...)


def _uninitialised(func: Any) -> bool:
    """Whether ``func`` returns memory it does not write (an ``out=`` overload returns
    its argument, which holds whatever it held)."""
    name = getattr(func, "_opname", "").lstrip("_")
    return name.startswith(_UNINITIALISED) and torch.Tag.out not in getattr(func, "tags", ())


def _storage(t: Any) -> StorageWeakRef | None:
    if not isinstance(t, torch.Tensor):
        return None
    try:
        return StorageWeakRef(t.untyped_storage())
    except Exception:  # sparse, nested, functional wrappers: no storage of their own
        return None


def _written_not_returned(schema: Any) -> tuple[tuple[int, str], ...]:
    """``(position, name)`` of the arguments an op writes in place without returning them
    (batch norm's running statistics): their bytes are written too, though not in ``out``."""
    if schema is None:
        return ()
    returned = {a for r in schema.returns if r.alias_info is not None for a in r.alias_info.before_set}
    return tuple(
        (i, a.name)
        for i, a in enumerate(schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write and not (a.alias_info.before_set & returned)
    )


class OpCost:
    """Running sums for one aten overload within one node."""

    __slots__ = ("calls", "flops", "macs", "bytes_read", "bytes_written", "status", "error", "kind")

    def __init__(self, status: OpStatus = OpStatus.COUNTED) -> None:
        self.calls = self.flops = self.macs = self.bytes_read = self.bytes_written = 0
        self.status = status
        self.error = ""
        self.kind: str | None = None  # (a convolution's, a batch norm's: rules.kinds; "" once two calls differ)


class CountingMode(DispatchMode):
    """Prices every aten op with its rule and charges it to ``self.node``."""

    def __init__(
        self, before_write: Callable[[], None] | None = None, observe: Callable[..., None] | None = None
    ) -> None:
        super().__init__()
        self.node: str | None = UNATTRIBUTED
        self.costs: dict[str | None, dict[str, OpCost]] = {}
        self.before_write = before_write
        self.observe = observe  # called with (func, args, kwargs, out) after each op of the model
        self._rules: dict[Any, tuple[Any, str | None, bool, tuple, bool, Any]] = {}
        # storages an empty-like op returned and no op has written since: not values yet
        self.unwritten_storages: dict[int, StorageWeakRef] = {}

    def unwritten(self, t: torch.Tensor) -> bool:
        """Whether ``t`` is (a view of) memory an ``empty``-like op returned and no op
        has written since: its bytes are whatever the allocator left there, not values
        (dropout's ``empty_like(x).bernoulli_(p)`` is two nodes of the eager tier)."""
        if not self.unwritten_storages:
            return False
        ref = _storage(t)
        held = self.unwritten_storages.get(ref.cdata) if ref is not None else None
        return held is not None and not held.expired()

    def _written(self, args: tuple, kwargs: dict | None) -> None:
        """Forget the storages a mutating op may write (any tensor it was given)."""
        for value in (*args, *(kwargs or {}).values()):
            for t in value if isinstance(value, (list, tuple)) else (value,):
                ref = _storage(t)
                if ref is not None:
                    self.unwritten_storages.pop(ref.cdata, None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _DEVICE and type(args[0]) is FakeTensor and not args[0].fake_mode.in_kernel_invocation:
            # a fake tensor's device, asked by autograd and meta functions thousands of
            # times a step: answered as the fake mode would, without its dispatch
            return args[0].fake_device
        if self.node is IGNORED:
            return func(*args, **kwargs) if kwargs else func(*args)
        if holds_wrappers(types):
            return NotImplemented  # (DTensor runs it as local ops, a quantized weight as ops on its inner tensors: they come back here)
        entry = self._rules.get(func)
        if entry is None:
            # fake tensors' queries of themselves and profiler ranges are no work the model
            # asked for (a virtual run must list the same ops as a real one): not listed
            key = None if func.namespace in NOT_WORK else str(func)
            schema = getattr(func, "_schema", None)  # (without one, assume it may write)
            mutates = schema.is_mutable if schema is not None else True
            fresh = _uninitialised(func)
            kinds = kind_reader(func) if key is not None else None  # (a convolution's, a batch norm's)
            entry = self._rules[func] = (lookup(func), key, mutates, _written_not_returned(schema), fresh, kinds)
        rule, key, mutates, side_writes, fresh, kinds = entry
        if mutates:
            if self.before_write is not None:
                self.before_write()
            if self.unwritten_storages:
                self._written(args, kwargs)
        out = func(*args, **kwargs) if kwargs else func(*args)
        if fresh:
            self._fresh(out)
        if self.observe is not None:
            self.observe(func, args, kwargs, out)
        if key is None:
            return out
        per_node = self.costs.get(self.node)
        if per_node is None:
            per_node = self.costs[self.node] = {}
        acc = per_node.get(key)
        if acc is None:
            acc = per_node[key] = OpCost(
                OpStatus.FREE if rule is FREE else OpStatus.COUNTED if rule else OpStatus.UNCOUNTED
            )
        acc.calls += 1
        if kinds is not None:
            kind = kinds(args)
            acc.kind = kind if acc.kind in (None, kind) else ""
        if rule is FREE:
            return out
        read = written = None
        if rule is not None:
            try:
                cost = rule(args, kwargs or {}, out)
            except Exception as exc:  # a rule that cannot price this call: say so, never 0
                acc.status, acc.error = OpStatus.UNCOUNTED, f"{type(exc).__name__}: {exc}"
            else:
                acc.flops += cost.flops
                acc.macs += cost.macs
                read, written = cost.bytes_read, cost.bytes_written
        if read is None:
            read = nbytes(args)
            if kwargs:
                read += nbytes([v for k, v in kwargs.items() if k != "out"])
        if written is None:
            written = nbytes(out)
            for index, name in side_writes:  # arguments written in place and not returned
                written += nbytes(args[index] if index < len(args) else (kwargs or {}).get(name))
        acc.bytes_read += read
        acc.bytes_written += written
        return out

    def _fresh(self, out: Any) -> None:
        ref = _storage(out)
        if ref is None:
            return
        if len(self.unwritten_storages) >= 64:  # (a long run: drop the storages freed since)
            for key in [k for k, r in self.unwritten_storages.items() if r.expired()]:
                del self.unwritten_storages[key]
        self.unwritten_storages[ref.cdata] = ref
