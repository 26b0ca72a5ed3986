"""The command line: ``fxinspect MODULE:CALLABLE`` with inputs, tables and files.

Run: ``python examples/command_line.py`` (it runs the commands below in-process).

The model comes from a factory (``torchvision.models:resnet18``), a file
(``path/to/net.py:build_model``) or a Hugging Face config class with ``--config``.
Inputs are ``--input-shape`` (positional, repeatable) and ``--input NAME=SHAPE``
(keyword; names ending in ``ids``/``mask`` get integer tokens/ones), with ``--kwargs``
for the rest. ``--json``, ``--csv``, ``--png`` and ``--svg`` write files;
``python -m fxinspect`` is the same. A mistake is one line on stderr and exit status 2.
On a terminal, work longer than 2 s shows its progress on stderr (``fxinspect: analyze ·
timing 3/10``), and a timed analysis says first that ``--no-timing`` skips its timed
runs; ``--no-progress`` or ``FXINSPECT_PROGRESS=0`` turns it off.

A training step: ``--backward`` with ``--optimizer AdamW`` (its state counts in the
memory), ``--device meta`` to allocate nothing; ``--fsdp N [--rank K]`` analyses one
rank of FSDP2 over N ranks on a fake process group, with its collectives listed.
Each of ``analyze``'s options has a flag made from its declaration
(``fxinspect.options.Options``; ``fxinspect --help`` lists them): ``--no-timing``,
``--warmup N``, ``--repeats N``, ``--no-check-finite``, ``--method``, ``--device-spec``...
``--sweep``, ``--max-batch`` and ``--checkpoint-plan`` answer will-it-fit questions
(see docs/will_it_fit.md; ``--workers N`` sets a sweep's forked workers).
``--generate --batch 8 --prompt 2048 --new-tokens 256`` analyses the model generating
after a prompt: its own prefill and decode steps with its own cache, built on the meta
device with its language-modelling head; a Hugging Face config class or a model's
``config.json`` (as the Hub has it: no download) names it (see docs/generation.md;
``--budget`` adds what fits, ``--png`` the chart, ``--json`` the figures, ``--html PATH`` the
explorer of the prefill at ``PATH`` and of the last decode step at ``<stem>.decode.html``).
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

from fxinspect.cli import main as cli

LLAMA = {
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_attention_heads": 4,
    "vocab_size": 1000,
}


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
        f"fxinspect transformers:LlamaConfig --config '{json.dumps(LLAMA)}' --input input_ids=2,128 "
        "--kwargs '{\"use_cache\": false}' --backward --optimizer AdamW --device meta --fsdp 8 --depth 1 --no-timing",
        f"fxinspect transformers:LlamaConfig --config '{json.dumps(LLAMA)}' --generate --batch 8 --prompt 2048 "
        "--new-tokens 256 --device-spec H100-SXM --dtype bfloat16 --budget 1GiB",
    ]
    text = "\n".join(_run(c) for c in commands)
    print(text)
    return text


if __name__ == "__main__":
    main()
