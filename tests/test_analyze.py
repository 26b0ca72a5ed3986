"""The core analyzer end to end: exact counts, invariants, the model left untouched."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torchvision
from reference import (
    assert_same_state,
    documented_size,
    published_gmacs,
    reference_flops,
    state_fingerprint,
    unique_param_count,
)

import fxinspect
from fxinspect.records import ModuleRecord
from fxinspect.report import Report

# Small enough for every CI run; the full torchvision sweep is benchmarks/sweep_torchvision.py
# and the slow-marked test in test_sweeps.py.
FAST_MODELS = ["resnet18", "mobilenet_v3_small", "vit_b_16", "efficientnet_b0", "squeezenet1_0"]


def _model(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None)
    size = documented_size(name)
    return model, torch.randn(1, 3, size, size)


def _subtree_sum(report: Report, module: ModuleRecord, field: str) -> int:
    own = sum(getattr(report.node(n), field) for n in module.nodes if report.node(n).module_path == module.path)
    return own + sum(getattr(report.modules[c], field) for c in module.children)


# ------------------------------------------------------------------ exact counts on real models


@pytest.fixture(scope="module")
def eval_report():
    """``(model, x, report)`` of a torchvision model in eval mode analysed under no_grad
    (timing off): each model analysed once for the tests of this module that only read it."""
    made = {}

    def get(name: str) -> tuple[torch.nn.Module, torch.Tensor, Report]:
        if name not in made:
            model, x = _model(name)
            with torch.no_grad():
                made[name] = model.eval(), x, fxinspect.analyze(model.eval(), x, timing=False)
        return made[name]

    return get


@pytest.mark.parametrize("name", FAST_MODELS)
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_torchvision_params_and_macs_match_references(name, grad, eval_report):
    if grad:
        model, x = _model(name)
        report = fxinspect.analyze(model.eval(), x, timing=False)
    else:
        model, x, report = eval_report(name)
    with torch.set_grad_enabled(grad):
        expected = reference_flops(model, (x,))
    assert report.totals.params == unique_param_count(model)
    assert 2 * report.totals.macs == expected
    # our matmul-like FLOPs are exactly 2 * MACs, so the rest of `flops` is elementwise work
    assert report.totals.flops > 2 * report.totals.macs


@pytest.mark.parametrize("name", ["resnet18", "vit_b_16", "mobilenet_v3_small", "squeezenet1_0"])
def test_torchvision_macs_match_published_gmacs(name, eval_report):
    _, _, report = eval_report(name)
    # torchvision publishes GMACs rounded to 3 decimals in weights.meta["_ops"]
    assert round(report.totals.macs / 1e9, 3) == pytest.approx(published_gmacs(name), abs=1e-3)


def test_vit_counts_cpu_attention_that_flopcountermode_misses(eval_report):
    model, x, report = eval_report("vit_b_16")
    plain = torch.utils.flop_counter.FlopCounterMode(display=False)
    with torch.no_grad(), plain:
        model(x)
    # 22.5 GFLOPs uncorrected vs 35.1 GFLOPs: 12 fused attention calls counted as zero there
    assert plain.get_total_flops() < 23e9 < 35e9 < 2 * report.totals.macs < 35.2e9


# ------------------------------------------------------------------ invariants


@pytest.mark.parametrize("name", ["resnet18", "vit_b_16"])
@pytest.mark.parametrize("field", ["flops", "macs", "bytes_read", "bytes_written"])
def test_node_figures_sum_to_modules_at_every_depth(name, field, eval_report):
    _, _, report = eval_report(name)
    assert getattr(report.modules[""], field) == getattr(report.totals, field)
    assert getattr(report.totals, field) == sum(getattr(n, field) for n in report.nodes if n.is_op)
    for module in report.modules.values():
        assert getattr(module, field) == _subtree_sum(report, module, field), module.path
    # every level of the tree partitions the total
    depth = max(m.depth for m in report.modules.values())
    for d in range(depth + 1):
        level = sum(getattr(m, field) for m in report.modules.values() if m.depth == d)
        above = sum(getattr(n, field) for n in report.nodes if n.is_op and _depth(n.module_path) < d)
        assert level + above == getattr(report.totals, field), d


def _depth(path: str) -> int:
    return 0 if not path else path.count(".") + 1


def test_latency_sums_to_modules_and_totals():
    model, x = _model("resnet18")
    with torch.no_grad():
        report = fxinspect.analyze(model.eval(), x, warmup=1, repeats=3)
    ops = [n for n in report.nodes if n.is_op]
    assert all(n.latency is not None and n.latency >= 0 for n in ops)
    assert report.totals.latency == pytest.approx(sum(n.latency for n in ops))
    assert report.modules[""].latency == pytest.approx(report.totals.latency)
    assert report.modules["layer1"].latency == pytest.approx(
        sum(n.latency for n in ops if n.module_path.startswith("layer1."))
    )
    # (whether the per-node times add up to a separately timed plain forward is measured
    # by benchmarks/overhead.py: a wall-clock comparison, not a test)
    assert report.timing.repeats == 3 and report.timing.plain_forward > 0


def test_timing_false_reports_no_latency_never_zero():
    report = fxinspect.analyze(torch.nn.Linear(4, 4), torch.randn(2, 4), timing=False)
    assert report.timing is None and report.totals.latency is None
    assert all(n.latency is None for n in report.nodes)
    assert report.modules[""].latency is None


# ------------------------------------------------------------------ functional ops and sharing


class Functional(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 32))

    def forward(self, x):  # x: (2, 8, 16)
        a = x @ self.w  # (2,8,16)@(16,32): 2*8*16*32 = 8192 MACs
        b = torch.matmul(a, a.transpose(1, 2))  # (2,8,32)@(2,32,8): 2*8*32*8 = 4096 MACs
        c = torch.einsum("bij,bjk->bik", b, a)  # (2,8,8)@(2,8,32): 2*8*8*32 = 4096 MACs
        q = c.view(2, 8, 4, 8).transpose(1, 2)  # (b=2, h=4, s=8, d=8)
        d = F.scaled_dot_product_attention(q, q, q)  # QK^T + AV: 2 * (2*4*8*8*8) = 8192 MACs
        return F.linear(d.transpose(1, 2).reshape(2, 8, 32), self.w)  # 2*8*32*16 = 8192 MACs


def test_functional_matmul_at_sdpa_einsum_are_counted():
    model = Functional()
    x = torch.randn(2, 8, 16)
    with torch.no_grad():
        report = fxinspect.analyze(model, x, timing=False)
        expected = reference_flops(model, (x,))
    assert report.totals.macs == 8192 + 4096 + 4096 + 8192 + 8192  # = 32768
    assert 2 * report.totals.macs == expected
    by_label: dict[str, int] = {}
    for n in report.nodes:
        if n.macs:
            by_label[n.label] = by_label.get(n.label, 0) + n.macs
    assert by_label == {"matmul": 8192 + 4096, "einsum": 4096, "scaled_dot_product_attention": 8192, "linear": 8192}
    assert report.totals.params == 16 * 32


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(100, 16)
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 100, bias=False)
        self.head.weight = self.embed.weight  # tied: one tensor, two names

    def forward(self, ids):
        return self.head(torch.relu(self.body(self.embed(ids))))


def test_tied_weight_counted_once_with_alias():
    model = Tied()
    report = fxinspect.analyze(model, torch.randint(0, 100, (2, 5)), timing=False)
    assert report.totals.params == 100 * 16 + 16 * 16 + 16  # embedding once + body = 1872
    assert unique_param_count(model) == report.totals.params
    assert [(s.name, s.aliases, s.numel) for s in report.shared] == [("embed.weight", ("head.weight",), 1600)]
    assert report.modules["head"].params == 1600 and report.modules["head"].own_params == 0
    assert report.modules["embed"].own_params == 1600
    assert report.modules["head"].macs == 2 * 5 * 16 * 100  # = 16000


def test_frozen_and_buffers_are_separate():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8))
    model[0].weight.requires_grad_(False)
    report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
    assert report.totals.params == 8 * 3 * 3 * 3 + 8 + 8 + 8  # conv w+b, bn w+b = 240
    assert report.totals.trainable_params == 240 - 216
    assert report.totals.frozen_params == 216
    assert report.totals.buffers == 8 + 8 + 1  # running mean, var, num_batches_tracked


# ------------------------------------------------------------------ inputs and outputs


class KeywordModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, pair, mask=None, scale: float = 1.0, flag=False):
        y = self.proj(x) * scale + pair[0] - pair[1]
        if mask is not None:
            y = y * mask
        return {"y": y, "parts": (y.sum(), [y.mean()])}


@pytest.mark.parametrize(
    "inputs, kwargs",
    [
        ((torch.randn(2, 4), (torch.randn(2, 4), torch.randn(2, 4))), None),
        ({"x": torch.randn(2, 4), "pair": [torch.randn(2, 4), torch.randn(2, 4)], "mask": torch.ones(2, 4)}, None),
        ((torch.randn(2, 4),), {"pair": (torch.randn(2, 4), torch.randn(2, 4)), "scale": 2.0, "flag": True}),
    ],
    ids=["positional-nested", "dict", "kwargs"],
)
def test_positional_keyword_and_nested_inputs_and_outputs(inputs, kwargs):
    report = fxinspect.analyze(KeywordModel(), inputs, kwargs=kwargs, timing=False)
    assert report.modules["proj"].macs == 2 * 4 * 4  # = 32
    assert [m.shape for m in report.inputs][:1] == [(2, 4)]
    assert len(report.inputs) == sum(
        isinstance(v, torch.Tensor) for v in torch.utils._pytree.tree_leaves((inputs, kwargs))
    )
    assert [m.shape for m in report.outputs] == [(2, 4), (), ()]  # y, sum, mean: every nested leaf


def test_tensor_input_names_follow_the_signature():
    report = fxinspect.analyze(
        KeywordModel(), {"x": torch.randn(2, 4), "pair": (torch.randn(2, 4), torch.randn(2, 4))}, timing=False
    )
    assert [n.name for n in report.nodes if n.op == "placeholder"] == ["x", "pair_0", "pair_1"]


# ------------------------------------------------------------------ NaN / Inf


class NaNMaker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 4)
        self.fc2 = torch.nn.Linear(4, 2)

    def forward(self, x):
        h = self.fc1(x)
        h = torch.sqrt(h - 100.0)  # every element negative: NaN appears here
        h = torch.relu(h)
        return self.fc2(h)


def test_nan_root_cause_is_the_first_op_that_made_it():
    report = fxinspect.analyze(NaNMaker(), torch.randn(3, 4), timing=False)
    found = report.nonfinite
    assert found is not None
    assert found.root_cause == "sqrt" and found.kind == "nan" and found.module_path == ""
    assert [m.shape for m in found.inputs] == [(3, 4)]
    assert all(m.stats.finite for m in found.inputs) and found.inputs[0].stats.max < 0
    assert found.downstream == ("relu", "fc2")
    assert found.sources == ()
    assert report.node("sqrt").nan_count == 12  # 3*4 elements
    assert report.node("fc1").nan_count == 0


def test_nan_in_a_parameter_is_named_as_source():
    model = NaNMaker()
    with torch.no_grad():
        model.fc2.weight[0, 0] = float("inf")
        model.fc1.bias.fill_(200.0)  # sqrt stays finite now
    report = fxinspect.analyze(model, torch.randn(3, 4), timing=False)
    assert report.nonfinite.sources == ("fc2.weight",)
    assert report.nonfinite.root_cause == "fc2"


def test_check_finite_false_reads_no_values():
    report = fxinspect.analyze(NaNMaker(), torch.randn(3, 4), timing=False, check_finite=False)
    assert report.nonfinite is None
    assert all(n.nan_count is None for n in report.nodes if n.is_op)
    assert all(m.stats is None for n in report.nodes for m in n.outputs)


def test_value_stats_of_outputs():
    x = torch.tensor([[1.0, -2.0, 3.0, 6.0]])
    report = fxinspect.analyze(torch.nn.ReLU(), x, timing=False)
    relu = next(n for n in report.nodes if n.is_op)
    stats = relu.outputs[0].stats
    assert (stats.min, stats.max, stats.mean) == (0.0, 6.0, 2.5)  # relu -> [1, 0, 3, 6]
    assert stats.std == pytest.approx((((1 - 2.5) ** 2 + 2.5**2 + 0.5**2 + 3.5**2) / 4) ** 0.5)  # population std


class WritesInPlace(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        x.add_(100)  # the input, written in place
        y.mul_(-1)  # an output already read, written in place
        return x + y


def test_values_are_reported_as_they_were_before_later_in_place_writes():
    x = torch.tensor([1.0, 2.0, 3.0])
    report = fxinspect.analyze(WritesInPlace(), x, timing=False)
    ranges = {n.name: (n.outputs[0].stats.min, n.outputs[0].stats.max) for n in report.nodes if n.outputs}
    # x = [1, 2, 3]; y = 2x = [2, 4, 6]; x += 100 -> [101, 103]; y *= -1 -> [-6, -2]; x + y = [101-2, 102-4, 103-6]
    assert ranges == {
        "x": (1.0, 3.0),
        "mul": (2.0, 6.0),
        "add_": (101.0, 103.0),
        "mul_": (-6.0, -2.0),
        "add": (97.0, 99.0),
    }


def test_an_input_written_in_place_is_written_once_and_timed_on_copies():
    x = torch.tensor([1.0, 2.0, 3.0])
    report = fxinspect.analyze(WritesInPlace(), x, warmup=2, repeats=3)
    assert x.tolist() == [101.0, 102.0, 103.0]  # once (the counting run), not once per timing run too
    assert any("writes its input(s) x in place" in note and "copies" in note for note in report.capture.notes)
    assert report.timing is not None and report.node("add_").latency > 0
    assert not any("in place" in n for n in fxinspect.analyze(torch.nn.ReLU(), x, timing=False).capture.notes)


@pytest.mark.parametrize("context", ["no_grad", "inference_mode", "grad"])
def test_in_place_activation_keeps_the_value_before_it(context):
    # inference tensors have no version counter and grad-mode outputs are detached first;
    # either way the Linear output is reported as it was before ReLU(inplace=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(inplace=True))
    x = torch.randn(2, 4)
    expected = model[0](x).detach()
    with {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode, "grad": torch.enable_grad}[context]():
        report = fxinspect.analyze(model, x, timing=False)
    linear, relu = (n.outputs[0].stats for n in report.nodes if n.is_op)
    assert (linear.min, linear.max) == (expected.min().item(), expected.max().item()) and linear.min < 0
    assert relu.min == 0.0 and relu.max == expected.max().item()


class _Cloning(torch.fx.Interpreter):
    """fx's own interpreter, keeping a float64 copy of every op node's tensor output."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        out = super().run_node(n)
        if n.op.startswith("call") and isinstance(out, torch.Tensor) and out.is_floating_point():
            self.values[n.name] = out.detach().double().reshape(-1).clone()
        return out


