"""The README's KV-bytes table says what ``benchmarks/kv_bytes_table.py`` measures and computes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from fxinspect.serving.kv_cache import closed_form_kv_bytes_per_token

ROOT = Path(__file__).resolve().parents[1]


def _benchmark():
    spec = importlib.util.spec_from_file_location("kv_bytes_table", ROOT / "benchmarks" / "kv_bytes_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # (configs only: nothing is built or run)
    return module


def _readme_rows() -> dict[str, list[str]]:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("| configuration | layers · kv heads · head_dim |")[1].split("\n\n")[0]
    rows = [line.strip().strip("|").split("|") for line in table.splitlines()[2:]]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


def test_the_readme_kv_table_is_the_benchmarks():
    """Each row's closed form is the library's from the benchmark's config, and its measured
    figure the hand-computed one the benchmark checks its measurement against."""
    bench, rows = _benchmark(), _readme_rows()
    assert set(rows) == set(bench.CONFIGS) and len(rows) >= 5
    for name, (_, closed, measured, why) in rows.items():
        expected = closed_form_kv_bytes_per_token(bench.CONFIGS[name], torch.bfloat16)
        assert closed == ("—" if expected is None else f"{expected:,}"), name
        assert measured == f"{bench.EXPECTED[name]:,}", name
        assert (why == "—") == (closed == measured), name  # a reason exactly where the two differ
