"""Progress on stderr: phases and fractions in order, quiet when asked or not interactive.

Every test forces the conditions it needs (``reporting(interactive=True, after=0, ...)``
writing to a ``StringIO``): none waits 2 s for a line, none asserts a duration.
"""

from __future__ import annotations

import io
import json
import re
import threading

import pytest
import torch

import fxinspect
from fxinspect.cli import main
from fxinspect.progress import Parts, reporting, task, tracked


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def terminal(**settings):
    """A StringIO seen as a terminal, every line shown at once (no redrawing thread)."""
    out = io.StringIO()
    return out, reporting(stream=out, **{"interactive": True, "after": 0, "interval": 0, "tick": 0, **settings})


def lines(out: io.StringIO, times: bool = False) -> list[str]:
    """What a terminal showed, one rewrite each (the ``fxinspect: `` prefix and the
    clearing dropped; the time so far too, unless ``times``: the machine's own)."""
    shown = [line.removeprefix("fxinspect: ") for line in out.getvalue().replace("\x1b[K", "").split("\r") if line]
    return shown if times else [re.sub(r" \(\d+ s\)$", "", line) for line in shown]


def test_analyze_shows_each_timing_phase_to_n_of_n_in_order_and_says_timing_false_skips_it():
    out, shown = terminal()
    with shown:
        fxinspect.analyze(mlp(), torch.randn(2, 8), warmup=2, repeats=3, backward=True)
    skip = " (timing=False skips it)"
    fractions = [(phase, n) for phase, k in (("timing warm-up", 2), ("timing", 3)) for n in range(k + 1)]
    fractions += [(phase, n) for phase, k in (("backward warm-up", 2), ("backward timing", 3)) for n in range(k + 1)]
    expected = []
    for phase, n in fractions:
        if n == 0:
            expected.append("analyze")  # (the phase before it ended: analyze alone)
        total = 2 if "warm-up" in phase else 3
        expected.append(f"analyze · {phase} {n}/{total}{skip}")
    assert lines(out) == [*expected, "analyze"]
    assert out.getvalue().endswith("\r\x1b[K")  # the line cleared as the work ends


def test_the_parallel_analysis_says_it_analyses_one_ranks_step():
    out, shown = terminal()
    with shown:
        fxinspect.analyze(mlp(), torch.randn(2, 8), backward=True, parallel=fxinspect.Parallel.fsdp(2))
    assert lines(out) == ["analyze one rank's step"]  # (on meta: no timed runs)


def test_a_sweep_shows_its_points_with_their_batch_sizes_and_ends_at_n_of_n():
    out, shown = terminal()
    with shown:
        fxinspect.sweep(mlp(), lambda b: torch.randn(b, 8), [1, 2, 4], workers=0)
    points = [line for line in lines(out) if "points" in line]
    assert points == [
        "sweep · points 0/3",
        "sweep · points 0/3 batch 1",
        "sweep · points 1/3 batch 1",
        "sweep · points 1/3 batch 2",
        "sweep · points 2/3 batch 2",
        "sweep · points 2/3 batch 4",
        "sweep · points 3/3 batch 4",
    ]


def test_max_batch_and_checkpoint_plan_say_what_they_try():
    out, shown = terminal()
    with shown:
        fit = fxinspect.max_batch(mlp(), lambda b: torch.randn(b, 8), "1MiB")
        fxinspect.checkpoint_plan(mlp(), torch.randn(64, 8), "1GiB")
    tried = [line for line in lines(out) if line.startswith("max_batch batch")]
    # each batch the search analysed, in the order it tried them, with how many came before
    assert tried == [f"max_batch batch {b} ({i} tried)" for i, (b, _) in enumerate(fit.tried)]
    assert lines(out)[-1].startswith("checkpoint_plan")


def test_generation_shows_its_analyses_as_one_piece_of_work():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4, vocab_size=128
    )
    out, shown = terminal()
    with shown:
        gen = fxinspect.generation(transformers.LlamaForCausalLM(config), batch=1, prompt=8, new_tokens=2)
        gen.prefill, gen.decode_step(8), gen.decode_step(9)
    # the prefill, then two decode steps: each analysis a part of the generation's work
    parts = [line for line in lines(out) if " · " not in line]
    assert parts == [f"generation decode steps analysed: {n}" for n in (0, 0, 0, 0, 1, 1)]  # (at each start and end)
    assert "generation decode steps analysed: 1 · analyze" in lines(out)


