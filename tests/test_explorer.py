"""The explorer page: its data, its file, and the page itself driven in headless Chromium."""

from __future__ import annotations

import re
import shutil

import pytest
import torch
from test_diagram_truth import Loop

import fxinspect
from fxinspect import formatting as fmt

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _gpt2(**options):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500)).eval()
    with torch.no_grad():
        return fxinspect.analyze(model, {"input_ids": torch.randint(0, 500, (1, 16))}, **options)


@pytest.fixture(scope="module")
def gpt2():
    return _gpt2(timing=False)


def test_the_page_is_one_file_that_asks_no_host_for_anything_and_is_the_same_each_time(gpt2, tmp_path):
    page = gpt2.to_html(tmp_path / "a.html")
    assert (tmp_path / "a.html").read_text(encoding="utf-8") == page == gpt2.to_html()
    # no script, style sheet, image or font fetched from anywhere: everything is inline
    assert not re.search(r"<(script|img|iframe)[^>]*\bsrc=|<link\b|url\((?!#)|@import|fetch\(|XMLHttpRequest", page)
    assert set(re.findall(r"https?://[^\s\"'<]+", page)) == {"http://www.w3.org/2000/svg"}  # the SVG namespace
    # the report's data is inside, with the folded run as report.plot folds it
    assert '"transformer.h.0":{"members":["transformer.h.0","transformer.h.1"],"label":"transformer.h.0–1"}' in page


# ---------------------------------------------------------------- in a real browser


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium for the browser tests: apt-get install -y chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("needs Playwright for Python for the browser tests: pip install playwright")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


def _open(browser, report, tmp_path):
    """The page of ``report``, loaded from disk, and the console errors it logged."""
    path = tmp_path / "report.html"
    report.to_html(path)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("window.fxinspectReady === true", timeout=10_000)
    return page, errors


def _paths(page) -> list[str]:
    return page.eval_on_selector_all("[data-path]", "els => els.map(e => e.dataset.path)")


def test_gpt2_opens_at_its_top_modules_and_each_click_opens_one_level(browser, gpt2, tmp_path):
    page, errors = _open(browser, gpt2, tmp_path)
    assert page.evaluate("typeof window.fxinspectReadyAt") == "number"
    assert _paths(page) == ["transformer", "lm_head"]
    page.click('[data-path="transformer"]')
    assert "transformer.h.0–1" in _paths(page) and "transformer.h.0" not in _paths(page)
    assert "(2×)" in page.text_content('[data-path="transformer.h.0–1"]')
    page.click('[data-path="transformer.h.0–1"]')  # the run opens as its first member
    assert "transformer.h.0" in _paths(page) and "transformer.h.1" not in _paths(page)
    page.click('[data-path="transformer.h.0"]')
    assert "transformer.h.0.attn" in _paths(page) and "transformer.h.1.attn" not in _paths(page)
    # back: collapsing the run takes its members and what was open inside them with it
    page.click('[data-path="transformer.h.0.attn"]')
    page.click("#collapse")
    assert _paths(page) == ["transformer", "lm_head"]
    assert errors == []


def test_the_tooltip_shows_a_modules_macs_as_the_table_does(browser, gpt2, tmp_path):
    page, _ = _open(browser, gpt2, tmp_path)
    macs = fmt.count(gpt2.modules["lm_head"].macs)  # 16 x 64 x 500 = 512,000: "512.00 K"
    assert macs == "512.00 K" and macs in gpt2.table(by="module", depth=1)
    page.hover('[data-path="lm_head"]')
    tip = page.locator('[role="tooltip"]')
    assert tip.is_visible()
    # the figures by their labels (not field names), and none the report did not measure
    assert re.search(rf"MACs\s+{re.escape(macs)}", tip.inner_text())
    text = tip.inner_text()
    assert "bytes_read" not in text and "bytes read" in text
    assert not re.search(r"backward (FLOPs|MACs|latency)|the backward (read|wrote)", text)  # (a forward-only report)
    row = page.locator('#table tr[data-row="lm_head"]').inner_text()
    assert macs in row


