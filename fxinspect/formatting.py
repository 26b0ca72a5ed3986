"""Numbers as text: the one place where base units become something to read.

Every view (tables, the summary, diagrams, the CLI) formats through these functions,
so a FLOP count, a size or a time reads the same everywhere. Values that were not
measured (``None``, NaN) print as :data:`MISSING`, never as ``0``.

Example
-------
>>> count(11_689_512), nbytes(44_629_152), seconds(0.0123), shape((1, 3, 224, 224))
('11.69 M', '42.56 MiB', '12.30 ms', '1×3×224×224')
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "MISSING",
    "PARTIAL",
    "count",
    "dtype",
    "listing",
    "nbytes",
    "number",
    "percent",
    "plural",
    "ratio",
    "seconds",
    "shape",
    "shapes",
    "stats",
    "tensor",
    "value",
]

MISSING = "—"
"""Shown for a figure that was not measured (timing off, values not read)."""

PARTIAL = "+"
"""Appended to a total that misses uncounted ops: "at least this much"."""

_COUNT_UNITS = ("", " K", " M", " G", " T", " P", " E")
_BYTE_UNITS = (" B", " KiB", " MiB", " GiB", " TiB", " PiB", " EiB")
_TIME_UNITS = ((1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s"))


def _absent(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _scaled(x: float, base: int, units: Sequence[str]) -> str:
    """``x`` divided by ``base`` until it reads below ``base`` *after* rounding, so that
    999_995 becomes "1.00 K" and never "1000.00"."""
    unit = 0
    while abs(round(x, 2)) >= base and unit < len(units) - 1:
        x /= base
        unit += 1
    return f"{x:.2f}{units[unit]}"


def count(n: float | None, partial: bool = False) -> str:
    """A count (parameters, FLOPs, MACs, samples/s) with a decimal K/M/G/T suffix.

    Integers below 1000 print exactly; ``partial`` appends :data:`PARTIAL`.

    >>> [count(x) for x in (0, 999, 1000, 11_689_512, 1.5e9, 1.82e12)]
    ['0', '999', '1.00 K', '11.69 M', '1.50 G', '1.82 T']
    >>> count(999_995), count(81.234), count(1_200, partial=True), count(None)
    ('1.00 M', '81.23', '1.20 K+', '—')
    """
    if _absent(n):
        return MISSING
    if isinstance(n, float) and math.isinf(n):
        text = "inf" if n > 0 else "-inf"
    elif isinstance(n, int) and abs(n) < 1000:
        text = str(n)
    else:
        text = _scaled(float(n), 1000, _COUNT_UNITS)
    return text + (PARTIAL if partial else "")


def nbytes(n: float | None, partial: bool = False) -> str:
    """A size in bytes with a binary KiB/MiB/GiB suffix.

    >>> [nbytes(x) for x in (0, 1023, 1024, 1536, 3 * 2**20, 1.5 * 2**30)]
    ['0 B', '1023 B', '1.00 KiB', '1.50 KiB', '3.00 MiB', '1.50 GiB']
    >>> nbytes(2048, partial=True), nbytes(None)
    ('2.00 KiB+', '—')
    """
    if _absent(n):
        return MISSING
    if isinstance(n, int) and abs(n) < 1024:
        text = f"{n} B"
    else:
        text = _scaled(float(n), 1024, _BYTE_UNITS)
    return text + (PARTIAL if partial else "")


def seconds(s: float | None) -> str:
    """A duration with the largest unit of ns/µs/ms/s that keeps it at or above 1.

    >>> [seconds(x) for x in (0, 5e-10, 1.5e-9, 2.5e-6, 0.0123, 1.0, 75.0)]
    ['0 s', '0.50 ns', '1.50 ns', '2.50 µs', '12.30 ms', '1.00 s', '75.00 s']
    >>> seconds(None), seconds(float("nan")), seconds(999.999e-6)
    ('—', '—', '1.00 ms')
    """
    if _absent(s):
        return MISSING
    if s == 0:
        return "0 s"
    for scale, name in _TIME_UNITS:
        v = s / scale
        if abs(round(v, 2)) < 1000 or name == "s":
            return f"{v:.2f} {name}"
    raise AssertionError("unreachable: the last unit always returns")


def axis_unit(largest: float, kind: str) -> tuple[float, str]:
    """``(size of one unit, its name)`` to draw an axis reaching ``largest`` in round numbers.

    ``kind`` is ``"byte"`` (KiB, MiB, ...), ``"second"`` (ns .. s) or anything else
    (decimal: K, M, G); the units are those of :func:`nbytes`, :func:`seconds`, :func:`count`.

    >>> axis_unit(3 * 2**20, "byte"), axis_unit(0.0123, "second"), axis_unit(2.5e9, "flop")
    ((1048576, 'MiB'), (0.001, 'ms'), (1000000000, 'G'))
    """
    if kind == "second":
        return next(((size, name) for size, name in reversed(_TIME_UNITS) if largest >= size), _TIME_UNITS[0])
    base, names = (1024, _BYTE_UNITS) if kind == "byte" else (1000, _COUNT_UNITS)
    power = 0
    while power + 1 < len(names) and largest >= base ** (power + 1):
        power += 1
    return base**power, names[power].strip()


def percent(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage.

    >>> percent(0.1234), percent(1.0), percent(0), percent(None)
    ('12.3%', '100.0%', '0.0%', '—')
    """
    if _absent(fraction):
        return MISSING
    return f"{fraction * 100:.{digits}f}%"


def plural(n: int, noun: str) -> str:
    """A count of something, the noun in plural unless there is exactly one.

    >>> plural(1, "call"), plural(3, "node"), plural(12_000, "call")
    ('1 call', '3 nodes', '12.00 K calls')
    """
    return f"{count(n)} {noun}{'' if n == 1 else 's'}"


def number(x: float | None, digits: int = 2) -> str:
    """A plain real number (arithmetic intensity and other ratios).

    >>> number(24.3456), number(3), number(float("nan"))
    ('24.35', '3.00', '—')
    """
    if _absent(x):
        return MISSING
    return f"{x:.{digits}f}"


def ratio(x: float | None) -> str:
    """A multiplicative factor, such as the node-sum over plain-forward time.

    >>> ratio(0.974), ratio(None)
    ('0.97×', '—')
    """
    return MISSING if _absent(x) else f"{x:.2f}×"


def value(x: float | None) -> str:
    """A tensor value (a statistic): four significant digits, NaN and Inf as such.

    >>> value(0.000123456), value(-2.5), value(float("nan")), value(float("-inf"))
    ('0.0001235', '-2.5', 'nan', '-inf')
    """
    if x is None:
        return MISSING
    return f"{x:.4g}"


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
    last words that fits, so the module or op itself, and as much of the block index as
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
    pieces = re.split(r"([._])", text.lstrip(" "))  # words, with the separators between them
    for start in range(2, len(pieces), 2):  # drop leading words (and their separators) one by one
        shorter = indent + "…" + "".join(pieces[start:])
        if len(shorter) <= limit:
            return shorter
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]
