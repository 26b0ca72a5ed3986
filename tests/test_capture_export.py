"""The ``export`` capture tier: models symbolic tracing cannot handle, module attribution,
repeated calls, Hugging Face transformers from small configs (no network)."""

from __future__ import annotations

import contextlib
import operator

import pytest
import torch
import torch.nn as nn
from reference import assert_same_state, reference_flops, state_fingerprint
from test_meta import _tiny_llama

import fxinspect
from fxinspect.capture import MODULE_KEY, FlatInputs, capture, module_of
from fxinspect.capture.exported import trace_export
from fxinspect.capture.hf import prepare_inputs
from fxinspect.run.graphs import op_nodes


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


class RowLoop(nn.Module):
    """Loops over a tensor dimension and assigns into a tensor: symbolic tracing fails
    in the model's own forward (``range()`` of a Proxy)."""

    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2, bias=False)

    def forward(self, x):  # x: (3, 5, 8)
        out = x.new_zeros(x.shape[0], x.shape[1], 4)
        for i in range(x.shape[0]):
            out[i] = self.block(x[i])
        return self.head(out)


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(4, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        return self.out(self.shared(self.shared(x)))


class NoGradInside(nn.Module):
    """A ``torch.no_grad()`` region inside forward: export wraps it in a sub-graph."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(4, 4)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            g = torch.sigmoid(self.gate(x))
        return self.fc(x) * g


class Keywords(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, mask=None, scale=1.0, flag=True):
        y = self.fc(x) * scale
        if mask is not None:
            y = y * mask
        return {"y": y, "n": x.shape[0], "flag": flag}


def _ops(cap):
    return op_nodes(cap.graph_module.graph)


# ------------------------------------------------------------------ untraceable models


def test_symbolic_fails_then_export_captures_with_module_paths_and_exact_macs():
    torch.manual_seed(0)
    model, x = RowLoop(), torch.randn(3, 5, 8)
    report = fxinspect.analyze(model, x, timing=False)
    assert report.capture.method == "export"
    assert [tier for tier, _ in report.capture.failures] == ["symbolic"]
    # block.fc: 5 * 8 * 4 = 160 per row, 3 rows = 480 ; head: 3 * 5 * 4 * 2 = 120
    assert report.modules["block.fc"].macs == 480
    assert report.modules["head"].macs == 120
    assert report.totals.macs == 600
    assert 2 * report.totals.macs == reference_flops(model, (x,))
    assert report.modules["block"].calls == report.modules["block.fc"].calls == 3
    assert report.modules["head"].calls == report.modules[""].calls == 1
    linears = [n for n in report.nodes if n.label == "linear"]
    assert [n.module_path for n in linears] == ["block.fc"] * 3 + ["head"]
    assert {n.module_type for n in linears} == {"Linear"}
    relus = [n for n in report.nodes if n.label == "relu"]
    assert [(n.module_path, n.module_type) for n in relus] == [("block", "Block")] * 3


def test_graph_module_returns_the_output_leaves():
    torch.manual_seed(0)
    model, x = RowLoop(), torch.randn(3, 5, 8)
    cap = trace_export(model, FlatInputs.build((x,), {}))
    (out,) = cap.graph_module(x)
    torch.testing.assert_close(out, model(x))
    assert cap.method == "export" and cap.attr_prefix == ""
    # attribute reads use the model's own names and tensors
    attrs = {str(n.target) for n in cap.graph_module.graph.nodes if n.op == "get_attr"}
    assert attrs == {"block.fc.weight", "block.fc.bias", "head.weight"}
    assert cap.graph_module.get_parameter("head.weight") is model.head.weight
    # every op node is tagged, and every path is a module of the user's model
    modules = dict(model.named_modules())
    for node in _ops(cap):
        path, mtype = node.meta[MODULE_KEY]
        assert type(modules[path]).__name__ == mtype, node.name
    # export's guard call and metadata assertions are gone
    assert not [n for n in cap.graph_module.graph.nodes if n.op == "call_module"]


def test_export_takes_no_stack_traces_and_puts_the_setting_back():
    """Nothing reads export's per-node Python stacks (a tenth of a large export): they are
    not taken, and torch's own setting is as it was afterwards, after a failure too."""
    assert torch.fx.config.do_not_emit_stack_traces is False
    cap = trace_export(RowLoop(), FlatInputs.build((torch.randn(3, 5, 8),), {}))
    assert [n.name for n in _ops(cap) if n.meta.get("stack_trace")] == []
    assert torch.fx.config.do_not_emit_stack_traces is False

    class Fails(nn.Module):
        def forward(self, x):
            raise ValueError("the user's own error")

    with pytest.raises(ValueError, match="the user's own error"):
        trace_export(Fails(), FlatInputs.build((torch.randn(2),), {}))
    assert torch.fx.config.do_not_emit_stack_traces is False


def test_module_called_twice_counts_two_calls_and_owns_both():
    x = torch.randn(2, 4)
    cap = trace_export(Twice(), FlatInputs.build((x,), {}))
    assert cap.calls["shared"] == 2 and cap.calls["out"] == 1 and cap.calls[""] == 1
    shared = [n for n in _ops(cap) if module_of(n)[0] == "shared"]
    assert [n.target for n in shared] == [torch.ops.aten.linear.default] * 2
    assert shared[0] is not shared[1]
    report = fxinspect.analyze(Twice(), x, method="export", timing=False)
    assert report.modules["shared"].calls == 2
    # shared: 2 calls * 2 * 4 * 4 = 64 ; out: 2 * 4 * 1 = 8
    assert (report.modules["shared"].macs, report.modules["out"].macs, report.totals.macs) == (64, 8, 72)


@pytest.mark.parametrize(
    "model, x",
    [
        (nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(4, 16)),
        (nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()), torch.randn(2, 3, 8, 8)),
    ],
    ids=["mlp", "conv_bn"],
)
def test_forced_export_on_a_traceable_model(model, x):
    report = fxinspect.analyze(model.eval(), x, method="export", timing=False)
    assert report.capture.method == "export" and report.capture.failures == ()
    assert 2 * report.totals.macs == reference_flops(model, (x,))
    assert all(n.module_path != "" for n in report.nodes if n.is_op)