@pytest.mark.parametrize("train", [False, True], ids=["eval-no_grad", "train-grad"])
def test_every_node_statistic_matches_a_copy_taken_when_it_ran(train):
    # mobilenet_v3_small: small squeeze-excite vectors and large feature maps (both
    # reading paths), in-place Hardswish/ReLU, Hardsigmoid outputs saturated near 0.5 at
    # random init (std ≪ mean), and (train) dropout and BatchNorm updates
    from fxinspect.capture import capture

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None).train(train)
    x = torch.randn(2, 3, 64, 64)
    with torch.set_grad_enabled(train):
        torch.manual_seed(1)
        report = fxinspect.analyze(model, x, timing=False)
        cap = capture(model, (x,), {})
        state = {k: v.clone() for k, v in model.state_dict().items()}
        torch.manual_seed(1)  # the same dropout masks
        reference = _Cloning(cap.graph_module)
        reference.run(*cap.inputs.tensors)
        model.load_state_dict(state)
    compared = 0
    for node in report.nodes:
        if node.name in reference.values:
            v, s = reference.values[node.name], node.outputs[0].stats
            assert (s.min, s.max) == pytest.approx((v.min().item(), v.max().item()), rel=1e-6, abs=1e-6), node.name
            assert s.mean == pytest.approx(v.mean().item(), rel=1e-4, abs=1e-5), node.name
            assert s.std == pytest.approx(v.std(correction=0).item(), rel=1e-3, abs=1e-9), node.name
            compared += 1
    small = sum(1 for v in reference.values.values() if v.numel() <= 256)
    assert compared > 100 and small >= 9  # (both paths: 9 squeeze-excite blocks at batch 2)


