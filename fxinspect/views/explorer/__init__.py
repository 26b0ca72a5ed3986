"""The explorer: one self-contained HTML file to browse a report in a browser.

``report.to_html(path)`` writes a page that needs no server and makes no request: the
report's data (:mod:`.payload`, packed by :mod:`.pack`), the script and the styles are all inside it. The model
opens at its top-level modules with repeated blocks folded, fitted to the window (the
wheel or a pinch zooms about the pointer, a drag pans, "fit" shows it all again, the
minimap shows where the view is); clicking a module opens it in place, down to single
ops, and a folded run opens as one member that steps to the others. Same report, same
bytes.

The testing contract: every module box carries ``data-path`` (a folded run its shown
path, ``transformer.h.0–11``), every op box ``data-node``; hovering shows an element
with ``role="tooltip"``; ``window.fxinspectReady`` is true once the first view is drawn
and ``window.fxinspectReadyAt`` holds ``performance.now()`` of that moment; the
drawing's scale is the ``transform`` of the graph's ``g.view`` (and
``window.fxinspect.view()``), a run's arrows carry ``data-step``, an edge ``data-from`` and
``data-to`` (its boxes' ``data-key``), its label (``.edge-label``) the same;
``window.fxinspect.openTo(depth)`` draws ``to_networkx(by="diagram", depth=depth)``'s boxes
and edges, and ``drawn()`` lists each box's key and nodes; the search lists its hits in
``data-part="hits"`` (a row per hit, ``data-hit``), the buttons ``svg`` and ``png`` save the
view drawn as files named after the model.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from ...records import ReportRecord
from .pack import pack
from .payload import payload

__all__ = ["SCRIPTS", "explorer_body", "page", "to_html"]

SCRIPTS = (
    "format.js",
    "boxes.js",
    "describe.js",
    "layout.js",
    "colours.js",
    "panel.js",
    "tooltip.js",
    "memory.js",
    "pair.js",
    "zoom.js",
    "unpack.js",
    "find.js",
    "export.js",
    "explorer.js",
)  # an explorer's scripts, in the order they load: each part defines one function, explorer.js uses them


def to_html(report: ReportRecord, path: str | Path | None = None, what: str = "") -> str:
    """The explorer page of ``report`` as text, also written to ``path`` when given;
    ``what`` follows the model's name in the title (``"prefill of 8 × 2,048 tokens"``)."""
    root = report.modules.get("")
    title = f"fxinspect: {root.type if root else 'model'}" + (f", {what}" if what else "")
    return page(title, explorer_body(title) + _TOOLTIP, pack(payload(report)), SCRIPTS, path)


def page(
    title: str,
    body: str,
    data: Any,
    script: str | tuple[str, ...],
    path: str | Path | None = None,
    data_id: str = "fxinspect-data",
) -> str:
    """A self-contained page: ``body`` (HTML) with ``data`` as JSON (in the script element
    ``data_id``), the shared styles and the package's ``script`` (or scripts, in order)
    inline; also written to ``path`` when given."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("</", "<\\/")  # (never closes the script element it sits in)
    folder = resources.files(__package__)
    fill = {
        "TITLE": html.escape(title),
        "STYLES": folder.joinpath("explorer.css").read_text(encoding="utf-8"),
        "BODY": body.replace("@@TITLE@@", html.escape(title)),
        "DATA_ID": data_id,
        "DATA": text,
        "SCRIPT": "".join(folder.joinpath(name).read_text(encoding="utf-8") for name in _names(script)),
    }
    # the template's @@MARKERS@@ filled in one pass (styles and script are full of braces,
    # and nothing filled in is searched again)
    out = "".join(fill[part] if i % 2 else part for i, part in enumerate(re.split(r"@@(\w+)@@", _PAGE)))
    if path is not None:
        Path(path).write_text(out, encoding="utf-8")
    return out


def _names(script: str | tuple[str, ...]) -> tuple[str, ...]:
    return (script,) if isinstance(script, str) else script


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>@@TITLE@@</title>
<style>
@@STYLES@@</style>
</head>
<body>
@@BODY@@
<script type="application/json" id="@@DATA_ID@@">@@DATA@@</script>
<script>
@@SCRIPT@@</script>
</body>
</html>
"""


def explorer_body(title: str, ids: bool = True) -> str:
    """The parts of one explorer, each marked ``data-part`` (and with ``ids``, an ``id`` of
    the same name: a page holds one explorer then)."""

    def attrs(name: str) -> str:
        return f'data-part="{name}"' + (f' id="{name}"' if ids else "")

    return f"""<div class="explorer">
<header>
<h2 class="heading">{html.escape(title)}</h2>
<input {attrs("search")} type="search" placeholder="find: name, type, aten.op, /regex/ (Enter)" size="28">
<label>colour by <select {attrs("colour")}></select></label>
<button {attrs("collapse")} type="button">collapse all</button>
<button {attrs("fit")} type="button" title="the whole graph in sight (wheel or pinch: zoom, drag: pan)">fit</button>
<button {attrs("svg")} type="button" title="save the view drawn as an SVG file">SVG</button>
<button {attrs("png")} type="button" title="save the view drawn as a PNG picture">PNG</button>
<button {attrs("side")} type="button" title="show or hide the side panel (the box selected)">panel</button>
<span {attrs("crumbs")}></span>
<div {attrs("scale")}></div>
</header>
<main>
<div class="canvas"><div {attrs("runs")}></div><div {attrs("hits")} hidden></div><svg {attrs("graph")} xmlns="http://www.w3.org/2000/svg"></svg>
<svg {attrs("minimap")} xmlns="http://www.w3.org/2000/svg"></svg></div>
<aside {attrs("panel")}></aside>
</main>
<section {attrs("memory")}></section>
<h3 class="heading">Modules</h3>
<table {attrs("table")}></table>
</div>"""


_TOOLTIP = '<div id="tooltip" role="tooltip" hidden></div>'