def test_model_left_untouched_in_train_mode():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.ReLU()).train()
    before = state_fingerprint(model)
    report = fxinspect.analyze(model, torch.randn(2, 3, 8, 8), method="export", timing=False)
    assert_same_state(before, state_fingerprint(model))
    # 2 * 6 * 6 output positions * 4 channels * 3 * 3 * 3 = 7776
    assert report.totals.macs == 7776


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_grad_mode_region_is_inlined(grad):
    torch.manual_seed(0)
    model, x = NoGradInside(), torch.randn(2, 4, requires_grad=True)
    with torch.set_grad_enabled(grad):
        cap = trace_export(model, FlatInputs.build((x,), {}))
        (out,) = cap.graph_module(x)
        torch.testing.assert_close(out, model(x))
        assert out.requires_grad == grad
        report = fxinspect.analyze(model, x, method="export", timing=False)
    assert not [n for n in cap.graph_module.graph.nodes if isinstance(n.target, torch._ops.HigherOrderOperator)]
    assert [module_of(n)[0] for n in _ops(cap) if n.target == torch.ops.aten.linear.default] == ["gate", "fc"]
    assert [module_of(n)[0] for n in _ops(cap) if n.target == torch.ops.aten.sigmoid.default] == [""]
    # gate and fc: 2 * 4 * 4 = 32 each
    assert report.totals.macs == 64


