"""A deep decoder's figures from shallow copies of it: 2, 3 and 4 blocks of layers, extrapolated.

A decoder whose layers repeat (every layer alike, or a pattern of period ``p``: sliding and
global alternating) runs each block of ``p`` layers as the same ops on tensors of the same
sizes; what its step costs grows by the same amount with each block: FLOPs, bytes, the
weights and cache held, each aten call. So a total of ``n`` blocks is ``a + b·n``, and an
event of the memory timeline or a call of block ``i`` is ``a + b·i + g·n`` (the cache the
blocks before it made is held, and the weights and cache of every block), its node's name
counting on by the same amount per block. The first block is its own (it frees what the
embeddings left, and a model of one block frees in its last what others free after it),
so the copies analysed have 2, 3 and 4 blocks, and the blocks after the first are counted.

:func:`repeating` finds the period from the layers themselves (their modules, their
simple attributes, their parameters, the config's per-layer lists); :func:`shallow_copy`
makes a copy with the first ``k`` layers without changing the model; :func:`extrapolate`
takes the figures of 1, 2 and 3 (counted) blocks, fits them on the first two and checks the
third exactly (floats to 1e-12), then gives them at ``n`` blocks, or ``None`` when the check
fails (the caller then analyses the whole model).

>>> a = {"flops": 10, "t": {"x#0": 5, "mul_2#0": 7, "out#0": 9}}
>>> b = {"flops": 16, "t": {"x#0": 5, "mul_2#0": 7, "mul_5#0": 8, "out#0": 11}}
>>> c = {"flops": 22, "t": {"x#0": 5, "mul_2#0": 7, "mul_5#0": 8, "mul_8#0": 9, "out#0": 13}}
>>> extrapolate([a, b, c], 5)
{'flops': 34, 't': {'x#0': 5, 'mul_2#0': 7, 'mul_5#0': 8, 'mul_8#0': 9, 'mul_11#0': 10, 'mul_14#0': 11, 'out#0': 17}}
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["extrapolate", "repeating", "shallow_copy"]

# attributes that number a layer (its cache slot), not what it computes
_NUMBERING = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "training"})
_SIMPLE = (int, float, str, bool, type(None), torch.dtype)
_BLOCKS = 10  # (the copies of 2, 3 and 4 blocks analysed for each step cost 9: fewer blocks gain nothing)


def repeating(model: torch.nn.Module) -> tuple[str, int, int] | None:
    """``(path of the layers' ModuleList, layer count, period)`` of a decoder-only model whose
    layers repeat with a period that leaves at least ``_BLOCKS`` blocks, else ``None``."""
    config = getattr(model, "config", None)
    count = getattr(config, "num_hidden_layers", None)
    if not isinstance(count, int) or count < _BLOCKS or getattr(config, "is_encoder_decoder", False):
        return None
    lists = [n for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m) == count]
    if len(lists) != 1:  # (none, or several stacks of that depth: not one decoder's layers)
        return None
    layers = model.get_submodule(lists[0])
    signatures = [_signature(layer, i, config, count) for i, layer in enumerate(layers)]
    for period in range(1, count // _BLOCKS + 1):
        if count % period == 0 and all(s == signatures[i % period] for i, s in enumerate(signatures)):
            return lists[0], count, period
    return None


def _signature(layer: torch.nn.Module, index: int, config: Any, count: int) -> tuple:
    """What layer ``index`` computes with: its modules' types and simple attributes, its
    tensors' shapes and dtypes, and the config's entries for it."""
    modules = tuple(
        (name, type(m).__qualname__, tuple(sorted((k, _simple(v)) for k, v in vars(m).items() if _kept(k, v))))
        for name, m in layer.named_modules()
    )
    tensors = tuple((n, tuple(t.shape), t.dtype) for n, t in (*layer.named_parameters(), *layer.named_buffers()))
    entries = []
    for key, value in sorted(vars(config).items()):
        if isinstance(value, (list, tuple)) and len(value) == count:
            entries.append((key, repr(value[index])))
        elif "layer" in key and isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            entries.append((key, index in value))  # (a list of layer indices: mlp_only_layers...)
    return modules, tensors, tuple(entries)


def _kept(key: str, value: Any) -> bool:
    if key.startswith("_") or key in _NUMBERING:
        return False
    return isinstance(value, _SIMPLE) or isinstance(value, tuple) and all(isinstance(v, _SIMPLE) for v in value)


def _simple(value: Any) -> Any:
    return repr(value) if isinstance(value, (float, torch.dtype)) else value


def shallow_copy(model: torch.nn.Module, path: str, keep: int) -> torch.nn.Module:
    """``model`` with only its first ``keep`` layers (of the ModuleList at ``path``) and a
    config saying so; the modules on the way are shallow copies, the layers shared, and
    the model and its config are left as they are."""
    config = copy.deepcopy(model.config)
    count = config.num_hidden_layers
    for key, value in list(vars(config).items()):
        if isinstance(value, (list, tuple)) and len(value) == count:
            setattr(config, key, type(value)(value[:keep]))
    config.num_hidden_layers = keep
    *parents, last = path.split(".")
    root = _copy(model, model.config, config)
    node = root
    for name in parents:
        child = _copy(node._modules[name], model.config, config)
        node._modules[name] = child
        node = child
    node._modules[last] = torch.nn.ModuleList(list(node._modules[last])[:keep])
    return root


def _copy(module: torch.nn.Module, old: Any, new: Any) -> torch.nn.Module:
    out = copy.copy(module)
    out._modules = dict(module._modules)  # (its own children: the model's module keeps its own)
    if getattr(module, "config", None) is old:
        out.__dict__["config"] = new
    return out


def extrapolate(figures: Sequence[Any], blocks: int) -> Any:
    """``figures`` of 1, 2 and 3 blocks at ``blocks`` blocks, or ``None`` when the third is
    not what the first two predict (see the module)."""
    try:
        return _fitted(list(figures))(0, blocks)
    except _Miss:
        return None


class _Miss(Exception):
    """The figures of 3 blocks are not those 1 and 2 blocks predict."""


Fitted = Callable[[int, int], Any]  # (block, blocks) -> the value
_LINE = ((0, 1), (0, 2), (0, 3))  # (what is outside the blocks: on the count alone)
_PLANE = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))  # (block i of count k: solved on the first three)


def _fitted(seen: list) -> Fitted:
    """A value outside the blocks, seen at 1, 2, 3 blocks: a mapping entry by entry, else as :func:`_plane`."""
    if any(isinstance(x, dict) for x in seen):
        if not all(isinstance(x, dict) for x in seen):
            raise _Miss
        return _mapping(seen)
    return _plane(seen, _LINE)


def _plane(values: list, at: Sequence[tuple[int, int]]) -> Fitted:
    """The value ``a + b·block + g·count`` through the first three of ``values`` (seen at
    ``at``; on a line when the first three share the block), checked on the others; a
    mapping key by key; anything but a number the same everywhere."""
    if any(isinstance(v, dict) for v in values):  # (a node's events: the same ones in every block)
        if not all(isinstance(v, dict) and list(v) == list(values[0]) for v in values):
            raise _Miss
        parts = {key: _plane([v[key] for v in values], at) for key in values[0]}
        return lambda i, n: {key: f(i, n) for key, f in parts.items()}
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        if any(v != values[0] for v in values):
            raise _Miss
        return lambda i, n, same=values[0]: same
    g = (values[1] - values[0]) / (at[1][1] - at[0][1]) if any(isinstance(v, float) for v in values) else None
    if g is None:
        g, rest = divmod(values[1] - values[0], at[1][1] - at[0][1])
        if rest:
            raise _Miss
    line = at[2][0] == at[0][0]  # (the third seen in the same block as the first: no slope in the block)
    b = 0 if line else values[2] - values[0] - g * (at[2][1] - at[0][1])
    a = values[0] - g * at[0][1]
    start = 2 if line else 3
    for v, (i, k) in zip(values[start:], at[start:]):
        predicted = a + b * i + g * k
        if v != predicted and not (isinstance(v, float) and abs(v - predicted) <= 1e-12 * max(abs(v), abs(predicted))):
            raise _Miss
    return lambda i, n: a + b * i + g * n


def _mapping(seen: list[dict]) -> Fitted:
    """An ordered mapping of 1, 2, 3 blocks (a timeline, a node's calls or events): the
    entries before and after the blocks' on lines in the block count, each block's entry
    ``j`` on a plane in (block, count); names with their numbers likewise."""
    items = [list(d.items()) for d in seen]
    size = len(items[1]) - len(items[0])
    if size < 0 or len(items[2]) - len(items[1]) != size:
        raise _Miss
    outside = len(items[0]) - size
    shared = next((i for i, (x, y) in enumerate(zip(items[0], items[1])) if x[0] != y[0]), len(items[0]))
    first = max(0, min(shared - size, outside)) if size else outside
    # (any cut that checks gives the same answer; the first guess is right but for a
    # coincidence of names at the blocks' end: the entries after them named as a block's)
    for before in dict.fromkeys([*range(first, -1, -1), *range(first + 1, outside + 1)]):
        try:
            return _cut(items, before, size)
        except _Miss:
            continue
    raise _Miss


def _cut(items: list[list], before: int, size: int) -> Fitted:
    """:func:`_mapping` with the blocks' entries starting at ``before``."""
    after = len(items[0]) - before - size
    outer = [[it[j] for it in items] for j in range(before)]
    outer += [[it[len(it) - after + j] for it in items] for j in range(after)]
    outer_fits = [(_named([k for k, _ in rows], _LINE), _fitted([v for _, v in rows])) for rows in outer]
    block_fits = []
    for j in range(size):
        rows = [items[k - 1][before + i * size + j] for i, k in _PLANE]
        block_fits.append((_named([r[0] for r in rows], _PLANE), _plane([r[1] for r in rows], _PLANE)))

    def at(_: int, n: int) -> dict:
        out = {name(0, n): value(0, n) for name, value in outer_fits[:before]}
        for i in range(n):
            out.update((name(i, n), value(i, n)) for name, value in block_fits)
        out.update((name(0, n), value(0, n)) for name, value in outer_fits[before:])
        return out

    return at


_NUMBER = re.compile(r"(\d+)")
_HEAD = re.compile(r"^([^#/]*?)(_\d+)?((?:[#/].*)?)$")


def _named(names: list[str], at: Sequence[tuple[int, int]]) -> Callable[[int, int], str]:
    """The name at (block, count) from the names seen at ``at``, each number in it fitted as
    the values are (a node's first of its kind is bare: ``silu`` then ``silu_1``)."""
    if all(x == names[0] for x in names):
        return lambda i, n, same=names[0]: same
    parts = [_NUMBER.split(x) for x in names]
    bare = any(p[0::2] != parts[0][0::2] for p in parts)
    if bare:
        parts = [_NUMBER.split(_numbered(x)) for x in names]
        if any(p[0::2] != parts[0][0::2] for p in parts):
            raise _Miss
    fields = [(f, _plane([int(p[f]) for p in parts], at)) for f in range(1, len(parts[0]), 2)]
    skeleton = list(parts[0])

    def name(i: int, n: int) -> str:
        out = list(skeleton)
        for f, fit in fields:
            value = fit(i, n)
            if value < 0:
                raise _Miss
            out[f] = str(value)
        text = "".join(out)
        return _unnumbered(text) if bare else text

    return name


def _numbered(name: str) -> str:
    """``name`` with its node's number written out (``silu#0`` -> ``silu_0#0``)."""
    head, number, tail = _HEAD.match(name).groups()
    return name if number else f"{head}_0{tail}"


def _unnumbered(name: str) -> str:
    head, number, tail = _HEAD.match(name).groups()
    return f"{head}{tail}" if number == "_0" else name
