"""Example inputs: normalise what the user passed and flatten it to tensors.

Every capture tier produces a program whose placeholders are the *tensor leaves* of
``(args, kwargs)`` in pytree order; everything else (``None``, flags, ints) is a
constant baked into the capture. :class:`FlatInputs` does the bookkeeping once.

Example
-------
>>> import torch
>>> flat = FlatInputs.build((torch.ones(2),), {"extra": {"mask": torch.zeros(2), "flag": True}})
>>> [t.shape for t in flat.tensors], flat.names
([torch.Size([2]), torch.Size([2])], ['input_0', 'extra_mask'])
"""

from __future__ import annotations

import inspect
import keyword
import re
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from ..errors import InputError


def normalize(example_inputs: Any, kwargs: dict | None) -> tuple[tuple, dict]:
    """``tensor`` -> ``(tensor,)``; ``tuple``/``list`` -> positional; ``dict`` -> keywords.

    ``kwargs`` adds keyword arguments to the positional ones.
    """
    if isinstance(example_inputs, dict):
        args, kw = (), dict(example_inputs)
    elif isinstance(example_inputs, (tuple, list)):
        args, kw = tuple(example_inputs), {}
    elif example_inputs is None:
        args, kw = (), {}
    else:
        args, kw = (example_inputs,), {}
    for key, value in (kwargs or {}).items():
        if key in kw:
            raise InputError(f"keyword argument {key!r} given twice: in example_inputs and in kwargs=")
        kw[key] = value
    return args, kw


def _identifier(text: str, taken: set[str]) -> str:
    name = re.sub(r"\W+", "_", text).strip("_") or "input"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"input_{name}"
    base, i = name, 1
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def _positional_names(forward: Callable | None, count: int) -> list[str]:
    """Names of the first ``count`` positional parameters, ``input_i`` past them."""
    names: list[str] = []
    try:
        params = list(inspect.signature(forward).parameters.values()) if forward else []
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return [names[i] if i < len(names) else f"input_{i}" for i in range(count)]


@dataclass
class FlatInputs:
    """The leaves of ``(args, kwargs)``, which of them are tensors, and their names."""

    args: tuple
    kwargs: dict
    leaves: list[Any]
    spec: pytree.TreeSpec
    tensor_positions: list[int]
    names: list[str]  # one readable identifier per tensor leaf, used as placeholder name

    @classmethod
    def build(cls, args: tuple, kwargs: dict, forward: Callable | None = None) -> "FlatInputs":
        leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        paths = [p for p, _ in pytree.tree_flatten_with_path((tuple(args), dict(kwargs)))[0]]
        arg_names = _positional_names(forward, len(args))
        taken: set[str] = set()
        names = []
        for i in positions:
            path = paths[i]
            head = path[1]  # path[0] picks args (0) or kwargs (1)
            if path[0].idx == 0:
                root = arg_names[head.idx]
            else:
                root = str(head.key)
            rest = "".join(str(k) for k in path[2:])
            names.append(_identifier(root + rest, taken))
        return cls(tuple(args), dict(kwargs), leaves, spec, positions, names)

    @property
    def tensors(self) -> list[torch.Tensor]:
        return [self.leaves[i] for i in self.tensor_positions]

    def rebuild(self, tensors: list[Any]) -> tuple[tuple, dict]:
        """``(args, kwargs)`` with the tensor leaves replaced by ``tensors`` (e.g. proxies)."""
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_positions, tensors):
            leaves[i] = t
        return pytree.tree_unflatten(leaves, self.spec)


def flatten_outputs(out: Any) -> tuple[list[Any], pytree.TreeSpec]:
    """Leaves of a model output (tensors, tuples, dicts, dataclasses, HF ModelOutput)."""
    return pytree.tree_flatten(out)
