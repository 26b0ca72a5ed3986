"""Table columns: their names, and how each is titled, rendered from its raw figure and sorted.

Every summed figure of :data:`fxinspect.records.fields.FIELDS` is a column named after its
field, titled by its ``header`` and rendered by its ``unit``, a default column when its
``column`` says so; so is every figure added by :func:`fxinspect.register_figure` (a
plain string key, not a :class:`Column` member: the enum is made once). The other
columns (names, shapes, counts, and the derived ``intensity`` and ``share``) are
declared here by hand.

Example
-------
>>> str(Column.FLOPS), SPECS[Column.FLOPS].header, SPECS[Column.LATENCY].render(0.0123, False)
('flops', 'FLOPs', '12.30 ms')
>>> [str(c) for c in columns_for("op")][:9]
['op', 'count', 'flops', 'macs', 'bytes_read', 'bytes_written', 'bytes', 'intensity', 'latency']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import formatting as fmt
from ..choices import Choice
from ..records.fields import DERIVED, FIELD, REGISTERED, SUMMED, Aggregate, Field, Unit, When, shown

__all__ = [
    "UNIT_TEXT",
    "By",
    "Column",
    "SPECS",
    "columns_for",
    "default_columns",
    "parse_by",
    "parse_column",
    "spec",
    "unit_text",
]


class By(Choice):
    """What one row of a table stands for."""

    MODULE = "module"
    OP = "op"
    NODE = "node"


# the columns that are not a declared figure: (member, name), in the order tables offer them
_LEADING = (
    ("NAME", "name"),
    ("TYPE", "type"),
    ("LABEL", "op"),
    ("MODULE", "module"),
    ("INPUTS", "inputs"),
    ("OUTPUTS", "outputs"),
    ("GRADIENTS", "gradients"),
    ("RECEPTIVE_FIELD", "receptive_field"),
    ("COUNT", "count"),
    ("CALLS", "calls"),
    ("PARAMS", "params"),
)
_DERIVED = (
    ("BYTES", "bytes"),
    ("INTENSITY", "intensity"),
    ("SHARE", "share"),
    ("NONFINITE", "nonfinite"),
    ("PER_BLOCK", "per_block"),
)


def _members() -> list[tuple[str, str]]:
    """``Column``'s (member, value) pairs: the hand-declared columns and one per summed figure."""
    members = [*_LEADING, *((f.name.upper(), f.name) for f in SUMMED), *_DERIVED]
    names = [name for _, name in members]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:  # a figure named like a built-in column would silently shadow it
        raise TypeError(f"figures {clash} are named like table columns: rename them in records/fields.py")
    return members


Column = Choice("Column", _members(), module=__name__, qualname="Column")
Column.__doc__ = """Column names accepted by ``columns=`` and ``sort=`` (the CLI uses the same strings).

One member per summed figure of :data:`fxinspect.records.fields.FIELDS` (``Column.FLOPS`` is
``"flops"``), and the hand-declared ones (``Column.NAME``, ``Column.SHARE``, ...)."""


@dataclass(frozen=True)
class Spec:
    """How a column is titled, rendered from its raw figure, aligned and sorted."""

    header: str
    render: Callable[[Any, bool], str]  # (raw figure, mark as a lower bound) -> cell text
    numeric: bool = True  # right-aligned, sorted descending by the raw figure
    marks_partial: bool = False  # a lower bound when the row misses uncounted ops

    def cell(self, raw: Any, partial: bool) -> str:
        """The text of one cell; ``partial``: its row misses uncounted ops."""
        return self.render(raw, partial and self.marks_partial)


def _text(raw: Any, partial: bool) -> str:
    """A name or type as it is; nothing for a row without one."""
    return "" if raw is None else str(raw)


def _shapes(raw: Any, partial: bool) -> str:
    """Tensor shapes; nothing for a row without tensors."""
    return "" if raw is None else fmt.shapes(raw)


