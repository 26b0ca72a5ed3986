"""The callbacks in real training loops: a Lightning ``Trainer.fit``, a Hugging Face
``Trainer.train`` and a plain loop, 30 steps each on CPU.

Each logged MFU is checked against the closed form computed here from the logged step
time, the device's peak and the step's FLOPs written out by hand; and the training is
the same with the callback as without it (the analysis of the first step leaves the
model as it was).
"""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest
import torch

import fxinspect
from fxinspect.integrations import StepMeter

PEAK = 1e12
SPEC = fxinspect.timemodel.DeviceSpec("test", {"float32": PEAK}, 1e11)
STEPS, BATCH = 30, 8

# the MLP below, 16 -> 32 -> 4 on a batch of 8: forward MACs 8*16*32 + 8*32*4 = 5,120; the
# backward the same for the weight gradients plus 8*32*4 = 1,024 for the second layer's
# input gradient (the first layer's input is data): model FLOPs 2 * (5,120 * 2 + 1,024)
MLP_FLOPS = 2 * (5_120 * 2 + 1_024)  # 22,528


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _data() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, 16, generator=g), torch.randint(0, 4, (BATCH,), generator=g)) for _ in range(STEPS)]


def _check_mfu(records: list[dict], flops: int, samples: int | None = BATCH, tokens: int | None = None) -> None:
    assert records
    for r in records:
        seconds = r["fxinspect/step_time"]
        assert r["fxinspect/mfu"] == pytest.approx(flops / (seconds * PEAK), rel=1e-6)
        if samples is not None:
            assert r["fxinspect/samples_per_second"] == pytest.approx(samples / seconds, rel=1e-6)
        if tokens is not None:
            assert r["fxinspect/tokens_per_second"] == pytest.approx(tokens / seconds, rel=1e-6)


def test_merged_records_are_the_mean_step_and_the_rates_over_the_whole_time():
    from fxinspect.integrations.meter import merged

    records = [
        {"fxinspect/step_time": 1.0, "fxinspect/mfu": 0.2},
        {"fxinspect/step_time": 3.0, "fxinspect/mfu": 0.1},
    ]
    # (1 + 3) / 2 = 2 s; (0.2 * 1 + 0.1 * 3) / 4 = 0.125: the FLOPs of both over their 4 s
    assert merged(records) == pytest.approx({"fxinspect/step_time": 2.0, "fxinspect/mfu": 0.125})


def test_import_fxinspect_needs_no_framework():
    code = (
        "import sys, fxinspect, fxinspect.integrations\n"
        "found = {m.split('.')[0] for m in sys.modules} & {'lightning', 'pytorch_lightning', 'lightning_fabric',"
        " 'accelerate', 'wandb', 'tensorboard', 'tensorboardX', 'transformers'}\n"
        "assert not found, found\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ plain loop


def _plain_loop(meter: bool) -> tuple[torch.nn.Module, StepMeter | None]:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    used = StepMeter(model, device_spec=SPEC, watch_every=10) if meter else None
    for x, y in _data():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if used is not None:
            used.step()
    if used is not None:
        used.close()
    return model, used


def test_plain_loop_logs_the_closed_form_mfu_and_leaves_training_as_it_was():
    metered, meter = _plain_loop(True)
    plain, _ = _plain_loop(False)
    assert all(torch.equal(a, b) for a, b in zip(metered.parameters(), plain.parameters()))
    assert len(meter.history) == STEPS
    _check_mfu(meter.history, MLP_FLOPS)
    assert meter.watcher.steps("0", "io") == [0, 10, 20]  # watch every 10 steps, from the first


# ------------------------------------------------------------------ Lightning


def _lightning_fit(tmp_path, callback, every: int = 1):
    lightning = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.loggers import CSVLogger

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = _mlp()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    module = Module()
    trainer = lightning.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        logger=CSVLogger(tmp_path),
        callbacks=[] if callback is None else [callback],
        log_every_n_steps=every,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, torch.utils.data.DataLoader(_data(), batch_size=None))
    return module, trainer


@pytest.mark.parametrize("every", [1, 5])
def test_lightning_fit_logs_the_closed_form_mfu(tmp_path, every):
    pytest.importorskip("lightning.pytorch")
    from fxinspect.integrations.lightning import MFUCallback

    callback = MFUCallback(device_spec=SPEC, watch_every=10)
    module, trainer = _lightning_fit(tmp_path / "with", callback, every)
    if every == 1:
        plain, _ = _lightning_fit(tmp_path / "without", None)
        assert all(torch.equal(a, b) for a, b in zip(module.parameters(), plain.parameters()))
    with open(f"{trainer.logger.log_dir}/metrics.csv") as f:
        rows = [{k: float(v) for k, v in r.items() if v} for r in csv.DictReader(f)]
    logged = [r for r in rows if "fxinspect/mfu" in r]
    # one row per log Lightning writes, the steps since the last merged into it: the
    # mean step time, and the MFU of their FLOPs over their time (the same closed form)
    assert len(logged) == STEPS // every and len(callback.meter.history) == STEPS
    _check_mfu(logged, MLP_FLOPS)
    assert callback.meter.watcher.steps("net.0", "io") == [0, 10, 20]


