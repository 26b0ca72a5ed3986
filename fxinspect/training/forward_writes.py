"""What the forward sets on ``self``, set again by a step the captured program answers.

The program runs the forward's ops, not its Python: ``self.aux_loss = y.pow(2).mean()``
runs the ops, but nothing binds the attribute. The capture lists each such write and
the nodes that compute its value (:mod:`fxinspect.capture.attributes`);
:class:`ForwardWrites` binds it, on the module the forward set it on, once the last of
those nodes has run, as the forward's own line would have (values from the inputs or
attribute reads, before the run). A value the program does not compute is left as it
was, and :meth:`ForwardWrites.notes` names it.

Example
-------
>>> import torch, fxinspect
>>> class Net(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = torch.nn.Linear(3, 2)
...     def forward(self, x):
...         y = self.fc(x)
...         self.stats = {"mean": y.mean(), "input": x}
...         return y
>>> net = Net()
>>> with fxinspect.inspect(net) as ins:
...     out = net(torch.ones(4, 3))
...     torch.equal(net.stats["mean"], out.mean()), net.stats["input"].shape
(True, torch.Size([4, 3]))
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from ..capture.attributes import AttributeWrite
from ..run.program import InstrumentedProgram

__all__ = ["ForwardWrites"]


class _Pending:
    """One write's value, leaf by leaf, bound when the last leaf is known."""

    def __init__(self, module: torch.nn.Module, write: AttributeWrite) -> None:
        self.module, self.write = module, write
        self.values: list[Any] = [None] * len(write.nodes)
        self.missing = len(write.nodes)

    def fill(self, index: int, value: Any) -> None:
        self.values[index] = value
        self.missing -= 1
        if self.missing == 0:
            setattr(self.module, self.write.name, pytree.tree_unflatten(self.values, self.write.spec))
            self.values = []  # (the module holds them now)


class ForwardWrites:
    """The capture's attribute writes of ``model``, bound from one run of ``program`` on
    ``inputs``: call :meth:`before_run`, then :meth:`ran` after each op node."""

    def __init__(self, model: torch.nn.Module, program: InstrumentedProgram, inputs: list[Any]) -> None:
        self._at: dict[str, list[tuple[_Pending, int]]] = {}  # op node -> the leaves it computes
        self._now: list[tuple[_Pending, int, Any]] = []  # leaves known before the run
        self._unset: list[str] = []
        nodes = {n.name: n for n in program.graph.nodes}
        placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
        for write in program.capture.attribute_writes:
            if not write.computed:
                self._unset.append(f"{write.module}.{write.name}" if write.module else write.name)
                continue
            pending = _Pending(model.get_submodule(write.module), write)
            if not write.nodes:  # a value with no tensor in it (None, an empty list)
                self._now.append((pending, -1, None))
            for index, name in enumerate(write.nodes):
                node = nodes[name]
                if node.op == "placeholder":
                    self._now.append((pending, index, inputs[placeholders.index(node)]))
                elif node.op == "get_attr":
                    self._now.append((pending, index, program.attribute(node)))
                else:
                    self._at.setdefault(name, []).append((pending, index))

    def notes(self) -> tuple[str, ...]:
        """A line naming the writes the program does not compute, if any."""
        if not self._unset:
            return ()
        names = ", ".join(self._unset[:4]) + (f", … (+{len(self._unset) - 4})" if len(self._unset) > 4 else "")
        return (
            f"inspect: the forward set attributes to values the captured program does not compute ({names}): "
            "the analysed call leaves them as they were, where a plain call would set them",
        )

    def before_run(self) -> None:
        """Bind what the inputs and attribute reads give (and values without tensors)."""
        for pending, index, value in self._now:
            if index < 0:
                setattr(pending.module, pending.write.name, pytree.tree_unflatten([], pending.write.spec))
            else:
                pending.fill(index, value)

    def ran(self, name: str, out: Any) -> None:
        """Op node ``name`` returned ``out``: the leaves it computes are known."""
        for pending, index in self._at.get(name, ()):
            pending.fill(index, out)