def test_parts_too_short_alone_are_shown_once_they_add_up():
    now = [0.0]
    out, shown = terminal(after=2.0, clock=lambda: now[0])
    parts = Parts("generation")
    with shown:
        for step in range(4):  # 1 s each: the first two (0-2 s) show nothing, the third and fourth do
            with parts.part(f"{step} steps analysed") as part:
                now[0] += 1.0
                part.advance()
    # timed from the first part's start: part 1 ends at 2 s; parts 2 and 3 begin at 2 and 3 s, end at 3 and 4
    assert lines(out, times=True) == [
        "generation 1 steps analysed (2 s)",
        "generation 2 steps analysed (2 s)",
        "generation 2 steps analysed (3 s)",
        "generation 3 steps analysed (3 s)",
        "generation 3 steps analysed (4 s)",
    ]


@pytest.mark.parametrize(
    "how",
    ["not a terminal", "progress=False", "FXINSPECT_PROGRESS=0", "reporting(False)"],
)
def test_nothing_is_shown_when_quiet_or_not_interactive(how, monkeypatch):
    out = io.StringIO()
    settings = {"after": 0, "interval": 0, "tick": 0, "interactive": how != "not a terminal"}
    options = {"progress": False} if how == "progress=False" else {}
    if how == "FXINSPECT_PROGRESS=0":
        monkeypatch.setenv("FXINSPECT_PROGRESS", "0")
    with reporting(how != "reporting(False)", stream=out, **settings):
        fxinspect.analyze(mlp(), torch.randn(2, 8), repeats=2, **options)
        fxinspect.sweep(mlp(), lambda b: torch.randn(b, 8), [1, 2], workers=0, **options)
    assert out.getvalue() == ""


def test_forced_on_a_stream_that_is_not_a_terminal_each_line_is_its_own(monkeypatch):
    monkeypatch.setenv("FXINSPECT_PROGRESS", "1")
    out = io.StringIO()
    with reporting(stream=out, after=0, interval=0, tick=0):
        fxinspect.analyze(mlp(), torch.randn(2, 8), warmup=0, repeats=2)
    assert "\r" not in out.getvalue()
    assert out.getvalue().splitlines()[-2:] == [
        "fxinspect: analyze · timing 2/2 (timing=False skips it)",
        "fxinspect: analyze",
    ]


def test_work_shorter_than_the_threshold_shows_nothing():
    now = [0.0]
    out, shown = terminal(after=2.0, clock=lambda: now[0])
    with shown:
        for _ in tracked("timing", range(3)):
            now[0] += 0.5  # 1.5 s in all
    assert out.getvalue() == ""
    out, shown = terminal(after=2.0, clock=lambda: now[0])
    with shown:
        for _ in tracked("timing", range(3)):
            now[0] += 1.0  # the line shows from 2 s on
    assert lines(out, times=True) == ["timing 2/3 (2 s)", "timing 3/3 (3 s)"]


def test_a_phase_with_no_fraction_is_redrawn_while_it_runs():
    out, shown = terminal(tick=0.01)
    seen = threading.Event()
    with shown, task("capture"):
        for _ in range(500):  # until the redrawing thread has drawn the line (no duration asserted)
            if "capture" in out.getvalue():
                seen.set()
                break
            seen.wait(0.01)
    assert seen.is_set()


def test_the_command_line_says_up_front_that_no_timing_skips_the_timed_runs(capsys):
    out, shown = terminal()
    argv = ["torch.nn:Linear", "--args", json.dumps([8, 4]), "--input-shape", "2,8", "--repeats", "2"]
    with shown:
        assert main([*argv, "--warmup", "1"]) == 0
    said = lines(out)
    assert said[0] == "the analysis is followed by 1 warm-up and 2 timed runs of the forward (--no-timing skips them)\n"
    assert said.index("analyze · timing 2/2 (timing=False skips it)") > said.index(
        "analyze · timing warm-up 1/1 (timing=False skips it)"
    )
    out, shown = terminal()
    with shown:
        assert main([*argv, "--no-progress"]) == 0
    assert out.getvalue() == ""
    capsys.readouterr()
