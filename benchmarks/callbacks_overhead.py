"""What the MFU callbacks cost a training loop, as a ratio to the same loop without them.

Run: ``python benchmarks/callbacks_overhead.py [--loops plain,lightning,hf] [--rounds 3] [--steps 100]``.
One process, CPU, torch on one thread.

The model is a small Llama (``LlamaForCausalLM``, hidden 128, 4 layers, 8 heads,
batch 4 of 128 tokens), the same in the three loops:

* ``plain``: two copies, equal to the bit, train side by side on the same batches; one
  with :class:`fxinspect.StepMeter` (``meter.step()`` a step, ``watch`` every 100
  steps), one without. A round is ``--steps`` steps of each, the order swapped from round
  to round; the meter's first step (its analysis) is run before the rounds;
* ``lightning``: ``Trainer.fit`` for ``1 + --steps`` steps with and without
  ``fxinspect.integrations.lightning.MFUCallback`` (``log_every_n_steps=50``,
  Lightning's default, a CSV logger in both), alternately;
* ``hf``: ``Trainer.train`` the same with and without
  ``fxinspect.integrations.hf_trainer.MFUCallback`` (``logging_steps=50``).

In the frameworks' runs, a clock callback in both runs times the steps after the first
(the first is the analysis: its seconds are printed apart, once per run, not per step).
Every clock is the thread's own CPU time (``time.thread_time``; torch on one thread
computes in it, and no loader runs in another): other processes on a shared machine
disturb it less than the wall clock. Each ratio is the median over the rounds of
(with / without), the quartiles beside it. Beside it, the share of the steps' time spent
in the callback's own code (its hooks and the meter's forward pre-hook, timed by
wrapping them): a figure the machine's noise barely moves, where the ratio of two runs
on a shared machine strays by a few percent; it leaves out ``watch``'s hooks
(``benchmarks/watch.py`` measures those) and what the framework's logger does with the
figures later (Lightning's ``log_dict`` itself runs inside the callback).
The bar (issue 43): at ``watch`` every 100 steps, within 1.01x of the loop without.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
import warnings

import torch
import transformers

import fxinspect
from fxinspect.integrations.meter import StepMeter

SEQ, BATCH, VOCAB = 128, 4, 512
LOG_EVERY = 50  # the frameworks write their logs every 50 steps (Lightning's default)


class Own:
    """Thread CPU seconds spent inside the callbacks' own code, counted by wrapping it."""

    seconds = 0.0

    @classmethod
    def wrap(cls, fn):
        def timed(*args, **kwargs):
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                cls.seconds += time.thread_time() - t0

        return timed

    @classmethod
    def hooks(cls, callback):
        """``callback``'s hooks, timed (its instance's attributes: the frameworks look them up there)."""
        for name, value in vars(type(callback)).items():
            if callable(value) and name.startswith("on_"):
                setattr(callback, name, cls.wrap(getattr(callback, name)))
        return callback


# the meter's forward pre-hook (registered as the bound method when a meter is made)
StepMeter._forward = Own.wrap(StepMeter._forward)


def llama() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=SEQ,
    )
    return transformers.LlamaForCausalLM(config).train()


def batches(n: int) -> list[dict]:
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        out.append({"input_ids": ids, "labels": ids})
    return out


# ------------------------------------------------------------------ plain loop


def plain_rounds(rounds: int, steps: int) -> tuple[list[float], list[float], float]:
    """Per round, metered seconds over plain seconds and the meter's own share of its
    seconds; and the meter's first step."""
    models = {"with": llama(), "without": None}
    models["without"] = copy.deepcopy(models["with"])
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-4) for k, m in models.items()}
    meter = fxinspect.StepMeter(models["with"], watch_every=steps)
    step = Own.wrap(meter.step)
    data = batches(steps)

    def run(key: str, n: int) -> float:
        model, opt = models[key], opts[key]
        t0 = time.thread_time()
        for batch in data[:n]:
            model(**batch).loss.backward()
            opt.step()
            opt.zero_grad()
            if key == "with":
                step()
        return time.thread_time() - t0

    first = run("with", 1)  # the analysis, then a step
    run("without", 1)
    ratios, own = [], []
    for r in range(rounds):
        order = ("with", "without") if r % 2 == 0 else ("without", "with")
        Own.seconds = 0.0
        seconds = {k: run(k, steps) for k in order}
        ratios.append(seconds["with"] / seconds["without"])
        own.append(Own.seconds / seconds["with"])
    meter.close()
    return ratios, own, first