# ------------------------------------------------------------------ the model is left as it was


def _busy_model():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10).train()  # BatchNorm updates stats
    model.layer1.requires_grad_(False)
    model.fc.weight.grad = torch.ones_like(model.fc.weight)
    model.layer2[0].bn1.eval()
    model.conv1.register_forward_hook(lambda m, i, o: None)
    model.register_forward_pre_hook(lambda m, i: None)
    return model


def test_model_unchanged_after_analyze_returns():
    model = _busy_model()
    x = torch.randn(2, 3, 64, 64)
    before = state_fingerprint(model)
    rng = torch.get_rng_state()
    fxinspect.analyze(model, x, warmup=1, repeats=2)
    assert_same_state(before, state_fingerprint(model))
    assert torch.equal(rng, torch.get_rng_state())


@pytest.mark.parametrize("backward", [False, True])
def test_model_unchanged_after_measuring_its_own_call(backward):
    model = _busy_model()  # (batch norm in train mode: its own call updates running statistics)
    x = torch.randn(2, 3, 64, 64)
    before = state_fingerprint(model)
    rng = torch.get_rng_state()
    m = fxinspect.analyze(model, x, timing=False, backward=backward, measure_memory=True)
    assert m.memory.measured_eager_peak is not None  # the model's own call did run
    assert_same_state(before, state_fingerprint(model))
    assert torch.equal(rng, torch.get_rng_state())