def test_colouring_by_latency_changes_the_fills(browser, tmp_path):
    report = _gpt2(warmup=1, repeats=2)
    page, errors = _open(browser, report, tmp_path)
    page.click('[data-path="transformer"]')
    fills = "els => els.map(e => e.getAttribute('fill'))"
    by_flops = page.eval_on_selector_all("[data-path] rect", fills)
    page.select_option("#colour", "latency")
    by_latency = page.eval_on_selector_all("[data-path] rect", fills)
    assert by_latency != by_flops and len(set(by_latency)) > 1
    assert "latency per box" in page.inner_text("#scale")
    assert errors == []


def test_the_side_panel_hides_and_the_drawing_takes_its_width(browser, gpt2, tmp_path):
    page, errors = _open(browser, gpt2, tmp_path)
    wide = page.locator("#graph").bounding_box()["width"]
    assert page.locator("#panel").is_visible() and page.get_attribute("#side", "aria-pressed") == "true"
    page.click("#side")
    # the 1,400-px page, the panel's 300 px and its padding (2 x 12) and border (1) given to the drawing
    assert not page.locator("#panel").is_visible() and page.get_attribute("#side", "aria-pressed") == "false"
    assert page.locator("#graph").bounding_box()["width"] == wide + 300 + 2 * 12 + 1 == 1400
    page.click("#side")
    assert page.locator("#panel").is_visible() and page.locator("#graph").bounding_box()["width"] == wide
    assert errors == []


def test_search_reveals_and_selects_c_fc(browser, gpt2, tmp_path):
    page, _ = _open(browser, gpt2, tmp_path)
    page.fill("#search", "c_fc")
    page.press("#search", "Enter")
    found = page.locator('[data-path="transformer.h.0.mlp.c_fc"]')
    assert found.count() == 1 and "selected" in found.get_attribute("class")
    assert "transformer.h.0.mlp.c_fc" in page.inner_text("#panel")


def test_opening_everything_draws_every_op_once_of_the_member_shown(browser, gpt2, tmp_path):
    page, errors = _open(browser, gpt2, tmp_path)
    page.evaluate("window.fxinspect.expandAll()")
    drawn = page.eval_on_selector_all("[data-node]", "els => els.map(e => e.dataset.node)")
    ops = [n.name for n in gpt2.nodes if n.is_op or n.op == "placeholder"]
    # the folded run transformer.h.0–1 shows one member, h.0: every op but h.1's, once
    module = {n.name: n.module_path for n in gpt2.nodes}
    assert sorted(drawn) == sorted(o for o in ops if not module[o].startswith("transformer.h.1"))
    assert not page.locator("[data-path]").count() and page.inner_text("#runs").startswith("transformer.h.0–1")
    assert errors == []


@pytest.mark.slow
def test_the_70b_training_report_fits_3_mb_and_opens_everything(browser, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config).train()
    ids = torch.zeros(1, 2048, dtype=torch.long, device="meta")
    report = fxinspect.analyze(
        model, {"input_ids": ids, "use_cache": False}, timing=False, backward=True, optimizer=torch.optim.AdamW
    )
    page, errors = _open(browser, report, tmp_path)
    assert (tmp_path / "report.html").stat().st_size <= 3_000_000
    # (how fast it opens is measured by benchmarks/explorer.py, never bounded in a test)
    page.evaluate("() => window.fxinspect.expandAll()")
    drawn = page.locator("[data-node]").count()
    assert 0 < drawn < sum(n.is_op for n in report.nodes) and errors == []  # one member of each run drawn