class Constants(nn.Module):
    """A tensor made in forward, a non-persistent buffer, a plain tensor attribute, an
    autocast region and a module the model does not register (held in a list)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("shift", torch.ones(4), persistent=False)
        self.plain = torch.full((4,), 3.0)
        self.hidden = [nn.Linear(4, 4)]

    def forward(self, x):
        y = self.fc(x) * torch.tensor([2.0]) + self.shift + self.plain
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = self.fc(y)
        return self.hidden[0](z.float())


def test_constants_autocast_and_unregistered_modules():
    torch.manual_seed(0)
    model, x = Constants(), torch.randn(2, 4)
    cap = trace_export(model, FlatInputs.build((x,), {}, model.forward))
    (out,) = cap.graph_module(x)
    torch.testing.assert_close(out, model(x))
    assert out.dtype == torch.float32
    assert any("autocast" in note for note in cap.notes)
    linears = [module_of(n)[0] for n in _ops(cap) if n.target == torch.ops.aten.linear.default]
    assert linears == ["fc", "fc", ""]  # export does not see the unregistered Linear: the root ran it
    assert cap.calls["fc"] == 2
    report = fxinspect.analyze(model, x, method="export", timing=False)
    # three linears: 2 * 4 * 4 = 32 each
    assert report.totals.macs == 96


def test_keyword_inputs_get_readable_names_and_constants_are_baked_in():
    torch.manual_seed(0)
    model = Keywords()
    x, mask = torch.randn(2, 4), torch.ones(2, 4)
    inputs = FlatInputs.build((x,), {"mask": mask, "scale": 2.0, "flag": False}, model.forward)
    cap = trace_export(model, inputs)
    assert [n.name for n in cap.graph_module.graph.nodes if n.op == "placeholder"] == ["x", "mask"]
    y, n, flag = cap.graph_module(x, mask)
    torch.testing.assert_close(y, model(x, mask=mask, scale=2.0)["y"])
    assert (n, flag) == (2, False)
    assert torch.utils._pytree.tree_unflatten([y, n, flag], cap.out_spec).keys() == {"y", "n", "flag"}
    assert not [n for n in cap.graph_module.graph.nodes if n.op == "call_function" and n.target is operator.getitem]


# ------------------------------------------------------------------ Hugging Face


def _hf(name: str):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if name == "bert":
        config = transformers.BertConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
        )
        return transformers.BertModel(config).eval()
    config = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("name", ["bert", "gpt2"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_hugging_face_macs_match_flopcountermode(name, grad):
    model = _hf(name)
    ids = torch.randint(0, 100, (2, 8))
    with torch.set_grad_enabled(grad):
        report = fxinspect.analyze(model, ids, method="export", timing=False)
        expected = reference_flops(model, (ids,), {"use_cache": False})
    assert report.capture.method == "export"
    assert any("use_cache=False" in note for note in report.capture.notes)
    assert 2 * report.totals.macs == expected
    assert not report.uncounted
    ops = [n for n in report.nodes if n.is_op]
    # attention-mask preparation runs in the root; the layers own the rest
    assert sum(n.module_path != "" for n in ops) / len(ops) > 0.7
    layer = "encoder.layer.1" if name == "bert" else "transformer.h.1"
    assert report.modules[layer].calls == 1 and report.modules[layer].macs > 0


def test_hugging_face_output_leaves_match_the_model():
    model = _hf("gpt2")
    ids = torch.randint(0, 100, (2, 8))
    args, kwargs, notes = prepare_inputs(model, (ids,), {})
    cap = trace_export(model, FlatInputs.build(args, kwargs, model.forward))
    (logits,) = cap.graph_module(ids)
    torch.testing.assert_close(logits, model(ids, use_cache=False).logits)
    assert (
        type(torch.utils._pytree.tree_unflatten([logits], cap.out_spec)).__name__ == "CausalLMOutputWithCrossAttentions"
    )


# ------------------------------------------------------------------ prepare_inputs


class FakeHF(nn.Module):
    config = object()

    def forward(self, input_ids, attention_mask=None, use_cache=None):
        return input_ids


class NoConfig(nn.Module):
    def forward(self, input_ids, use_cache=None):
        return input_ids


@pytest.mark.parametrize(
    "model, args, kwargs, expected",
    [
        (FakeHF(), ("ids",), {}, {"use_cache": False}),
        (FakeHF(), ("ids",), {"use_cache": True}, {"use_cache": True}),  # the user's choice stays
        (FakeHF(), ("ids", None, True), {}, {}),  # given by position
        (NoConfig(), ("ids",), {}, {}),  # not a transformers-style model
        (nn.Linear(2, 2), ("x",), {}, {}),
    ],
    ids=["added", "kept", "positional", "no_config", "plain"],
)
def test_prepare_inputs(model, args, kwargs, expected):
    new_args, new_kwargs, notes = prepare_inputs(model, args, kwargs)
    assert new_args == args and new_kwargs == expected
    assert bool(notes) == (expected != kwargs)


@pytest.mark.parametrize("method", ["auto", "export"])
def test_use_cache_note_whatever_tier_runs(method):
    model = _hf("gpt2")
    cap = capture(model, (torch.randint(0, 100, (1, 4)),), {}, method=method)
    assert cap.notes[0].startswith("passed use_cache=False")
    assert cap.inputs.kwargs == {"use_cache": False}


def _is_checkpoint_node(n) -> bool:
    return n.name.startswith(("checkpoint", "end_checkpoint"))


def test_checkpointed_hugging_face_blocks_keep_their_breakdown_and_recomputation():
    """export keeps transformers' checkpoints: every op a node of its module, as without
    checkpointing, and the program frees and recomputes what the checkpoints do."""
    from reference import CUSTOM
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=128)
    model = GPT2LMHeadModel(config).train()
    inputs = {"input_ids": torch.randint(0, 128, (2, 16)), "use_cache": False}
    options = dict(timing=False, backward=True, loss_fn=lambda out: out.logits.sum(), measure_memory=True)
    plain = fxinspect.analyze(model, inputs, **options)
    # (the CPU RNG state checkpoint keeps per block is outside the tensor model: see test_memory)
    model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False, "preserve_rng_state": False}
    )
    kept = fxinspect.analyze(model, inputs, **options)
    eager = fxinspect.analyze(model, inputs, method="eager", **options)
    assert model.transformer.gradient_checkpointing  # (left as it was)
    assert plain.capture.method == kept.capture.method == "export" and not kept.capture.lost_checkpoints
    assert any("checkpoint kept for 'transformer.h.0', 'transformer.h.1'" in n for n in kept.capture.notes)
    # the forward: node for node (but the 2 blocks' enter and leave nodes) and module for module
    ops = [(n.name, n.module_path, n.flops, n.bytes_read, n.bytes_written) for n in kept.nodes if n.is_op]
    assert [o for o, n in zip(ops, [n for n in kept.nodes if n.is_op]) if not _is_checkpoint_node(n)] == [
        (n.name, n.module_path, n.flops, n.bytes_read, n.bytes_written) for n in plain.nodes if n.is_op
    ]
    assert len(ops) == len([n for n in plain.nodes if n.is_op]) + 2 * 2
    assert {p: m.flops for p, m in kept.modules.items()} == {p: m.flops for p, m in plain.modules.items()}
    assert kept.node("checkpoint").module_path == "transformer.h.0"
    # memory: what the allocator saw running the same program (to 0.1 %), far below the plain one
    assert kept.memory.saved < plain.memory.saved / 5
    for r in (plain, kept):
        assert abs(r.memory.peak - r.memory.measured_peak) <= 0.001 * r.memory.measured_peak
        assert abs(r.memory.forward_peak - r.memory.measured_forward_peak) <= 0.001 * r.memory.measured_forward_peak
    # the backward recomputes the blocks: FlopCounterMode over the model's own checkpointed step
    with FlopCounterMode(display=False, custom_mapping=CUSTOM) as forward:
        out = model(**inputs).logits
    with FlopCounterMode(display=False, custom_mapping=CUSTOM) as backward:
        out.sum().backward()
    model.zero_grad(set_to_none=True)
    assert 2 * kept.totals.macs == forward.get_total_flops()
    assert 2 * kept.totals.backward_macs == backward.get_total_flops() > 2 * plain.totals.backward_macs
    assert any("torch.utils.checkpoint ran for 'transformer.h.0'" in n for n in eager.capture.notes)
    # on the meta device the same program, the same figures (a capture that runs the model's
    # own code instead sees transformers build a causal mask there: 2*1*16*16 bool = 512 B more)
    with torch.device("meta"):
        on_meta = GPT2LMHeadModel(config).train()
    on_meta.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = {"input_ids": torch.zeros(2, 16, dtype=torch.long, device="meta"), "use_cache": False}
    meta = fxinspect.analyze(on_meta, ids, **{**options, "measure_memory": False}).memory
    assert (meta.forward_peak, meta.peak, meta.saved) == (kept.memory.forward_peak, kept.memory.peak, kept.memory.saved)


def test_checkpoints_are_watched_on_a_torch_without_its_common_entry(monkeypatch):
    """Before torch.utils.checkpoint._checkpoint_impl, the reentrant Function is watched instead."""
    from torch.utils.checkpoint import CheckpointFunction

    from fxinspect.capture.kept import checkpoints_traced_through

    model = nn.Sequential(nn.Linear(4, 4))
    monkeypatch.delattr(torch.utils.checkpoint, "_checkpoint_impl")
    with checkpoints_traced_through(model) as seen:
        assert "apply" in vars(CheckpointFunction)
        CheckpointFunction.apply(model[0], True, torch.randn(2, 4, requires_grad=True))
    assert seen == ["'0'"] and "apply" not in vars(CheckpointFunction)  # the inherited apply is back


class _RMSNorm(nn.Module):
    """Llama's RMSNorm: its first op returns its input itself when nothing changes."""

    def __init__(self, width: int, first):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.first = first

    def forward(self, x):
        x = self.first(x)
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class _Residual(nn.Module):
    def __init__(self, first):
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.norm = _RMSNorm(8, first)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.pre(x)
        return h + self.fc(self.norm(h))  # the skip connection runs around the norm


