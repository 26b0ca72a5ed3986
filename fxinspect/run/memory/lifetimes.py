"""How long the model, run eagerly, keeps a value alive past its last use.

The captured program drops each value at its last use. The model itself holds a
module's arguments until the module returns: the caller's frame keeps them, whatever
the module's forward does with its own copy of the name. ``y = self.expand(x)`` then
``self.block(y)`` keeps ``y`` through all of ``block``, even after ``block``'s first op
was its last reader. :class:`CallInputs` finds, from the module call each node ran in
(``CALL_KEY``), the values a call received from outside it and the node where the call
ends. A value a frame of the model held past its last use (``h = self.a(x)`` kept
until the forward returns or rebinds ``h``) is held until the last op it was held at,
which the symbolic trace and ``torch.export`` record (:mod:`fxinspect.capture.held`,
:mod:`fxinspect.capture.export_frames`). A memory run holds both until then, so the
timeline follows the eager model's.

Not modelled: a module call that pops a value off a list its caller passed it (a U-Net
block taking its residuals off the caller's ``skips``) holds the value to its end, as
a call's inputs are found from what it reads, not from its arguments.

The eager tier sees no frames of the model (``Capture.frames_seen``): there a call's
inputs are held, and a value entering a loop over a ``ModuleList`` is held through the
loop (see :class:`CallInputs`), an approximation.

Example
-------
>>> import torch, fxinspect
>>> class Net(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.expand = torch.nn.Linear(4, 8)
...         self.block = torch.nn.Sequential(torch.nn.Linear(8, 2), torch.nn.Linear(2, 8))
...     def forward(self, x):
...         return self.block(self.expand(x))
>>> calls = CallInputs(fxinspect.instrument(Net(), torch.randn(1, 4)).graph)
>>> calls.hold, calls.release_after
({'expand'}, {'block_1': ['expand']})
"""

from __future__ import annotations

import torch.fx as fx

from ...capture.base import MODULE_KEY
from ...capture.calls import CALL_KEY, CALLED_KEY
from ...capture.held import HELD_KEY
from ...records import OP_KINDS

__all__ = ["CallInputs"]


class CallInputs:
    """The values the eager model holds past their last use (``hold``): a module call's
    inputs and what its frames bind; per node, those to let go after it (``release_after``).

    ``frames_seen``: whether the capture read the model's frames. Without them, a value
    entering a container that is never called itself (the ``ModuleList`` a forward loops
    over) is held until the loop ends, as the forward that loops usually binds it to a
    name of its own (transformers' ``inputs_embeds``); with them, exactly as they held it.
    """

    def __init__(self, graph: fx.Graph, frames_seen: bool = True) -> None:
        index: dict[str, int] = {}
        first: dict[tuple[str, int], int] = {}
        last: dict[tuple[str, int], str] = {}
        received: dict[tuple[str, int], set[str]] = {}
        for i, node in enumerate(graph.nodes):
            index[node.name] = i
            if node.op not in OP_KINDS:
                continue
            path = node.meta.get(MODULE_KEY, ("", ""))[0]
            numbers = node.meta.get(CALL_KEY, ())
            if not path or not numbers:  # run by the root module: it returns when the run ends
                continue
            parts = path.split(".")
            producers = [a for a in node.all_input_nodes if a.op in OP_KINDS]  # (inputs and weights are resident)
            called = node.meta.get(CALLED_KEY, ()) if frames_seen else ()
            for depth in range(1, min(len(parts), len(numbers)) + 1):
                if depth <= len(called) and not called[depth - 1]:
                    continue  # a container never called (a ModuleList): no call holds anything
                call = (".".join(parts[:depth]), numbers[depth - 1])
                start = first.setdefault(call, i)
                last[call] = node.name
                outside = {p.name for p in producers if index[p.name] < start}
                if outside:
                    received.setdefault(call, set()).update(outside)
        ends: dict[str, int] = {}  # value -> index of the last node of a call that received it
        for call, values in received.items():
            end = index[last[call]]
            if end == first[call]:  # a call of one node: its inputs live through it anyway
                continue
            for value in values:
                ends[value] = max(ends.get(value, -1), end)
        for node in graph.nodes:
            held = node.meta.get(HELD_KEY)
            if held is None:
                continue
            until = index.get(held, -1)  # (-1: gone from the program)
            if until <= index[node.name]:
                continue
            for user in node.users:
                if index[user.name] >= until:
                    break
            else:  # held past its last use
                ends[node.name] = max(ends.get(node.name, -1), until)
        names = {i: name for name, i in index.items()}
        self.hold: set[str] = set(ends)
        self.release_after: dict[str, list[str]] = {}
        for value, end in sorted(ends.items(), key=lambda kv: index[kv[0]]):
            self.release_after.setdefault(names[end], []).append(value)