def test_the_memory_timeline_names_the_node_at_the_peak(browser, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 8))
    with torch.no_grad():
        report = fxinspect.analyze(model, torch.randn(32, 64), timing=False)
    m = report.memory
    # the peak: at the ReLU, the Linear's output and the ReLU's (32 x 4096 x 4 bytes each)
    assert (m.peak, m.peak_node) == (2 * 32 * 4096 * 4, "_1")
    page, errors = _open(browser, report, tmp_path)
    page.locator(".timeline").scroll_into_view_if_needed()
    chart = page.locator(".timeline").bounding_box()
    peak_op = next(op for op, held in m.timeline if held == m.peak)
    last = m.timeline[-1][0]
    x = chart["x"] + 70 + (900 - 70 - 10) * peak_op / last  # the chart's own scale: 70 px of labels, 10 of margin
    page.mouse.move(x, chart["y"] + 90)
    tip = page.locator('[role="tooltip"]').inner_text()
    assert tip.startswith("_1") and fmt.nbytes(m.peak) in tip
    assert errors == []


def test_the_watch_page_shows_every_logged_step_of_every_quantity(browser, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    watcher = fxinspect.watch(model, every=3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(10):  # steps 0, 3, 6 and 9 logged
        opt.zero_grad()
        model(torch.randn(32, 8)).pow(2).mean().backward()
        opt.step()
    watcher.remove()
    path = tmp_path / "watch.html"
    assert watcher.to_html(path) == watcher.to_html()  # the same run, the same bytes
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("window.fxinspectReady === true")
    panels = page.eval_on_selector_all(
        ".panel", "els => els.map(e => [e.dataset.module, e.dataset.quantity, e.dataset.steps])"
    )
    expected = [
        [name, quantity, ",".join(map(str, watcher.steps(name, quantity)))]
        for name in watcher.names()
        for quantity in watcher.log
        if watcher.steps(name, quantity)
    ]
    assert panels == expected and all(steps == "0,3,6,9" for _, _, steps in panels)
    # a cell of module 0's outputs at step 9: as many values as the histogram has in that bin
    page.evaluate("window.fxinspect.drawAll()")
    canvas = page.locator('.panel[data-module="0"][data-quantity="io"] canvas')
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    h = watcher.histogram("0", "io", 9)
    page.mouse.move(box["x"] + 56 + 3 * 14 + 5, box["y"] + 1)  # the NaN row, step 9 (the 4th column)
    assert "step9" in page.locator('[role="tooltip"]').inner_text().replace("\t", "").replace(" ", "")
    assert f"values\t{h.nan}" in page.locator('[role="tooltip"]').inner_text()
    assert errors == []


def test_two_reports_side_by_side_frame_what_differs(browser, gpt2, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    wider = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_inner=512)).eval()
    with torch.no_grad():
        other = fxinspect.analyze(wider, {"input_ids": torch.randint(0, 500, (1, 16))}, timing=False)
    path = tmp_path / "diff.html"
    assert fxinspect.diff_html(gpt2, other, path) == gpt2.diff(other).to_html()
    page = browser.new_page(viewport={"width": 1600, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("window.fxinspectReady === true")
    sides = page.locator(".explorer")
    assert sides.count() == 2
    for side in (sides.nth(0), sides.nth(1)):
        transformer = side.locator('[data-path="transformer"]')
        # c_fc: 64 x 256 + 256 parameters per layer against 64 x 512 + 512 (and c_proj alike)
        assert "changed" in transformer.get_attribute("class") and "params" in transformer.text_content()
        assert "changed" not in side.locator('[data-path="lm_head"]').get_attribute("class")
    sides.nth(1).locator('[data-path="transformer"]').click()
    sides.nth(1).locator('[data-path="transformer.h.0–1"]').click()
    assert "changed" in sides.nth(1).locator('[data-path="transformer.h.0"]').get_attribute("class")
    assert "changed" in sides.nth(0).locator('[data-path="transformer.h.0"]').get_attribute("class")  # (both open)
    assert errors == []


def test_a_module_called_three_times_is_three_boxes_without_a_loop_back(browser, tmp_path):
    report = fxinspect.analyze(Loop(), torch.randn(2, 4), timing=False)  # small called three times
    page, errors = _open(browser, report, tmp_path)
    calls = page.eval_on_selector_all('[data-path="small"]', "els => els.map(e => [e.dataset.call, e.textContent])")
    assert [c for c, _ in calls] == ["0", "1", "2"] and "small (call 2 of 3)" in calls[1][1]
    assert page.locator(".edge.back").count() == 0  # every edge runs down the page: no cycle drawn
    page.click('[data-path="small"][data-call="1"]')  # the second call opens to its op alone
    second = [n.name for n in report.nodes if n.module_path == "small"][1]
    drawn = page.eval_on_selector_all("[data-node]", "els => els.map(e => e.dataset.node)")
    # the input, the root's three residual adds, and the second call's op
    assert len(drawn) == 5 and second in drawn and page.locator('[data-path="small"]').count() == 2
    assert errors == []


# ---------------------------------------------------------------- at scale: zoom, fit, one member of a run


def _view(page, root="") -> tuple[float, float, float]:
    """The drawing's (scale, x, y) on screen, read from its group's transform attribute."""
    transform = page.get_attribute(f'{root} [data-part="graph"] g.view', "transform")
    x, y, k = re.fullmatch(r"translate\(([-\d.e]+),([-\d.e]+)\) scale\(([-\d.e]+)\)", transform).groups()
    return float(k), float(x), float(y)


def test_the_wheel_zooms_about_the_pointer_and_a_drag_pans_without_opening(browser, gpt2, tmp_path):
    page, errors = _open(browser, gpt2, tmp_path)
    graph = page.locator("#graph").bounding_box()
    px, py = 300, 200  # a point of the canvas, from its top-left corner
    page.mouse.move(graph["x"] + px, graph["y"] + py)
    k, x, y = _view(page)
    page.mouse.wheel(0, -300)  # one wheel step up: the scale times exp(300 x 0.002) = 1.822
    k2, x2, y2 = _view(page)
    assert k2 == pytest.approx(k * 1.8221, rel=1e-3)
    # the drawing's point under the pointer stays under it: (p - t) / k before and after
    assert (px - x2) / k2 == pytest.approx((px - x) / k, abs=0.2) and (py - y2) / k2 == pytest.approx(
        (py - y) / k, abs=0.2
    )
    # a drag from over a box moves the drawing by the drag and opens nothing
    box = page.locator('[data-path="transformer"]').bounding_box()
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    page.mouse.down()
    page.mouse.move(box["x"] + 65, box["y"] + 45, steps=4)
    page.mouse.up()
    k3, x3, y3 = _view(page)
    assert (k3, x3 - x2, y3 - y2) == pytest.approx((k2, 60, 40), abs=0.2)
    assert _paths(page) == ["transformer", "lm_head"] and errors == []


def _inside(page, selector) -> list[str]:
    """The boxes of ``selector`` not wholly inside the canvas (in the browser's pixels)."""
    canvas = page.locator("#graph").bounding_box()
    out = []
    for el in page.locator(selector).all():
        b = el.bounding_box()
        if b["x"] < canvas["x"] or b["y"] < canvas["y"] or b["x"] + b["width"] > canvas["x"] + canvas["width"]:
            out.append(el.get_attribute("data-key"))
        elif b["y"] + b["height"] > canvas["y"] + canvas["height"]:
            out.append(el.get_attribute("data-key"))
    return out


def test_the_first_view_and_fit_show_every_box(browser, tmp_path):
    # 60 top-level modules, none repeated next to its like: 60 boxes in a column, each 50 px
    # tall with 36 px between, 5,000 px and more, in a canvas of 900 - 120 = 780 px
    layers = [torch.nn.Linear(8, 8) if i % 2 == 0 else torch.nn.Tanh() for i in range(60)]
    report = fxinspect.analyze(torch.nn.Sequential(*layers), torch.randn(2, 8), timing=False)
    page, errors = _open(browser, report, tmp_path)
    assert page.locator("[data-path]").count() == 60
    k, _, _ = _view(page)
    assert k < 780 / 5000 and _inside(page, ".box") == []
    page.mouse.move(500, 400)
    page.mouse.wheel(0, -2000)  # zoomed in: boxes leave the canvas, then fit brings them all back
    assert _inside(page, ".box") != []
    page.click("#fit")
    assert _view(page) == pytest.approx((k, *_view(page)[1:])) and _inside(page, ".box") == []
    assert errors == []


def _blocks():
    """Five identical blocks in a row: one folded run, 0–4."""
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()) for _ in range(5)]
    return fxinspect.analyze(torch.nn.Sequential(*blocks), torch.randn(2, 8), timing=False)


def test_a_folded_run_opens_as_one_member_that_steps_to_the_others(browser, tmp_path):
    page, errors = _open(browser, _blocks(), tmp_path)
    assert _paths(page) == ["0–4"]
    page.click('[data-path="0–4"]')
    assert _paths(page) == ["0"] and "0 × 5" in page.text_content('[data-path="0"]')
    # the member between the input and the output: input -> 0 -> output, two edges, none back
    assert page.locator(".edge").count() == 2 and page.locator(".edge.back").count() == 0
    assert page.locator('[data-path="0"] .step.off').count() == 1  # (no member before the first)
    page.click('[data-path="0"] [data-step="1"]')
    page.click('[data-path="1"] [data-step="1"]')
    assert _paths(page) == ["2"]
    page.click('[data-path="2"]')  # open the member: its Linear and Tanh
    assert _paths(page) == ["2.0", "2.1"] and "(3 of 5)" in page.inner_text("#runs")
    page.click('#runs [data-step="1"]')  # the next member, opened as the one before was
    assert _paths(page) == ["3.0", "3.1"] and page.locator(".edge").count() == 3
    page.click('#runs [data-step="-1"]')
    assert _paths(page) == ["2.0", "2.1"]
    page.fill("#search", "4.1")  # a search shows the member its hit is in
    page.press("#search", "Enter")
    assert _paths(page) == ["4.0", "4.1"] and "(5 of 5)" in page.inner_text("#runs") and errors == []


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, h, t):
        return self.linear(h) + t


