"""The command line's ``--generate``, end to end, in-process, on tiny Llama configurations."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
import torch

from fxinspect.cli import main
from fxinspect.views.explorer.pack import unpack

# 2 layers, 4 heads of 64 / 4 = 16, 2 kv heads, vocab 128
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
}


def test_cli_generates_from_a_config_json_and_writes_the_figures(tmp_path, capsys):
    config = tmp_path / "config.json"  # as a model's page on the Hub has it: no download
    config.write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"], **TINY}))
    out, png = tmp_path / "gen.json", tmp_path / "gen.png"
    argv = [str(config), "--generate", "--batch", "2", "--prompt", "16", "--new-tokens", "8", "--dtype", "bfloat16"]
    code = main([*argv, "--device-spec", "h100-sxm", "--budget", "10MiB", "--json", str(out), "--png", str(png)])
    text = capsys.readouterr().out
    assert code == 0
    figures = json.loads(out.read_text())
    # 2 layers * 2 kv heads * 16 head_dim * (key + value) * 2 B (bfloat16)
    assert figures["kv_bytes_per_token"] == 2 * 2 * 16 * 2 * 2 == 256
    # embedding and lm_head 128*64 each; a layer: q, o 64*64, k, v 64*32, MLP 3*64*128, 2 norms of 64;
    # the final norm 64: 90,432 parameters at 2 B, + the rotary inv_freq and its original copy, 8 values
    # each, cast to bfloat16 as model.to(torch.bfloat16) casts them
    params = 2 * 128 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64
    assert figures["weights_bytes"] == params * 2 + 2 * 8 * 2 == 180_896
    assert [s["context"] for s in figures["decode"]] == [16, 22]  # the first and last steps: 16 + 8 - 2
    assert (
        figures["peak"]["weights"] + figures["peak"]["kv_cache"] + figures["peak"]["activations"]
        == (figures["peak"]["bytes"])
    )
    assert figures["ttft"] > 0 and figures["tpot"] > 0
    assert "KV cache: 256 B per token per sequence" in text and "on h100-sxm" in text
    assert f"within 10MiB: at most {figures['max_batch']} sequences of 16 + 8 tokens" in text
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert figures["max_batch"] > 2 and figures["max_context"] > 16 + 8  # (10 MiB; batch 2 peaks under 1 MiB)


def test_cli_generates_from_a_config_class_at_the_dtype_given(capsys):
    argv = ["transformers:LlamaConfig", "--config", json.dumps(TINY), "--generate", "--prompt", "4", "--new-tokens"]
    assert main([*argv, "2", "--dtype", "float16", "--no-timing"]) == 0
    text = capsys.readouterr().out
    # 2 layers * 2 kv heads * 16 * 2 * 2 B (float16); no device spec: no times
    assert "batch 1, prompt 4, 2 new tokens\n" in text and "KV cache: 256 B per token" in text
    assert "TTFT" not in text


LLAMA = ["transformers:LlamaConfig", "--config", json.dumps(TINY)]


@pytest.mark.parametrize(
    "argv, message",
    [
        ([*LLAMA, "--input", "input_ids=1,8", "--batch", "2"], "--batch go with --generate"),
        ([*LLAMA, "--generate", "--input", "input_ids=1,8"], "--input does not go with --generate"),
        ([*LLAMA, "--generate", "--backward"], "--backward does not go with --generate"),
        ([*LLAMA, "--generate", "--no-memory"], "--no-memory does not go with --generate"),
        ([*LLAMA, "--generate", "--sweep", "1,2"], "--sweep does not go with --generate"),
        ([*LLAMA, "--generate", "--dtype", "int64"], "--dtype int64 does not go with --generate"),
        ([*LLAMA, "--generate", "--new-tokens", "0"], "expected a number >= 1"),
        ([*LLAMA, "--generate", "--prompt", "many"], "expected a number of tokens or sequences"),
        ([*LLAMA, "--generate", "--budget", "80 gigs"], "budget expects bytes"),
    ],
)
def test_cli_generation_options_are_checked_before_the_model_is_built(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"model_type": "lama"}', "a model_type transformers knows, got model_type 'lama' (did you mean 'llama'?)"),
        ('{"hidden_size": 8}', "got no model_type"),
        ("{hidden", "is not JSON"),
        ('{"model_type": "vit"}', "ViTConfig has no generative model in transformers"),
    ],
)
def test_cli_a_config_file_that_names_no_generative_model_is_a_one_line_error(content, message, tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(content)
    assert main([str(config), "--generate"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


class _Page(HTMLParser):
    """An HTML page's elements, checked to nest, and its scripts' text by id."""

    def __init__(self, text: str):
        super().__init__()
        self.open, self.scripts, self.at = [], {}, None
        self.feed(text)
        self.close()
        assert self.open == [], f"elements left open: {self.open}"

    def handle_starttag(self, tag, attrs):
        if tag not in _VOID:
            self.open.append(tag)
        if tag == "script":
            self.at = dict(attrs).get("id")

    def handle_endtag(self, tag):
        assert self.open.pop() == tag, f"</{tag}> closes another element"
        self.at = None

    def handle_data(self, data):
        if self.at is not None:
            self.scripts[self.at] = self.scripts.get(self.at, "") + data


_VOID = {"meta", "input", "br", "img", "link", "hr"}


def test_cli_html_writes_the_explorer_of_the_prefill_and_of_the_last_decode_step(tmp_path, capsys):
    import transformers

    import fxinspect

    path = tmp_path / "gen.html"
    argv = [*LLAMA, "--generate", "--batch", "2", "--prompt", "16", "--new-tokens", "8", "--no-timing"]
    assert main([*argv, "--html", str(path)]) == 0
    decode = tmp_path / "gen.decode.html"  # (its name: the page's stem, .decode)
    assert f"the prefill in {path}, the last decode step (at 22 tokens cached) in {decode}" in capsys.readouterr().out
    pages = {name: _Page(p.read_text(encoding="utf-8")) for name, p in (("prefill", path), ("decode", decode))}
    data = {name: unpack(json.loads(page.scripts["fxinspect-data"])) for name, page in pages.items()}
    # the same generation through the API: each page holds every op of its report
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY))
    gen = fxinspect.generation(model.eval(), batch=2, prompt=16, new_tokens=8, timing=False)
    for name, report in (("prefill", gen.prefill), ("decode", gen.decode_step(22))):
        ops = [n["name"] for n in data[name]["nodes"] if n["kind"] == "op"]
        assert ops == [n.name for n in report.nodes if n.is_op] and len(ops) > 20, name
    # the prefill's keys: 2 sequences, 2 kv heads, 16 tokens of 16; the last step's (context 16 + 8 - 2
    # = 22) grow its cache of 22 by one token
    shapes = {name: {n["shape"] for n in d["nodes"]} for name, d in data.items()}
    assert "2×2×16×16" in shapes["prefill"] and "2×2×23×16" in shapes["decode"]
    assert "2×2×23×16" not in shapes["prefill"]
    assert (
        "prefill of 2 × 16 tokens" in path.read_text() and "decode step of 2 at 22 tokens cached" in decode.read_text()
    )
