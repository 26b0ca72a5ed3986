"""Regenerate every page and image under ``docs/`` from the examples.

Run: ``python docs/generate.py``. Each example in ``PAGES`` is imported and its
``main(images_dir)`` run; it saves its images into ``docs/images/`` and returns the text
it printed. The page ``docs/<name>.md`` is the example's docstring, its code, the
command that runs it after the README's set-up, its output and its images: nothing on
a page is written by hand, so a page cannot drift from what the code does.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
EXAMPLES = DOCS.parent / "examples"
IMAGES = DOCS / "images"

PAGES = {  # page name: (example file, images it writes)
    "architecture": ("architecture.py", []),
    "capture": ("capture_tiers.py", []),
    "tables": ("tables.py", []),
    "conventions": ("conventions.py", []),
    "exports": ("exports.py", []),
    "training": ("training_step.py", []),
    "meta_device": ("meta_device.py", []),
    "cli": ("command_line.py", []),
    "watch": ("watch_training.py", ["watch_heatmaps.png"]),
    "integrations": ("integrations.py", []),
    "memory": ("training_memory.py", ["resnet50_training_memory.png"]),
    "explorer": (
        "explorer.py",
        [
            "explorer_gpt2_collapsed.png",
            "explorer_gpt2_expanded.png",
            "explorer_resnet50_latency.png",
            "explorer_watch.png",
        ],
    ),
    "time_model": ("time_model.py", ["resnet50_roofline.png", "gpt2_h100_roofline.png"]),
    "custom_figure": ("custom_figure.py", ["custom_figure_energy.png"]),
    "will_it_fit": ("will_it_fit.py", ["resnet50_sweep.png", "resnet50_checkpoint_plan.png"]),
    "parallel": ("parallel_training.py", ["llama_fsdp_tp_communication.png"]),
    "generation": ("generation.py", ["llama2_70b_generation.png"]),
    "diagrams": (
        "diagrams.py",
        [
            "mlp_ops.png",
            "resnet50_depth1.png",
            "resnet50_depth2.png",
            "vit_b_16_depth2.png",
            "gpt2_depth2.png",
            "gpt2_bytes_by_op.png",
        ],
    ),
}


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (a module that finds its own classes by name needs it)
    spec.loader.exec_module(module)
    return module


def _code(path: Path) -> str:
    """The example's code: its whole source after the module docstring (the page's text)."""
    source = path.read_text()
    return source.split('"""', 2)[2].lstrip("\n").rstrip() if source.lstrip().startswith('"""') else source.rstrip()


def generate(name: str) -> Path:
    """Run one example and write its page; the page's path."""
    example, images = PAGES[name]
    module = _load(EXAMPLES / example)
    output = module.main(IMAGES)
    title, _, body = module.__doc__.strip().partition("\n")
    body = body.split("\n", 2)[-1].strip() if body.lstrip().startswith("Run:") else body.strip()
    lines = [
        f"# {title}",
        "",
        body,
        "",
        "The code (`examples/" + example + "`):",
        "",
        f"```python\n{_code(EXAMPLES / example)}\n```",
        "",
        "Run it (after the README's set-up, from the checkout):",
        "",
        "```bash",
        f".venv/bin/python examples/{example}",
        "```",
        "",
        "What it printed:",
        "",
        "```text",
        output,
        "```",
        "",
    ]
    lines += [f"![{image}](images/{image})\n" for image in images]
    page = DOCS / f"{name}.md"
    page.write_text("\n".join(lines))
    return page


def index() -> Path:
    """``docs/README.md``: every page, by its title (the first line of its example's docstring)."""
    lines = [
        "# fxinspect documentation",
        "",
        "Every page is written by `.venv/bin/python docs/generate.py` from an example in",
        "`examples/`: the output and images are what the code printed and drew.",
        "",
    ]
    for name, (example, _) in PAGES.items():
        title = (EXAMPLES / example).read_text().split('"""')[1].strip().splitlines()[0]
        lines.append(f"* [{title}]({name}.md) (`examples/{example}`)")
    page = DOCS / "README.md"
    page.write_text("\n".join(lines) + "\n")
    return page


def main() -> None:
    IMAGES.mkdir(exist_ok=True)
    for name in sys.argv[1:] or PAGES:
        print(f"wrote {generate(name).relative_to(DOCS.parent)}")
    print(f"wrote {index().relative_to(DOCS.parent)}")


if __name__ == "__main__":
    main()