def test_lightning_fit_with_the_callback_writes_watchs_exact_bins_to_tensorboard(tmp_path):
    """The callback's watch, sent to TensorBoard: TensorBoard's own reader gets each logged
    step's histogram with watch's bins and counts, and the step numbers it logged."""
    pytest.importorskip("lightning.pytorch")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import HISTOGRAMS, EventAccumulator

    from fxinspect.integrations.lightning import MFUCallback
    from fxinspect.training.writers import buckets

    logdir = tmp_path / "tb"
    callback = MFUCallback(device_spec=SPEC, watch_every=10, watch_options={"to": f"tensorboard:{logdir}"})
    _lightning_fit(tmp_path, callback, every=5)
    callback.meter.watcher.remove()  # (flushes and closes the writer it opened)
    events = EventAccumulator(str(logdir), size_guidance={HISTOGRAMS: 0})
    events.Reload()
    written = events.Histograms("watch_io/net.0")
    assert [e.step for e in written] == [0, 10, 20]  # every 10 of the 30 steps
    for e in written:
        edges, counts = buckets(callback.meter.watcher.histogram("net.0", "io", e.step))
        assert [e.histogram_value.min, *e.histogram_value.bucket_limit] == list(edges)
        assert list(e.histogram_value.bucket) == list(counts)
        assert e.histogram_value.num == BATCH * 32  # every output of the first Linear, binned


# ------------------------------------------------------------------ Hugging Face Trainer


def test_hf_trainer_logs_the_closed_form_mfu(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from fxinspect.integrations.hf_trainer import MFUCallback

    batch, seq, hidden, layers = 2, 16, 32, 2

    def train(callback):
        torch.manual_seed(0)
        config = transformers.LlamaConfig(
            vocab_size=128,
            hidden_size=hidden,
            intermediate_size=64,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32,
        )
        model = transformers.LlamaForCausalLM(config)
        g = torch.Generator().manual_seed(1)
        data = [{"input_ids": (ids := torch.randint(0, 128, (seq,), generator=g)), "labels": ids} for _ in range(64)]
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path),
            max_steps=STEPS,
            per_device_train_batch_size=batch,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            disable_tqdm=True,
            seed=0,
        )
        trainer = transformers.Trainer(
            model=model, args=args, train_dataset=data, callbacks=[callback] if callback else []
        )
        trainer.train()
        return model, trainer

    callback = MFUCallback(device_spec=SPEC, watch_every=10)
    model, trainer = train(callback)
    plain, _ = train(None)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), plain.parameters()))
    tokens = batch * seq
    # 6 * N * tokens + 12 * L * s * h * tokens, N the matmuls' weights (tests/test_mfu.py):
    # per layer q, o 32*32, k, v 32*16, gate, up, down 32*64; the lm_head 32*128
    n = layers * (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 64) + 32 * 128  # 2 * 9,216 + 4,096 = 22,528
    flops = 6 * n * tokens + 12 * layers * seq * hidden * tokens  # 4,325,376 + 393,216 = 4,718,592
    logged = [r for r in trainer.state.log_history if "fxinspect/mfu" in r]
    assert len(logged) == STEPS
    _check_mfu(logged, flops, samples=batch, tokens=tokens)
    assert callback.meter.watcher.steps("model.layers.0.mlp", "io") == [0, 10, 20]


def test_a_step_that_cannot_be_analysed_trains_on_timed_without_mfu():
    model = _mlp()

    def loss_fn(output):
        raise ValueError("no loss here")

    meter = StepMeter(model, device_spec=SPEC, watch_every=None, loss_fn=loss_fn)
    with pytest.warns(UserWarning, match=r"could not be analysed \(ValueError: no loss here\)"):
        for x, _ in _data()[:3]:
            model(x).sum().backward()
            meter.step()
    meter.close()
    assert meter.flops is None and len(meter.history) == 3
    assert all(set(r) == {"fxinspect/step_time"} for r in meter.history)


def test_lightning_says_when_the_modules_forward_never_ran(tmp_path):
    lightning = pytest.importorskip("lightning.pytorch")
    from fxinspect.integrations.lightning import MFUCallback

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = _mlp()

        def training_step(self, batch, batch_idx):  # calls self.net, never self(...)
            return torch.nn.functional.cross_entropy(self.net(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def fit(callback):
        trainer = lightning.Trainer(
            max_steps=3,
            accelerator="cpu",
            logger=False,
            callbacks=[callback],
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        trainer.fit(Module(), torch.utils.data.DataLoader(_data()[:3], batch_size=None))

    with pytest.warns(UserWarning, match=r"Module's forward did not run .*\(module=lambda pl_module"):
        fit(MFUCallback(device_spec=SPEC, watch_every=None))
    named = MFUCallback(module=lambda pl_module: pl_module.net, device_spec=SPEC, watch_every=None)
    fit(named)
    assert named.meter.flops.model_flops == MLP_FLOPS
