"""Text tables of a report: one row per module, per op label, or per op node.

A table is built in three steps, each a small pure function: rows of *raw* figures
(ints, seconds, shapes; :mod:`fxinspect.views.rows`), then sorting and cutting on
those raw figures, then rendering each column as :mod:`fxinspect.views.columns`
says, through ``tabulate``. Sorting therefore orders 1.50 G above 999.00 M, which
sorting the text would not.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 10))
>>> report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
>>> print(table(report, by="op", columns=["op", "flops"]))     # 2*8*27*36 + 288 bias adds ; 288 ; 2*288*10 + 10
op        FLOPs
------  -------
Conv2d  15.84 K
ReLU        288
Linear   5.77 K
------  -------
total   21.90 K
1 op type that cost nothing (no FLOPs, no bytes) not shown: zeros=True
>>> print(report.table(depth=1, columns=["name", "params", "flops"]))
name      params    FLOPs
------  --------  -------
0            224  15.84 K
1              0      288
2              0        0
3         2.89 K   5.77 K
------  --------  -------
total     3.11 K  21.90 K
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from tabulate import SEPARATING_LINE, tabulate

from .. import formatting as fmt
from ..records import ReportRecord
from ..records.fields import Field, When
from .columns import By, Column, columns_for, default_columns, parse_by, parse_column, spec
from .footnotes import footnotes
from .rows import Row, bookkeeping_row, module_rows, node_rows, op_rows, totals_row

__all__ = ["By", "Column", "table", "columns_for"]

# Formats in which tabulate draws SEPARATING_LINE as a rule; elsewhere (markdown, html,
# grid) it would print a broken or duplicated row, so the totals row just follows.
_RULED_FORMATS = frozenset(
    "simple rst psql outline simple_outline rounded_outline heavy_outline mixed_outline double_outline fancy_outline".split()
)


def table(
    report: ReportRecord,
    *,
    by: By | str = By.MODULE,
    depth: int | None = None,
    columns: Sequence[Column | str] | None = None,
    sort: Column | str | None = None,
    ascending: bool | None = None,
    top: int | None = None,
    tablefmt: str = "simple",
    fold: bool = True,
    zeros: bool = False,
    width: int | None = 100,
) -> str:
    """A text table of ``report`` by module, op label or op node, with a totals row.

    Parameters
    ----------
    by : ``"module"`` (model order, names indented by depth), ``"op"`` (one row per
        ``NodeRecord.label``, in order of first appearance) or ``"node"`` (one row per op
        node, graph order).
    depth : modules deeper than this are left out (``by="module"`` only; at least 1, the
        model's children: the totals row is the model). A module's figures already
        include its descendants', so each level still adds up.
    columns : column names (see :func:`columns_for`); default: the usual ones, without
        latency when timing did not run and without NaN/Inf when nothing was found.
    sort : a column, by key or header in any case (``"flops"``, ``"FLOPs"``); numeric
        columns sort descending by their value, text columns ascending, unless
        ``ascending`` says otherwise. Without it rows keep model or graph order.
    ascending : ``True`` sorts smallest first, ``False`` largest first (missing last).
    top : keep the first ``top`` rows (after sorting). The totals row stays the model's.
    tablefmt : any ``tabulate`` format.
    fold : merge runs of identical sibling blocks (found by structure, whatever their
        names) into one row ``layer.0–11`` of type ``12 × Block`` with their summed
        figures, their descendants likewise (``by="module"`` only).
    zeros : ``by="op"`` only: also list the op types that cost nothing (no FLOPs, no
        bytes: views, shape queries); by default they are counted in a footnote.
    width : characters the table may take: names, module paths and shapes are cut from
        the middle (``encoder.layers…self_attention``) and footnotes wrapped to fit it,
        as far as 16 characters a column allow; ``None`` keeps everything whole.

    Totals that miss uncounted ops carry :data:`fxinspect.formatting.PARTIAL` and a
    footnote; unmeasured figures print as :data:`fxinspect.formatting.MISSING`.
    """
    by = parse_by(by)
    if depth is not None and (by is not By.MODULE or depth < 1):
        raise ValueError(
            f"depth={depth!r}: depth is a module depth of at least 1 (the model's children; the totals row is "
            "the model) and applies to by='module' only"
        )
    if top is not None and top < 0:
        raise ValueError(f"top={top!r}: expected a non-negative number of rows")
    cols = _default_columns(report, by) if columns is None else [parse_column(c, by, "columns") for c in columns]
    sort_column = None if sort is None else parse_column(sort, by, "sort")
    # indentation shows the module hierarchy, which a sorted table no longer follows
    rows, free = _rows(report, by, depth, fold, zeros, indent=sort_column is None)
    if columns is None and not any(r.values.get(Column.PER_BLOCK) is not None for r in rows):
        cols = [c for c in cols if c is not Column.PER_BLOCK]  # nothing folded: no per-block figure
    if sort_column is not None:
        rows = sorted(rows, key=lambda r: _sort_key(sort_column, r, ascending))  # stable: ties keep order
    shown = rows if top is None else rows[:top]
    fitted, total, cells = _fitted_cells(report, shown, cols, width, by, may_drop=columns is None)
    dropped = [c for c in cols if c not in fitted]
    notes = footnotes(report, by, fitted, shown, rows, total, dropped=dropped, width=width, free=free)
    if width is not None:
        notes = [line for note in notes for line in textwrap.wrap(note, width, subsequent_indent="  ")]
    return "\n".join([_tabulate(cells, fitted, tablefmt), *notes])


def _default_columns(report: ReportRecord, by: By) -> list[Column | str]:
    """The usual columns for ``by``: the figures whose declared ``column`` conditions
    hold for ``report``; gradients when a backward ran, NaN/Inf when found, the receptive
    field when the model has a spatial input."""
    backward = report.totals.backward_flops is not None

    def holds(figure: Field, when: When) -> bool:
        total = getattr(report.totals, figure.attribute)
        return {
            When.ALWAYS: True,
            When.TIMED: report.totals.latency is not None,
            When.BACKWARD: backward,
            When.PRICED: report.time_model is not None,
            When.KNOWN: total is not None,
            When.NONZERO: bool(total),
            When.NOT_BY_OP: by is not By.OP,
        }[when]

    return [
        c
        for c in default_columns(by, holds)
        if (c is not Column.GRADIENTS or backward)
        and (c is not Column.NONFINITE or any(n.nonfinite for n in report.nodes))
        and (c is not Column.RECEPTIVE_FIELD or any(m.receptive_field is not None for m in report.modules.values()))
    ]


_BOOKKEEPING_SHARE = 0.01  # an op type with no FLOPs moving under this share of the bytes is bookkeeping


def _rows(
    report: ReportRecord, by: By, depth: int | None, fold: bool, zeros: bool, indent: bool
) -> tuple[list[Row], int]:
    """The rows for ``by`` in model or graph order, and how many free op types were left out."""
    uncounted = {name for u in report.uncounted for name in u.nodes}
    if by is By.MODULE:
        return module_rows(report, depth, fold, indent=indent, uncounted=uncounted), 0
    if by is By.NODE:
        return node_rows(report, uncounted), 0
    rows = op_rows(report, uncounted)
    if zeros:
        return rows, 0
    # a view or a shape query moves nothing: a footnote counts them; op types with no
    # FLOPs that move under 1 % of the bytes (masks, index arithmetic) share one row
    free = [r for r in rows if not r.values.get(Column.FLOPS) and not r.values.get(Column.BYTES)]
    little = _BOOKKEEPING_SHARE * (report.totals.bytes_moved or 0)
    small = [r for r in rows if r not in free and not r.values.get(Column.FLOPS) and r.values[Column.BYTES] < little]
    kept = [r for r in rows if r not in free and r not in small]
    if len(small) > 1:  # (one alone keeps its own name)
        kept.append(bookkeeping_row(report, [r.values[Column.LABEL] for r in small], uncounted))
    else:
        kept += small
    return kept, len(free)


def _sort_key(column: Column, row: Row, ascending: bool | None) -> tuple:
    """Numeric columns descending by raw figure, text ascending, unless ``ascending``
    says otherwise; missing figures last."""
    raw = row.values.get(column)
    if spec(column).numeric:
        if column is Column.NONFINITE:
            raw = None if raw is None or raw[0] is None else raw[0] + (raw[1] or 0)
        missing = raw is None or raw != raw  # None and NaN go last
        return (missing, 0 if missing else raw if ascending else -raw)
    text = spec(column).cell(raw, False)
    if ascending is False:  # text largest first: sort by the negated code points
        return (raw is None, (*(-ord(ch) for ch in text), 1))  # (1: a longer text sorts first)
    return (raw is None, text)


_DROPPED_FIRST: dict[By, tuple[Column, ...]] = {
    # default columns a narrow table does without before it cuts names below 24
    # characters: one block's figure, figures that restate others (MACs ~ FLOPs / 2)
    By.MODULE: (Column.PER_BLOCK, Column.MACS, Column.BACKWARD_LATENCY, Column.SAVED_BYTES),
    By.OP: (Column.MACS, Column.BACKWARD_LATENCY, Column.SHARE),
    # (a node's inputs are its producers' outputs, listed in their rows)
    By.NODE: (Column.MACS, Column.BACKWARD_LATENCY, Column.SAVED_BYTES, Column.INPUTS, Column.GRADIENTS),
}
_DROPPED_LAST: dict[By, tuple[Column, ...]] = {
    # ... and those it leaves out only when names cut to 16 characters do not make it fit
    By.MODULE: (Column.LATENCY, Column.BACKWARD_FLOPS),
    By.OP: (Column.LATENCY, Column.BACKWARD_FLOPS),
    By.NODE: (Column.LATENCY, Column.BACKWARD_FLOPS),
}


def _fitted_cells(
    report: ReportRecord, shown: list[Row], cols: list[Column], width: int | None, by: By, may_drop: bool
) -> tuple[list[Column], Row, list[list[str]]]:
    """The columns kept, the totals row and every row's cells (totals last), fitted to
    ``width``: text cut from the middle, then (for default columns) the least needed
    columns left out, one by one, until the table fits."""
    while True:
        total = totals_row(report, cols)
        rendered = [_render(r, cols) for r in [*shown, total]]
        first, last = ([c for c in drop[by] if c in cols] for drop in (_DROPPED_FIRST, _DROPPED_LAST))
        spare = first + last if may_drop and width is not None else []
        # names and types keep a readable width while a column can go instead
        cells = _fit(rendered, cols, width, _READABLE if may_drop and first else _NARROWEST)
        if not spare or _width(cells, cols) <= width:
            return cols, total, cells
        cols = [c for c in cols if c is not spare[0]]


def _render(row: Row, cols: Sequence[Column]) -> list[str]:
    """One row's cells as text, in ``cols`` order."""
    return [spec(c).cell(row.values.get(c), row.partial) for c in cols]


def _tabulate(cells: list[list[str]], cols: Sequence[Column], tablefmt: str) -> str:
    """The cells as a ``tabulate`` table, the totals row (the last) under a rule where the format has one."""
    body: list[Any] = cells[:-1]
    if tablefmt in _RULED_FORMATS:
        body.append(SEPARATING_LINE)
    body.append(cells[-1])
    return tabulate(
        body,
        headers=[spec(c).header for c in cols],
        tablefmt=tablefmt,
        colalign=["right" if spec(c).numeric else "left" for c in cols],
        disable_numparse=True,  # cells are already text; keep them exactly as formatted
        preserve_whitespace=True,  # the indentation of module names is meaningful
    )


_SHRINKABLE = (
    (Column.MODULE, Column.INPUTS, Column.OUTPUTS, Column.GRADIENTS, Column.LABEL),
    (Column.NAME, Column.TYPE),
)
"""Text columns cut from the middle to fit a width: the first group, then the row's
name and type, the widest first."""
_NARROWEST = 16
_READABLE = 24  # the narrowest a text column is cut to while a default column could be left out instead


_HEADER_PADDING = 2  # tabulate's MIN_PADDING: a column is at least its header and two spaces wide


def _width(cells: list[list[str]], cols: Sequence[Column]) -> int:
    return sum(
        max(len(spec(c).header) + _HEADER_PADDING, *(len(row[i]) for row in cells)) for i, c in enumerate(cols)
    ) + 2 * (len(cols) - 1)


def _fit(cells: list[list[str]], cols: Sequence[Column], width: int | None, narrowest: int) -> list[list[str]]:
    """Cut the widest text columns from the middle until the table fits ``width``.

    The other text columns go first, the row's name and type last (a node's name is how
    ``report.node(name)`` finds it; a module path keeps its block index:
    ``…encoder_layer_0–11.mlp``), none below ``narrowest`` characters. Names stay unique: where two
    would read the same, their column is cut less.
    """
    if width is None or not cells:
        return cells
    widths = [max(len(spec(c).header) + _HEADER_PADDING, *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    caps = list(widths)
    for group in _SHRINKABLE:
        while sum(caps) + 2 * (len(caps) - 1) > width:
            candidates = [i for i, c in enumerate(cols) if c in group and caps[i] > narrowest]
            if not candidates:
                break
            caps[max(candidates, key=lambda i: caps[i])] -= 1
    if Column.NAME in cols:
        i = cols.index(Column.NAME)
        caps[i] = _unique_cap([row[i] for row in cells], caps[i])
    return [[fmt.middle(cell, caps[i]) if caps[i] < widths[i] else cell for i, cell in enumerate(row)] for row in cells]


def _unique_cap(names: list[str], cap: int) -> int:
    """The narrowest width from ``cap`` up at which names that differ still differ once cut."""
    distinct = len(set(names))
    while len({fmt.middle(n, cap) for n in names}) < distinct:
        cap += 1
    return cap