def test_model_unchanged_after_analyze_raises():
    model = _busy_model()
    before = state_fingerprint(model)
    with pytest.raises(RuntimeError, match="channels"):  # the model's own error, not a wrapper
        fxinspect.analyze(model, torch.randn(2, 4, 64, 64))
    assert_same_state(before, state_fingerprint(model))


def test_wrong_input_shape_is_the_models_error_naming_node_module_and_shapes():
    model = torchvision.models.resnet18(weights=None)
    with pytest.raises(RuntimeError) as info:  # raised as the model raises it, not wrapped
        fxinspect.analyze(model, torch.randn(1, 4, 224, 224), timing=False)
    err = info.value
    assert type(err) is RuntimeError and "channels" in str(err)
    (note,) = err.__notes__
    assert "node 'conv1' (module 'conv1', Conv2d)" in note
    assert "1×4×224×224" in note and "64×3×7×7" in note


def test_wrong_input_shape_deep_in_the_model():
    model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(5, 2)))
    with pytest.raises(RuntimeError) as info:
        fxinspect.analyze(model, torch.randn(3, 8), timing=False)
    (note,) = info.value.__notes__
    assert "node '_2_0' (module '2.0', Linear)" in note  # fx names start with a letter or _
    assert "3×6" in note and "2×5" in note


