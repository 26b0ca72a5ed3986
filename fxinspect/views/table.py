"""Text tables of a report: one row per module, per op label, or per op node.

A table is built in three steps, each a small pure function: rows of *raw* figures
(ints, seconds, shapes), then sorting and cutting on those raw figures, then
rendering through :mod:`fxinspect.formatting` and ``tabulate``. Sorting therefore
orders 1.50 G above 999.00 M, which sorting the text would not.

Example
-------
>>> print(table(report, by="op", columns=["op", "flops"]))       # doctest: +SKIP
op        FLOPs
------  -------
conv2d  1.82 G
relu    2.41 M
------  -------
total   1.82 G
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Iterable, Iterator, Sequence

from tabulate import SEPARATING_LINE, tabulate

from .. import formatting as fmt
from ..records import ModuleRecord, NodeRecord, ReportRecord

__all__ = ["By", "Column", "table", "columns_for"]


class By(str, Enum):
    """What one row of a table stands for."""

    MODULE = "module"
    OP = "op"
    NODE = "node"

    def __str__(self) -> str:
        return self.value


class Column(str, Enum):
    """Column names accepted by ``columns=`` and ``sort=`` (the CLI uses the same strings)."""

    NAME = "name"
    TYPE = "type"
    LABEL = "op"
    MODULE = "module"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    COUNT = "count"
    CALLS = "calls"
    PARAMS = "params"
    FLOPS = "flops"
    MACS = "macs"
    BYTES = "bytes"
    INTENSITY = "intensity"
    LATENCY = "latency"
    SHARE = "share"
    NONFINITE = "nonfinite"

    def __str__(self) -> str:
        return self.value


def _text(raw: Any, partial: bool) -> str:
    return "" if raw is None else str(raw)


def _nonfinite(raw: tuple[int | None, int | None] | None, partial: bool) -> str:
    if raw is None:
        return ""
    if raw[0] is None:
        return fmt.MISSING  # values were not read: unknown, not "finite"
    nan, inf = raw[0], raw[1] or 0
    parts = [f"{fmt.count(nan)} NaN"] if nan else []
    parts += [f"{fmt.count(inf)} Inf"] if inf else []
    return ", ".join(parts)


@dataclass(frozen=True)
class _Spec:
    """How a column is titled, rendered from its raw figure, aligned and sorted."""

    header: str
    render: Callable[[Any, bool], str]  # (raw figure, row is partial) -> cell text
    numeric: bool = True  # right-aligned, sorted descending by the raw figure


_SPECS: dict[Column, _Spec] = {
    Column.NAME: _Spec("name", _text, numeric=False),
    Column.TYPE: _Spec("type", _text, numeric=False),
    Column.LABEL: _Spec("op", _text, numeric=False),
    Column.MODULE: _Spec("module", _text, numeric=False),
    Column.INPUTS: _Spec("inputs", lambda v, p: "" if v is None else fmt.shapes(v), numeric=False),
    Column.OUTPUTS: _Spec("outputs", lambda v, p: "" if v is None else fmt.shapes(v), numeric=False),
    Column.COUNT: _Spec("nodes", lambda v, p: fmt.count(v)),
    Column.CALLS: _Spec("calls", lambda v, p: "" if v is None else fmt.count(v)),
    Column.PARAMS: _Spec("params", lambda v, p: fmt.count(v)),
    # uncounted ops make FLOPs, MACs and bytes lower bounds: mark them, never hide it
    Column.FLOPS: _Spec("FLOPs", fmt.count),
    Column.MACS: _Spec("MACs", fmt.count),
    Column.BYTES: _Spec("bytes", fmt.nbytes),
    Column.INTENSITY: _Spec("FLOP/B", lambda v, p: fmt.number(v)),
    Column.LATENCY: _Spec("latency", lambda v, p: fmt.seconds(v)),
    Column.SHARE: _Spec("FLOPs %", lambda v, p: fmt.percent(v)),
    Column.NONFINITE: _Spec("NaN/Inf", _nonfinite),
}

_AVAILABLE: dict[By, tuple[Column, ...]] = {
    By.MODULE: (
        Column.NAME, Column.TYPE, Column.CALLS, Column.PARAMS, Column.FLOPS, Column.MACS,
        Column.BYTES, Column.INTENSITY, Column.LATENCY, Column.SHARE,
    ),
    By.OP: (
        Column.LABEL, Column.COUNT, Column.FLOPS, Column.MACS, Column.BYTES, Column.INTENSITY,
        Column.LATENCY, Column.SHARE,
    ),
    By.NODE: (
        Column.NAME, Column.LABEL, Column.MODULE, Column.INPUTS, Column.OUTPUTS, Column.FLOPS,
        Column.MACS, Column.BYTES, Column.INTENSITY, Column.LATENCY, Column.SHARE, Column.NONFINITE,
    ),
}

_DEFAULT: dict[By, tuple[Column, ...]] = {
    By.MODULE: (Column.NAME, Column.TYPE, Column.PARAMS, Column.FLOPS, Column.MACS, Column.BYTES, Column.LATENCY),
    By.OP: (Column.LABEL, Column.COUNT, Column.FLOPS, Column.MACS, Column.BYTES, Column.LATENCY, Column.SHARE),
    By.NODE: (
        Column.NAME, Column.LABEL, Column.MODULE, Column.INPUTS, Column.OUTPUTS, Column.FLOPS,
        Column.MACS, Column.BYTES, Column.LATENCY, Column.NONFINITE,
    ),
}

# Formats in which tabulate draws SEPARATING_LINE as a rule; elsewhere (markdown, html,
# grid) it would print a broken or duplicated row, so the totals row just follows.
_RULED_FORMATS = frozenset(
    {"simple", "rst", "psql", "outline", "simple_outline", "rounded_outline", "heavy_outline",
     "mixed_outline", "double_outline", "fancy_outline"}
)


@dataclass(frozen=True)
class _Row:
    """Raw figures of one table row, keyed by column; ``partial`` when it misses ops."""

    values: dict[Column, Any]
    partial: bool = False


def columns_for(by: By | str) -> tuple[Column, ...]:
    """The columns a table ``by`` modules, ops or nodes can show.

    >>> [str(c) for c in columns_for("op")]
    ['op', 'count', 'flops', 'macs', 'bytes', 'intensity', 'latency', 'share']
    """
    return _AVAILABLE[_parse_by(by)]


def _parse_by(by: By | str) -> By:
    try:
        return By(by)
    except ValueError:
        valid = ", ".join(repr(b.value) for b in By)
        raise ValueError(f"table(by=...) must be one of {valid}, got {by!r}") from None


def _parse_column(name: Column | str, by: By, option: str) -> Column:
    valid = _AVAILABLE[by]
    try:
        column = Column(name)
    except ValueError:
        column = None
    if column not in valid:
        names = ", ".join(c.value for c in valid)
        raise ValueError(f"{option}: unknown column {name!r} for by={by.value!r}; valid columns: {names}")
    return column


def _share(flops: int, report: ReportRecord) -> float | None:
    return flops / report.totals.flops if report.totals.flops else None


def _intensity(flops: int, moved: int) -> float | None:
    return flops / moved if moved else None


def _latency(values: Iterable[float | None]) -> float | None:
    """A sum of latencies, unknown (``None``) as soon as one part is."""
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def _figures(report: ReportRecord, records: Sequence[NodeRecord | ModuleRecord]) -> dict[Column, Any]:
    """The summed figure columns of some node or module records."""
    flops = sum(r.flops for r in records)
    moved = sum(r.bytes_read + r.bytes_written for r in records)
    return {
        Column.FLOPS: flops,
        Column.MACS: sum(r.macs for r in records),
        Column.BYTES: moved,
        Column.INTENSITY: _intensity(flops, moved),
        Column.LATENCY: _latency(r.latency for r in records),
        Column.SHARE: _share(flops, report),
    }


# ------------------------------------------------------------------ module rows


def _local(path: str) -> str:
    return path.rpartition(".")[2]


def _children(report: ReportRecord) -> dict[str, list[str]]:
    """Child paths of every module, in model order, derived from the paths themselves
    (a module whose parent is unknown hangs under its nearest known ancestor)."""
    kids: dict[str, list[str]] = {"": []}
    for path in report.modules:
        kids.setdefault(path, [])
    for path in report.modules:
        if not path:
            continue
        parent = path.rpartition(".")[0]
        while parent not in kids:
            parent = parent.rpartition(".")[0]
        kids[parent].append(path)
    return kids


def _fold_runs(children: list[str], signature: Callable[[str], tuple] | None) -> list[list[int]]:
    """Positions of ``children`` grouped into runs of repeated blocks.

    A run is consecutive siblings named by consecutive integers (a ``ModuleList`` or
    ``Sequential``) whose subtrees have the same names, types and parameter counts, so
    their descendants line up one to one and can be summed row by row.
    """
    if signature is None:
        return [[i] for i in range(len(children))]
    runs: list[list[int]] = []
    for i, path in enumerate(children):
        if runs:
            prev = children[runs[-1][-1]]
            name, prev_name = _local(path), _local(prev)
            if (name.isdigit() and prev_name.isdigit() and int(name) == int(prev_name) + 1
                    and signature(path) == signature(children[runs[-1][0]])):
                runs[-1].append(i)
                continue
        runs.append([i])
    return runs


def _module_groups(report: ReportRecord, depth: int | None, fold: bool) -> Iterator[tuple[str, int, list[str]]]:
    """``(display path, repeats, member module paths)`` in model order, root excluded
    (the totals row stands for it). A folded row's members are every repeat's module."""
    kids = _children(report)
    memo: dict[str, tuple] = {}

    def signature(path: str) -> tuple:
        """What two blocks must share to be folded: names, types, parameter counts."""
        if path not in memo:
            m = report.modules[path]
            memo[path] = (m.type, m.params, m.trainable_params, m.buffers,
                          tuple((_local(c), signature(c)) for c in kids[path]))
        return memo[path]

    def walk(group: list[str], prefix: str) -> Iterator[tuple[str, int, list[str]]]:
        first = kids[group[0]]
        for run in _fold_runs(first, signature if fold else None):
            members = [kids[g][i] for g in group for i in run]
            if depth is not None and report.modules[members[0]].depth > depth:
                continue
            if report.modules[members[0]].counted_in:  # ran inside a leaf: no figures of its own
                continue
            if len(members) == 1:  # nothing folded here or above: the module's own path
                name = members[0]
            else:
                local = _local(first[run[0]])
                if len(run) > 1:
                    local += "-" + _local(first[run[-1]])
                name = f"{prefix}.{local}" if prefix else local
            yield name, len(run), members
            yield from walk(members, name)

    yield from walk([""], "")


def _module_rows(report: ReportRecord, depth: int | None, fold: bool, indent: bool, uncounted: set[str]) -> list[_Row]:
    rows = []
    for name, repeats, members in _module_groups(report, depth, fold):
        records = [report.modules[p] for p in members]
        first = records[0]
        values = {
            Column.NAME: ("  " * (first.depth - 1) if indent else "") + name,
            Column.TYPE: first.type if repeats == 1 else f"{fmt.count(repeats)} × {first.type}",
            Column.CALLS: sum(r.calls for r in records),
            Column.PARAMS: sum(r.params for r in records),
            **_figures(report, records),
        }
        partial = any(n in uncounted for r in records for n in r.nodes)
        rows.append(_Row(values, partial))
    return rows


# ------------------------------------------------------------------ op and node rows


def _op_rows(report: ReportRecord, uncounted: set[str]) -> list[_Row]:
    groups: dict[str, list[NodeRecord]] = {}  # by label, in order of first appearance
    for n in report.nodes:
        if n.is_op:
            groups.setdefault(n.label, []).append(n)
    return [
        _Row(
            {Column.LABEL: label, Column.COUNT: len(nodes), **_figures(report, nodes)},
            partial=any(n.name in uncounted for n in nodes),
        )
        for label, nodes in groups.items()
    ]


def _node_rows(report: ReportRecord, uncounted: set[str]) -> list[_Row]:
    return [
        _Row(
            {
                Column.NAME: n.name,
                Column.LABEL: n.label,
                Column.MODULE: n.module_path,
                Column.INPUTS: tuple(t.shape for t in n.inputs),
                Column.OUTPUTS: tuple(t.shape for t in n.outputs),
                Column.NONFINITE: (n.nan_count, n.inf_count),
                **_figures(report, [n]),
            },
            partial=n.name in uncounted,
        )
        for n in report.nodes
        if n.is_op
    ]


def _totals_row(report: ReportRecord, cols: Sequence[Column]) -> _Row:
    """The whole model's figures; "total" written once, in the first name-like column."""
    t = report.totals
    titled = next((c for c in cols if c in (Column.NAME, Column.LABEL)), None)
    root = report.modules.get("")
    moved = t.bytes_read + t.bytes_written
    return _Row(
        {
            Column.NAME: "total" if titled is Column.NAME else None,
            Column.LABEL: "total" if titled is Column.LABEL else None,
            Column.TYPE: root.type if root else None,
            Column.INPUTS: tuple(m.shape for m in report.inputs),
            Column.OUTPUTS: tuple(m.shape for m in report.outputs),
            Column.COUNT: sum(1 for n in report.nodes if n.is_op),
            Column.PARAMS: t.params,
            Column.FLOPS: t.flops,
            Column.MACS: t.macs,
            Column.BYTES: moved,
            Column.INTENSITY: _intensity(t.flops, moved),
            Column.LATENCY: t.latency,
            Column.SHARE: 1.0 if t.flops else None,
        },
        partial=t.partial,
    )


