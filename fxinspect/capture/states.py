"""State objects among the inputs (a KV cache): their tensors are inputs, and the caller's object stays as it was.

A decode step takes the cache the model built (transformers' ``DynamicCache``,
``StaticCache``, ``EncoderDecoderCache``, a Mamba state...): a plain Python object whose
tensors sit in its attributes, which the step grows (``torch.cat`` into a list of
layers) or writes in place (``index_copy_``), and returns. No tier can take such an
object as it is: torch.fx refuses it as an argument, ``torch.export`` as an output, and
the eager tier keeps its tensors as constants and grows the caller's cache once per run.

:func:`held_states` makes each such object a pytree node for the duration of an
analysis, by duck typing (any input object that is no tensor, container, module or torch object,
:func:`is_state`; transformers is never imported): its
leaves are those tensors, in attribute order, named by their path
(``cache.layers.0.keys``), and unflattening deep-copies a snapshot of the object with the
new leaves in their places. So every tier gets a *copy* of the object around its own
tensors (placeholders, proxies, fakes), outputs holding such an object flatten to its
tensors, and the memory model sees the cached tensors as inputs, not activations.

The caller's objects are never run: :func:`held_states` hands back the inputs with each
state object replaced by a copy whose tensors are clones (free on ``meta`` and for fake
tensors), so neither a rebinding of its attributes nor an in-place write reaches the
caller's cache, however many runs an analysis makes. The registrations are removed when
the block ends, also on error (a class the user registered is left as it was).

Example
-------
>>> import torch
>>> class State:
...     def __init__(self):
...         self.layers = [{"k": torch.zeros(2, 3)}]
>>> state = State()
>>> with held_states((state,), {}) as ((copy,), _):
...     leaves, spec = pytree.tree_flatten(copy)
...     [tuple(t.shape) for t in leaves], copy is state, pytree.tree_flatten_with_path(copy)[0][0][0]
([(2, 3)], False, (GetAttrKey(name='layers.0.k'),))
>>> State in pytree.SUPPORTED_NODES
False
"""

from __future__ import annotations

import contextlib
import copy
import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree

__all__ = ["held_states", "held_tensors", "holds_states", "is_state", "rewound", "state_tensors"]

DEPTH = 8
"""How deep :func:`state_tensors` looks into attributes (a cache: cache.layers[i].keys is 3)."""


class _Slot:
    """Where a tensor sat in a snapshot; unflattening puts a leaf in its place."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __deepcopy__(self, memo: dict) -> Any:  # a slot not in the memo stays a slot
        return memo.get(id(self), self)


@dataclass(frozen=True)
class _Context:
    """A state object's pytree context: its snapshot (tensors as slots) and leaf paths."""

    paths: tuple[str, ...]
    kind: type
    snapshot: Any = field(compare=False, hash=False)
    slots: tuple[_Slot, ...] = field(compare=False, hash=False)


