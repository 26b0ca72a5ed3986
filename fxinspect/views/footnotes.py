"""The footnotes under a table: what its cells cannot say.

Partial figures and why, the root module's own ops, leaf modules not broken down (and
how to break them down), timing that did not run, rows cut by ``top``, columns
left out to fit the width, op types that cost nothing left out. :func:`footnotes` is
called by :func:`fxinspect.views.table.table` with the rows it made.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import formatting as fmt
from ..records import ReportRecord
from .columns import By, Column, spec
from .rows import BOOKKEEPING, Row

__all__ = ["footnotes"]


def footnotes(
    report: ReportRecord,
    by: By,
    cols: Sequence[Column],
    shown: list[Row],
    rows: list[Row],
    total: Row,
    *,
    dropped: Sequence[Column] = (),
    width: int | None = None,
    free: int = 0,
) -> list[str]:
    """The lines under a table: what its cells cannot say: partial figures, the root's own ops, leaves
    not broken down, timing that did not run, rows cut by ``top``, the ``dropped``
    columns left out to fit ``width``, ``free`` op types left out."""
    notes = []
    marked = any(spec(c).marks_partial for c in cols)
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
        inside = [m for m in report.modules.values() if m.counted_in is not None]
        if inside:
            owners = dict.fromkeys(m.counted_in for m in inside)
            leaves = fmt.listing(p or "the root module" for p in owners)
            where = "the total" if list(owners) == [""] else "the leaf's row"
            # the model itself is a torch.nn layer (a TransformerEncoder): the eager tier records
            # the ops it ran (its fast path too), module by module; symbolic tracing cannot
            how = (
                "; method='eager' breaks it down as it ran" if "" in owners and report.capture.method != "eager" else ""
            )
            notes.append(
                f"{fmt.plural(len(inside), 'module')} inside leaf modules ({leaves}) not broken down: "
                f"each ran as one op; their work is in {where}{how}"
            )
    if Column.LATENCY in cols and report.totals.latency is None:
        notes.append(f"{fmt.MISSING} timing did not run")
    if len(shown) < len(rows):
        notes.append(f"{fmt.count(len(shown))} of {fmt.count(len(rows))} rows shown")
    if dropped == [Column.PER_BLOCK]:
        notes.append("folded rows give their blocks' total; one block's: columns=[..., 'per_block'] or width=None")
    elif dropped:
        names = ", ".join(spec(c).header for c in dropped)
        notes.append(f"left out to fit width={width}: {names} (width=None or columns=[...] shows them)")
    if free:
        notes.append(f"{fmt.plural(free, 'op type')} that cost nothing (no FLOPs, no bytes) not shown: zeros=True")
    if by is By.OP and any(str(r.values.get(Column.LABEL, "")).startswith(BOOKKEEPING) for r in shown):
        notes.append(f"{BOOKKEEPING}: op types with no FLOPs moving under 1 % of the bytes each; zeros=True lists them")
    return notes