@pytest.mark.parametrize(
    "first",
    [
        lambda x: x.to(torch.float32),  # returns x itself: the traced add read the `to`
        lambda x: x.contiguous(),  # the same
        lambda x: x.type_as(x),  # the same
        lambda x: x.to(torch.float32, copy=True),  # a copy: the traced add read `pre` already
    ],
    ids=["to", "contiguous", "type_as", "copy"],
)
def test_an_edge_follows_the_value_through_an_op_that_returns_its_argument(first):
    model = _Residual(first)
    x = torch.randn(2, 8)
    r = fxinspect.analyze(model, x, method="export", timing=False, memory=False)
    g = r.to_networkx(by="module")
    assert g.has_edge("pre", "") and not g.has_edge("norm", "")  # pre -> add, the norm only feeds fc
    assert set(g.successors("norm")) == {"fc"}
    add = next(n for n in r.nodes if n.target == "aten.add.Tensor" and n.module_path == "")
    assert r.node(add.args[0]).module_path == "pre"
    first_op = next(n for n in r.nodes if n.module_path == "norm" and n.is_op)
    assert first_op.args == (add.args[0],)  # the no-op stays in the norm, reading pre's output
    # the program still computes the model's output (the op returned that very tensor)
    gm = capture(model, (x,), {}, method="export").graph_module
    torch.testing.assert_close(gm(x)[0], model(x))


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_llama_residual_edges_skip_the_norms(device):
    """Every Llama block: the residual add reads the block's input, not the norm's `to`."""
    model = _tiny_llama(device).model  # (its LlamaModel; on meta the capture runs under the analysis's fake mode)
    ids = torch.randint(0, 128, (1, 8), device=device)
    r = fxinspect.analyze(model, ids, timing=False, memory=False)
    assert r.capture.method == "export"
    g = r.to_networkx(by="module")
    # the first residual add (in layers.i) reads what entered input_layernorm: the
    # embedding for layer 0, the previous layer's last add for layer 1
    assert g.has_edge("embed_tokens", "layers.0") and g.has_edge("layers.0", "layers.1")
    for i in range(2):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            assert not g.has_edge(f"layers.{i}.{norm}", f"layers.{i}")
    assert set(g.successors("layers.0.input_layernorm")) == {f"layers.0.self_attn.{p}_proj" for p in "qkv"}


