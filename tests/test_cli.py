"""The command line, end to end, in-process."""

from __future__ import annotations

import json

import pytest
import torch

import fxinspect
from fxinspect.cli import main


def test_cli_prints_summary_and_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(
        ["torchvision.models:resnet18", "--input-shape", "1,3,64,64", "--no-timing", "--depth", "1", "--json", str(out)]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "captured by symbolic" in text and "layer4" in text and "layer4.0" not in text
    report = fxinspect.Report.from_json(out.read_text())
    assert report.totals.params == 11_689_512  # torchvision's published resnet18 parameter count
    assert json.loads(out.read_text())["schema_version"] == report.schema_version


@pytest.mark.parametrize(
    "argv, message",
    [
        (["torchvision.models.resnet18", "--input-shape", "1,3,8,8"], "expected MODULE:CALLABLE"),
        (["torchvision.models:resnet18", "--input-shape", "1,4,64,64", "--no-timing"], "node 'conv1'"),
        (["builtins:dict", "--input-shape", "1"], "expected a torch.nn.Module"),
    ],
)
def test_cli_errors_are_one_clear_line(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_rejects_a_bad_shape():
    with pytest.raises(SystemExit):
        main(["torchvision.models:resnet18", "--input-shape", "1,x"])


def test_cli_keyword_inputs_hf_config_and_every_file(tmp_path, capsys):
    files = {suffix: tmp_path / f"r.{suffix}" for suffix in ("json", "csv", "png", "svg", "html")}
    code = main(
        [
            "transformers:GPT2Config",
            "--config",
            '{"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 100}',
            "--input",
            "input_ids=1,16",
            "--input",
            "attention_mask=1,16",
            "--kwargs",
            '{"use_cache": false}',
            "--no-timing",
            "--no-memory",
            "--depth",
            "2",
            *(a for suffix, path in files.items() for a in (f"--{suffix}", str(path))),
        ]
    )
    assert code == 0, capsys.readouterr().err
    report = fxinspect.Report.from_json(files["json"].read_text())
    assert report.modules[""].type == "GPT2Model" and [t.shape for t in report.inputs] == [(1, 16), (1, 16)]
    assert files["csv"].read_text().startswith("path,") and files["png"].read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in files["svg"].read_text()[:500]
    assert files["html"].read_text(encoding="utf-8") == report.to_html()  # the explorer, of the same report


def test_cli_a_file_factory_and_a_backward(tmp_path, capsys):
    source = tmp_path / "net.py"
    source.write_text("import torch\n\ndef build_model():\n    return torch.nn.Sequential(torch.nn.Linear(4, 2))\n")
    assert main([f"{source}:build_model", "--input-shape", "3,4", "--no-timing", "--backward"]) == 0
    assert "backward     " in capsys.readouterr().out  # 3*4*2 MACs of the weight gradient in the summary


def test_cli_analyses_one_rank_of_fsdp(capsys):
    argv = ["torch.nn:Linear", "--args", "[16, 8]", "--input-shape", "4,16", "--backward", "--fsdp", "4", "--rank", "3"]
    assert main([*argv, "--no-timing", "--optimizer", "AdamW", "--device-spec", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "AdamW:" in out and "predicted on the wire" in out  # the optimizer and the links, not ignored
    # one unit, the root: gathered once (FSDP2 keeps the root's gathered through the backward), reduce-scattered
    assert "rank 3 of 4 (dp=4): 2 collectives" in out
    assert "all_gather" in out and "reduce_scatter" in out  # the communication table
    assert main([*argv[:-4], "--fsdp", "2", "--sweep", "4,8"]) == 0  # a sweep of one rank's steps
    assert "each analysed on its own" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["torch.nn:Identity", "--input-shape", "1", "--rank", "1"])
    assert "give --fsdp too" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["no_such_package:thing", "--input-shape", "1"], "no module named 'no_such_package'"),
        (["torch.nn:Linear", "--input-shape", "1,4"], "cannot be called without arguments"),
        (["torch.nn:NoSuchLayer", "--input-shape", "1"], "has no 'NoSuchLayer'"),
    ],
)
def test_cli_loading_errors_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["torch.nn:Identity", "--input-shape", "1", "--sort", "bogus"], "unknown column 'bogus'"),
        (["torch.nn:Identity", "--input-shape", "1", "--depth", "0"], "expected a number >= 1"),
        (["torch.nn:Identity"], "give the model's inputs"),
        (["torch.nn:Identity", "--input", "1,2"], "expected NAME=SHAPE"),
        (["torch.nn:Identity", "--input-shape", "1", "--kwargs", "[1]"], "expected a JSON object"),
    ],
)
def test_cli_options_are_checked_before_the_model_is_built(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["torchvisoin.models:resnet18", "--input-shape", "1"],
            "no module named 'torchvisoin' (did you mean 'torchvision'?)",
        ),
        (["torchvision.models:resnet1B", "--input-shape", "1"], "has no 'resnet1B' (did you mean 'resnet18'?)"),
        (
            ["transformers:GPT2Config", "--config", '{"n_layerz": 2}', "--input", "input_ids=1,8"],
            "GPT2Config has no field 'n_layerz' (did you mean 'n_layer'?)",
        ),
        (
            [
                "transformers:GPT2Config",
                "--config",
                '{"n_layer": 1, "n_embd": 32, "n_head": 2}',
                "--input",
                "input_ids=1,8",
                "--kwargs",
                '{"use_cach": false}',
            ],
            "takes no keyword 'use_cach' (did you mean 'use_cache'?)",
        ),  # fmt: skip
        (
            ["torch.nn:Linear", "--args", "[4, -2]", "--input-shape", "1,4"],
            "building the model: torch.nn:Linear raised",
        ),
        (["torch.nn:Linear", "--args", "[4]", "--input-shape", "1,4"], "cannot be called with the --args"),
    ],
)
def test_cli_misspelt_names_and_a_raising_factory_are_one_line_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "the model raised" not in err


