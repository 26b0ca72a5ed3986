"""MFU in the loop you already run: Lightning, the Hugging Face Trainer, or a plain loop.

Run: ``python examples/integrations.py`` (needs ``pip install fxinspect[integrations]``).

One line each: ``Trainer(callbacks=[MFUCallback()])`` in Lightning
(``fxinspect.integrations.lightning``) or in the Hugging Face ``Trainer``
(``fxinspect.integrations.hf_trainer``), or ``meter = fxinspect.StepMeter(model)`` and
``meter.step()`` at the end of each iteration of a plain loop. The model's first
training forward is analysed, on the batch the loop gives it, and each step then logs
``fxinspect/mfu``, ``fxinspect/hfu``, ``fxinspect/step_time`` and
``fxinspect/tokens_per_second`` or ``fxinspect/samples_per_second`` to the framework's
loggers; ``fxinspect.watch`` runs every ``watch_every`` steps (``meter.watcher``).

What counts (the convention of PaLM's appendix B and torchtitan): *model
FLOPs* are twice the matmul MACs of the step's forward and backward as the model needs
them, *hardware FLOPs* add what the step recomputes: the forward that activation
checkpointing reruns in the backward, and the ``Q K^T`` a fused attention kernel's
backward recomputes. The counts are the ops that ran, so a mixture of experts counts
only the experts its tokens were routed to. MFU is model FLOPs over the step's seconds
times the device's peak for the dtype that carries the MACs (``device_spec=``: a preset
such as ``"h100-sxm"``, a ``DeviceSpec``, or ``"measured"``, the default on a CPU).
Later batches are taken to be the first one's work: a batch of another shape (dynamic
padding) is not analysed again. The Hugging Face ``Trainer`` calls its reporting
callbacks (TensorBoard, W&B) before the ones it is given: insert this one first
(``trainer.callback_handler.callbacks.insert(0, MFUCallback())``) for them to get its
figures. A tiny Llama's step against the closed form, then the three loops on a CPU,
against its measured peak:
"""

from __future__ import annotations

import tempfile
import warnings

import torch
import transformers

import fxinspect

SEQ, BATCH, STEPS = 64, 4, 20


def llama(checkpointing: bool = False) -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=SEQ,
    )
    model = transformers.LlamaForCausalLM(config).train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def batch(seed: int) -> dict:
    ids = torch.randint(0, 512, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed))
    return {"input_ids": ids, "labels": ids}


def closed_form(model: torch.nn.Module) -> int:
    """6 * N * tokens + 12 * layers * seq * hidden * tokens; N the weights of the matmuls."""
    config, tokens = model.config, BATCH * SEQ
    n = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return 6 * n * tokens + 12 * config.num_hidden_layers * SEQ * config.hidden_size * tokens


def counts() -> list[str]:
    lines = [f"{'one step, batch 4 x 64 tokens':34} {'model FLOPs':>12} {'hardware FLOPs':>15} {'closed form':>12}"]
    for name, model in (("Llama, 2 layers", llama()), ("  with activation checkpointing", llama(True))):
        flops = fxinspect.step_flops(model, kwargs=batch(0))
        lines.append(f"{name:34} {flops.model_flops:12,} {flops.hardware_flops:15,} {closed_form(model):12,}")
    return lines


def plain_loop() -> list[dict]:
    model = llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    meter = fxinspect.StepMeter(model, watch_every=10)
    for step in range(STEPS):
        model(**batch(step)).loss.backward()
        opt.step()
        opt.zero_grad()
        meter.step()  # <- the one line
    meter.close()
    return meter.history


def lightning_fit(tmp: str) -> list[dict]:
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger

    from fxinspect.integrations.lightning import MFUCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = llama()

        def forward(self, **inputs):
            return self.model(**inputs)

        def training_step(self, inputs, batch_idx):
            return self(**inputs).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    callback = MFUCallback(watch_every=10)  # <- the one line
    trainer = pl.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        callbacks=[callback],
        logger=CSVLogger(tmp),
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Module(), torch.utils.data.DataLoader([batch(s) for s in range(STEPS)], batch_size=None))
    return callback.meter.history


def hf_train(tmp: str) -> list[dict]:
    from fxinspect.integrations.hf_trainer import MFUCallback

    rows = [{k: v[i] for k, v in batch(s).items()} for s in range(STEPS) for i in range(BATCH)]
    args = transformers.TrainingArguments(
        output_dir=tmp,
        max_steps=STEPS,
        per_device_train_batch_size=BATCH,
        logging_steps=5,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=llama(), args=args, train_dataset=rows, callbacks=[MFUCallback(watch_every=10)]
    )  # <- the one line: callbacks=[MFUCallback()]
    trainer.train()
    return [r for r in trainer.state.log_history if "fxinspect/mfu" in r]


def describe(name: str, records: list[dict]) -> str:
    last = records[-1]
    return (
        f"{name:22} {len(records):2} records; the last: step {last['fxinspect/step_time'] * 1e3:.1f} ms, "
        f"MFU {last['fxinspect/mfu']:.2%}, HFU {last['fxinspect/hfu']:.2%}, "
        f"{last['fxinspect/tokens_per_second']:,.0f} tokens/s"
    )


def main(out_dir=None) -> str:
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # (tiny random configs warn about token ids)
    try:
        with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
            warnings.simplefilter("ignore")  # (the frameworks' advice about data loader workers)
            lines = [*counts(), ""]
            lines.append(describe("plain loop", plain_loop()))
            lines.append(describe("Lightning Trainer.fit", lightning_fit(tmp)))
            lines.append(describe("HF Trainer.train", hf_train(tmp)))
    finally:
        transformers.logging.set_verbosity(verbosity)
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