# ------------------------------------------------------------------ the table


def _sort_key(column: Column, row: _Row) -> tuple:
    raw = row.values.get(column)
    if _SPECS[column].numeric:
        if column is Column.NONFINITE:
            raw = None if raw is None or raw[0] is None else raw[0] + (raw[1] or 0)
        missing = raw is None or raw != raw  # None and NaN go last
        return (missing, 0 if missing else -raw)
    return (raw is None, _SPECS[column].render(raw, False))


def _render(row: _Row, cols: Sequence[Column]) -> list[str]:
    return [_SPECS[c].render(row.values.get(c), row.partial) for c in cols]


def table(
    report: ReportRecord,
    by: By | str = By.MODULE,
    depth: int | None = None,
    columns: Sequence[Column | str] | None = None,
    sort: Column | str | None = None,
    top: int | None = None,
    tablefmt: str = "simple",
    fold: bool = True,
) -> str:
    """A text table of ``report`` by module, op label or op node, with a totals row.

    Parameters
    ----------
    by : ``"module"`` (model order, names indented by depth), ``"op"`` (one row per
        ``NodeRecord.label``, in order of first appearance) or ``"node"`` (one row per op
        node, graph order).
    depth : modules deeper than this are left out (``by="module"`` only). A module's
        figures already include its descendants', so each level still adds up.
    columns : column names (see :func:`columns_for`); default: the usual ones, without
        latency when timing did not run and without NaN/Inf when nothing was found.
    sort : a column name; numeric columns sort descending by their value, text columns
        ascending. Without it rows keep model or graph order.
    top : keep the first ``top`` rows (after sorting). The totals row stays the model's.
    tablefmt : any ``tabulate`` format.
    fold : merge runs of identical repeated blocks (``layer.0`` .. ``layer.11`` of the
        same structure) into one row ``layer.0-11`` of type ``12 × Block`` with their
        summed figures, their descendants likewise (``by="module"`` only).

    Totals that miss uncounted ops carry :data:`fxinspect.formatting.PARTIAL` and a
    footnote; unmeasured figures print as :data:`fxinspect.formatting.MISSING`.

    Example
    -------
    >>> print(report.table(depth=1, columns=["name", "params", "flops"]))  # doctest: +SKIP
    name      params    FLOPs
    ------  --------  -------
    conv1      9.41 K  236.03 M
    ...
    """
    by = _parse_by(by)
    if depth is not None and (by is not By.MODULE or depth < 0):
        raise ValueError(f"depth={depth!r}: depth is a non-negative module depth and applies to by='module' only")
    if top is not None and top < 0:
        raise ValueError(f"top={top!r}: expected a non-negative number of rows")
    if columns is None:
        timed = report.totals.latency is not None
        found = any(n.nonfinite for n in report.nodes)
        cols = [c for c in _DEFAULT[by]
                if (c is not Column.LATENCY or timed) and (c is not Column.NONFINITE or found)]
    else:
        cols = [_parse_column(c, by, "columns") for c in columns]
    sort_column = None if sort is None else _parse_column(sort, by, "sort")

    uncounted = {name for u in report.uncounted for name in u.nodes}
    if by is By.MODULE:
        # indentation shows the hierarchy, which a sorted table no longer follows
        rows = _module_rows(report, depth, fold, indent=sort_column is None, uncounted=uncounted)
    elif by is By.OP:
        rows = _op_rows(report, uncounted)
    else:
        rows = _node_rows(report, uncounted)
    if sort_column is not None:
        rows = sorted(rows, key=lambda r: _sort_key(sort_column, r))  # stable: ties keep order
    shown = rows if top is None else rows[:top]

    body: list[Any] = [_render(r, cols) for r in shown]
    total = _totals_row(report, cols)
    if tablefmt in _RULED_FORMATS:
        body.append(SEPARATING_LINE)
    body.append(_render(total, cols))
    text = tabulate(
        body,
        headers=[_SPECS[c].header for c in cols],
        tablefmt=tablefmt,
        colalign=["right" if _SPECS[c].numeric else "left" for c in cols],
        disable_numparse=True,  # cells are already text; keep them exactly as formatted
        preserve_whitespace=True,  # the indentation of module names is meaningful
    )
    return "\n".join([text, *_footnotes(report, by, cols, shown, rows, total)])


