"""``Watch.to_html``: the histograms of a watched run as one self-contained page.

Per module, a heat map per quantity (outputs, output-gradient norms, parameters, their
gradients) over the logged steps, as ``Watch.plot`` draws them: a column per step, a row
per signed log2 bin, NaN/±Inf rows at the edges; hovering a cell gives the step, the bin
and its count. The findings (``Watch.summary``) come first, each linked to the module it
names. Modules are listed in the order they first ran; a panel is drawn when it scrolls
into view, so a model with hundreds of modules opens at once.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
>>> watcher = fxinspect.watch(model, every=2)
>>> for _ in range(4):
...     model(torch.randn(16, 4)).sum().backward()
>>> data = watch_data(watcher)
>>> [(m["name"], [p["quantity"] for p in m["panels"]]) for m in data["modules"]][:2]
[('0', ['io', 'io_grad', 'params', 'params_grad']), ('1', ['io', 'io_grad'])]
>>> data["modules"][0]["panels"][0]["steps"]
[0, 2]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..views.explorer import page
from .findings import linked_findings
from .plot import grid
from .quantities import Quantity

__all__ = ["watch_data", "watch_html"]


def watch_data(w: Any) -> dict[str, Any]:
    """The page's data: findings (with the module each names) and every module's panels."""
    modules = []
    for name in w.names():
        panels = []
        for quantity in w.log:
            if not w.steps(name, quantity):
                continue
            counts, labels, steps = grid(w, name, quantity)
            panels.append(
                {
                    "quantity": quantity,
                    "title": Quantity(quantity).title,
                    "steps": steps,
                    "bins": labels,
                    "counts": counts,
                }
            )
        modules.append({"name": name, "type": w.types.get(name, ""), "panels": panels})
    known = set(w.names())
    # each finding links the module it is about, said by the finding itself: a first NaN
    # whose module is unknown links none (a module merely quoted in its text is no lead)
    findings = [
        {"text": text, "module": module if module in known else None}
        for text, module in (linked_findings(w) if w.names() else [])
    ]
    return {"modules": modules, "findings": findings, "every": w.every}


def watch_html(w: Any, path: str | Path | None = None) -> str:
    """The watch page as text, also written to ``path`` when given."""
    return page("fxinspect watch", _BODY, watch_data(w), "watch.js", path)


_BODY = """<header><h2 class="heading">@@TITLE@@</h2><span id="about"></span></header>
<section id="findings"></section>
<div id="tooltip" role="tooltip" hidden></div>
<section id="modules"></section>"""
