"""Table rows of raw figures: modules (repeated blocks folded), op labels, op nodes, the totals.

A row holds each column's raw figure (ints, seconds, shapes), not text, so that
tables sort 1.50 G above 999.00 M; :mod:`fxinspect.views.table` renders them.

Example
-------
>>> row = Row({Column.NAME: "conv1", Column.FLOPS: 1_500_000_000}, partial=True)
>>> row.values[Column.FLOPS]      # raw, rendered only after sorting: "1.50 G+"
1500000000
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import formatting as fmt
from .. import paths
from ..records import ModuleRecord, NodeRecord, ReportRecord, Totals
from ..records.fields import sums
from .columns import Column
from .folding import Folds

__all__ = ["Row", "module_rows", "node_rows", "op_rows", "totals_row"]


@dataclass(frozen=True)
class Row:
    """Raw figures of one table row, keyed by column; ``partial`` when it misses ops."""

    values: dict[Column | str, Any]  # (a registered figure's column is its name)
    partial: bool = False


def _ratio(part: float, whole: float) -> float | None:
    """``part / whole``; unknown rather than infinite when ``whole`` is 0."""
    return part / whole if whole else None


def _figures(report: ReportRecord, records: Sequence[NodeRecord | ModuleRecord | Totals]) -> dict[Column, Any]:
    """The figure columns of some records: every declared figure summed, and the derived ones."""
    summed = sums(records)
    values: dict[Column | str, Any] = {Column(name): total for name, total in summed.items() if name != "registered"}
    values.update(summed.get("registered", {}))  # (a registered figure's column is its name)
    moved = values[Column.BYTES] = sum(r.bytes_moved for r in records)
    values[Column.INTENSITY] = _ratio(values[Column.FLOPS], moved)
    values[Column.SHARE] = _ratio(values[Column.FLOPS], report.totals.flops)
    return values


# ------------------------------------------------------------------ module rows


def _module_groups(report: ReportRecord, depth: int | None, fold: bool) -> Iterator[tuple[str, int, list[str]]]:
    """``(display path, repeats, member module paths)`` in model order, root excluded
    (the totals row stands for it). A folded row's members are every repeat's module:
    runs of identical sibling blocks are found by structure (:mod:`.folding`)."""
    folds = Folds(report, fold)
    kids = folds.children

    def walk(group: list[str], prefix: str) -> Iterator[tuple[str, int, list[str]]]:
        first = kids[group[0]]
        position = {c: i for i, c in enumerate(first)}
        for run in folds.runs(first):
            members = [kids[g][position[c]] for g in group for c in run]
            if depth is not None and report.modules[members[0]].depth > depth:
                continue
            if report.modules[members[0]].counted_in is not None:  # ran inside one op: no figures of its own
                continue
            if len(members) == 1:  # nothing folded here or above: the module's own path
                name = members[0]
            else:
                local = folds.label(run[0]) if len(run) > 1 else paths.name(run[0])
                name = f"{prefix}.{local}" if prefix else local
            yield name, len(run), members
            yield from walk(members, name)

    yield from walk([""], "")


def module_rows(report: ReportRecord, depth: int | None, fold: bool, indent: bool, uncounted: set[str]) -> list[Row]:
    """One row per module (root excluded) in model order, down to ``depth``.

    ``fold`` merges runs of identical repeated blocks into one row of summed figures;
    ``indent`` indents names by depth; ``uncounted`` names the nodes without a FLOP rule.
    """
    rows = []
    for name, _repeats, members in _module_groups(report, depth, fold):
        records = [report.modules[p] for p in members]
        first = records[0]
        values = {
            Column.NAME: ("  " * (first.depth - 1) if indent else "") + name,
            # a row stands for every member: the blocks it folds, or their same child in each
            Column.TYPE: first.type if len(records) == 1 else f"{fmt.count(len(records))} × {first.type}",
            Column.CALLS: sum(r.calls for r in records),
            Column.PARAMS: sum(r.params for r in records),
            Column.RECEPTIVE_FIELD: records[-1].receptive_field,  # (a folded run's: its last block's)
            **_figures(report, records),
        }
        if len(records) > 1:  # the row is the members' total; this is one member's (their mean)
            total = values[Column.FLOPS]
            values[Column.PER_BLOCK] = total // len(records) if total % len(records) == 0 else total / len(records)
        partial = any(n in uncounted for r in records for n in r.nodes)
        rows.append(Row(values, partial))
    return rows


# ------------------------------------------------------------------ op and node rows


def op_rows(report: ReportRecord, uncounted: set[str]) -> list[Row]:
    """One row per op label, in order of first appearance, its nodes' figures summed."""
    groups: dict[str, list[NodeRecord]] = {}
    for n in report.nodes:
        if n.is_op:
            groups.setdefault(n.label, []).append(n)
    return [
        Row(
            {Column.LABEL: label, Column.COUNT: len(nodes), **_figures(report, nodes)},
            partial=any(n.name in uncounted for n in nodes),
        )
        for label, nodes in groups.items()
    ]


BOOKKEEPING = "bookkeeping"
"""The op table's row for op types with no FLOPs that move little (see :func:`bookkeeping_row`)."""


def bookkeeping_row(report: ReportRecord, labels: Sequence[str], uncounted: set[str]) -> Row:
    """One row for the op types ``labels`` together: their nodes' figures summed."""
    chosen = set(labels)
    nodes = [n for n in report.nodes if n.is_op and n.label in chosen]
    return Row(
        {Column.LABEL: f"{BOOKKEEPING} ({len(chosen)} ops)", Column.COUNT: len(nodes), **_figures(report, nodes)},
        partial=any(n.name in uncounted for n in nodes),
    )


def node_rows(report: ReportRecord, uncounted: set[str]) -> list[Row]:
    """One row per op node, in graph order."""
    return [
        Row(
            {
                Column.NAME: n.name,
                Column.LABEL: n.label,
                Column.MODULE: n.module_path,
                Column.INPUTS: tuple(t.shape for t in n.inputs),
                Column.OUTPUTS: tuple(t.shape for t in n.outputs),
                Column.GRADIENTS: tuple(g.shape for g in n.grad_outputs) if n.grad_outputs is not None else None,
                Column.NONFINITE: (n.nan_count, n.inf_count),
                Column.RECEPTIVE_FIELD: n.receptive_field,
                **_figures(report, [n]),
            },
            partial=n.name in uncounted,
        )
        for n in report.nodes
        if n.is_op
    ]


def totals_row(report: ReportRecord, cols: Sequence[Column]) -> Row:
    """The whole model's figures; "total" written once, in the first name-like column."""
    titled = next((c for c in cols if c in (Column.NAME, Column.LABEL)), None)
    root = report.modules.get("")
    return Row(
        {
            Column.NAME: "total" if titled is Column.NAME else None,
            Column.LABEL: "total" if titled is Column.LABEL else None,
            Column.TYPE: root.type if root else None,
            Column.INPUTS: tuple(m.shape for m in report.inputs),
            Column.OUTPUTS: tuple(m.shape for m in report.outputs),
            Column.COUNT: sum(1 for n in report.nodes if n.is_op),
            Column.PARAMS: report.totals.params,
            Column.RECEPTIVE_FIELD: root.receptive_field if root else None,
            **_figures(report, [report.totals]),  # the totals' own figures: a sum of one
        },
        partial=report.totals.partial,
    )
