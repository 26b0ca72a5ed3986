"""The command line, end to end, in-process."""

from __future__ import annotations

import json

import pytest

import fxinspect
from fxinspect.cli import main


def test_cli_prints_summary_and_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["torchvision.models:resnet18", "--input-shape", "1,3,64,64", "--no-timing", "--depth", "1",
                 "--json", str(out)])
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