class _Shared(torch.nn.Module):
    """Four blocks in a row, each adding what ``pre`` made (as a decoder layer reads the
    rotary table) to its Linear's output."""

    def __init__(self):
        super().__init__()
        self.pre = torch.nn.Linear(8, 8)
        self.blocks = torch.nn.ModuleList(_Block() for _ in range(4))
        self.post = torch.nn.Linear(8, 8)

    def forward(self, x):
        t, h = self.pre(x), x
        for block in self.blocks:
            h = block(h, t)
        return self.post(h)


@pytest.mark.parametrize("steps", [0, 2])
def test_the_member_shown_has_the_runs_edges_and_no_other(browser, tmp_path, steps):
    report = fxinspect.analyze(_Shared(), torch.randn(2, 8), timing=False)
    page, errors = _open(browser, report, tmp_path)
    page.click('[data-path="blocks.0–3"]')
    for _ in range(steps):
        page.click('#runs [data-step="1"]')
    shown = f"blocks.{steps}"
    page.click(f'[data-path="{shown}"]')  # open it: its Linear and its add
    edges = page.eval_on_selector_all(".edge", "els => els.map(e => [e.dataset.from, e.dataset.to])")
    linear, add = (
        f"m:{shown}.linear",
        next(k for k in page.eval_on_selector_all(".box", "els => els.map(e => e.dataset.key)") if k.startswith("n:")),
    )
    # x -> pre; x (through the blocks before) -> the block's Linear; pre's t -> the add;
    # Linear -> add; the add (through the blocks after) -> post -> output. No edge from
    # pre to post: the blocks after read t too, but that edge is the one drawn to the add
    expected = {("in:x", "m:pre"), ("in:x", linear), ("m:pre", add), (linear, add), (add, "m:post"), ("m:post", "out")}
    assert set(map(tuple, edges)) == expected and errors == []