class _Checkpointed(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.pre = nn.Linear(4, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.options = options

    def forward(self, x):
        h = self.pre(x)
        return h + torch.utils.checkpoint.checkpoint(self.block, h, **self.options)


@pytest.mark.parametrize(
    "options, kept",
    [
        ({"use_reentrant": False}, True),
        ({"use_reentrant": False, "preserve_rng_state": False, "early_stop": False}, True),
        ({"use_reentrant": True}, False),  # export records it under no_grad: nothing to keep
        ({"use_reentrant": False, "context_fn": lambda: (contextlib.nullcontext(), contextlib.nullcontext())}, False),
    ],
    ids=["plain", "options", "reentrant", "context_fn"],
)
def test_export_keeps_the_checkpoints_it_can_and_names_the_others(options, kept):
    cap = capture(_Checkpointed(**options), (torch.randn(2, 4),), {}, method="export")
    names = [n.name for n in cap.graph_module.graph.nodes if n.op == "call_function"]
    assert ("checkpoint" in names and "end_checkpoint" in names) == kept
    assert cap.lost_checkpoints == (() if kept else ("'block'",))


@pytest.mark.parametrize("method", ["symbolic", "export"])
def test_a_graph_module_with_kept_checkpoints_runs_itself(method):
    """The capture's module computes the model's output (fx's code generation once called
    torch.utils.checkpoint.checkpoint in place of the node's own target)."""
    model = _Checkpointed(use_reentrant=False)
    x = torch.randn(2, 4)
    gm = capture(model, (x,), {}, method=method).graph_module
    torch.testing.assert_close(gm(x)[0], model(x))


class _MaybeCheckpointed(_Checkpointed):
    """``_Checkpointed``, its block called plainly when given no options."""

    def forward(self, x):
        h = self.pre(x)
        return h + (torch.utils.checkpoint.checkpoint(self.block, h, **self.options) if self.options else self.block(h))


def _small_checkpointed():
    torch.manual_seed(0)
    model, x = _MaybeCheckpointed(), torch.randn(2, 4)
    return model, (x,), lambda: setattr(model, "options", {"use_reentrant": False})


def _bert_checkpointed():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    model = BertModel(config).train()
    enable = lambda: model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})  # noqa: E731
    return model, {"input_ids": torch.randint(0, 128, (2, 16))}, enable


