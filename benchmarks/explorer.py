"""The explorer on a large report: file size and the browser's time to draw and open it.

Run: ``python benchmarks/explorer.py [--size 70b]``. The Llama-2 training report of
``benchmarks/llama_training_meta.py`` (meta device, AdamW) is written with
``report.to_html``; headless Chromium (Debian's ``chromium``, driven by Playwright)
opens it from disk. Read from the page's own ``performance.now()`` marks: the first
view (``window.fxinspectReadyAt``), opening the folded decoder layers and then one
decoder layer (a click each), and opening every module at once
(``window.fxinspect.expandAll()``, a folded run showing one member), each to the second
frame after it (so the browser's own layout and paint are in it), then a fit and a wheel
step with everything open. Targets (issue 20) for 70B: at most 3 MB, first view
under 1 s, a decoder layer under 100 ms, everything under 2 s.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from llama_training_meta import SIZES, training_report

# (each time runs to the frame after the change: the browser's layout and paint included)
_TIMED_CLICK = """async selector => {
    const start = performance.now();
    document.querySelector(selector).dispatchEvent(new MouseEvent("click", {bubbles: true}));
    await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
    return performance.now() - start;
}"""
_TIMED_EXPAND_ALL = """async () => {
    const start = performance.now();
    window.fxinspect.expandAll();
    await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
    return performance.now() - start;
}"""
_TIMED_FIT_AND_ZOOM = """async () => {
    const start = performance.now();
    window.fxinspect.fit();
    const graph = document.querySelector('[data-part="graph"]'), r = graph.getBoundingClientRect();
    graph.dispatchEvent(new WheelEvent("wheel", {deltaY: -300, clientX: r.left + 200, clientY: r.top + 200, cancelable: true}));
    await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
    return performance.now() - start;
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="70b")
    parser.add_argument("--seq", type=int, default=2048)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    report = training_report(args.size, args.seq)
    path = Path(tempfile.mkdtemp()) / "llama.html"
    start = time.perf_counter()
    report.to_html(path)
    written = time.perf_counter() - start
    size = path.stat().st_size
    ops = sum(1 for n in report.nodes if n.is_op)
    print(f"Llama-2-{args.size} training report: {ops:,} op nodes, {len(report.modules):,} modules")
    print(f"  file               {size / 1e6:8.2f} MB (target 3), written in {written:.2f} s")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(path.as_uri())
        page.wait_for_function("window.fxinspectReady === true", timeout=60_000)
        first = page.evaluate("window.fxinspectReadyAt")  # performance.now() counts from the navigation's start
        print(f"  first view         {first:8.0f} ms after navigation start (target 1000)")
        paths = page.eval_on_selector_all("[data-path]", "els => els.map(e => e.dataset.path)")
        page.evaluate(_TIMED_CLICK, '[data-path="model"]')
        run = next(
            p for p in page.eval_on_selector_all("[data-path]", "els => els.map(e => e.dataset.path)") if "–" in p
        )
        opened_run = page.evaluate(_TIMED_CLICK, f'[data-path="{run}"]')
        layer = run.split("–")[0]
        opened_layer = page.evaluate(_TIMED_CLICK, f'[data-path="{layer}"]')
        shown = page.evaluate("window.fxinspect.boxes()")
        print(f"  open {run:16} {opened_run:8.0f} ms")
        print(f"  open {layer:16} {opened_layer:8.0f} ms (target 100), {shown} boxes drawn")
        everything = page.evaluate(
            "() => { const s = performance.now(); window.fxinspect.expandAll(); return performance.now() - s; }"
        )
        print(
            f"  open every module  {everything:8.0f} ms (target 2000), {page.evaluate('window.fxinspect.boxes()')} boxes drawn"
        )
        if page.evaluate("typeof window.fxinspect.fit") == "function":  # (pages before zoom and fit had none)
            fitted = page.evaluate(_TIMED_FIT_AND_ZOOM)
            print(f"  fit, then zoom     {fitted:8.0f} ms (a fit and a wheel step, everything open)")
        print(f"  (first view showed {paths})")
        browser.close()


if __name__ == "__main__":
    main()