def test_dtype_mismatch_names_both_dtypes():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    with pytest.raises(RuntimeError, match="same dtype") as info:
        fxinspect.analyze(model, torch.randn(4, 3, dtype=torch.float64), timing=False)
    (note,) = info.value.__notes__
    assert "input_1: 4×3 f64" in note and "0.weight: 2×3 f32" in note


def test_bad_options_raise_input_error():
    with pytest.raises(fxinspect.InputError, match="method must be"):
        fxinspect.analyze(torch.nn.ReLU(), torch.randn(2), method="telepathy")
    with pytest.raises(fxinspect.InputError, match="repeats"):
        fxinspect.analyze(torch.nn.ReLU(), torch.randn(2), repeats=0)
    with pytest.raises(fxinspect.InputError, match="nn.Module"):
        fxinspect.analyze(lambda x: x, torch.randn(2))


class SetsFlagsOnFirstCall(torch.nn.Module):
    """Like Hugging Face models that install hooks and mark it on their first forward."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.scale = 1.0

    def forward(self, x):
        if not getattr(self, "_installed", False):
            self._installed = True
            self.scale = 2.0
            self.fc.register_forward_hook(lambda m, i, o: o * 3)
        return self.fc(x) * self.scale


def test_attributes_set_during_the_pass_are_removed_or_put_back():
    model = SetsFlagsOnFirstCall()
    x = torch.randn(2, 4)
    before = state_fingerprint(model)
    fxinspect.analyze(model, x, method="eager", timing=False)
    assert_same_state(before, state_fingerprint(model))
    assert not hasattr(model, "_installed") and model.scale == 1.0
    assert not model.fc._forward_hooks


class CachesPerDevice(torch.nn.Module):
    """Like timm's attention-bias cache: a dict filled on the first forward."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.cache: dict = {}

    def forward(self, x):
        key = str(x.device)
        if key not in self.cache:
            self.cache[key] = torch.ones(4)
        return self.fc(x) + self.cache[key]


@pytest.mark.parametrize("method", ["symbolic", "export", "eager"])
def test_caches_filled_during_the_pass_are_emptied(method):
    model = CachesPerDevice()
    fxinspect.analyze(model, torch.randn(2, 4), method=method, timing=False)
    assert model.cache == {}
    fxinspect.analyze(model, torch.randn(2, 4), device="meta", timing=False)
    assert model.cache == {}  # no fake tensor left behind to break the next real forward
    assert model(torch.randn(2, 4)).shape == (2, 4)


