"""Analyse a broad spread of timm and Hugging Face models with random weights.

Run: ``python benchmarks/sweep_models.py [--method auto|export|...] [--suite timm hf]
[--per-module 1] [--only NAME ...] [--out rows.jsonl] [--timeout 240]``. Not run in CI:
the default set takes about a quarter of an hour on two CPU cores.

* timm: for every module (family) of ``timm.list_modules()``, the ``--per-module``
  smallest models (fewest parameters x input pixels among a few candidates whose names
  suggest a small variant, measured on the ``meta`` device), built with
  ``pretrained=False`` and fed ``1x3xHxW`` at its ``pretrained_cfg`` input size (a
  model whose size exceeds 384 and that takes ``img_size`` is built for 224 instead).
  Modules with many models get one more (``--extra-from``).
* Hugging Face: models built with ``from_config`` from small configs (hidden 32, two
  layers, vocabulary 100, small images and audio), fed the inputs their forward needs.

Each model is analysed with ``fxinspect.analyze(model, inputs, timing=False)`` in eval
mode under ``torch.no_grad()``. A row records ok/failed, the capture method and why
earlier tiers failed (or why all failed), seconds, whether ``2 * macs`` equals
``FlopCounterMode``'s total corrected for CPU attention (``tests/reference.py``) over
the same forward, the share of op nodes attributed to a module below the root, and
uncounted aten ops. Rows are appended to ``--out`` as JSON lines as they finish; a
table, the failures and the success percentages are printed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import re
import signal
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference import reference_flops
from sweep_common import error_fields, print_failed, print_findings, report_fields

import fxinspect
from fxinspect.capture.base import one_line
from fxinspect.capture.hf import prepare_inputs

Built = tuple[torch.nn.Module, tuple, dict, str]  # model, args, kwargs, inputs described

# ------------------------------------------------------------------ timm

SMALL_HINTS = (
    "atto",
    "femto",
    "pico",
    "nano",
    "tiny",
    "xxs",
    "xs",
    "mini",
    "small",
    "lite",
    "_s",
    "_t",
    "b0",
    "18",
    "050",
    "100",
)
LARGE_HINTS = (
    "huge",
    "giant",
    "gigantic",
    "large",
    "xlarge",
    "xxl",
    "_xl",
    "_l_",
    "_m_",
    "base",
    "medium",
    "448",
    "512",
    "384",
    "336",
)


def _hint_rank(name: str) -> tuple:
    small = next((i for i, h in enumerate(SMALL_HINTS) if h in name), len(SMALL_HINTS))
    large = sum(h in name for h in LARGE_HINTS)
    return (large, small, len(name), name)


def _input_size(name: str) -> tuple[int, int, int]:
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    size = getattr(cfg, "input_size", None) if cfg is not None else None
    return tuple(size) if size else (3, 224, 224)


def _meta_cost(name: str) -> float:
    """Parameters x input pixels of ``name`` built on the meta device (no memory)."""
    import timm

    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = timm.create_model(name, pretrained=False)
        params = sum(p.numel() for p in model.parameters())
    except Exception:
        return float("inf")
    c, h, w = _input_size(name)
    return params * h * w


def timm_names(per_module: int, extra_from: int, candidates: int = 4) -> list[str]:
    import timm

    names = []
    for module in timm.list_modules():
        models = sorted(timm.list_models(module=module), key=_hint_rank)
        if not models:
            continue
        take = per_module + (1 if len(models) >= extra_from else 0)
        pool = models[: max(candidates, take + 1)]
        pool.sort(key=lambda n: (_meta_cost(n), _hint_rank(n)))
        names += [f"timm:{n}" for n in pool[:take]]
    return names


def _smaller_size(name: str, size: int) -> bool:
    """Whether ``name`` builds with ``img_size=size`` and runs on such an input (checked
    on the meta device: nothing allocated)."""
    import timm

    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            timm.create_model(name, pretrained=False, img_size=size).eval()(torch.empty(1, 3, size, size))
        return True
    except Exception:
        return False


def build_timm(name: str, max_side: int = 384, small_side: int = 224) -> Built:
    """The model at its ``pretrained_cfg`` input size; above ``max_side`` pixels a side
    (546-768 for the large ViT encoders), at ``small_side`` when it takes ``img_size``."""
    import timm

    torch.manual_seed(0)
    c, h, w = _input_size(name)
    extra: dict[str, Any] = {}
    if max(h, w) > max_side and _smaller_size(name, small_side):
        extra, h, w = {"img_size": small_side}, small_side, small_side
    model = timm.create_model(name, pretrained=False, **extra).eval()
    described = f"1x{c}x{h}x{w}" + (f" (img_size={small_side})" if extra else "")
    return model, (torch.randn(1, c, h, w),), {}, described


# ------------------------------------------------------------------ Hugging Face

TEXT = dict(
    vocab_size=100,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=0,
    eos_token_id=0,
)
SEQ2SEQ = dict(
    vocab_size=100,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=0,
    eos_token_id=0,
    decoder_start_token_id=0,
)
VISION = dict(
    image_size=32,
    patch_size=8,
    num_channels=3,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
)
AUDIO = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    conv_dim=(16, 16),
    conv_kernel=(10, 3),
    conv_stride=(5, 2),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=2,
    vocab_size=100,
)


def _ids(batch: int = 2, length: int = 16) -> torch.Tensor:
    return torch.randint(1, 100, (batch, length))


def _text(**extra) -> dict:
    return {"input_ids": _ids(), "attention_mask": torch.ones(2, 16, dtype=torch.long), **extra}


def _seq2seq() -> dict:
    return {"input_ids": _ids(), "attention_mask": torch.ones(2, 16, dtype=torch.long), "decoder_input_ids": _ids(2, 8)}


def _pixels(size: int = 32) -> dict:
    return {"pixel_values": torch.randn(1, 3, size, size)}


# name -> (model_type, Auto class name, config kwargs, inputs)
HF: dict[str, tuple[str, str, dict, Callable[[], dict]]] = {
    "bert": ("bert", "AutoModel", TEXT, _text),
    "roberta": ("roberta", "AutoModelForMaskedLM", {**TEXT, "pad_token_id": 1}, _text),
    "xlm-roberta": ("xlm-roberta", "AutoModel", {**TEXT, "pad_token_id": 1}, _text),
    "distilbert": (
        "distilbert",
        "AutoModelForSequenceClassification",
        dict(vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64, pad_token_id=0),
        _text,
    ),
    "albert": ("albert", "AutoModel", {**TEXT, "embedding_size": 16}, _text),
    "electra": ("electra", "AutoModelForPreTraining", {**TEXT, "embedding_size": 16}, _text),
    "deberta-v2": ("deberta-v2", "AutoModel", {**TEXT, "position_buckets": 16, "max_relative_positions": 32}, _text),
    "deberta": ("deberta", "AutoModel", TEXT, _text),
    "mobilebert": (
        "mobilebert",
        "AutoModel",
        {
            **TEXT,
            "embedding_size": 16,
            "intra_bottleneck_size": 16,
            "true_hidden_size": 16,
            "num_feedforward_networks": 2,
        },
        _text,
    ),
    "modernbert": (
        "modernbert",
        "AutoModel",
        {**TEXT, "global_attn_every_n_layers": 2, "local_attention": 8, "cls_token_id": 0, "sep_token_id": 0},
        _text,
    ),
    "gpt2": (
        "gpt2",
        "AutoModelForCausalLM",
        dict(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64, bos_token_id=0, eos_token_id=0),
        _text,
    ),
    "gpt_neox": ("gpt_neox", "AutoModelForCausalLM", TEXT, _text),
    "gptj": (
        "gptj",
        "AutoModelForCausalLM",
        dict(
            vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64, rotary_dim=8, bos_token_id=0, eos_token_id=0
        ),
        _text,
    ),
    "gpt_bigcode": (
        "gpt_bigcode",
        "AutoModelForCausalLM",
        dict(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64, bos_token_id=0, eos_token_id=0),
        _text,
    ),
    "opt": (
        "opt",
        "AutoModelForCausalLM",
        {**TEXT, "ffn_dim": 64, "word_embed_proj_dim": 32, "pad_token_id": 1},
        _text,
    ),
    "bloom": (
        "bloom",
        "AutoModelForCausalLM",
        dict(vocab_size=100, hidden_size=32, n_layer=2, n_head=2, pad_token_id=0, bos_token_id=0, eos_token_id=0),
        _text,
    ),
    "falcon": ("falcon", "AutoModelForCausalLM", TEXT, _text),
    "llama": ("llama", "AutoModelForCausalLM", {**TEXT, "num_attention_heads": 4, "num_key_value_heads": 2}, _text),
    "mistral": (
        "mistral",
        "AutoModelForCausalLM",
        {**TEXT, "num_attention_heads": 4, "num_key_value_heads": 2, "sliding_window": 8},
        _text,
    ),
    "mixtral": (
        "mixtral",
        "AutoModelForCausalLM",
        {**TEXT, "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2},
        _text,
    ),
    "qwen2": ("qwen2", "AutoModelForCausalLM", {**TEXT, "num_attention_heads": 4, "num_key_value_heads": 2}, _text),
    "qwen3": (
        "qwen3",
        "AutoModelForCausalLM",
        {**TEXT, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8},
        _text,
    ),
    "phi": ("phi", "AutoModelForCausalLM", TEXT, _text),
    "phi3": ("phi3", "AutoModelForCausalLM", {**TEXT, "num_key_value_heads": 2}, _text),
    "gemma": ("gemma", "AutoModelForCausalLM", {**TEXT, "num_key_value_heads": 1, "head_dim": 16}, _text),
    "gemma2": (
        "gemma2",
        "AutoModelForCausalLM",
        {**TEXT, "num_key_value_heads": 1, "head_dim": 16, "sliding_window": 8},
        _text,
    ),
    "stablelm": ("stablelm", "AutoModelForCausalLM", {**TEXT, "num_key_value_heads": 2}, _text),
    "starcoder2": ("starcoder2", "AutoModelForCausalLM", {**TEXT, "num_key_value_heads": 1}, _text),
    "olmo": ("olmo", "AutoModelForCausalLM", TEXT, _text),
    "t5": (
        "t5",
        "AutoModelForSeq2SeqLM",
        dict(
            vocab_size=100,
            d_model=32,
            d_kv=16,
            d_ff=64,
            num_layers=2,
            num_heads=2,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        ),
        _seq2seq,
    ),
    "bart": ("bart", "AutoModelForSeq2SeqLM", SEQ2SEQ, _seq2seq),
    "mbart": ("mbart", "AutoModelForSeq2SeqLM", SEQ2SEQ, _seq2seq),
    "marian": ("marian", "AutoModelForSeq2SeqLM", SEQ2SEQ, _seq2seq),
    "pegasus": ("pegasus", "AutoModelForSeq2SeqLM", SEQ2SEQ, _seq2seq),
    "m2m_100": ("m2m_100", "AutoModelForSeq2SeqLM", SEQ2SEQ, _seq2seq),
    "vit": ("vit", "AutoModelForImageClassification", VISION, _pixels),
    "deit": ("deit", "AutoModel", VISION, _pixels),
    "beit": ("beit", "AutoModel", {**VISION, "use_relative_position_bias": True}, _pixels),
    "dinov2": ("dinov2", "AutoModel", VISION, _pixels),
    "swin": (
        "swin",
        "AutoModelForImageClassification",
        dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4),
        _pixels,
    ),
    "convnext": (
        "convnext",
        "AutoModelForImageClassification",
        dict(num_stages=2, hidden_sizes=[8, 16], depths=[1, 1]),
        _pixels,
    ),
    "resnet": (
        "resnet",
        "AutoModelForImageClassification",
        dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"),
        lambda: _pixels(64),
    ),
    "mobilevit": (
        "mobilevit",
        "AutoModelForImageClassification",
        dict(image_size=64, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64]),
        lambda: _pixels(64),
    ),
    "segformer": (
        "segformer",
        "AutoModelForSemanticSegmentation",
        dict(
            num_encoder_blocks=2,
            depths=[1, 1],
            sr_ratios=[2, 1],
            hidden_sizes=[16, 32],
            num_attention_heads=[1, 2],
            decoder_hidden_size=32,
        ),
        lambda: _pixels(64),
    ),
    "clip": (
        "clip",
        "AutoModel",
        dict(
            text_config=dict(
                vocab_size=100,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=64,
                bos_token_id=0,
                eos_token_id=0,
                pad_token_id=0,
            ),
            vision_config=dict(
                image_size=32,
                patch_size=8,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
            ),
            projection_dim=16,
        ),
        lambda: {"input_ids": _ids(), "pixel_values": torch.randn(2, 3, 32, 32)},
    ),
    "siglip": (
        "siglip",
        "AutoModel",
        dict(
            text_config=dict(
                vocab_size=100,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=64,
            ),
            vision_config=dict(
                image_size=32,
                patch_size=8,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
            ),
        ),
        lambda: {"input_ids": _ids(), "pixel_values": torch.randn(2, 3, 32, 32)},
    ),
    "whisper": (
        "whisper",
        "AutoModelForSpeechSeq2Seq",
        {**SEQ2SEQ, "num_mel_bins": 80, "max_source_positions": 32, "max_target_positions": 32},
        lambda: {"input_features": torch.randn(1, 80, 64), "decoder_input_ids": _ids(1, 8)},
    ),
    "wav2vec2": ("wav2vec2", "AutoModelForCTC", AUDIO, lambda: {"input_values": torch.randn(1, 4000)}),
    "hubert": ("hubert", "AutoModel", AUDIO, lambda: {"input_values": torch.randn(1, 4000)}),
    "wavlm": (
        "wavlm",
        "AutoModel",
        {**AUDIO, "num_buckets": 16, "max_bucket_distance": 32},
        lambda: {"input_values": torch.randn(1, 4000)},
    ),
}


def build_hf(name: str) -> Built:
    import transformers

    model_type, auto, config_kwargs, make_inputs = HF[name]
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(model_type, **config_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(transformers, auto).from_config(config).eval()
    kwargs = make_inputs()
    described = ", ".join(f"{k}={'x'.join(map(str, v.shape))}" for k, v in kwargs.items())
    return model, (), kwargs, described


# ------------------------------------------------------------------ running


class Timeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int):
    def expire(signum, frame):
        raise Timeout(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _leaves(out: Any) -> list[Any]:
    return torch.utils._pytree.tree_leaves(out)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.equal(a, b)
    return type(a) is type(b) and a == b


def run_one(name: str, method: str, timeout: int) -> dict[str, Any]:
    suite, short = name.split(":", 1)
    row: dict[str, Any] = {"name": name, "suite": suite, "ok": False}
    start = time.perf_counter()
    try:
        with time_limit(timeout):
            model, args, kwargs, described = build_timm(short) if suite == "timm" else build_hf(short)
    except Exception as exc:
        row["error"] = f"build: {one_line(exc, limit=400)}"
        return row
    row["inputs"] = described
    # the reference and the outputs come from a pristine copy: analyze runs first on the
    # model as built (as a user would), and must leave it computing the same outputs
    ref_args, ref_kwargs, _ = prepare_inputs(model, args, kwargs)  # use_cache=False, as analyze passes it
    try:
        pristine = copy.deepcopy(model)
        with time_limit(timeout), torch.no_grad():
            before = _leaves(pristine(*ref_args, **ref_kwargs))
            try:
                reference = reference_flops(pristine, ref_args, ref_kwargs)
            except AssertionError:
                # FlopCounterMode's module tracker asserts on some models under no_grad
                # ("Expected gradient function to be set"); forward FLOPs do not depend
                # on grad mode, so count them with grad enabled
                with torch.enable_grad():
                    reference = reference_flops(pristine, ref_args, ref_kwargs)
                row["reference_with_grad"] = True
        del pristine
        row["reference_flops"] = reference
    except Exception as exc:
        row["reference_error"] = one_line(exc, limit=400)
        reference = before = None
    start = time.perf_counter()
    try:
        with time_limit(timeout), torch.no_grad():
            report = fxinspect.analyze(model, args, kwargs=kwargs, method=method, timing=False)
        row["seconds"] = round(time.perf_counter() - start, 2)
    except Exception as exc:
        row["seconds"] = round(time.perf_counter() - start, 2)
        row.update(error_fields(exc))
        return row
    row.update(report_fields(report))
    if reference is not None:
        row["ref_match"] = 2 * report.totals.macs == reference
    if before is not None:  # the model must still compute what it computed before
        try:
            with time_limit(timeout), torch.no_grad():
                after = _leaves(model(*ref_args, **ref_kwargs))
            row["unchanged"] = len(after) == len(before) and all(_same(a, b) for a, b in zip(after, before))
        except Exception as exc:
            row["unchanged"] = False
            row["after_error"] = one_line(exc, limit=400)
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    header = f"{'model':48} {'ok':3} {'method':8} {'sec':>6} {'nodes':>6} {'mod%':>6} {'GMACs':>9} {'2*macs=ref':>10}"
    print(header)
    print("-" * len(header))
    for r in rows:
        share = f"{100 * r['module_share']:.1f}" if "module_share" in r else ""
        gmacs = f"{r['macs'] / 1e9:.4f}" if "macs" in r else ""
        ref = {True: "=", False: "X"}.get(r.get("ref_match"), "")
        print(
            f"{r['name'][:48]:48} {'yes' if r['ok'] else 'NO':3} {r.get('method', ''):8} {r.get('seconds', 0):6.1f} "
            f"{r.get('op_nodes', ''):>6} {share:>6} {gmacs:>9} {ref:>10}"
        )
    print()
    print_failed(rows)
    for r in rows:
        if r["ok"] and r.get("ref_match") is False:
            print(f"MACS MISMATCH {r['name']}: 2*macs={2 * r['macs']} reference={r['reference_flops']}")
        if "reference_error" in r:
            print(f"NO REFERENCE {r['name']}: {r['reference_error']}")
        if r.get("unchanged") is False:
            print(
                f"MODEL CHANGED {r['name']}: after analyze the forward {r.get('after_error') or 'gives other outputs'}"
            )
    print_findings(rows, only_ok=True)
    print("\ntotals:")
    for suite in sorted({r["suite"] for r in rows}):
        rs = [r for r in rows if r["suite"] == suite]
        ok = [r for r in rs if r["ok"]]
        exact = [r for r in ok if r.get("ref_match")]
        methods: dict[str, int] = {}
        for r in ok:
            methods[r["method"]] = methods.get(r["method"], 0) + 1
        share = sum(r["module_share"] for r in ok) / len(ok) if ok else 0.0
        changed = [r for r in ok if r.get("unchanged") is False]
        print(
            f"  {suite:5}: {len(ok)}/{len(rs)} analysed ({100 * len(ok) / len(rs):.1f}%), "
            f"2*macs == reference on {len(exact)}/{len(rs)} ({100 * len(exact) / len(rs):.1f}%), "
            f"methods {methods}, mean module share {100 * share:.1f}%, "
            f"seconds {sum(r.get('seconds', 0) for r in rs):.0f}, model changed by analyze: {len(changed)}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="auto", help="capture tier: auto (default), symbolic, export, eager")
    parser.add_argument("--suite", nargs="*", default=["timm", "hf"], choices=["timm", "hf"])
    parser.add_argument("--per-module", type=int, default=1, help="timm models per module (family)")
    parser.add_argument("--extra-from", type=int, default=25, help="one more model from modules with this many")
    parser.add_argument("--only", nargs="*", default=[], help="names (timm:NAME, hf:NAME) or regexes")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per model")
    parser.add_argument("--out", type=Path, default=None, help="append rows here as JSON lines")
    opts = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    names: list[str] = []
    if "hf" in opts.suite:
        names += [f"hf:{n}" for n in HF]
    if "timm" in opts.suite:
        names += timm_names(opts.per_module, opts.extra_from)
    if opts.only:
        names = [n for n in names if any(n == o or re.search(o, n) for o in opts.only)] or list(opts.only)
    print(f"{len(names)} models, method={opts.method}", flush=True)
    rows = []
    for i, name in enumerate(names, 1):
        row = run_one(name, opts.method, opts.timeout)
        rows.append(row)
        status = "ok" if row["ok"] else f"FAILED {row.get('error')}"
        ref = {True: " macs=ref", False: " MACS != REF"}.get(row.get("ref_match"), "")
        print(f"[{i}/{len(names)}] {name} {row.get('method', '')} {row.get('seconds', 0)}s {status}{ref}", flush=True)
        if opts.out:
            with opts.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
        gc.collect()
    print()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