def test_a_notebook_shows_the_explorer_inline_with_nothing_fetched(browser, gpt2):
    import html

    shown = gpt2._repr_html_()
    # nothing from any host: the one URL is the SVG namespace, written inside the page
    assert set(re.findall(r"https?://[^\s\"'<&]+", shown)) == {"http://www.w3.org/2000/svg"}
    assert html.escape(gpt2.to_html(), quote=True) in shown  # the whole page, its data included
    assert html.escape('"transformer.h.0":{"members":["transformer.h.0","transformer.h.1"]', quote=True) in shown
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(shown)
    frame = page.frame_locator("iframe")
    frame.locator('[data-path="transformer"]').wait_for()
    assert frame.locator("[data-path]").evaluate_all("els => els.map(e => e.dataset.path)") == [
        "transformer",
        "lm_head",
    ]
    frame.locator('[data-path="transformer"]').click()  # it works there as on its own page
    assert frame.locator('[data-path="transformer.h.0–1"]').count() == 1
    assert [u for u in asked if u.startswith("http")] == [] and errors == []


# ---------------------------------------------------------------- finding things, the colour scale, the table


def _expected_hits(report, query: str) -> list[str]:
    """What a query finds, by the rule the page states: a module's path or type, an op's
    name or kind, case aside; ``/.../`` a regular expression; ``aten.X`` the op kind X."""
    if query.startswith("/"):
        match = re.compile(query.strip("/"), re.I).search
    else:
        match = lambda text: query.lower() in text.lower()  # noqa: E731
    kind = query[5:].split(".")[0] if query.startswith("aten.") else None  # (an overload aside)
    found = [p for p, m in report.modules.items() if p and kind is None and (match(p) or match(m.type))]
    for n in report.nodes:
        if n.is_op and (n.label == kind if kind else match(n.name) or match(n.label)):
            found.append(n.name)
        elif n.op == "placeholder" and kind is None and match(n.name):
            found.append(n.name)
    return found


