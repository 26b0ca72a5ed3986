"""Figures as text in readable units: counts, sizes, durations, shares and ratios.

Each figure is scaled to the unit that keeps it short (``1.50 G``, ``42.56 MiB``,
``12.30 ms``); a figure that was not measured (``None``, NaN) prints as
:data:`MISSING`, never as ``0``.

Example
-------
>>> count(11_689_512), nbytes(44_629_152), seconds(0.0123), percent(0.25)
('11.69 M', '42.56 MiB', '12.30 ms', '25.0%')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = [
    "MISSING",
    "PARTIAL",
    "axis_unit",
    "count",
    "nbytes",
    "number",
    "percent",
    "plural",
    "ratio",
    "seconds",
    "si",
    "value",
]

MISSING = "—"
"""Shown for a figure that was not measured (timing off, values not read)."""

PARTIAL = "+"
"""Appended to a total that misses uncounted ops: "at least this much"."""

_COUNT_UNITS = ("", " K", " M", " G", " T", " P", " E")
_BYTE_UNITS = (" B", " KiB", " MiB", " GiB", " TiB", " PiB", " EiB")
_TIME_UNITS = ((1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s"))
_SI_PREFIXES = ((1e-12, "p"), (1e-9, "n"), (1e-6, "µ"), (1e-3, "m"), (1.0, ""), (1e3, "k"), (1e6, "M"), (1e9, "G"))


def _absent(x: Any) -> bool:
    """Whether ``x`` was not measured: ``None`` or NaN."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def _scaled(x: float, base: int, units: Sequence[str]) -> str:
    """``x`` divided by ``base`` until it reads below 1000 *after* rounding, so that
    999_995 becomes "1.00 K" and never "1000.00", and 1,024,000 bytes "0.98 MiB", never
    "1000.00 KiB" (four digits before the point read as a unit too small)."""
    unit = 0
    while abs(round(x, 2)) >= 1000 and unit < len(units) - 1:
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

    >>> [nbytes(x) for x in (0, 1023, 1024, 1536, 1_024_010, 3 * 2**20, 1.5 * 2**30)]
    ['0 B', '1023 B', '1.00 KiB', '1.50 KiB', '0.98 MiB', '3.00 MiB', '1.50 GiB']
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


def si(x: float | None, symbol: str) -> str:
    """A value in a unit of its own (joules, watts) with the SI prefix that keeps it at or above 1.

    >>> si(0.0123, "J"), si(2.5e-7, "J"), si(1500.0, "W"), si(0, "J"), si(None, "J")
    ('12.30 mJ', '250.00 nJ', '1.50 kW', '0 J', '—')
    """
    if _absent(x):
        return MISSING
    if x == 0:
        return f"0 {symbol}"
    # the largest prefix that keeps it at or above 1 once rounded; the smallest below that
    scale, prefix = next((p for p in reversed(_SI_PREFIXES) if abs(round(x / p[0], 2)) >= 1), _SI_PREFIXES[0])
    return f"{x / scale:.2f} {prefix}{symbol}"


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