def _nonfinite(raw: tuple[int | None, int | None] | None, partial: bool) -> str:
    """``(nan_count, inf_count)`` as "2 NaN, 1 Inf"; empty when finite."""
    if raw is None:
        return ""
    if raw[0] is None:
        return fmt.MISSING  # values were not read: unknown, not "finite"
    nan, inf = raw[0], raw[1] or 0
    parts = [f"{fmt.count(nan)} NaN"] if nan else []
    parts += [f"{fmt.count(inf)} Inf"] if inf else []
    return ", ".join(parts)


# how a figure of each unit reads; a time is a median, never marked as a lower bound
UNIT_TEXT: dict[Unit, Callable[[Any, bool], str]] = {
    Unit.COUNT: fmt.count,
    Unit.FLOP: fmt.count,
    Unit.MAC: fmt.count,
    Unit.BYTE: fmt.nbytes,
    Unit.SECOND: lambda v, p: fmt.seconds(v),
}


def unit_text(unit: Unit) -> Callable[[Any, bool], str]:
    """How a value of ``unit`` reads in a cell (``partial``: mark it as a lower bound);
    a unit of its own (joules) with SI prefixes."""
    return UNIT_TEXT.get(unit) or (lambda v, p: fmt.si(v, unit.symbol) + (fmt.PARTIAL if p else ""))


def _field(value: tuple[int, ...] | str | None) -> str:
    """A receptive field as a table writes it: ``"7×7"``, ``"global"`` or nothing."""
    if value is None:
        return ""
    return value if isinstance(value, str) else "×".join(str(v) for v in value)


def _figure_spec(field: Field) -> Spec:
    """A declared figure's column: its header, its unit's format.

    An ``EXACT`` figure counts an op without a rule as 0, so uncounted ops make it a
    lower bound: mark it, never hide it. A ``KNOWN`` one is ``None`` instead.
    """
    return Spec(field.header, unit_text(field.unit), marks_partial=field.aggregate is Aggregate.EXACT)


SPECS: dict[Column, Spec] = {
    Column.NAME: Spec("name", _text, numeric=False),
    Column.TYPE: Spec("type", _text, numeric=False),
    Column.LABEL: Spec("op", _text, numeric=False),
    Column.MODULE: Spec("module", _text, numeric=False),
    Column.INPUTS: Spec("inputs", _shapes, numeric=False),
    Column.OUTPUTS: Spec("outputs", _shapes, numeric=False),
    Column.GRADIENTS: Spec("output grads", _shapes, numeric=False),
    Column.RECEPTIVE_FIELD: Spec("receptive field", lambda v, p: _field(v), numeric=False),
    Column.COUNT: Spec("nodes", lambda v, p: fmt.count(v)),
    Column.CALLS: Spec("calls", lambda v, p: "" if v is None else fmt.count(v)),
    Column.PARAMS: Spec("params", lambda v, p: fmt.count(v)),
    **{Column(f.name): _figure_spec(f) for f in SUMMED},
    Column.BYTES: _figure_spec(DERIVED[0]),  # traffic: the records' bytes_moved
    Column.INTENSITY: Spec("FLOP/B", lambda v, p: fmt.number(v)),
    Column.SHARE: Spec("FLOPs %", lambda v, p: fmt.percent(v)),
    Column.NONFINITE: Spec("NaN/Inf", _nonfinite),
    Column.PER_BLOCK: Spec("per block", lambda v, p: "" if v is None else fmt.count(v, p), marks_partial=True),
}


def spec(column: Column | str) -> Spec:
    """How ``column`` is titled and rendered: a built-in column's, or a registered figure's."""
    found = SPECS.get(column)
    if found is not None:
        return found
    if column in REGISTERED:
        return _figure_spec(REGISTERED[column])
    raise KeyError(f"no table column {column!r}")