def _selected(page) -> str:
    box = page.locator(".box.selected")
    assert box.count() == 1
    return box.get_attribute("data-path") or box.get_attribute("data-node")


# a Conv1D per projection: c_attn, c_proj, c_fc, c_proj in each of 2 layers = 8 modules; the
# same 8 are addmm ops; the regex: each layer's mlp and its 4 children = 10 modules
@pytest.mark.parametrize(
    ("query", "count"),
    [("Conv1D", 8), ("aten.addmm", 8), ("aten.addmm.default", 8), (r"/h\.\d+\.mlp/", 10), ("c_fc", 2)],
)
def test_search_lists_every_hit_and_steps_through_them(browser, gpt2, tmp_path, query, count):
    expected = _expected_hits(gpt2, query)
    assert len(expected) == count
    page, errors = _open(browser, gpt2, tmp_path)
    page.fill("#search", query)
    page.press("#search", "Enter")
    rows = page.eval_on_selector_all("#hits tr[data-hit]", "els => els.map(e => e.cells[0].textContent)")
    assert rows == expected and page.inner_text('#hits [data-part="count"]') == f"1 of {count}"
    assert _selected(page) == expected[0]
    page.click('#hits [data-go="1"]')  # next
    assert _selected(page) == expected[1] and page.inner_text('#hits [data-part="count"]') == f"2 of {count}"
    page.click('#hits [data-go="-1"]')  # previous
    assert _selected(page) == expected[0]
    page.press("#search", "Enter")  # Enter on the same query steps on
    assert _selected(page) == expected[1]
    page.press("#search", "Shift+Enter")
    assert _selected(page) == expected[0]
    page.click(f'#hits tr[data-hit="{count - 1}"]')  # a hit in the list, clicked
    assert _selected(page) == expected[-1] and page.inner_text('#hits [data-part="count"]') == f"{count} of {count}"
    assert errors == []


