"""A box of a dataflow diagram: the op nodes it stands for and how it is labelled."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import formatting as fmt
from ..records import NodeRecord, ReportRecord

__all__ = ["Box", "end_box"]


@dataclass
class Box:
    """One box of the diagram: the op nodes it stands for and how it is labelled."""

    key: str
    title: str
    kind: str  # "input", "module", "op" or "output"
    type: str = ""
    repeats: int = 1
    nodes: list[NodeRecord] = field(default_factory=list)
    shape: str = ""
    order: int = 0
    call: int = 0  # which call of the module the box shows, when it ran more than once
    calls: int = 1
    constants: list[str] = field(default_factory=list)  # op level: the constant ops drawn inside it


def end_box(report: ReportRecord, n: NodeRecord, key: str, order: int) -> Box:
    """The box of a model input (a placeholder node) or of the model's output."""
    shapes = n.outputs if n.op == "placeholder" else report.outputs
    return Box(
        key,
        n.name if n.op == "placeholder" else "output",
        "input" if n.op == "placeholder" else "output",
        shape=fmt.shapes(tuple(t.shape for t in shapes)),
        order=order,
    )