def test_cli_option_errors_are_one_line_and_a_factory_takes_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["torch.nn:Identity", "--input-shape", "1", "--bogus"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1 and "usage:" not in err
    assert "unrecognized arguments: --bogus" in err
    code = main(["torch.nn:Linear", "--args", "[4, 3]", "--factory-kwargs", '{"bias": false}', "--input-shape", "2,4",
                 "--no-timing", "--no-memory"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "MACs 24" in out  # 2*4*3, no bias adds


def test_cli_no_fold_lists_every_block(capsys):
    argv = ["torchvision.models:resnet18", "--input-shape", "1,3,32,32", "--no-timing", "--no-memory", "--depth", "2"]
    assert main(argv) == 0
    folded = capsys.readouterr().out
    assert main([*argv, "--no-fold"]) == 0
    unfolded = capsys.readouterr().out
    # layer1's two identical BasicBlocks: one row folded, two rows unfolded
    assert "layer1.0–1" in folded and "layer1.1 " not in folded
    assert "layer1.0–1" not in unfolded and "layer1.0 " in unfolded and "layer1.1 " in unfolded


def test_cli_measure_memory_adds_the_allocators_figure(capsys):
    argv = ["torchvision.models:resnet18", "--input-shape", "1,3,32,32", "--no-timing", "--depth", "1"]
    assert main(argv) == 0
    estimated = capsys.readouterr().out
    assert main([*argv, "--measure-memory"]) == 0
    measured = capsys.readouterr().out
    assert "measure_memory=True measures the allocator" in estimated and "by torch.profiler" not in estimated
    assert "by torch.profiler" in measured


LINEAR = ["torch.nn:Linear", "--args", "[64, 256]"]


@pytest.mark.parametrize(
    "argv, message",
    [
        ([*LINEAR, "--input-shape", "1,64", "--sweep", "1,x"], "expected batch sizes such as 1,2,4,8"),
        ([*LINEAR, "--input-shape", "1,64", "--sweep", "1", "--max-batch", "1GiB"], "give one of --sweep"),
        ([*LINEAR, "--input-shape", "1,64", "--backward", "--optimizer", "Adamw"], "not a torch.optim class"),
        ([*LINEAR, "--input-shape", "1,64", "--optimizer", "AdamW"], "--optimizer needs --backward"),
        ([*LINEAR, "--input-shape", "1,64", "--checkpoint-plan", "1GiB"], "plans a training step: add --backward"),
        ([*LINEAR, "--input-shape", "1,64", "--budget", "1GiB"], "--budget goes with --sweep"),
        ([*LINEAR, "--input-shape", "1,64", "--workers", "2"], "--workers goes with --sweep"),
        (
            [*LINEAR, "--input-shape", "1,64", "--sweep", "1,2", "--workers", "-1"],
            "--workers expects a count of processes",
        ),
        ([*LINEAR, "--input-shape", "1,64", "--max-batch", "24 gigs"], "budget expects bytes"),
        ([*LINEAR, "--input-shape", "1,64", "--max-batch", "1GiB", "--reserve", "1.5"], "a fraction below 1"),
        ([*LINEAR, "--input-shape", "1,64", "--reserve", "0.1"], "--reserve goes with a budget"),
        ([*LINEAR, "--input-shape", "1,64", "--sweep", "1,2", "--json", "x.json"], "--json do not go with --sweep"),
        ([*LINEAR, "--input-shape", "1,64", "--max-batch", "1GiB", "--png", "x.png"], "--max-batch draws nothing"),
    ],
)
def test_cli_planning_options_are_checked_before_the_model_is_built(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_cli_sweeps_and_finds_the_largest_batch(tmp_path, capsys):
    plot = tmp_path / "sweep.png"
    argv = [*LINEAR, "--input-shape", "1,64", "--backward", "--optimizer", "SGD"]
    assert main([*argv, "--sweep", "1,2,4", "--budget", "1MiB", "--png", str(plot)]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("note:")]
    assert [line.split()[0] for line in table[2:]] == ["1", "2", "4"] and plot.stat().st_size > 10_000
    assert main([*argv, "--max-batch", "200KiB"]) == 0
    text = capsys.readouterr().out
    model = fxinspect.factory.build("torch.nn:Linear", None, [64, 256], {})
    fit = fxinspect.max_batch(model, lambda b: torch.randn(b, 64), "200KiB", backward=True, optimizer=torch.optim.SGD)
    assert text.startswith(f"batch {fit.batch} fits 200.00 KiB")
    assert main([*argv, "--reserve", "0.2", "--max-batch", "200KiB"]) == 0
    half = fxinspect.max_batch(
        model, lambda b: torch.randn(b, 64), "200KiB", reserve=0.2, backward=True, optimizer=torch.optim.SGD
    )
    assert capsys.readouterr().out.startswith(f"batch {half.batch} fits 160.00 KiB (200.00 KiB less 40.00 KiB")
    assert half.batch < fit.batch


def test_cli_plans_checkpoints_and_passes_kwargs_beside_batched_inputs(tmp_path, capsys):
    blocks = '{"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 100, "n_positions": 64}'
    argv = ["transformers:GPT2Config", "--config", blocks, "--input", "input_ids=8,64", "--kwargs"]
    assert main([*argv, '{"use_cache": false}', "--backward", "--checkpoint-plan", "8MiB"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("checkpoint ") and "fits 8.00 MiB" in text
    # --kwargs beside positional --input-shape go to every step as keywords
    seen = []

    class Scaled(torch.nn.Linear):
        def forward(self, x, scale=1.0):
            seen.append(scale)
            return super().forward(x) * scale

    module = tmp_path / "scaled.py"
    module.write_text("import torch\n")
    import sys

    sys.modules["scaled_for_cli"] = type(sys)("scaled_for_cli")
    sys.modules["scaled_for_cli"].build = lambda: Scaled(4, 2)
    assert main(["scaled_for_cli:build", "--input-shape", "1,4", "--kwargs", '{"scale": 3.0}', "--sweep", "1,2"]) == 0
    del sys.modules["scaled_for_cli"]
    assert seen and set(seen) == {3.0}


def test_the_default_table_shows_two_levels_of_modules(capsys):
    """resnet18's table without --depth: its stages and their blocks (``layer1.0``), never a
    block's own layers (``layer1.0.conv1``, depth 3)."""
    argv = ["torchvision.models:resnet18", "--input-shape", "1,3,32,32", "--no-timing", "--no-memory", "--no-fold"]
    assert main(argv) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert "layer1" in rows and "layer1.0" in rows and "layer4.1" in rows
    assert not [r for r in rows if r.count(".") >= 2]  # depth 3 would be layer1.0.conv1
