"""The explorer: one HTML file to browse a report, opened a module at a time.

Run: ``python examples/explorer.py [OUT_DIR]`` (writes the pages, and with Chromium the
screenshots named below).

``report.to_html(path)`` (CLI: ``--html PATH``) writes one self-contained page: the
report's data, the script and the styles are inside it, so it opens from disk, offline,
with no server; the same report gives the same bytes. The model opens at its top-level
modules with repeated blocks folded (``transformer.h.0–1 (2×)``), fitted to the window:
the wheel or a pinch zooms about the pointer, a drag pans, "fit" shows it all again and
the minimap shows where the view is. A click opens a module in place, down to single ops;
a folded run opens as one member (``transformer.h.0 × 2``) whose arrows step to the
others, what is open inside it staying open; breadcrumbs (a line of their own, so the
header keeps its height) and "collapse all" go back. Boxes are coloured by any figure the
report has (FLOPs, MACs, bytes, latency, memory, backward FLOPs, NaN/Inf) on one scale for
the whole report, from its smallest op to its largest box, whatever is open (the colour
bar says what it spans), so a colour is the same figure at every level; hovering shows a
box's figures as the table writes them, inside the window; the side panel ("panel" hides
or shows it) shows the selected module's row and children. The search box lists every module and op it matches
(by path, name or type: ``Linear``, ``conv2d``; ``aten.mm`` for an op kind exactly;
``/layers\\.\\d+\\.mlp/`` a regular expression) with previous and next; Enter steps to the
next hit (Shift+Enter the one before), opening the modules above it and stepping a folded
run to the member holding it. "SVG" and "PNG" save the view drawn (all of it, not only what
is in sight) as files named after the model: the SVG with its styles on its elements, the
PNG rendered from it. Below the graph, the module table sorts by any figure, either way
(the column's ▼ or ▲ says which). Each level shows the boxes and edges ``report.plot`` draws
(``to_networkx(by="diagram", depth=d)`` when every module above depth ``d`` is open): a
call whose ops are not contiguous is a box per part, a module's own ops a box per group
of them that feed one another, the ops between a folded run's members in the run's box
(an open run draws its other members as the one it shows: their edges leave from its
boxes, and the ops between members are one box after it, as in ``plot``).
An edge down several layers runs in a lane of its own beside the boxes it passes, every
edge is labelled with the shape and dtype it carries, and a box shows the shapes its
edges bring in and take out.

Scripts can drive it: every module box has ``data-path``, every op box ``data-node``,
the tooltip is ``role="tooltip"``, ``window.fxinspectReady`` is true once the first view
is drawn (``window.fxinspectReadyAt``: when, by ``performance.now()``), and
``window.fxinspect.expandAll()``/``collapseAll()`` open or close everything (a run
showing one member), ``openTo(depth)`` opens every module above ``depth``, ``drawn()``
lists each box's key and nodes, ``fit()`` and ``view()`` (the scale and offset) drive the
zoom; an edge has ``data-from`` and ``data-to`` (the boxes' ``data-key``). The
screenshots here are taken that way, with Playwright and Debian's ``chromium``. In a
notebook, a report shows the same explorer inline (``_repr_html_``: the page in an
``<iframe srcdoc>``, no server), between its summary and its module table.

Below the table, the memory timeline: hovering a point names the node running there and
the bytes held. ``watcher.to_html(path)`` writes the histograms of a ``watch`` the same
way: per module a heat map per quantity over the logged steps (hover a cell for its
step, bin and count), the findings first, each linked to its module; and
``report.diff(other).to_html(path)`` (``fxinspect.diff_html(a, b, path)``) two reports'
explorers side by side, each module that differs framed in red with its change written in
it; the two panes open, step, zoom and pan together (a path one report lacks is named in a
note on its side) and colour on one scale, over the boxes of both. Each pane draws on half
the page: the side panels start hidden, and "panel" shows both.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
import torchvision

import fxinspect


def main(out_dir: Path = Path(".")) -> str:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    out_dir = Path(out_dir)
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=2)).eval()
    resnet = torchvision.models.resnet50(weights=None).eval()
    with torch.no_grad():
        text_report = fxinspect.analyze(gpt2, {"input_ids": torch.randint(0, 50257, (1, 32))}, timing=False)
        image_report = fxinspect.analyze(resnet, torch.randn(1, 3, 224, 224), warmup=1, repeats=3)
    pages = {"gpt2.html": text_report, "resnet50.html": image_report}
    lines = []
    for name, report in pages.items():
        report.to_html(out_dir / name)
        size = (out_dir / name).stat().st_size
        lines.append(f"{name}: {size / 1e6:.2f} MB, {sum(n.is_op for n in report.nodes)} ops")
    watcher = _watched_run()
    watcher.to_html(out_dir / "watch.html")
    lines.append(f"watch.html: {len(watcher.names())} modules, steps {watcher.steps('0', 'io')}")
    lines += _screenshots(out_dir)
    return "\n".join(lines)


def _watched_run():
    """A small CNN trained 60 steps under ``watch(every=5)``, its second conv dead from step 30."""
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 10),
    )
    watcher = fxinspect.watch(model, every=5)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    images, labels = torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))
    for step in range(60):
        if step == 30:  # a bias pushed far below zero: the ReLU after it outputs zeros from here on
            with torch.no_grad():
                model[2].bias.fill_(-100.0)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        opt.step()
    watcher.remove()
    return watcher


def _screenshots(out_dir: Path) -> list[str]:
    """The pages as a person sees them, in headless Chromium (when it is installed)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        return ["(no screenshots: they need Debian's chromium and pip install playwright)"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 820})
        page.goto((out_dir / "gpt2.html").resolve().as_uri())
        page.wait_for_function("window.fxinspectReady === true")
        page.screenshot(path=out_dir / "explorer_gpt2_collapsed.png")
        for path in ("transformer", "transformer.h.0–1", "transformer.h.0"):
            page.click(f'[data-path="{path}"]')
        page.hover('[data-path="transformer.h.0.attn"]')
        page.locator('[data-path="transformer.h.0.attn"]').scroll_into_view_if_needed()
        page.screenshot(path=out_dir / "explorer_gpt2_expanded.png")
        page.goto((out_dir / "resnet50.html").resolve().as_uri())
        page.wait_for_function("window.fxinspectReady === true")
        page.select_option("#colour", "latency")
        page.click('[data-path="layer1"]')
        box = page.locator('[data-path="layer1.0"]').bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.wheel(0, -350)  # the wheel zooms in about the pointer: the opened stage readable
        page.wait_for_timeout(200)
        page.mouse.move(1270, 810)  # (no tooltip over the picture)
        page.screenshot(path=out_dir / "explorer_resnet50_latency.png")
        page.goto((out_dir / "watch.html").resolve().as_uri())
        page.wait_for_function("window.fxinspectReady === true")
        page.screenshot(path=out_dir / "explorer_watch.png")
        browser.close()
    return ["screenshots: " + ", ".join(SCREENSHOTS)]


SCREENSHOTS = (
    "explorer_gpt2_collapsed.png",
    "explorer_gpt2_expanded.png",
    "explorer_resnet50_latency.png",
    "explorer_watch.png",
)


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")))
