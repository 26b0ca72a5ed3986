"""Every example runs as written and draws the images its docs page shows."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DOCS = EXAMPLES.parent / "docs"


def _pages():
    spec = importlib.util.spec_from_file_location("generate", DOCS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PAGES


@pytest.mark.parametrize("page, example, images", [(p, e, i) for p, (e, i) in _pages().items()])
def test_example_runs_and_draws_its_images(page, example, images, tmp_path):
    if page == "explorer" and not (shutil.which("chromium") and importlib.util.find_spec("playwright")):
        pytest.skip("the explorer's screenshots need Debian's chromium (apt-get install -y chromium) and playwright")
    spec = importlib.util.spec_from_file_location(Path(example).stem, EXAMPLES / example)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.main(tmp_path)
    assert text.strip() and "<- differs" not in text  # (conventions.py marks a count off its closed form)
    for image in images:
        assert (tmp_path / image).read_bytes()[:4] == b"\x89PNG", image
    assert (DOCS / f"{page}.md").exists()  # the page generate.py writes from it is committed


def test_the_readme_says_what_the_set_up_costs():
    readme = (EXAMPLES.parent / "README.md").read_text()
    setup = readme.split("## Set-up on a fresh machine")[1].split("## ")[0]
    assert "GB of disk" in setup and "minutes" in setup and ". .venv/bin/activate" in setup


@pytest.mark.parametrize("page, example", [(p, e) for p, (e, _) in _pages().items()])
def test_each_page_shows_the_code_that_made_it_and_a_command_that_runs(page, example):
    text = (DOCS / f"{page}.md").read_text()
    source = (EXAMPLES / example).read_text()
    code = source.split('"""', 2)[2].strip()  # the example after its docstring, as the page shows it
    assert f"```python\n{code}\n```" in text, f"docs/{page}.md does not show examples/{example} as it is now"
    assert f".venv/bin/python examples/{example}" in text  # runs after the README's set-up as written
