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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from .. import formatting
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


_ACCEPTED = "a tensor, a tuple/list of positional arguments, or a dict of keyword arguments"


def _given(value: Any) -> str:
    """What the user passed, in a few words: ``str 'abc'``, ``numpy.ndarray of shape (2, 3)``."""
    if isinstance(value, torch.Tensor):
        return f"tensor {formatting.tensor(tuple(value.shape), str(value.dtype).removeprefix('torch.'))}"
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    if hasattr(value, "shape"):
        return f"{kind} of shape {tuple(value.shape)}"
    text = repr(value)
    return f"{kind} {text if len(text) <= 40 else text[:39] + '…'}"


def check_inputs(model: torch.nn.Module, args: tuple, kwargs: dict) -> None:
    """Raise an :class:`InputError` naming the input when ``model`` cannot be called on it.

    Arrays of other libraries (numpy, ...) where tensors belong, no tensor at all, or
    arguments the forward's signature does not take: each is named with what was given
    and what is accepted, before any capture tier runs the model.
    """
    flat, _ = pytree.tree_flatten_with_path((tuple(args), dict(kwargs)))
    for path, leaf in flat:
        if not isinstance(leaf, torch.Tensor) and hasattr(leaf, "__array__") and hasattr(leaf, "shape"):
            where = "example input" + pytree.keystr(path[1:]) if len(path) > 1 else "example input"
            raise InputError(
                f"{where} is a {_given(leaf)}: fxinspect runs the model on torch tensors; "
                "convert it with torch.as_tensor(...)"
            )
    forward = getattr(model, "forward", None)
    try:
        signature = inspect.signature(forward) if forward is not None else None
    except (TypeError, ValueError):  # a builtin or C forward: nothing to check against
        signature = None
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            shown = ", ".join([_given(a) for a in args] + [f"{k}={_given(v)}" for k, v in kwargs.items()]) or "nothing"
            raise InputError(
                f"{type(model).__name__}.forward{signature} cannot take the example inputs ({exc}); "
                f"given: {shown}; example_inputs is {_ACCEPTED}{_as_one_dict(signature, args, kwargs)}"
            ) from None
    if (args or kwargs) and not any(isinstance(leaf, torch.Tensor) for _, leaf in flat):
        shown = _given(args[0]) if len(args) == 1 and not kwargs else _given((args, kwargs))
        raise InputError(f"the example inputs hold no tensor: given {shown}; expected {_ACCEPTED}")


def _as_one_dict(signature: inspect.Signature, args: tuple, kwargs: dict) -> str:
    """A hint when the forward takes the dict given as keyword arguments as one argument."""
    if args or not kwargs:
        return ""
    try:
        bound = signature.bind(dict(kwargs))
    except TypeError:
        return ""
    (name,) = bound.arguments
    return f". To pass the dict as the one argument {name!r}, give it in a tuple: analyze(model, (batch,))"


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
    # per tensor leaf, the dimensions that follow the batch, when a capture is to serve
    # every batch size (the export tier marks them dynamic); ``None``: specialise
    batch_dims: tuple[tuple[int, ...], ...] | None = None
    batch_min: int = 1  # the smallest batch such a capture serves (export's: 2)

    @classmethod
    def build(cls, args: tuple, kwargs: dict, forward: Callable | None = None) -> FlatInputs:
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
