"""Every example runs as written and draws the images its docs page shows.

An example that builds a torchvision or Hugging Face model (ResNet, ViT, GPT-2, Llama)
takes up to minutes at full size (the page's own figures) on a busy machine: its full run
is marked ``examples`` and left to ``.ci/run`` (or ``pytest -m examples``), and the
default run runs its ``main`` with those models swapped for tiny ones of the same kind
(:func:`tiny_models`), so that a break in what it calls still shows in seconds. The
examples that build their own small models run at full size in the default run.
"""

from __future__ import annotations

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


PAGES = [(p, e, i) for p, (e, i) in _generate().PAGES.items()]
SWAPPED = ("resnet18", "resnet34", "resnet50", "vit_b_16", "GPT2LMHeadModel", "LlamaForCausalLM")  # by tiny_models
SHRUNK = [(p, e, i) for p, e, i in PAGES if any(name in (EXAMPLES / e).read_text() for name in SWAPPED)]


def _runs_and_draws(page: str, example: str, images: list[str], out: Path) -> None:
    if page == "explorer" and not (shutil.which("chromium") and importlib.util.find_spec("playwright")):
        pytest.skip("the explorer's screenshots need Debian's chromium (apt-get install -y chromium) and playwright")
    spec = importlib.util.spec_from_file_location(Path(example).stem, EXAMPLES / example)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.main(out)
    assert text.strip() and "<- differs" not in text  # (conventions.py marks a count off its closed form)
    for image in images:
        assert (out / image).read_bytes()[:4] == b"\x89PNG", image
    assert (DOCS / f"{page}.md").exists()  # the page generate.py writes from it is committed


@pytest.mark.parametrize(
    "page, example, images", [pytest.param(*p, marks=pytest.mark.examples) if p in SHRUNK else p for p in PAGES]
)
def test_example_runs_and_draws_its_images(page, example, images, tmp_path):
    _runs_and_draws(page, example, images, tmp_path)


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
    _runs_and_draws(page, example, images, tmp_path)


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
    with _generate()._libraries_aside(), contextlib.redirect_stderr(page):
        logging.getLogger("torch.utils._pytree").warning("an Enum subclass is now natively supported")
        print("fxinspect: the example's own line", file=sys.stderr)
    assert page.getvalue() == "fxinspect: the example's own line\n"
