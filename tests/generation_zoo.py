"""Tiny Hugging Face generative models, one per architecture family, for generation checks.

Each entry builds a randomly initialised model from a hand-written config (hidden <= 64,
<= 4 layers, vocab 128, float32, eval mode) in well under a second, and is tagged with the
attention or state kind it exercises. Sliding windows are 8 tokens, so a context of 32
exceeds them. The families are split in two: ``BUILD`` ones may be used while writing the
generation code; ``HELD_OUT`` ones (one per kind: multi-head, multi-query, latent, hybrid
local/global, mixture-of-experts, state-space hybrid, encoder-decoder) are kept for final checks
on models not used while building it.

This is a helper module, not a test file: ``families()`` returns ``Family(name, kind, build)``
entries and ``encoder_inputs(model, batch)`` the encoder's input of an encoder-decoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest
import torch
import transformers as tf

__all__ = ["BUILD", "HELD_OUT", "WINDOW", "Family", "encoder_inputs", "families", "quiet_transformers"]

VOCAB = 128
WINDOW = 8  # sliding window of the local-attention families, below the 32-token contexts used

# common shape of the attention families: hidden 64, 4 heads of 16, 2 layers
_LM = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)


class Family(NamedTuple):
    """One architecture family: its name, what it exercises, and a builder of a tiny model."""

    name: str
    kind: str
    build: Callable[[], torch.nn.Module]
    held_out: bool


def _causal(config: tf.PretrainedConfig) -> Callable[[], torch.nn.Module]:
    return lambda: tf.AutoModelForCausalLM.from_config(config).eval()


def _seq2seq(config: tf.PretrainedConfig, auto: type = tf.AutoModelForSeq2SeqLM) -> Callable[[], torch.nn.Module]:
    return lambda: auto.from_config(config).eval()


def _configs() -> list[tuple[str, str, Callable[[], torch.nn.Module], bool]]:
    # built lazily (inside families()) so importing the module costs nothing
    sliding = dict(num_key_value_heads=2, sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"])
    mla = dict(
        num_key_value_heads=4, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, n_group=1,
        topk_group=1, first_k_dense_replace=1, n_shared_experts=1, kv_lora_rank=16, qk_rope_head_dim=8,
        qk_nope_head_dim=16, v_head_dim=16,
    )  # fmt: skip
    # fmt: off
    return [
        # --- build set ---
        ("gpt2", "multi-head", _causal(tf.GPT2Config(
            vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4, bos_token_id=1, eos_token_id=1)), False),
        ("opt", "multi-head", _causal(tf.OPTConfig(
            vocab_size=VOCAB, hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=128, word_embed_proj_dim=64)), False),
        ("llama", "grouped-query", _causal(tf.LlamaConfig(**_LM, num_key_value_heads=2)), False),
        ("qwen2", "grouped-query", _causal(tf.Qwen2Config(**_LM, num_key_value_heads=2)), False),
        ("falcon", "multi-query", _causal(tf.FalconConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, multi_query=True,
            new_decoder_architecture=False, alibi=False)), False),
        ("deepseek_v3", "latent (MLA) + mixture-of-experts", _causal(tf.DeepseekV3Config(
            **_LM, **mla, q_lora_rank=32)), False),
        ("mistral", "sliding window", _causal(tf.MistralConfig(
            **_LM, num_key_value_heads=2, sliding_window=WINDOW)), False),
        ("gemma2", "hybrid local/global", _causal(tf.Gemma2Config(**_LM, **sliding, head_dim=16)), False),
        ("mixtral", "mixture-of-experts", _causal(tf.MixtralConfig(
            **_LM, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)), False),
        ("qwen3_moe", "mixture-of-experts", _causal(tf.Qwen3MoeConfig(
            **_LM, num_key_value_heads=2, head_dim=16, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, decoder_sparse_step=1)), False),
        ("mamba", "state-space", _causal(tf.MambaConfig(
            vocab_size=VOCAB, hidden_size=64, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4)), False),
        ("jamba", "state-space hybrid + mixture-of-experts", _causal(tf.JambaConfig(
            **_LM, num_key_value_heads=2, num_experts=2, num_experts_per_tok=1, expert_layer_period=2,
            expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_d_conv=4,
            mamba_expand=2, use_mamba_kernels=False)), False),
        ("t5", "encoder-decoder", _seq2seq(tf.T5Config(
            vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
            decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)), False),
        # --- held out: one per kind, used only for the final checks ---
        ("gpt_neox", "multi-head", _causal(tf.GPTNeoXConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=128, bos_token_id=1, eos_token_id=1)), True),
        ("gpt_bigcode", "multi-query", _causal(tf.GPTBigCodeConfig(
            vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128, multi_query=True,
            bos_token_id=1, eos_token_id=1)), True),
        ("deepseek_v2", "latent (MLA) + mixture-of-experts", _causal(tf.DeepseekV2Config(
            **_LM, **mla, q_lora_rank=None)), True),
        ("cohere2", "hybrid local/global", _causal(tf.Cohere2Config(
            **_LM, **sliding, bos_token_id=1, eos_token_id=1)), True),
        ("qwen2_moe", "mixture-of-experts", _causal(tf.Qwen2MoeConfig(
            **_LM, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=32)), True),
        ("bamba", "state-space hybrid", _causal(tf.BambaConfig(
            **_LM, num_key_value_heads=2, attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=32, mamba_n_groups=1,
            mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16)), True),
        ("whisper", "encoder-decoder", _seq2seq(tf.WhisperConfig(
            vocab_size=VOCAB, num_mel_bins=8, encoder_layers=2, decoder_layers=2, d_model=64,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
            max_source_positions=16, max_target_positions=128, decoder_start_token_id=1, pad_token_id=0,
            eos_token_id=2, bos_token_id=1, begin_suppress_tokens=None, suppress_tokens=None),
            tf.AutoModelForSpeechSeq2Seq), True),
    ]
    # fmt: on


def families(which: str = "all") -> list[Family]:
    """The zoo's families: ``"build"``, ``"held_out"`` or ``"all"``, in a fixed order."""
    rows = [Family(*row) for row in _configs()]
    if which == "all":
        return rows
    keep = {"build": False, "held_out": True}[which]
    return [f for f in rows if f.held_out == keep]


def encoder_inputs(model: torch.nn.Module, batch: int, length: int = 12) -> dict[str, torch.Tensor]:
    """The encoder's input of an encoder-decoder: token ids, or Whisper's fixed-length features."""
    config = model.config
    device = next(model.parameters()).device
    if model.main_input_name == "input_features":
        # Whisper's encoder takes exactly 2 * max_source_positions frames
        return {
            "input_features": torch.randn(batch, config.num_mel_bins, 2 * config.max_source_positions, device=device)
        }
    return {"input_ids": torch.randint(2, config.vocab_size, (batch, length), device=device)}


BUILD = [f.name for f in families("build")]
HELD_OUT = [f.name for f in families("held_out")]


@pytest.fixture(autouse=True)
def quiet_transformers():
    """transformers' warnings off for a test (tiny random configs warn about token ids)."""
    level = tf.logging.get_verbosity()
    tf.logging.set_verbosity_error()
    yield
    tf.logging.set_verbosity(level)
