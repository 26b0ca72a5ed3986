"""The eager tier's calls into torch: which recorded ops are a torch function's own workings.

The eager tier records aten ops, so one call in the user's code can be many nodes:
``F.scaled_dot_product_attention`` on CPU is some twenty (with a causal mask of ``-inf``
built and absorbed inside it), ``F.dropout`` four. A profile function
(``sys.setprofile``) sees each call of a C function (a torch builtin) and each Python
call; every op recorded is given the outermost C call running in the Python frame
that made it (:meth:`CCalls.current`). After the run, the op nodes of one such call
that nothing outside it reads (and that write none of their arguments: a write may be
the call's effect on the caller's tensors) get :data:`WITHIN_CALL` in their meta, the
name of the call. Their values are the function's, not the model's: a NaN/Inf
finding is judged at the calls, as in the other tiers, where such a call is one node
(:func:`fxinspect.run.findings.find_nonfinite`). Unlike a ``TorchFunctionMode``, a
profile function changes no path the model takes (``has_torch_function`` fast paths).
When another profiler is set, nothing is marked.

Example
-------
>>> import torch
>>> from fxinspect.capture.eager import trace_eager
>>> from fxinspect.capture.inputs import FlatInputs
>>> m = torch.nn.Linear(4, 2)
>>> cap = trace_eager(m, FlatInputs.build((torch.randn(3, 4),), {}))
>>> [(n.name, n.meta.get(WITHIN_CALL)) for n in cap.graph_module.graph.nodes if n.op == "call_function"]
[('t', 'linear'), ('addmm', None)]
"""

from __future__ import annotations

import contextlib
import operator
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx as fx

__all__ = ["WITHIN_CALL", "CCalls"]

WITHIN_CALL = "fxinspect_within_call"
"""Node meta key: the torch function whose own workings the node's op was."""

_MACHINERY = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))
"""Where the frames between a C call and the dispatch mode come from: torch, fxinspect."""


class CCalls:
    """The outermost C call running in each Python frame, kept by a profile function."""

    def __init__(self) -> None:
        # per Python frame entered since: [C calls running in it, the outermost one as
        # (number, function), the call the frame was entered from (or None), whether it
        # is torch's or fxinspect's own code]
        self.levels: list[list[Any]] = [[0, None, None, False]]
        self.names: dict[int, str] = {}  # call number -> the C function's name
        self.ops: dict[fx.Node, int] = {}  # op node -> the call it ran in
        self.profile: Any = None  # the profile function, while it is set (the dispatch pauses it)

    def _profiler(self) -> Any:
        """The profile function (a closure: it runs at every call and return of the run)."""
        levels, machinery = self.levels, {}
        count = [0]

        def profile(frame: Any, event: str, arg: Any) -> None:
            level = levels[-1]
            if event == "c_call":
                if not level[0]:
                    count[0] += 1
                    level[1] = (count[0], arg)
                level[0] += 1
            elif event == "call":
                code = frame.f_code
                ours = machinery.get(code)
                if ours is None:
                    ours = machinery[code] = code.co_filename.startswith(_MACHINERY)
                levels.append([0, None, level[1] if level[0] else None, ours])
            elif event == "return":
                if len(levels) > 1:  # (frames entered before the profile was set return too)
                    levels.pop()
            elif level[0]:  # c_return, c_exception
                level[0] -= 1

        return profile

    @contextlib.contextmanager
    def watched(self) -> Iterator[None]:
        """Keep the calls while the block runs (not when another profiler is set)."""
        if sys.getprofile() is not None:
            yield
            return
        self.profile = self._profiler()
        sys.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            self.profile = None

    def record(self, node: fx.Node) -> None:
        """Note the C call ``node``'s op ran in: down the frames of the dispatch (torch's
        and fxinspect's own code) to the first that a C call entered; none when the
        dispatch came from other Python code (``x + y`` is no C call)."""
        for level in reversed(self.levels):
            if level[2] is not None:
                number, function = level[2]
                self.names.setdefault(number, getattr(function, "__name__", "") or str(function))
                self.ops[node] = number
                return
            if not level[3]:
                return

    def mark(self, graph: fx.Graph) -> None:
        """Mark the op nodes of each call of several ops that only that call reads."""
        members: dict[int, list[fx.Node]] = {}
        for node in graph.nodes:  # (not self.ops: the pruned nodes are gone)
            call = self.ops.get(node)
            if call is not None:
                members.setdefault(call, []).append(node)
        for call, nodes in members.items():
            if len(nodes) < 2:
                continue
            inside = set(nodes)
            for node in nodes:
                schema = getattr(node.target, "_schema", None)
                if schema is not None and not schema.is_mutable and all(u in inside for u in _readers(node)):
                    node.meta[WITHIN_CALL] = self.names[call]


def _readers(node: fx.Node) -> list[fx.Node]:
    """The nodes that read ``node``'s value, through the getitems of a tuple output."""
    found = []
    for user in node.users:
        found += _readers(user) if user.target is operator.getitem else [user]
    return found
