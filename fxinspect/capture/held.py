"""What the model's own Python frames hold while each op runs, read during a symbolic trace.

The captured program drops a value at its last use. The model run eagerly keeps a value
as long as a name in one of its frames refers to it: ``h = self.a(x)`` keeps ``h`` until
``h`` is rebound or the forward returns, and a list such as DenseNet's ``features``
keeps everything appended to it. While torch.fx traces, those frames run for real, with
proxies where the tensors would be. :class:`FrameHolds` looks at their locals each time
an op node is made and records, per value, the last op during which some frame of the
model still held it: ``node.meta[HELD_KEY]``, the name of that op, which the memory
model uses to keep the value alive as long (:mod:`fxinspect.run.memory.lifetimes`).

Frames of torch.fx and of fxinspect are not the model's (they hold what the eager model
would not) and are skipped; a call's arguments, which they pass on, are the caller's and
are modelled from the module calls instead. A frame's locals are read again only when
the frame has run since (it calls another frame, or from another instruction), so a
trace pays for the frames that changed, not for the whole stack at every op.

A frame that waits on a call is not read again, but the lists and dicts it holds are
checked at each op: a callee may change them (``skips.pop()`` on its caller's list lets
a U-Net's residual go while the caller waits), and the frame is read again when one has.

Not seen: values held on the interpreter's stack rather than in a name (a later op of
the same expression reads them anyway), or stored on ``self``.

Example
-------
>>> import torch, fxinspect
>>> class Net(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.a, self.b, self.c = (torch.nn.Linear(4, 4) for _ in range(3))
...     def forward(self, x):
...         h = self.a(x)            # h: bound until forward returns
...         y = self.b(h)
...         return self.c(y)
>>> graph = fxinspect.instrument(Net(), torch.randn(1, 4)).graph
>>> {n.name: n.meta[HELD_KEY] for n in graph.nodes if HELD_KEY in n.meta}
{'a': 'c', 'b': 'c'}
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx

from ..records import OP_KINDS

__all__ = ["HELD_KEY", "FrameHolds"]

HELD_KEY = "fxinspect_held_until"
"""``node.meta[HELD_KEY]``: the last op node during which a frame of the model held the value."""

_FXINSPECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NOT_THE_MODEL = (os.path.dirname(fx.__file__) + os.sep, _FXINSPECT + os.sep, torch.overrides.__file__)
_CONTAINERS = (list, tuple, dict)
_MAX_ITEMS = 256  # a container longer than this is not scanned (a list of ints, a table)


class FrameHolds:
    """Per value, the last op node at which one of the model's frames held it.

    By default for torch.fx's trace: frames up to ``Tracer.trace``, those of torch.fx and
    fxinspect skipped, proxies mapped to their nodes. Another trace (``torch.export``'s,
    :mod:`.export_frames`) passes its own ``stop`` (the code of the outermost frame not
    read), ``skip`` (whether a file's frames are not the model's) and ``held`` (the op
    nodes a frame's locals hold).
    """

    def __init__(
        self,
        stop: types.CodeType | None = None,
        skip: Callable[[str], bool] | None = None,
        held: Callable[[dict[str, Any]], list[fx.Node]] | None = None,
    ) -> None:
        self.nodes: list[fx.Node] = []
        self.until: dict[fx.Node, int] = {}
        # the model's frames under the trace, outermost first: (frame, last instruction,
        # held nodes, the lists and dicts it holds with their items' ids); each kept, so
        # no other frame takes its id
        self._stack: list[tuple[types.FrameType, int, list[fx.Node], list[tuple[Any, tuple[int, ...]]]]] = []
        self._where: dict[int, int] = {}  # id(frame) -> its place in the stack
        self._ours: dict[int, tuple[types.CodeType, bool]] = {}  # id -> (code, not the model's)
        self._stop = stop or fx.Tracer.trace.__code__
        self._skip = skip or (lambda filename: filename.startswith(_NOT_THE_MODEL))
        self._read = _held_and_containers if held is None else lambda names: (held(names), _containers(names))

    def observe(self, node: fx.Node) -> None:
        """Record what the model's frames hold while ``node`` (an op just made) runs."""
        # (runs at every op node of the trace: lookups hoisted, the reads inlined)
        index = len(self.nodes)
        self.nodes.append(node)
        stack, where, ours = self._stack, self._where, self._ours
        fresh = []
        keep = 0
        f, callee, stop = sys._getframe(1), None, self._stop
        while f is not None:
            code = f.f_code
            if code is stop:
                break
            known = ours.get(id(code))  # (by id: a code object hashes its whole bytecode)
            if known is None or known[0] is not code:
                known = ours[id(code)] = (code, self._skip(code.co_filename))
            if not known[1]:
                place = where.get(id(f))
                if place is not None:  # (the stack holds its frames: an id found is that frame)
                    if place + 1 < len(stack) and stack[place + 1][0] is callee and stack[place][1] == f.f_lasti:
                        keep = place + 1  # still inside the same call: not run since (nor any caller of it)
                    else:
                        fresh.append(f)  # run since; its callers wait on it, as they did when it was read
                        keep = place
                    break
                fresh.append(f)
                callee = f
            f = f.f_back
        until, last = self.until, index - 1
        while len(stack) > keep:  # returned or run on: what they held, they held until the last op
            frame, _, held, _ = stack.pop()
            del where[id(frame)]
            for value in held:
                if until.get(value, -1) < last:
                    until[value] = last
        for place in range(keep):  # waiting on a call: read again if the call changed its containers
            for container, items in stack[place][3]:
                if len(container) != len(items) or (items and _items(container) != items):
                    frame, lasti, held, _ = stack[place]
                    self._flush(held, last)
                    stack[place] = (frame, lasti, *self._read(frame.f_locals))
                    break
        read = self._read
        for f in reversed(fresh):
            where[id(f)] = len(stack)
            stack.append((f, f.f_lasti, *read(f.f_locals)))

    def finish(self) -> dict[fx.Node, fx.Node]:
        """Per value a frame held past its making, the last op node it was held at."""
        last = len(self.nodes) - 1
        for _, _, held, _ in self._stack:
            self._flush(held, last)
        self._stack.clear()
        self._where.clear()
        return {value: self.nodes[i] for value, i in self.until.items() if self.nodes[i] is not value}

    def _flush(self, held: list[fx.Node], last: int) -> None:
        until = self.until
        for value in held:
            if until.get(value, -1) < last:
                until[value] = last


def _held_nodes(names: dict[str, Any]) -> list[fx.Node]:
    """The op nodes whose proxies the locals hold, directly or in a list, tuple or dict."""
    held: list[fx.Node] = []
    for value in names.values():  # (per op, :func:`_held_and_containers` takes the common case)
        _collect(value, held, 2)
    return held


def _held_and_containers(names: dict[str, Any]) -> tuple[list[fx.Node], list[tuple[Any, tuple[int, ...]]]]:
    """:func:`_held_nodes` and :func:`_containers` of the same locals, in one pass over
    them when they hold no list, tuple or dict (the common case)."""
    held: list[fx.Node] = []
    for value in names.values():
        kind = type(value)
        if kind is fx.Proxy:  # the common case, spelled out: it runs per local per op
            if value.node.op in OP_KINDS:
                held.append(value.node)
        elif kind in _CONTAINERS or isinstance(value, _CONTAINERS):
            return _held_nodes(names), _containers(names)
        elif isinstance(value, fx.Proxy):
            _collect(value, held, 2)
    return held, []


def _collect(value: Any, held: list[fx.Node], depth: int) -> None:
    if isinstance(value, fx.Proxy):
        # (read without the ``node`` property: an attribute proxy's makes a node)
        node = value.__dict__.get("node") or value.__dict__.get("_node")
        if isinstance(node, fx.Node) and node.op in OP_KINDS:
            held.append(node)
    elif depth and type(value) in _CONTAINERS and len(value) <= _MAX_ITEMS:
        for item in value.values() if type(value) is dict else value:
            _collect(item, held, depth - 1)


def _items(container: Any) -> tuple[int, ...]:
    """The ids of a list's items or a dict's values: changed when a callee changes it."""
    return tuple(map(id, container.values() if isinstance(container, dict) else container))


def _containers(names: dict[str, Any]) -> list[tuple[Any, tuple[int, ...]]]:
    """The lists and dicts the locals hold (to the depth read for values), each with its
    items' ids: what a callee may change while the frame waits on it."""
    found: list[tuple[Any, tuple[int, ...]]] = []
    pending = [(value, 2) for value in names.values() if isinstance(value, _CONTAINERS)]
    while pending:
        value, depth = pending.pop()
        if len(value) > _MAX_ITEMS:
            continue
        if isinstance(value, (list, dict)):
            found.append((value, _items(value)))
        if depth:
            items = value.values() if isinstance(value, dict) else value
            pending.extend((item, depth - 1) for item in items if isinstance(item, _CONTAINERS))
    return found
