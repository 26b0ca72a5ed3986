"""Memory budgets as users write them: ``24 * 2**30``, ``"24GiB"``, ``"80 GB"``, ``"512MiB"``.

Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones (KB, MB, GB, TB) powers
of 1000, as device datasheets print them. A budget is total bytes, resident memory
included, the figure :attr:`~fxinspect.records.MemoryRecord.total_peak` is compared with.
A *reserve* keeps part of it for what the memory model cannot see (allocator
fragmentation, the CUDA context, communication buffers): bytes (an int or a string), or
a fraction of the budget (a float below 1).

>>> parse_bytes("24GiB"), parse_bytes("1.5 KB"), parse_bytes(4096)
(25769803776, 1500, 4096)
>>> Budget.of("10GiB", reserve=0.1).usable == 9 * 2**30
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InputError
from ..formatting import units

__all__ = ["Budget", "parse_bytes"]

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})
_PATTERN = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_bytes(value: int | float | str, what: str = "budget") -> int:
    """Bytes from an int, a float, or a string with a unit; an ``InputError`` naming the form otherwise."""
    if isinstance(value, bool):
        raise InputError(f"{what} expects bytes (an int or a string such as '24GiB'), got {value!r}")
    if isinstance(value, (int, float)):
        if not 0 <= value < float("inf"):
            raise InputError(f"{what} expects bytes (a finite number, not negative), got {value!r}")
        return int(value)
    match = _PATTERN.fullmatch(value) if isinstance(value, str) else None
    if match is None or match.group(2).lower() not in _UNITS:
        raise InputError(
            f"{what} expects bytes: an int, or a number with one of {', '.join(k for k in _UNITS if k)} "
            f"(case-insensitive) such as '24GiB' or '80GB'; got {value!r}"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


@dataclass(frozen=True)
class Budget:
    """Bytes a step may hold, and the part kept back from it (``usable`` is what plans use)."""

    total: int
    reserve: int = 0

    @classmethod
    def of(cls, budget: int | str, reserve: int | float | str = 0) -> Budget:
        """``reserve`` below 1 (a float) is a fraction of the budget; otherwise bytes."""
        total = parse_bytes(budget)
        if total <= 0:
            raise InputError(f"budget expects a positive number of bytes, got {budget!r}")
        if isinstance(reserve, float):
            if not 0 <= reserve < 1:
                raise InputError(
                    f"reserve expects a fraction below 1 (a float) or bytes (an int or '2GiB'), got {reserve!r}"
                )
            kept = int(total * reserve)
        else:
            kept = parse_bytes(reserve, "reserve")
        if kept >= total:
            raise InputError(f"reserve ({units.nbytes(kept)}) leaves nothing of the budget ({units.nbytes(total)})")
        return cls(total, kept)

    @property
    def usable(self) -> int:
        """The budget less the reserve: what peaks are held to."""
        return self.total - self.reserve

    def __str__(self) -> str:
        if not self.reserve:
            return units.nbytes(self.total)
        return f"{units.nbytes(self.usable)} ({units.nbytes(self.total)} less {units.nbytes(self.reserve)} reserved)"