@pytest.mark.parametrize(
    "make",
    [_small_checkpointed, _bert_checkpointed],  # (symbolic traces a checkpointed BertModel, not a plain one)
    ids=["checkpoint in a forward", "BertModel"],
)
def test_auto_prefers_a_capture_that_breaks_checkpointed_modules_down(make):
    """A tier that keeps a checkpoint as one node (symbolic) hides the module's ops: auto
    takes export's, which keeps the same checkpoint with every op a node of its module."""
    model, inputs, enable_checkpointing = make()
    options = dict(timing=False, backward=True, loss_fn=lambda out: out[0].sum(), memory=False)
    plain = fxinspect.analyze(model, inputs, **options)
    enable_checkpointing()
    kept = fxinspect.analyze(model, inputs, **options)
    assert kept.capture.method == "export" and not kept.capture.lost_checkpoints
    assert any("kept the checkpoints of" in reason for _, reason in kept.capture.failures)
    # node for node and module for module as without checkpointing (symbolic's capture had
    # one node per checkpointed module and none of its submodules)
    ops = [(n.module_path, n.flops) for n in kept.nodes if n.is_op and "checkpoint" not in n.name]
    assert ops == [(n.module_path, n.flops) for n in plain.nodes if n.is_op]
    assert {p: m.flops for p, m in kept.modules.items()} == {p: m.flops for p, m in plain.modules.items()}


