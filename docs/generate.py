"""Regenerate every page and image under ``docs/`` from the examples.

Run: ``python docs/generate.py``. Each example in ``PAGES`` is imported and its
``main(images_dir)`` run; it saves its images into ``docs/images/`` and returns the text
it printed. The page ``docs/<name>.md`` is the example's docstring, its code, the
command that runs it after the README's set-up, its output and its images: nothing on
a page is written by hand, so a page cannot drift from what the code does
(``tests/test_examples.py`` runs each example again and fails where a page shows other
output than it prints now, timings aside).

The examples run on :data:`THREADS` CPU threads whatever the machine: a CPU kernel's
scratch memory and the order of a float sum depend on the thread count, and with them
peaks, the largest batch that fits and histogram counts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import sys
import warnings
from pathlib import Path

DOCS = Path(__file__).resolve().parent
EXAMPLES = DOCS.parent / "examples"
IMAGES = DOCS / "images"
HAND_WRITTEN = ("reference", "benchmarks")  # pages not made from an example: the long forms
THREADS = 2
"""CPU threads the examples run on (see the module)."""

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
    "generation_tp": ("generation_tp.py", ["llama2_70b_tp8_generation.png"]),
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


class _Aside(logging.Handler):
    """A library's log handler, writing to the terminal while the example's streams are captured."""

    def __init__(self, inner: logging.Handler, streams: tuple):
        super().__init__(inner.level)
        self.inner, self.streams = inner, streams

    def handle(self, record: logging.LogRecord) -> bool:
        captured = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.streams
        try:
            return self.inner.handle(record)
        finally:
            sys.stdout, sys.stderr = captured


@contextlib.contextmanager
def _libraries_aside():
    """The libraries' own warnings go to this terminal, not onto the page.

    A page shows what its example prints. A library imported on the way may warn through
    its log handlers (torch's write to whatever ``sys.stderr`` is when they emit: the
    stream an example captures; transformers importing torchao makes torch warn so) or
    through Python's ``warnings`` from its own files: both are written where this script's
    own output goes. (A capture tier's ``quiet`` swaps torch's handlers for its own while it
    runs, and puts them back: what it files in a report is unchanged.)
    """
    streams = sys.stdout, sys.stderr
    loggers = [logging.getLogger(), *(g for g in logging.root.manager.loggerDict.values() if hasattr(g, "handlers"))]
    held = {g: g.handlers[:] for g in loggers if g.handlers}
    show = warnings.showwarning

    def aside(message, category, filename, lineno, file=None, line=None):
        outside = not Path(filename).resolve().is_relative_to(DOCS.parent)
        show(message, category, filename, lineno, streams[1] if outside else file, line)

    for logger, handlers in held.items():
        logger.handlers = [_Aside(h, streams) for h in handlers]
    warnings.showwarning = aside
    try:
        yield
    finally:
        warnings.showwarning = show
        for logger, handlers in held.items():
            logger.handlers = handlers


def run(example: str, images_dir: Path) -> str:
    """Run ``examples/<example>``'s ``main(images_dir)`` on :data:`THREADS` threads; what it printed."""
    import torch  # (the examples import it anyway)

    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        with _libraries_aside():
            return _load(EXAMPLES / example).main(images_dir)
    finally:
        torch.set_num_threads(threads)


def shown(name: str) -> str:
    """The output ``docs/<name>.md`` shows (its "What it printed" block)."""
    page = (DOCS / f"{name}.md").read_text()
    return page.split("What it printed:\n\n```text\n", 1)[1].split("\n```\n", 1)[0]


def generate(name: str) -> Path:
    """Run one example and write its page; the page's path."""
    example, images = PAGES[name]
    output = run(example, IMAGES)
    module = sys.modules[Path(example).stem]  # (as _load registered it)
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
    lines += ["", "Written by hand:", ""]
    for name in HAND_WRITTEN:
        title = (DOCS / f"{name}.md").read_text().splitlines()[0].removeprefix("# ")
        lines.append(f"* [{title}.]({name}.md)")
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
