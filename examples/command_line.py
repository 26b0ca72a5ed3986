"""The command line: ``fxinspect MODULE:CALLABLE`` with inputs, tables and files.

Run: ``python examples/command_line.py`` (it runs the commands below in-process).

The model comes from a factory (``torchvision.models:resnet18``), a file
(``path/to/net.py:build_model``) or a Hugging Face config class with ``--config``.
Inputs are ``--input-shape`` (positional, repeatable) and ``--input NAME=SHAPE``
(keyword; names ending in ``ids``/``mask`` get integer tokens/ones), with ``--kwargs``
for the rest. ``--json``, ``--csv``, ``--png`` and ``--svg`` write files;
``python -m fxinspect`` is the same. A mistake is one line on stderr and exit status 2.
"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

from fxinspect.cli import main as cli


def _run(command: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli(shlex.split(command)[1:])
        except SystemExit as exc:
            code = exc.code
    return f"$ {command}\n{out.getvalue()}{err.getvalue()}(exit status {code})\n"


def main(out_dir: Path = Path(".")) -> str:
    commands = [
        "fxinspect torchvision.models:resnet18 --input-shape 1,3,224,224 --depth 1 --no-timing --no-memory",
        "fxinspect transformers:GPT2Config --config '{\"n_layer\": 2}' --input input_ids=1,64 "
        "--input attention_mask=1,64 --kwargs '{\"use_cache\": false}' --by op --no-timing --no-memory",
        "fxinspect torchvision.models:resnet18 --input-shape 1,3,224,224 --sort bogus",
        "fxinspect torchvision.models:resnet18 --input-shape 1,4,224,224 --no-timing",
    ]
    text = "\n".join(_run(c) for c in commands)
    print(text)
    return text


if __name__ == "__main__":
    main()
