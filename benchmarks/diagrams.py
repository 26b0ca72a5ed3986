"""Seconds to draw a diagram from a report, beside Graphviz drawing the same boxes.

Run: ``python benchmarks/diagrams.py [--repeats 5]``. Each report is made once; then
``report.plot(path)`` is timed, PNG and SVG, median of ``repeats`` (the first call of
the process, which loads matplotlib's fonts, is left out as warm-up).

Beside it, interleaved, where Graphviz's ``dot`` is on the PATH (it is never needed to
run fxinspect): ``dot`` laying out and rendering *the same boxes and edges*
(``report.to_networkx(level="diagram")``, each box labelled with the same lines and
filled with the same colour), as torchview has it do; and, where torchview is
installed, torchview's own ``draw_graph(depth=...)`` rendered to a file. The target
(issue 25): ``plot(depth=2)`` within Graphviz's time on the same boxes.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch
import torchvision

import fxinspect
from fxinspect.views.colouring import box_label, colour_scale


def dot_source(report, depth: int | None) -> str:
    """The DOT text of the boxes ``report.plot(depth=depth)`` draws, labelled and coloured alike."""
    import matplotlib.colors

    g = report.to_networkx(level="diagram", depth=depth)
    values = {k: (g.nodes[k]["flops"] or None) if g.nodes[k]["members"] else None for k in g}
    colormap, norm = colour_scale(values, "YlOrRd")
    lines = ["digraph G {", 'node [shape=box, style="rounded,filled", fontname="DejaVu Sans", fontsize=9];']
    for i, key in enumerate(g):
        box = g.nodes[key]
        title = box["title"] + (f"  ({box['repeats']}x)" if box["repeats"] > 1 else "")
        label = [title, box["type"], box["shape"]]
        value = values[key]
        if value:
            label.append(box_label("flops", value))
        fill = matplotlib.colors.to_hex(colormap(norm(value))) if value and norm else "#dddddd"
        text = "\\n".join(s.replace('"', "'") for s in label if s)
        lines.append(f'n{i} [label="{text}", fillcolor="{fill}"];')
    index = {k: i for i, k in enumerate(g)}
    lines += [f"n{index[a]} -> n{index[b]};" for a, b in g.edges]
    lines.append("}")
    return "\n".join(lines)


def _variants(report, model, inputs, options, suffix, source, dot, torchview, out) -> dict:
    """What is timed for one case and format: our plot, dot on the same boxes, torchview."""
    variants = {"fxinspect plot": lambda: report.plot(out / f"d.{suffix}", **options)}
    if dot:
        variants["dot, same boxes"] = lambda: subprocess.run(
            [dot, f"-T{suffix}", "-o", str(out / f"g.{suffix}")], input=source.encode(), check=True
        )
    if torchview is not None and options["depth"] is not None:

        def draw():
            g = torchview.draw_graph(model, input_data=inputs, depth=options["depth"], save_graph=False)
            g.visual_graph.render(out / "tv", format=suffix, cleanup=True)

        try:
            draw()
        except Exception as exc:  # torchview cannot draw every model (GPT-2: a KeyError in its edges)
            print(f"  (torchview failed on this model: {type(exc).__name__}: {exc})")
        else:
            variants["torchview (trace + dot)"] = draw
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    image = torch.randn(1, 3, 224, 224)
    cases = [
        ("resnet50 depth 1", torchvision.models.resnet50(weights=None), image, {"depth": 1}),
        ("resnet50 depth 2", torchvision.models.resnet50(weights=None), image, {"depth": 2}),
        ("resnet50 every op", torchvision.models.resnet50(weights=None), image, {"depth": None}),
        ("vit_b_16 depth 2", torchvision.models.vit_b_16(weights=None), image, {"depth": 2}),
        ("gpt2 depth 2", GPT2LMHeadModel(GPT2Config()), {"input_ids": torch.randint(0, 50257, (1, 128))}, {"depth": 2}),
    ]
    dot = shutil.which("dot")
    try:
        import torchview
    except ImportError:
        torchview = None
    out = Path(tempfile.mkdtemp())
    warm = True
    print(f"Graphviz dot: {dot or 'not installed'}; torchview: {'yes' if torchview else 'not installed'}")
    for name, model, inputs, options in cases:
        model.eval()
        with torch.no_grad():
            report = fxinspect.analyze(model, inputs, timing=False, memory=False)
        if warm:
            report.plot(out / "warm.png", **options)
            warm = False
        source = dot_source(report, options["depth"])
        for suffix in ("png", "svg"):
            variants = _variants(report, model, inputs, options, suffix, source, dot, torchview, out)
            times: dict[str, list[float]] = {k: [] for k in variants}
            for _ in range(args.repeats):
                for key, fn in variants.items():
                    start = time.perf_counter()
                    fn()
                    times[key].append(time.perf_counter() - start)
            med = {k: statistics.median(v) for k, v in times.items()}
            ours = med["fxinspect plot"]
            row = f"{name:20} {suffix}: fxinspect {ours:6.2f} s"
            if "dot, same boxes" in med:
                ratio = ours / med["dot, same boxes"]
                verdict = "met" if ratio <= 1 else "NOT MET"
                row += f"; dot on the same boxes {med['dot, same boxes']:6.2f} s (ratio {ratio:.2f}, {verdict})"
            if "torchview (trace + dot)" in med:
                row += f"; torchview {med['torchview (trace + dot)']:6.2f} s"
            print(row, flush=True)


if __name__ == "__main__":
    main()
