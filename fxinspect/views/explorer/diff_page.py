"""Two reports side by side in one page: ``report.diff(other).to_html(path)``.

Each side is the explorer of one report; a module that differs between them (its type,
parameters, FLOPs, MACs or bytes; latency alone is noise) is framed in red on both sides
with the change written in it, and a module found in one report only is framed in dashes.
The two panes move as one (pair.js pairs them): a module opened, a run stepped, a
colour chosen, a zoom, pan or fit in one is done in the other where the other report has
the same path (one it lacks is named in a note on its side), and both colour on one scale,
over the boxes drawn in both (``window.fxinspect[i].fill(v)``: the fill of a value).

Example
-------
>>> import torch, fxinspect
>>> x = torch.randn(2, 8)
>>> small = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(8, 4)), x, timing=False)
>>> large = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(8, 16)), x, timing=False)
>>> page = diff_html(small.diff(large))
>>> page.count('class="explorer"'), '"0":{"changed":true,"only":false,"text":"params 36 → 144 (+300.0%)"}' in page
(2, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import SCRIPTS, explorer_body, page
from .pack import pack
from .payload import payload

__all__ = ["diff_html"]


def diff_html(d: Any, path: str | Path | None = None) -> str:
    """The page of diff ``d`` (made by ``report.diff(other)``, which keeps both reports)."""
    if d.this is None or d.other is None:
        raise ValueError("this diff does not hold its two reports: make it with report.diff(other)")
    left = explorer_body(f"this: {_name(d.this)}", ids=False)
    right = explorer_body(f"other: {_name(d.other)}", ids=False)
    # (the side panels start hidden: each pane's drawing gets half the page; "panel" shows both)
    body = f'<div class="diff panel-closed">{left}{right}</div><div id="tooltip" role="tooltip" hidden></div>'
    data = {"this": pack(payload(d.this)), "other": pack(payload(d.other)), "changes": d.changes()}
    return page("fxinspect: two reports", body, data, SCRIPTS, path, data_id="fxinspect-diff")


def _name(report: Any) -> str:
    root = report.modules.get("")
    return root.type if root else "model"