# ------------------------------------------------------------------ auto: complete totals win


@torch.library.custom_op("fxinspect_tests::opaque_mm", mutates_args=())
def opaque_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A matmul no rule prices: its calls are uncounted."""
    return a @ b


@opaque_mm.register_fake
def _(a, b):
    return a.new_empty(a.shape[0], b.shape[1])


class ShapeBranch(torch.nn.Module):
    """Branches on a shape: a symbolic trace makes it a leaf, torch.export specialises it."""

    def forward(self, x):
        return x * 2 if x.shape[0] > 1 else x


class OpaqueWhenExported(torch.nn.Module):
    """As transformers' MoE experts: an op without a rule under torch.export only."""

    def __init__(self, always: bool = False):
        super().__init__()
        self.branch = ShapeBranch()
        self.w = torch.nn.Parameter(torch.randn(8, 4))
        self.always = always

    def forward(self, x):
        h = self.branch(x)
        # (export traces with fake tensors: a check of the tensor, as transformers makes)
        if self.always or isinstance(h, torch._subclasses.FakeTensor):
            return opaque_mm(h, self.w)
        return h @ self.w


def _tiers_run(monkeypatch) -> list[str]:
    """Names of the capture tiers called from now on, in order."""
    ran = []
    for name, tier in list(fxinspect.capture.TIERS.items()):
        monkeypatch.setitem(fxinspect.capture.TIERS, name, lambda *a, _n=name, _t=tier: ran.append(str(_n)) or _t(*a))
    return ran


def test_auto_prefers_a_tier_whose_count_is_complete(monkeypatch):
    ran = _tiers_run(monkeypatch)
    # symbolic had to make 'branch' a leaf; export captures it all but its count is partial
    report = fxinspect.analyze(OpaqueWhenExported(), torch.randn(3, 8), timing=False)
    assert ran == ["symbolic", "export", "eager"]
    assert report.capture.method == "eager"
    assert (report.totals.macs, report.totals.partial, report.uncounted) == (3 * 8 * 4, False, ())  # 96
    assert ("export", "its count left fxinspect_tests.opaque_mm.default uncounted; eager counts every op") in (
        report.capture.failures
    )
    assert "method='auto' chose the eager tier" in report.capture.notes[-1]
    # asked for by name, a tier is kept as it counts
    exported = fxinspect.analyze(OpaqueWhenExported(), torch.randn(3, 8), method="export", timing=False)
    assert (exported.totals.partial, exported.uncounted[0].op) == (True, "fxinspect_tests.opaque_mm.default")


def test_auto_keeps_the_first_capture_when_no_tier_counts_everything(monkeypatch):
    ran = _tiers_run(monkeypatch)
    report = fxinspect.analyze(OpaqueWhenExported(always=True), torch.randn(3, 8), timing=False)
    # symbolic (with a leaf) waits behind export, which is kept: eager is partial too
    assert ran == ["symbolic", "export", "eager"]
    assert report.capture.method == "export" and report.totals.partial
    assert report.capture.notes[-1] == (
        "method='auto' kept the export tier although its count left fxinspect_tests.opaque_mm.default uncounted: "
        "eager leaves fxinspect_tests.opaque_mm.default uncounted; symbolic leaves fxinspect_tests.opaque_mm.default uncounted"
    )


def test_auto_tries_no_other_tier_when_the_count_is_complete(monkeypatch):
    ran = _tiers_run(monkeypatch)
    report = fxinspect.analyze(torch.nn.Linear(8, 4), torch.randn(3, 8), timing=False)
    assert ran == ["symbolic"] and not report.totals.partial


class MarksItsTensors(torch.nn.Module):
    """Sets attributes on its own weight and buffer during the forward."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("noise", torch.zeros(4))

    def forward(self, x):
        self.fc.weight.seen = True
        self.noise.bernoulli_(0.5)  # a random mask drawn into a buffer: the counting rules mark it
        return self.fc(x) * self.noise


@pytest.mark.parametrize("method", ["symbolic", "eager"])
def test_attributes_set_on_parameters_and_buffers_do_not_outlive_the_pass(method):
    model = MarksItsTensors()
    fxinspect.analyze(model, torch.randn(2, 4), method=method, timing=False)
    assert model.fc.weight.__dict__ == {} and model.noise.__dict__ == {}
    assert torch.equal(model.noise, torch.zeros(4))
