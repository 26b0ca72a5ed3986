"""Fast paths on nested tensors: counted on the tokens they compute on, by every tier."""

from __future__ import annotations

import pytest
import torch

import fxinspect

D, HEADS, FF, LAYERS = 16, 2, 32, 2
LENGTHS = (5, 3)  # the second sequence has 2 padding positions


def _encoder_and_inputs():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=D, nhead=HEADS, dim_feedforward=FF, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=LAYERS).eval()
    x = torch.randn(len(LENGTHS), max(LENGTHS), D)
    padding = torch.tensor([[i >= n for i in range(max(LENGTHS))] for n in LENGTHS])
    return encoder, x, padding


def _encoder_macs(lengths) -> int:
    tokens = sum(lengths)
    per_token = 3 * D * D + D * D + 2 * D * FF  # q/k/v and output projections, two feed-forward matmuls
    attention = sum(n * n for n in lengths) * 2 * D  # q @ k^T and weights @ v, over each sequence's own tokens
    return LAYERS * (tokens * per_token + attention)


@pytest.mark.parametrize("method", ["auto", "symbolic", "eager"])
def test_padded_encoder_counts_only_the_real_tokens(method):
    encoder, x, padding = _encoder_and_inputs()
    with torch.no_grad():
        report = fxinspect.analyze(encoder, x, kwargs={"src_key_padding_mask": padding}, method=method, timing=False)
    assert report.totals.macs == _encoder_macs(LENGTHS)  # 2 * (8 * 2048 + 34 * 32) = 34944
    assert not report.totals.partial


def test_under_export_torch_takes_the_padded_path_and_that_is_what_is_counted():
    # torch turns the fast path off while exporting ("mask_check enabled with torch.export"):
    # the exported program computes on every position, padding included
    encoder, x, padding = _encoder_and_inputs()
    with torch.no_grad():
        report = fxinspect.analyze(encoder, x, kwargs={"src_key_padding_mask": padding}, method="export", timing=False)
    assert report.totals.macs == _encoder_macs((max(LENGTHS),) * len(LENGTHS))  # 2 * (10 * 2048 + 50 * 32)