# ------------------------------------------------------------------ frameworks


def lightning_run(steps: int, with_callback: bool, tmp: str) -> float:
    """Seconds of the steps after the first in one ``Trainer.fit``."""
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger

    from fxinspect.integrations.lightning import MFUCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = llama()

        def forward(self, **batch):
            return self.model(**batch)

        def training_step(self, batch, batch_idx):
            return self(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Clock(pl.Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            if batch_idx == 1:
                self.t0, Own.seconds = time.thread_time(), 0.0

        def on_train_end(self, trainer, module):
            self.seconds, self.own = time.thread_time() - self.t0, Own.seconds

    clock = Clock()
    callbacks = [clock] + ([Own.hooks(MFUCallback(watch_every=steps))] if with_callback else [])
    trainer = pl.Trainer(
        max_steps=1 + steps,
        accelerator="cpu",
        logger=CSVLogger(tmp),
        callbacks=callbacks,
        log_every_n_steps=LOG_EVERY,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    data = batches(1 + steps)
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=None))
    return clock.seconds, clock.own


def hf_run(steps: int, with_callback: bool, tmp: str) -> float:
    """Seconds of the steps after the first in one ``Trainer.train``."""
    from fxinspect.integrations.hf_trainer import MFUCallback

    class Clock(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1:
                self.t0, Own.seconds = time.thread_time(), 0.0

        def on_train_end(self, args, state, control, **kwargs):
            self.seconds, self.own = time.thread_time() - self.t0, Own.seconds

    clock = Clock()
    rows = [{k: v[i] for k, v in b.items()} for b in batches(1 + steps) for i in range(BATCH)]
    args = transformers.TrainingArguments(
        output_dir=tmp,
        max_steps=1 + steps,
        per_device_train_batch_size=BATCH,
        logging_steps=LOG_EVERY,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    callbacks = [clock] + ([Own.hooks(MFUCallback(watch_every=steps))] if with_callback else [])
    transformers.Trainer(model=llama(), args=args, train_dataset=rows, callbacks=callbacks).train()
    return clock.seconds, clock.own


def framework_rounds(run, rounds: int, steps: int) -> tuple[list[float], list[float]]:
    ratios, own = [], []
    with tempfile.TemporaryDirectory() as tmp:
        run(steps, True, tmp)  # warm-up (imports, the host's measured peak)
        for r in range(rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            found = {w: run(steps, w, tmp) for w in order}
            ratios.append(found[True][0] / found[False][0])
            own.append(found[True][1] / found[True][0])
    return ratios, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="plain,lightning,hf")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    a = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; watch every {a.steps} steps")
    for loop in a.loops.split(","):
        t0 = time.perf_counter()
        if loop == "plain":
            ratios, own, first = plain_rounds(a.rounds, a.steps)
            extra = f"; the first step with its analysis {first:.2f} s"
        else:
            run = {"lightning": lightning_run, "hf": hf_run}[loop]
            (ratios, own), extra = framework_rounds(run, a.rounds, a.steps), ""
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        print(
            f"{loop:10} with/without {statistics.median(ratios):.4f} (quartiles {q[0]:.4f}-{q[2]:.4f}, "
            f"{len(ratios)} rounds of {a.steps} steps, {time.perf_counter() - t0:.0f} s); the callback's own code "
            f"{statistics.median(own):.3%} of the steps' time{extra}"
        )


if __name__ == "__main__":
    main()