# --- fake kernels: what the device's kernel takes -------------------------------------------

G_OFFS = torch.tensor([2, 3, 6], dtype=torch.int32)  # 3 groups: rows (or the contraction) cut at 2, 3, 6


def _column_major(*shape: int) -> torch.Tensor:
    """A matrix (or a batch of them) stored column-major, as transformers hands the CPU
    kernel its experts' (out, in) weights transposed."""
    return torch.randn(*shape[:-2], shape[-1], shape[-2]).transpose(-2, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "a, b, offs",
    [
        ((6, 8), (3, 8, 5), G_OFFS),  # rows split among 3 (8, 5) matrices: transformers' experts
        ((3, 6, 8), (3, 8, 5), None),  # a batched matmul
        ((6, 8), (8, 5), G_OFFS),  # the contraction split (its first 6): one (6, 5) output per group
    ],
    ids=["2d-3d", "3d-3d", "2d-2d"],
)
def test_a_fake_cpu_grouped_matmul_has_the_output_the_cpu_kernel_allocates(a, b, offs, dtype):
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fxinspect.capture.fake_kernels import device_fake_kernels

    mat_a, mat_b = torch.randn(*a, dtype=dtype), _column_major(*b).to(dtype)
    real = torch._grouped_mm(mat_a, mat_b, offs)
    mode = FakeTensorMode()
    fakes = [mode.from_tensor(t) if t is not None else None for t in (mat_a, mat_b, offs)]
    with device_fake_kernels(), mode:
        fake = torch._grouped_mm(*fakes)
    # the CPU kernel pads each output row to 16 bytes: 5 columns -> 8 (4 B or 2 B each)
    assert (fake.shape, fake.stride(), fake.dtype) == (real.shape, real.stride(), real.dtype)
    assert real.stride()[-2] == 8
    if dtype is torch.float32:  # torch's meta kernel takes the CUDA kernel's dtypes only, again after the context
        with mode, pytest.raises(RuntimeError, match="BFloat16"):
            torch._grouped_mm(*fakes)


class _GroupedExperts(nn.Module):
    """Rows of ``x`` split among 3 experts' weights by a float32 grouped matmul on CPU,
    under ``torch.export`` another computation (as transformers' experts switch op)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 5, 8))  # (experts, out, in), used transposed

    def forward(self, x, offs):
        if torch.compiler.is_compiling():
            return torch.cat([x, x]) @ self.weight[0].T
        return torch._grouped_mm(x, self.weight.transpose(-2, -1), offs) * 2


def test_export_takes_the_eager_branch_of_a_float32_grouped_matmul_on_cpu():
    model, x = _GroupedExperts(), torch.randn(6, 8)
    cap = capture(model, (x, G_OFFS), {}, method="export")
    ops = [n for n in cap.graph_module.graph.nodes if n.op == "call_function"]
    assert [str(n.target) for n in ops] == ["aten.transpose.int", "aten._grouped_mm.default", "aten.mul.Tensor"]
    assert not any("eager branches" in note for note in cap.notes)
    out = ops[1].meta["val"]
    assert (tuple(out.shape), out.stride()) == ((6, 5), (8, 1))  # 5 float32 columns padded to 16 B
    report = fxinspect.analyze(model, (x, G_OFFS), method="export", timing=False)
    assert report.totals.macs == 6 * 8 * 5  # each of the 6 rows meets one expert's (8, 5) weight
