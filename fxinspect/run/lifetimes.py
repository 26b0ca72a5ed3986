"""How long the model, run eagerly, keeps a value alive past its last use: a call's inputs.

The captured program drops each value at its last use. The model itself holds a
module's arguments until the module returns: the caller's frame keeps them, whatever
the module's forward does with its own copy of the name. ``y = self.expand(x)`` then
``self.block(y)`` keeps ``y`` through all of ``block``, even after ``block``'s first op
was its last reader. :class:`CallInputs` finds, from the module call each node ran in
(``CALL_KEY``), the values a call received from outside it and the node where the call
ends; a memory run holds them until then, so the timeline follows the eager model's.

Not modelled: locals a forward binds and never rebinds (they too live until it returns;
telling them from rebound names needs the source).

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

from ..capture.base import MODULE_KEY
from ..capture.calls import CALL_KEY
from ..records import OP_KINDS

__all__ = ["CallInputs"]


class CallInputs:
    """The values module calls receive from outside (``hold``) and, per node that ends a
    call, those to let go after it (``release_after``)."""

    def __init__(self, graph: fx.Graph) -> None:
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
            for depth in range(1, min(len(parts), len(numbers)) + 1):
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
        names = {i: name for name, i in index.items()}
        self.hold: set[str] = set(ends)
        self.release_after: dict[str, list[str]] = {}
        for value, end in sorted(ends.items(), key=lambda kv: index[kv[0]]):
            self.release_after.setdefault(names[end], []).append(value)