def _children(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, (list, tuple)):
        yield from ((str(i), v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        yield from ((str(k), v) for k, v in value.items())
    elif hasattr(value, "__dict__") and not isinstance(value, (type, torch.nn.Module)) and not callable(value):
        yield from vars(value).items()


def state_tensors(value: Any) -> list[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for each distinct tensor held in ``value``'s attributes, lists
    and dicts (at most :data:`DEPTH` deep), in attribute order."""
    found: list[tuple[str, torch.Tensor]] = []
    seen: set[int] = set()

    def walk(v: Any, path: str, depth: int) -> None:
        if id(v) in seen:
            return
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            found.append((path, v))
        elif depth < DEPTH and not isinstance(v, (str, bytes, int, float, bool)):
            for name, child in _children(v):
                walk(child, f"{path}.{name}" if path else name, depth + 1)

    for name, child in _children(value):
        walk(child, name, 1)
    return found


def _flatten(value: Any) -> tuple[list[torch.Tensor], _Context]:
    held = state_tensors(value)
    slots = tuple(_Slot(i) for i in range(len(held)))
    # the snapshot is taken now: a later rebinding of the object's attributes (a decode
    # step growing the cache) does not reach what unflattening this spec builds
    snapshot = copy.deepcopy(value, {id(t): s for (_, t), s in zip(held, slots)})
    return [t for _, t in held], _Context(tuple(p for p, _ in held), type(value), snapshot, slots)


def _flatten_with_keys(value: Any) -> tuple[list[tuple[Any, torch.Tensor]], _Context]:
    leaves, context = _flatten(value)
    return [(pytree.GetAttrKey(p), t) for p, t in zip(context.paths, leaves)], context


def _unflatten(leaves: Any, context: _Context) -> Any:
    return copy.deepcopy(context.snapshot, {id(s): leaf for s, leaf in zip(context.slots, leaves)})


def is_state(value: Any) -> bool:
    """An object that may hold tensors in its attributes: no tensor, container, module,
    class, function, enum or torch object (an empty cache holds none yet, and the
    forward fills it: a prefill's)."""
    kind = type(value)
    return (
        hasattr(value, "__dict__")
        and kind not in pytree.SUPPORTED_NODES
        and not isinstance(value, (torch.Tensor, torch.nn.Module, type, enum.Enum))
        and not callable(value)
        and not kind.__module__.startswith("torch")
    )


def _state_objects(args: tuple, kwargs: dict) -> list[Any]:
    """The inputs that are state objects which can be copied (see :func:`is_state`)."""
    found = []
    for v in pytree.tree_leaves((args, kwargs)):
        if is_state(v):
            try:
                copy.deepcopy(v, {id(t): t for _, t in state_tensors(v)})
            except Exception:  # (an object that cannot be copied stays a constant, as before)
                continue
            found.append(v)
    return found


def _cloned(value: Any) -> Any:
    """A copy of a state object whose tensors are clones (its other attributes copied)."""
    with torch.no_grad():
        return copy.deepcopy(value, {id(t): t.clone() for _, t in state_tensors(value)})


@contextlib.contextmanager
def held_states(args: tuple, kwargs: dict) -> Iterator[tuple[tuple, dict]]:
    """The inputs with each state object a cloned copy, its class a pytree node for the
    block (see the module). Inputs without one are handed back as they are."""
    objects = _state_objects(args, kwargs)
    kinds = list(dict.fromkeys(type(v) for v in objects))
    for kind in kinds:
        pytree._private_register_pytree_node(
            kind,
            _flatten,
            _unflatten,
            serialized_type_name=f"fxinspect.state.{kind.__module__}.{kind.__qualname__}",
            flatten_with_keys_fn=_flatten_with_keys,
        )
    try:
        if not objects:
            yield args, kwargs
            return
        copies = {id(v): _cloned(v) for v in objects}
        leaves, spec = pytree.tree_flatten((args, kwargs), is_leaf=lambda v: id(v) in copies)
        yield pytree.tree_unflatten([copies.get(id(v), v) for v in leaves], spec)
    finally:
        for kind in kinds:
            pytree._deregister_pytree_node(kind)


def held_tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors of the state objects in ``(args, kwargs)`` that :func:`held_states`
    made pytree nodes (inside its block)."""
    found = []
    for v in pytree.tree_leaves((args, kwargs), is_leaf=_held):
        if _held(v):
            found += [t for _, t in state_tensors(v)]
    return found


def holds_states(args: tuple, kwargs: dict) -> bool:
    """Whether ``(args, kwargs)`` hold a state object :func:`held_states` made a pytree
    node (inside its block), empty or not (a prefill's cache holds no tensor yet)."""
    return any(_held(v) for v in pytree.tree_leaves((args, kwargs), is_leaf=_held))


def _held(value: Any) -> bool:
    node = pytree.SUPPORTED_NODES.get(type(value))
    return node is not None and node.flatten_fn is _flatten


@contextlib.contextmanager
def rewound(tensors: list[torch.Tensor]) -> Iterator[None]:
    """Put back each of ``tensors`` the block writes in place (its version moved).

    A capture tier that runs the model (eager, or a trace that calls it) writes what the
    step writes (a static cache's ``index_copy_``, its length's ``add_``); the analysed
    run must find the cache as the caller's step would, so such writes are undone. Only
    the tensors of state objects are given (small beside the weights; free on ``meta``).
    """
    kept = [(t, t._version, t.detach().clone()) for t in tensors if not t.is_inference()]
    try:
        yield
    finally:
        with torch.no_grad():
            for t, seen, value in kept:
                if t._version != seen:
                    t.copy_(value)
