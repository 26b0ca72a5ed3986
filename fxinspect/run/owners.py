"""Which fx node created each autograd node: the bridge from backward ops to nodes.

Autograd numbers every node it creates in the forward (its sequence number). The probe
before an fx node reads the counter, the probe after reads it again: the autograd nodes
numbered in between are that fx node's. In the backward, ``torch._C._current_autograd_node()``
says which autograd node is running, and so which fx node's backward it is.

Example
-------
>>> import torch
>>> owners = AutogradOwners()
>>> x = torch.ones(2, requires_grad=True)
>>> owners.before("double"); y = x * 2; owners.after("double")
>>> owners.before("square"); z = (y * y).sum(); owners.after("square")
>>> owners.owner(z.grad_fn._sequence_nr()), owners.owner(y.grad_fn._sequence_nr())
('square', 'double')
"""

from __future__ import annotations

import bisect

import torch

__all__ = ["AutogradOwners"]

_sequence_nr = torch._C._autograd._get_sequence_nr
_current_node = torch._C._current_autograd_node


class AutogradOwners:
    """Sequence-number ranges of autograd nodes, each owned by one fx node."""

    def __init__(self) -> None:
        self._opened: dict[str, int] = {}
        self._ranges: list[tuple[int, int, str]] = []
        self._starts: list[int] | None = None

    def reset(self) -> None:
        """Forget every range (a new forward numbers its autograd nodes afresh)."""
        self._opened.clear()
        self._ranges.clear()
        self._starts = None

    def before(self, name: str) -> None:
        """Called as fx node ``name`` starts."""
        self._opened[name] = _sequence_nr()

    def after(self, name: str) -> None:
        """Called as fx node ``name`` ends: the autograd nodes numbered since are its."""
        end = _sequence_nr()
        if end > self._opened[name]:
            self._ranges.append((self._opened[name], end, name))
            self._starts = None

    def owner(self, sequence_nr: int) -> str | None:
        """The fx node whose forward created autograd node ``sequence_nr``, or ``None``."""
        if self._starts is None:
            self._ranges.sort()
            self._starts = [r[0] for r in self._ranges]
        i = bisect.bisect_right(self._starts, sequence_nr) - 1
        return self._ranges[i][2] if i >= 0 and sequence_nr < self._ranges[i][1] else None

    def running(self) -> str | None:
        """The fx node whose backward is running now, or ``None`` (no node's, or no backward)."""
        current = _current_node()
        return self.owner(current._sequence_nr()) if current is not None else None
