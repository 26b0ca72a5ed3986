"""``Choice``: the base of every option and label given by name (``str`` enums).

A member equals its value and prints as it, so the strings the CLI and the API take,
the values reports store and what tables print are one and the same.

Example
-------
>>> class Colour(Choice):
...     RED = "red"
>>> Colour.RED == "red", str(Colour.RED), f"{Colour.RED}", Colour("red") is Colour.RED
(True, 'red', 'red', True)
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Choice"]


class Choice(str, Enum):
    """A ``str`` enum that prints as its value."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
