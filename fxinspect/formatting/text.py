"""Tensors and names as text: shapes, dtypes, value statistics, lists and cut paths.

Example
-------
>>> shape((1, 3, 224, 224)), tensor((2, 8), "torch.float16"), listing(["conv1", "bn1", "relu", "fc"])
('1×3×224×224', '2×8 f16', 'conv1, bn1, relu, … (+1)')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from .units import MISSING, count, value

__all__ = ["dtype", "listing", "middle", "shape", "shapes", "stats", "tensor"]


def shape(dims: Sequence[int]) -> str:
    """A tensor shape with × between sizes; a 0-d tensor is a scalar.

    >>> shape((1, 3, 224, 224)), shape((7,)), shape(())
    ('1×3×224×224', '7', 'scalar')
    """
    return "×".join(str(d) for d in dims) if len(dims) else "scalar"


def listing(items: Iterable[str], limit: int = 3) -> str:
    """Names, comma separated; those past ``limit`` are counted, not shown.

    >>> listing(["conv1", "bn1"]), listing("abcdef"), listing([])
    ('conv1, bn1', 'a, b, c, … (+3)', '')
    """
    items = list(items)
    text = ", ".join(items[:limit])
    if len(items) > limit:
        text += f", … (+{count(len(items) - limit)})"
    return text


def shapes(many: Iterable[Sequence[int]], limit: int = 3) -> str:
    """Several shapes (a node's tensors), as a :func:`listing`.

    >>> shapes([(1, 4)]), shapes([(1, 4), (4,)]), shapes([(2,)] * 5), shapes([])
    ('1×4', '1×4, 4', '2, 2, 2, … (+2)', '')
    """
    return listing((shape(s) for s in many), limit)


_DTYPES = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "complex128": "c128",
    "complex64": "c64",
    "complex32": "c32",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint64": "u64",
    "uint32": "u32",
    "uint16": "u16",
    "uint8": "u8",
    "bool": "bool",
    # aliases torch prints for the same dtypes
    "double": "f64",
    "float": "f32",
    "half": "f16",
    "long": "i64",
    "int": "i32",
    "short": "i16",
}


def dtype(name: str) -> str:
    """A dtype's short name; unknown dtypes keep their name without ``torch.``.

    >>> dtype("torch.float32"), dtype("bfloat16"), dtype("int64"), dtype("torch.float8_e4m3fn")
    ('f32', 'bf16', 'i64', 'float8_e4m3fn')
    """
    bare = name.removeprefix("torch.")
    return _DTYPES.get(bare, bare)


def tensor(dims: Sequence[int], dtype_name: str) -> str:
    """A tensor's shape and short dtype.

    >>> tensor((2, 8), "torch.float16")
    '2×8 f16'
    """
    return f"{shape(dims)} {dtype(dtype_name)}"


def stats(s: Any) -> str:
    """A ``ValueStats`` (anything with min, max, mean, std, nan_count, inf_count).

    >>> from types import SimpleNamespace as S
    >>> stats(S(min=-1.0, max=2.5, mean=0.25, std=1.0, nan_count=0, inf_count=3))
    'min -1 max 2.5 mean 0.25 std 1, 3 Inf'
    >>> stats(None)
    '—'
    """
    if s is None:
        return MISSING
    text = f"min {value(s.min)} max {value(s.max)} mean {value(s.mean)} std {value(s.std)}"
    flags = [f"{count(s.nan_count)} NaN"] if s.nan_count else []
    flags += [f"{count(s.inf_count)} Inf"] if s.inf_count else []
    return ", ".join([text, *flags])


def middle(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping its end.

    A path or a node name (words joined by ``.`` or ``_``) keeps the longest run of its
    last path components that fits (``…position_embeddings``, not ``…embeddings``), else
    of its last words, so the module or op itself, and as much of the block index as
    there is room for, stay whole; other text is cut in the middle.

    >>> middle("encoder.layers.encoder_layer_0–11.mlp", 24)
    '…encoder_layer_0–11.mlp'
    >>> middle("encoder_layers_encoder_layer_3_self_attention", 24)
    '…layer_3_self_attention'
    >>> middle("layer4.1.conv2", 30), middle("abcdefghijklmnop", 9)
    ('layer4.1.conv2', 'abcd…mnop')
    """
    if len(text) <= limit or limit < 5:
        return text
    indent = " " * (len(text) - len(text.lstrip(" ")))
    for separators in (r"([.])", r"([._])"):  # whole path components first, then words
        pieces = re.split(separators, text.lstrip(" "))  # with the separators between them
        for start in range(2, len(pieces), 2):  # drop leading pieces (and their separators) one by one
            shorter = indent + "…" + "".join(pieces[start:])
            if len(shorter) <= limit:
                return shorter
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]