def _footnotes(
    report: ReportRecord, by: By, cols: Sequence[Column], shown: list[_Row], rows: list[_Row], total: _Row
) -> list[str]:
    notes = []
    marked = {Column.FLOPS, Column.MACS, Column.BYTES} & set(cols)
    if marked and (total.partial or any(r.partial for r in shown)):
        ops = fmt.listing(u.op for u in report.uncounted) or "some ops"
        notes.append(f"{fmt.PARTIAL} partial: no FLOP rule for {ops} (see report.uncounted)")
    if by is By.MODULE and "" in report.modules:
        # the totals row stands for the root; say what in it no module row shows
        inner = {n for path, m in report.modules.items() if path for n in m.nodes}
        own = [n for n in report.modules[""].nodes if n not in inner]
        if own:
            label = {n.name: n.label for n in report.nodes}
            labels = fmt.listing(dict.fromkeys(label[n] for n in own))
            notes.append(f"total includes {fmt.plural(len(own), 'op')} of the root module itself: {labels}")
    if by is By.MODULE:
        inside = [m for m in report.modules.values() if m.counted_in]
        if inside:
            leaves = fmt.listing(dict.fromkeys(m.counted_in for m in inside))
            notes.append(
                f"{fmt.plural(len(inside), 'module')} inside leaf modules ({leaves}) not broken down: "
                "their work is in the leaf's row"
            )
    if Column.LATENCY in cols and report.totals.latency is None:
        notes.append(f"{fmt.MISSING} timing did not run")
    if len(shown) < len(rows):
        notes.append(f"{fmt.count(len(shown))} of {fmt.count(len(rows))} rows shown")
    return notes
