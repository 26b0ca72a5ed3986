"""What an edge of a diagram carries, as text: the one place ``plot`` and the explorer agree on.

An edge between two boxes carries the outputs of one or more nodes of the first box
(or the model's input). Its label names each carried node's output shape and dtype
(``1×8 float32``), the different ones only, two at most and ``; …`` beyond.
``report.plot`` draws :func:`edge_label`; the explorer page gets each node's
:func:`output_shape` and :func:`output_dtype` and joins them the same way (its
``carries()``, checked against :func:`edge_label` in a browser test).

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> report = fxinspect.analyze(model, torch.randn(1, 4), timing=False)
>>> node = {n.name: n for n in report.nodes}     # input_1, then _0, _1, _2: the three modules
>>> edge_label([node["_1"]]), edge_label([node["_0"], node["_1"]]), edge_label([node[k] for k in ("input_1", "_0", "_2")])
('1×8 float32', '1×8 float32', '1×4 float32; 1×8 float32; …')
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import formatting as fmt
from ..records import NodeRecord

__all__ = ["edge_label", "output_dtype", "output_shape"]

_LISTED = 2  # the carried outputs a label names before "…"


def output_shape(node: NodeRecord) -> str:
    """The shapes of ``node``'s outputs (``1×8``, ``4×32×256, 4×4×128``)."""
    return fmt.shapes(tuple(t.shape for t in node.outputs))


def output_dtype(node: NodeRecord) -> str:
    """The dtypes of ``node``'s outputs, each once (``float32``)."""
    return ", ".join(dict.fromkeys(t.dtype for t in node.outputs))


def carried_text(node: NodeRecord) -> str:
    """One carried output: its shape and dtype (``1×8 float32``)."""
    dtype = output_dtype(node)
    return output_shape(node) + (" " + dtype if dtype else "")


def edge_label(carried: Iterable[NodeRecord]) -> str:
    """The label of an edge carrying the outputs of the nodes ``carried``: each different
    shape and dtype once, two at most, ``; …`` beyond (``1×8 float32; 1×2 int64; …``)."""
    texts = list(dict.fromkeys(carried_text(n) for n in carried))
    return "; ".join(texts[:_LISTED]) + ("; …" if len(texts) > _LISTED else "")