def test_a_hit_in_a_folded_run_or_a_closed_parent_is_drawn_and_selected(browser, gpt2, tmp_path):
    page, errors = _open(browser, gpt2, tmp_path)
    page.fill("#search", "transformer.h.1.mlp.c_fc")  # inside the second member of the run h.0–1
    page.press("#search", "Enter")
    assert _selected(page) == "transformer.h.1.mlp.c_fc" and "(2 of 2)" in page.inner_text("#runs")
    # an op of the second member's MLP, by a regular expression on its name
    op = [n.name for n in gpt2.nodes if n.label == "addmm" and n.module_path.startswith("transformer.h.1.mlp")][-1]
    page.click("#collapse")
    page.fill("#search", f"/^{op}$/")
    page.press("#search", "Enter")
    assert _selected(page) == op and page.locator(f'[data-node="{op}"]').count() == 1
    assert "(2 of 2)" in page.inner_text("#runs") and errors == []
    page.fill("#search", "/[/")  # not an expression: nothing found, said so
    page.press("#search", "Enter")
    assert page.inner_text('#hits [data-part="count"]') == "0 of 0" and "missing" in page.get_attribute(
        "#search", "class"
    )


def test_a_boxs_colour_is_the_same_figure_on_one_scale_at_every_level(browser, gpt2, tmp_path):
    page, errors = _open(browser, gpt2, tmp_path)
    fill = lambda path: page.get_attribute(f'[data-path="{path}"] rect', "fill")  # noqa: E731
    top = fill("lm_head")
    for path in ("transformer", "transformer.h.0–1", "transformer.h.0", "transformer.h.0.mlp"):
        page.evaluate("window.fxinspect.fit()")  # (every box in sight to click)
        page.click(f'[data-path="{path}"]')  # opened from the top, a level at a time
    assert fill("lm_head") == top
    clicked = fill("transformer.h.0.mlp.c_fc")
    page.click("#collapse")
    page.fill("#search", "transformer.h.0.mlp.c_fc")
    page.press("#search", "Enter")  # reached by search
    assert fill("transformer.h.0.mlp.c_fc") == clicked and fill("lm_head") == top
    # the bar says what the scale spans: the smallest op, a residual add of 1 x 16 x 64 = 1,024
    # FLOPs, to the largest box, the transformer (every op but lm_head's)
    smallest = min(n.flops for n in gpt2.nodes if n.is_op and n.flops)
    largest = max(m.flops for p, m in gpt2.modules.items() if p)
    assert (
        smallest == 1024
        and largest == gpt2.modules["transformer"].flops == gpt2.modules[""].flops - gpt2.modules["lm_head"].flops
    )
    span = page.inner_text("#scale .span")
    trimmed = re.sub(r"\.?0+ ", " ", fmt.count(largest))  # (the bar's marks drop trailing zeros: 3.40 M -> 3.4 M)
    assert "1.02 K (smallest op)" in span and f"{trimmed} (largest box)" in span and errors == []


@pytest.mark.parametrize("figure", ["macs", "bytes_read"])
def test_the_table_sorts_by_a_figure_both_ways(browser, gpt2, tmp_path, figure):
    page, errors = _open(browser, gpt2, tmp_path)
    listed = [p for p in gpt2.modules if p]
    order = lambda: page.eval_on_selector_all("#table tbody tr", "els => els.map(e => e.dataset.row)")  # noqa: E731
    value = lambda p: getattr(gpt2.modules[p], figure)  # noqa: E731
    head = f'#table th[data-sort="{figure}"]'
    page.click(head)
    assert order() == sorted(listed, key=lambda p: -value(p))  # (ties keep the report's order)
    assert page.get_attribute(head, "aria-sort") == "descending" and page.inner_text(head).endswith("▼")
    page.click(head)
    assert order() == sorted(listed, key=value)
    assert page.get_attribute(head, "aria-sort") == "ascending" and page.inner_text(head).endswith("▲")
    assert order()[0] != order()[-1] and errors == []


