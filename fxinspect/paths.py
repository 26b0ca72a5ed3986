"""Dotted module paths: ``""`` is the root, ``"layer1.0.conv1"`` a descendant.

The one place that knows how module paths nest; pure string functions.

Example
-------
>>> list(ancestors("layer1.0.conv1"))
['layer1.0.conv1', 'layer1.0', 'layer1', '']
>>> parent("layer1.0"), name("layer1.0"), depth("layer1.0"), cut("layer1.0.conv1", 1)
('layer1', '0', 2, 'layer1')
>>> within("layer1.0", "layer1"), within("layer10", "layer1"), within("a", "")
(True, False, True)
"""

from __future__ import annotations

from collections.abc import Container, Iterator

__all__ = ["ancestors", "cut", "depth", "name", "nearest", "parent", "within"]


def ancestors(path: str) -> Iterator[str]:
    """``path`` itself, then each enclosing path up to the root ``""``."""
    while path:
        yield path
        path = path.rpartition(".")[0]
    yield ""


def parent(path: str) -> str:
    """The enclosing module's path (the root's parent is the root)."""
    return path.rpartition(".")[0]


def name(path: str) -> str:
    """The last component: the module's attribute name in its parent."""
    return path.rpartition(".")[2]


def depth(path: str) -> int:
    """0 for the root, 1 for its children, and so on."""
    return path.count(".") + 1 if path else 0


def cut(path: str, levels: int | None) -> str:
    """``path`` cut to its first ``levels`` components (``None``: unchanged)."""
    if levels is None or not path:
        return path
    return ".".join(path.split(".")[:levels])


def within(path: str, ancestor: str) -> bool:
    """Whether ``path`` is ``ancestor`` or inside it (everything is inside the root)."""
    return not ancestor or path == ancestor or path.startswith(ancestor + ".")


def nearest(path: str, known: Container[str]) -> str:
    """The closest of ``path`` and its ancestors that is in ``known`` (else the root)."""
    return next((p for p in ancestors(path) if p in known), "")
