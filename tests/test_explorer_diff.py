"""The diff page's two explorers move as one: they open, step, zoom and pan together and colour on one scale."""

from __future__ import annotations

import pytest
import torch
from test_explorer import _view, browser, gpt2  # noqa: F401 (the fixtures, shared)

import fxinspect
from fxinspect.views.explorer.payload import payload

LEFT, RIGHT = ".diff > .explorer:nth-child(1)", ".diff > .explorer:nth-child(2)"


@pytest.fixture(scope="module")
def wider():
    """gpt2's twin with a wider MLP (n_inner 512 against 4 x 64 = 256)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_inner=512)).eval()
    with torch.no_grad():
        return fxinspect.analyze(model, {"input_ids": torch.randint(0, 500, (1, 16))}, timing=False)


def _diff_page(browser, this, other, tmp_path, width=1600):  # noqa: F811
    path = tmp_path / "diff.html"
    this.diff(other).to_html(path)
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("window.fxinspectReady === true")
    return page, errors


def _paths(page, side: str) -> list[str]:
    return page.eval_on_selector_all(f"{side} [data-path]", "els => els.map(e => e.dataset.path)")


def test_a_module_opened_or_a_run_stepped_in_one_pane_is_so_in_the_other(browser, gpt2, wider, tmp_path):  # noqa: F811
    page, errors = _diff_page(browser, gpt2, wider, tmp_path)
    assert _paths(page, LEFT) == _paths(page, RIGHT) == ["transformer", "lm_head"]
    page.click(f'{LEFT} [data-path="transformer"]')
    assert "transformer.h.0–1" in _paths(page, RIGHT) and "transformer.h.0–1" in _paths(page, LEFT)
    page.click(f'{RIGHT} [data-path="transformer.h.0–1"]')  # the run opens as its first member, in both
    assert "transformer.h.0" in _paths(page, LEFT) and "transformer.h.0" in _paths(page, RIGHT)
    page.click(f'{LEFT} [data-part="fit"]')  # (the member's arrows in sight: edges' lanes widen the drawing)
    page.click(f'{LEFT} [data-path="transformer.h.0"] [data-step="1"]')  # the next member, in both
    assert "transformer.h.1" in _paths(page, RIGHT) and "transformer.h.0" not in _paths(page, RIGHT)
    page.click(f'{RIGHT} [data-path="transformer.h.1"]')
    assert "transformer.h.1.mlp" in _paths(page, LEFT) and "transformer.h.1.mlp" in _paths(page, RIGHT)
    page.click(f'{LEFT} [data-part="collapse"]')
    assert _paths(page, LEFT) == _paths(page, RIGHT) == ["transformer", "lm_head"] and errors == []


def test_a_wheel_zoom_or_a_drag_in_one_pane_moves_both_alike(browser, gpt2, wider, tmp_path):  # noqa: F811
    page, errors = _diff_page(browser, gpt2, wider, tmp_path)
    left, right = _view(page, LEFT), _view(page, RIGHT)
    graph = page.locator(f'{LEFT} [data-part="graph"]').bounding_box()
    page.mouse.move(graph["x"] + 300, graph["y"] + 200)
    page.mouse.wheel(0, -300)  # one wheel step up: the scale times exp(300 x 0.002) = 1.822, in both panes
    left2, right2 = _view(page, LEFT), _view(page, RIGHT)
    assert left2[0] / left[0] == pytest.approx(1.8221, rel=1e-3) and right2[0] / right[0] == pytest.approx(
        1.8221, rel=1e-3
    )
    # about the same point of each pane (300, 200): what sat there still does
    for before, after in ((left, left2), (right, right2)):
        assert (300 - after[1]) / after[0] == pytest.approx((300 - before[1]) / before[0], abs=0.2)
        assert (200 - after[2]) / after[0] == pytest.approx((200 - before[2]) / before[0], abs=0.2)
    # a drag in the right pane, from an empty spot: both drawings move by the drag
    right_graph = page.locator(f'{RIGHT} [data-part="graph"]').bounding_box()
    page.mouse.move(right_graph["x"] + 20, right_graph["y"] + right_graph["height"] - 20)
    page.mouse.down()
    page.mouse.move(right_graph["x"] + 80, right_graph["y"] + right_graph["height"] - 60, steps=4)
    page.mouse.up()
    left3, right3 = _view(page, LEFT), _view(page, RIGHT)
    assert (left3[1] - left2[1], left3[2] - left2[2]) == pytest.approx((60, -40), abs=0.2)
    assert (right3[1] - right2[1], right3[2] - right2[2]) == pytest.approx((60, -40), abs=0.2)
    page.click(f'{LEFT} [data-part="fit"]')  # fit: each pane fitted to its own drawing, as at first
    assert _view(page, LEFT) == pytest.approx(left, abs=0.2) and _view(page, RIGHT) == pytest.approx(right, abs=0.2)
    assert errors == []


def _box_value(data, shown: str) -> float:
    """The FLOPs of the box of a module (or a folded run: ``shown`` its label), from the
    page's own numbers: the sum over the ops inside it."""
    runs = [r["members"] for r in data["runs"].values() if r["label"] == shown]
    paths = runs[0] if runs else [shown]
    inside = lambda m: any(m == p or m.startswith(p + ".") for p in paths)  # noqa: E731
    return sum(n["values"]["flops"] for n in data["nodes"] if n["kind"] == "op" and inside(n["module"]))