def _tip_inside(page) -> bool:
    tip = page.locator('[role="tooltip"]')
    assert tip.is_visible()
    box = tip.bounding_box()  # (in the viewport's pixels)
    size = page.viewport_size
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= size["width"]
        and box["y"] + box["height"] <= size["height"]
    )


def test_a_tooltip_near_the_windows_edges_stays_inside_it(browser, gpt2, tmp_path):
    page, errors = _open(browser, gpt2, tmp_path)
    canvas = page.locator("#graph").bounding_box()
    box = page.locator('[data-path="lm_head"]').bounding_box()
    corner = (canvas["x"] + canvas["width"] - 6, canvas["y"] + canvas["height"] - 6)
    page.mouse.move(box["x"] + 5, box["y"] + 5)  # drag lm_head's corner to the canvas's bottom-right corner
    page.mouse.down()
    page.mouse.move(*corner, steps=4)
    page.mouse.up()
    page.mouse.move(corner[0] - 60, corner[1] - 60)
    page.mouse.move(*corner)  # the pointer on lm_head, 6 px from the window's bottom
    assert "lm_head" in page.inner_text('[role="tooltip"]') and _tip_inside(page)
    # the memory timeline, 900 px wide: near its right end in a window 960 px wide
    page.set_viewport_size({"width": 960, "height": 900})
    page.locator(".timeline").scroll_into_view_if_needed()
    chart = page.locator(".timeline").bounding_box()
    page.mouse.move(chart["x"] + 880, chart["y"] + 90)
    assert _tip_inside(page) and errors == []


def test_the_header_keeps_its_height_when_breadcrumbs_appear(browser, gpt2, tmp_path):
    page, errors = _open(browser, gpt2, tmp_path)  # (1,400 px wide: before, the crumbs wrapped the header to 2 lines)
    before = page.locator("header").bounding_box()["height"], page.locator("#graph").bounding_box()["y"]
    assert page.inner_text("#crumbs") == ""
    page.fill("#search", "transformer.h.0.attn.attn_dropout")  # the deepest path: six crumbs
    page.press("#search", "Enter")
    assert page.inner_text("#crumbs").endswith("attn_dropout")
    after = page.locator("header").bounding_box()["height"], page.locator("#graph").bounding_box()["y"]
    assert after == before and page.locator("#crumbs").bounding_box()["height"] == 16 and errors == []  # one line


def test_the_view_exports_as_svg_and_png_files_named_after_the_model(browser, gpt2, tmp_path):
    import struct
    import xml.etree.ElementTree as ET

    page, errors = _open(browser, gpt2, tmp_path)
    page.click('[data-path="transformer"]')
    drawn = _paths(page)
    with page.expect_download() as svg:
        page.click("#svg")
    assert svg.value.suggested_filename == "GPT2LMHeadModel.svg"
    root = ET.parse(svg.value.path()).getroot()  # it parses as XML, an <svg> with every box drawn
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    boxes = [g for g in root.iter() if g.get("data-key")]
    assert [g.get("data-path") for g in boxes if g.get("data-path")] == drawn
    assert len(boxes) == page.locator(".box").count()
    # its styles on its elements (the page's sheet does not travel): the box outline
    rect = next(g for g in boxes if g.get("data-path") == "lm_head").find("{http://www.w3.org/2000/svg}rect")
    assert "stroke:rgb(51, 51, 51)" in rect.get("style") and "class" not in rect.attrib
    width, height = float(root.get("width")), float(root.get("height"))
    with page.expect_download() as png:
        page.click("#png")
    assert png.value.suggested_filename == "GPT2LMHeadModel.png"
    data = open(png.value.path(), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    # twice the SVG's size (a small drawing is rendered at scale 2)
    assert struct.unpack(">II", data[16:24]) == (round(2 * width), round(2 * height)) and errors == []