def _registered() -> tuple[str, ...]:
    """The registered figures that sum: columns keyed by their names."""
    names = tuple(f.name for f in REGISTERED.values() if f.sums)
    clash = sorted(set(names) & set(SPECS))
    if clash:  # (register_figure refuses a figure's name; a column's is found here)
        raise ValueError(f"registered figures {clash} are named like table columns: register them by another name")
    return names


def _figures() -> tuple[Column | str, ...]:
    """The figure columns every table offers: the declared ones in declaration order,
    ``bytes`` and ``intensity`` right after the bytes they are computed from, the
    registered ones, ``share`` last."""
    columns: list[Column | str] = []
    for f in SUMMED:
        columns.append(Column(f.name))
        if f.name == "bytes_written":
            columns += [Column.BYTES, Column.INTENSITY]
    return (*columns, *_registered(), Column.SHARE)


_NODE_PLACE = (Column.NAME, Column.LABEL, Column.MODULE, Column.INPUTS, Column.OUTPUTS, Column.GRADIENTS)
"""Where a node sits and what flows through it: the first columns of a node table."""


def columns_for(by: By | str) -> tuple[Column | str, ...]:
    """The columns a table ``by`` modules, ops or nodes can show.

    >>> [str(c) for c in columns_for("module")][:5]
    ['name', 'type', 'calls', 'params', 'flops']
    """
    by = parse_by(by)
    if by is By.MODULE:
        return (Column.NAME, Column.TYPE, Column.CALLS, Column.PARAMS, *_figures(), Column.PER_BLOCK) + (
            Column.RECEPTIVE_FIELD,
        )
    if by is By.OP:
        return (Column.LABEL, Column.COUNT, *_figures())
    return (*_NODE_PLACE, *_figures(), Column.NONFINITE, Column.RECEPTIVE_FIELD)


def default_columns(by: By, holds: Callable[[Field, When], bool]) -> tuple[Column | str, ...]:
    """The columns shown when ``columns=`` is not given: the figures whose ``column``
    conditions all hold (``holds(figure, condition)``, as the table judges its report),
    in the order of :func:`fxinspect.records.fields.shown`, after the row's place.

    FLOPs per block (``per_block``) follows FLOPs in a module table (the table leaves
    it out when no row folds blocks), ``share`` ends an op table; a node table shows
    NaN/Inf last (when found), a module or node table the receptive field (when the
    model has a spatial input): the table checks those.
    """
    figures: list[Column | str] = []
    for f in shown():
        if f.sums and f.column is not None and all(holds(f, when) for when in f.column):
            figures.append(Column(f.name) if f.name in FIELD or f.read else f.name)
            if by is By.MODULE and f.name == "flops":
                figures.append(Column.PER_BLOCK)
    if by is By.MODULE:
        return (Column.NAME, Column.TYPE, Column.PARAMS, *figures, Column.RECEPTIVE_FIELD)
    if by is By.OP:
        return (Column.LABEL, Column.COUNT, *figures, Column.SHARE)
    return (*_NODE_PLACE, *figures, Column.NONFINITE)


def parse_by(by: By | str) -> By:
    """``by`` as a :class:`By`, or a ``ValueError`` naming the valid ones."""
    try:
        return By(by)
    except ValueError:
        valid = ", ".join(repr(b.value) for b in By)
        raise ValueError(f"table(by=...) must be one of {valid}, got {by!r}") from None


def parse_column(name: Column | str, by: By, option: str) -> Column | str:
    """``name`` as a column a table ``by`` can show, or a ``ValueError`` naming them.

    A column is named by its key or by its header, in any case (``"flops"``, ``"FLOPs"``,
    ``"bytes r+w"``)."""
    valid = columns_for(by)
    key = str(name).strip().lower()
    column = next((c for c in valid if key in (str(c).lower(), spec(c).header.lower())), None)
    if column is None:
        names = ", ".join(str(c) for c in valid)
        raise ValueError(f"{option}: unknown column {name!r} for by={by.value!r}; valid columns: {names}")
    return column
