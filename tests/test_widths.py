"""Everything printed fits its width: tables, summaries and diffs within 100 characters,
cut names unique and readable, what was left out said in a footnote."""

from __future__ import annotations

import pytest
import torch
import torchvision

import fxinspect
from fxinspect.formatting import middle


@pytest.fixture(scope="module")
def distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(n_layers=2, dim=64, n_heads=4, hidden_dim=128, vocab_size=500)
    model = DistilBertModel(config).eval()
    return fxinspect.analyze(model, torch.randint(0, 500, (1, 16)), backward=True)


@pytest.fixture(scope="module")
def resnets():
    x = torch.randn(1, 3, 64, 64)
    small, large = (torchvision.models.resnet18(weights=None), torchvision.models.resnet34(weights=None))
    return fxinspect.analyze(small, x, backward=True), fxinspect.analyze(large, x, timing=False)


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.parametrize("by", ["module", "op", "node"])
def test_every_default_table_fits_100_columns_and_says_what_it_left_out(distilbert, resnets, by):
    for report in (distilbert, resnets[0]):
        text = report.table(by=by)
        assert _widest(text) <= 100, text
        whole = report.table(by=by, width=None)  # every column, every name whole
        headers = whole.splitlines()[0].split("  ")
        left_out = [h.strip() for h in headers if h.strip() and h.strip() not in text.splitlines()[0]]
        if left_out:
            assert f"left out to fit width=100: {', '.join(left_out)}" in " ".join(text.split())


def test_cut_names_are_unique_and_keep_whole_path_components(distilbert):
    lines = distilbert.table(by="module").splitlines()
    name_width = len(lines[1].split()[0])  # the rule under the header: one run of dashes per column
    body = lines[2 : lines.index(lines[1], 2)]  # the module rows, down to the rule above the totals
    names = [line[:name_width].strip() for line in body]
    assert len(names) > 10 and len(names) == len(set(names)), names
    # the two embedding tables: not both "…embeddings"
    assert middle("embeddings.position_embeddings", 22) == "…position_embeddings"
    assert middle("embeddings.word_embeddings", 22) == "…word_embeddings"


def test_summary_and_diff_fit_100_columns(distilbert, resnets):
    small, large = resnets
    for report in (distilbert, small):
        text = str(report)
        assert _widest(text) <= 100
        # nothing is lost by wrapping: the same words as the unwrapped lines
        assert text.split() == report.summary(width=None).split()
    diff = str(small.diff(large))
    assert _widest(diff) <= 100
    # three figures do not fit side by side: one table each, all there
    assert [line for line in diff.splitlines() if line.endswith(":")] == ["params:", "flops:", "bytes:"]
    assert "layer3.5.conv2" in diff and _widest(small.diff(large).table(width=None)) > 100
