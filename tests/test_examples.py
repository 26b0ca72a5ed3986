"""Every example runs as written and draws the images its docs page shows.

An example that builds a torchvision or Hugging Face model (ResNet, ViT, GPT-2, Llama)
takes up to minutes at full size (the page's own figures) on a busy machine: its full run
is marked ``examples`` and left to ``.ci/run`` (or ``pytest -m examples``), and the
default run runs its ``main`` with those models swapped for tiny ones of the same kind
(:func:`tiny_models`), so that a break in what it calls still shows in seconds. The
examples that build their own small models run at full size in the default run.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib.util
import io
import logging
import re
import shutil
import sys
from pathlib import Path

import pytest
import torchvision
import transformers

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DOCS = EXAMPLES.parent / "docs"


def _generate():
    spec = importlib.util.spec_from_file_location("generate", DOCS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generate()
PAGES = [(p, e, i) for p, (e, i) in GENERATE.PAGES.items()]
SWAPPED = ("resnet18", "resnet34", "resnet50", "vit_b_16", "GPT2LMHeadModel", "LlamaForCausalLM")  # by tiny_models
SHRUNK = [(p, e, i) for p, e, i in PAGES if any(name in (EXAMPLES / e).read_text() for name in SWAPPED)]


# what differs from run to run: a time (and a rate made from one), the spaces that align a
# column around it, the dashes under a column's header
_TIME = re.compile(
    r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)? ?(?:[kMGTP]?(?:FLOP|B|tokens|samples)/s|ns|µs|us|ms|s)\b"
    r"|(?<=[MH]FU )\d+(?:\.\d+)?%"  # (a utilisation: FLOPs over a measured time)
)
_ALIGNMENT = re.compile(r"(?<=\S)  +|-{3,}")


def _without_times(text: str) -> list[str]:
    """``text``'s lines with every time written as ``<t>`` and columns' alignment dropped."""
    return [_ALIGNMENT.sub(" ", _TIME.sub("<t>", line)).rstrip() for line in text.strip("\n").splitlines()]


def _runs_and_draws(page: str, example: str, images: list[str], out: Path, as_shown: bool) -> None:
    """Run the example; with ``as_shown`` (its models at full size), its output must be
    what its page shows, timings aside."""
    if page == "explorer" and not (shutil.which("chromium") and importlib.util.find_spec("playwright")):
        pytest.skip("the explorer's screenshots need Debian's chromium (apt-get install -y chromium) and playwright")
    text = GENERATE.run(example, out)
    assert text.strip() and "<- differs" not in text  # (conventions.py marks a count off its closed form)
    for image in images:
        assert (out / image).read_bytes()[:4] == b"\x89PNG", image
    assert (DOCS / f"{page}.md").exists()  # the page generate.py writes from it is committed
    if as_shown:
        now, shown = _without_times(text), _without_times(GENERATE.shown(page))
        changed = [f"- {a}\n+ {b}" for a, b in zip(shown, now) if a != b][:3]
        assert now == shown, (
            f"docs/{page}.md shows other output than examples/{example} prints now "
            f"({len(shown)} lines shown, {len(now)} printed; first changes:\n" + "\n".join(changed) + "\n"
            f"); regenerate it: python docs/generate.py {page}"
        )


def test_a_page_shows_what_its_example_prints_timings_aside():
    """The comparison's masking: times and rates go, and the alignment they move; every
    other figure stays."""
    shown = "name  latency      FLOPs\n----  -------  ------\nfc    1.20 ms    2.00 K\nTPOT 99.15 ms, 221.67 tokens/s"
    now = "name  latency    FLOPs\n----  -------  -----\nfc    980.00 µs  2.00 K\nTPOT 12 ms, 3.5 tokens/s"
    assert _without_times(now) == _without_times(shown)
    assert _without_times(now.replace("2.00 K", "2.01 K")) != _without_times(shown)  # a count is a count
    assert _without_times("2 threads, 3 steps, 4 s") == ["2 threads, 3 steps, <t>"]
    assert _without_times("MFU 20.44%, HFU 20.72%, share 3.5%") == ["MFU <t>, HFU <t>, share 3.5%"]


@pytest.mark.parametrize(
    "page, example, images", [pytest.param(*p, marks=pytest.mark.examples) if p in SHRUNK else p for p in PAGES]
)
def test_example_runs_and_draws_its_images_and_prints_what_its_page_shows(page, example, images, tmp_path):
    _runs_and_draws(page, example, images, tmp_path, as_shown=True)


@pytest.fixture
def tiny_models(monkeypatch):
    """The examples' models at a tiny size, of the same kind: torchvision's ResNets one
    basic block a stage, ViT-B/16 one layer 32 wide, GPT-2 32 wide with at most 2 layers
    (the explorer's screenshots open layers 0-1), Llama 64 wide with 1 (8 heads of 8). Inputs stay as written."""
    from torchvision.models.resnet import BasicBlock, ResNet
    from torchvision.models.vision_transformer import VisionTransformer

    for name in ("resnet18", "resnet34", "resnet50"):
        monkeypatch.setattr(
            torchvision.models,
            name,
            lambda weights=None, num_classes=1000: ResNet(BasicBlock, [1, 1, 1, 1], num_classes=num_classes),
        )
    vit = lambda weights=None: VisionTransformer(224, 16, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=64)  # noqa: E731
    monkeypatch.setattr(torchvision.models, "vit_b_16", vit)
    shrink = {  # model class: (its layer count's field, at most, the sizes it is built with)
        "GPT2LMHeadModel": ("n_layer", 2, {"n_embd": 32, "n_head": 2}),
        "LlamaForCausalLM": (
            "num_hidden_layers",
            1,
            {"hidden_size": 64, "head_dim": 8, "intermediate_size": 128, "num_attention_heads": 8},
        ),
    }
    fulls = {name: getattr(transformers, name) for name in shrink}
    # resolving a lazy name replaces sys.modules["transformers"] with a new module object, which
    # is what an example's own `import transformers` gets: the patch goes there
    module = sys.modules["transformers"]
    for name, (layers, most, sizes) in shrink.items():
        monkeypatch.setattr(module, name, _shrunk(fulls[name], layers, most, sizes))


def _shrunk(full, layers: str, most: int, sizes: dict):
    """``full`` (a Hugging Face model class) built from a copy of its config with ``sizes``
    and at most ``most`` layers."""

    def small(config):
        config = copy.deepcopy(config)
        for field, value in {**sizes, layers: min(getattr(config, layers), most)}.items():
            setattr(config, field, value)
        if hasattr(config, "num_key_value_heads"):  # (the examples' tensor-parallel plans split them 4 and 8 ways)
            config.num_key_value_heads = config.num_attention_heads
        return full(config)

    return small


@pytest.mark.parametrize("page, example, images", SHRUNK)
def test_example_runs_at_a_tiny_size(page, example, images, tmp_path, tiny_models):
    _runs_and_draws(page, example, images, tmp_path, as_shown=False)


def test_the_readme_says_what_the_set_up_costs():
    readme = (EXAMPLES.parent / "README.md").read_text()
    setup = readme.split("## Set-up on a fresh machine")[1].split("## ")[0]
    assert "GB of disk" in setup and "minutes" in setup and ". .venv/bin/activate" in setup


@pytest.mark.parametrize("page, example", [(p, e) for p, e, _ in PAGES])
def test_each_page_shows_the_code_that_made_it_and_a_command_that_runs(page, example):
    text = (DOCS / f"{page}.md").read_text()
    source = (EXAMPLES / example).read_text()
    code = source.split('"""', 2)[2].strip()  # the example after its docstring, as the page shows it
    assert f"```python\n{code}\n```" in text, f"docs/{page}.md does not show examples/{example} as it is now"
    # and its prose is the example's docstring (a page edited by hand loses it when regenerated)
    title, _, body = ast.get_docstring(ast.parse(source), clean=False).strip().partition("\n")
    body = body.split("\n", 2)[-1].strip() if body.lstrip().startswith("Run:") else body.strip()
    assert text.startswith(f"# {title}\n\n{body}\n\n"), f"docs/{page}.md's text is not examples/{example}'s docstring"
    assert f".venv/bin/python examples/{example}" in text  # runs after the README's set-up as written


def test_ci_runs_what_the_default_run_leaves_out_but_the_sweeps():
    """The markers the default run deselects (pyproject's addopts) are run by .ci/run's
    second pytest command, but ``slow``."""
    root = EXAMPLES.parent
    addopts = (root / "pyproject.toml").read_text().split("addopts = ")[1].splitlines()[0]
    left_out = set(re.findall(r"not (\w+)", addopts))
    assert left_out == {"slow", "examples", "distributed"}
    runs = [
        line
        for line in (root / ".ci" / "run").read_text().splitlines()
        if line.startswith(".venv/bin/python -m pytest -m")
    ]
    assert runs == ['.venv/bin/python -m pytest -m "examples or distributed"']


def test_a_librarys_log_warning_while_an_example_runs_stays_off_its_page():
    """torch's log handlers write to whatever ``sys.stderr`` is (the stream an example
    captures for its page: transformers importing torchao made torch warn into docs/cli.md);
    while generate.py runs an example they write to its own stderr, and the example's own
    lines stay."""
    page = io.StringIO()
    with GENERATE._libraries_aside(), contextlib.redirect_stderr(page):
        logging.getLogger("torch.utils._pytree").warning("an Enum subclass is now natively supported")
        print("fxinspect: the example's own line", file=sys.stderr)
    assert page.getvalue() == "fxinspect: the example's own line\n"