def test_both_panes_colour_on_one_scale(browser, gpt2, wider, tmp_path):  # noqa: F811
    page, errors = _diff_page(browser, gpt2, wider, tmp_path)
    page.click(f'{LEFT} [data-path="transformer"]')  # open in both: boxes of different sizes side by side
    fills = {}
    for side, report in ((LEFT, gpt2), (RIGHT, wider)):
        data = payload(report)
        boxes = page.eval_on_selector_all(
            f"{side} [data-path]", "els => els.map(e => [e.dataset.path, e.querySelector('rect').getAttribute('fill')])"
        )
        fills[side] = dict(boxes)
        for path, fill in boxes:  # each box the colour of its own value on the scale
            value = _box_value(data, path)
            expected = page.evaluate(f"window.fxinspect[{int(side == RIGHT)}].fill({value})") if value else "#ffffff"
            assert fill == expected, path  # (no FLOPs, as the embeddings: white)
    values = [_box_value(payload(gpt2), "lm_head"), _box_value(payload(wider), "transformer.h.0")]
    # one scale: the two panes give a value the same colour
    for v in values:
        assert page.evaluate(f"window.fxinspect[0].fill({v})") == page.evaluate(f"window.fxinspect[1].fill({v})")
    # lm_head: the same value in both, the same fill; a decoder layer with the wider MLP
    # (64 x 512 against 64 x 256 multiply-adds per token in each of its two Linears) is darker
    assert _box_value(payload(gpt2), "lm_head") == _box_value(payload(wider), "lm_head")
    assert fills[LEFT]["lm_head"] == fills[RIGHT]["lm_head"]
    assert fills[LEFT]["transformer.h.0–1"] != fills[RIGHT]["transformer.h.0–1"]
    assert "one scale for both reports" in page.inner_text(f'{LEFT} [data-part="scale"]')
    assert errors == []


def test_a_path_one_report_lacks_is_said_so_not_an_error(browser, tmp_path):  # noqa: F811
    torch.manual_seed(0)
    block = lambda: torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())  # noqa: E731
    extra = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 8))
    x = torch.randn(2, 8)
    this = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(8, 8), block()), x, timing=False)
    other = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(8, 8), block(), extra), x, timing=False)
    page, errors = _diff_page(browser, this, other, tmp_path)
    page.click(f'{RIGHT} [data-path="2"]')  # a module of the other report only
    assert "2.0" in _paths(page, RIGHT) and _paths(page, LEFT) == ["0", "1"]
    assert page.inner_text(f"{LEFT} .missing") == "not in this report: 2"
    page.click(f'{RIGHT} [data-path="1"]')  # one both have: open in both (2 still open on the right)
    assert _paths(page, LEFT) == ["0", "1.0", "1.1"] and page.inner_text(f"{LEFT} .missing") == "not in this report: 2"
    page.click(f'{RIGHT} [data-crumb=""]')  # back to the top, 2 closed: the note goes
    assert _paths(page, LEFT) == ["0", "1"] and not page.is_visible(f"{LEFT} .missing")
    assert errors == []


def test_each_pane_draws_on_half_the_page_and_the_panels_open_together(browser, gpt2, wider, tmp_path):  # noqa: F811
    page, errors = _diff_page(browser, gpt2, wider, tmp_path, width=1280)

    def widths():
        return [page.locator(f'{side} [data-part="graph"]').bounding_box()["width"] for side in (LEFT, RIGHT)]

    # 1,280 px for two panes (a 1-px border each): each drawing on at least 45 % of the page, 576 px
    # (with a 300-px side panel each, shown, a drawing had 314 px: 24.5 %)
    assert all(w >= 0.45 * 1280 for w in widths()), widths()
    assert not page.locator(f'{LEFT} [data-part="panel"]').is_visible()
    page.click(f'{RIGHT} [data-part="side"]')  # the side panels shown: both panes'
    assert all(page.locator(f'{side} [data-part="panel"]').is_visible() for side in (LEFT, RIGHT))
    assert page.get_attribute(f'{LEFT} [data-part="side"]', "aria-pressed") == "true"
    page.click(f'{LEFT} [data-part="fit"]')  # (the drawing, fitted to the narrower canvas: both)
    page.click(f'{LEFT} [data-path="lm_head"]')  # selected in both, each panel shows its own report's
    assert all("lm_head" in page.inner_text(f'{side} [data-part="panel"]') for side in (LEFT, RIGHT))
    assert all(w < 0.45 * 1280 for w in widths())
    page.click(f'{LEFT} [data-part="side"]')
    assert all(w >= 0.45 * 1280 for w in widths()) and errors == []
