"""The ``eager`` capture tier: the aten ops one real run executes, attributed to modules.

The graph must compute what the model computes (views, in-place and ``out=`` ops,
constants, values read back with ``.item()``), carry a module path on every op node,
and count like the symbolic tier on a real model.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from reference import assert_same_state, reference_flops, state_fingerprint, unique_param_count
from torch.utils import _pytree as pytree

import fxinspect
from fxinspect.capture import MODULE_KEY, FlatInputs, capture, module_of
from fxinspect.capture.eager import trace_eager
from fxinspect.capture.eager_calls import WITHIN_CALL
from fxinspect.run.graphs import op_nodes

aten = torch.ops.aten


def _trace(model: nn.Module, *args, **kwargs):
    return trace_eager(model, FlatInputs.build(args, kwargs, model.forward))


def _assert_same_outputs(cap, model: nn.Module, *args, **kwargs) -> None:
    """The captured graph returns the leaves of what the model returns, value for value."""
    expected, spec = pytree.tree_flatten(model(*args, **kwargs))
    got = cap.graph_module(*cap.inputs.tensors)
    assert isinstance(got, tuple) and len(got) == len(expected)
    assert spec == cap.out_spec
    for a, b in zip(expected, got):
        if isinstance(a, torch.Tensor):
            assert isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
        else:
            assert a == b


def _aten_targets(cap) -> list:
    return [n.target for n in op_nodes(cap.graph_module.graph)]


# ------------------------------------------------------------------ the fallback tier


class Branch(nn.Module):
    """A data-dependent ``if``: symbolic tracing cannot evaluate it, export cannot guard on it."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Linear(8, 4)
        self.neg = nn.Linear(8, 4, bias=False)

    def forward(self, x):
        if x.sum() > 0:
            return self.pos(x)
        return self.neg(x) * 2


@pytest.mark.parametrize("sign, taken, macs", [(1.0, "pos", 3 * 8 * 4), (-1.0, "neg", 3 * 8 * 4)])
def test_data_dependent_branch_ends_in_eager_with_reasons(sign, taken, macs):
    model = Branch()
    x = sign * torch.rand(3, 8)
    report = fxinspect.analyze(model, x, timing=False)
    assert report.capture.method == "eager"
    # every earlier tier failed, each for a one-line reason
    assert [tier for tier, _ in report.capture.failures] == ["symbolic", "export"]
    assert all(reason and "\n" not in reason for _, reason in report.capture.failures)
    assert any("one executed path" in note for note in report.capture.notes)
    # the path this input took, and only it: 3 rows * 8 * 4 = 96 MACs
    assert report.totals.macs == macs
    assert report.modules[taken].calls == 1
    other = "neg" if taken == "pos" else "pos"
    assert report.modules[other].calls == 0 and report.modules[other].macs == 0
    assert report.totals.params == 8 * 4 + 4 + 8 * 4  # both branches' parameters = 68


def test_forced_eager_on_a_traceable_model():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    report = fxinspect.analyze(model, torch.randn(5, 4), method="eager", timing=False)
    assert report.capture.method == "eager" and report.capture.failures == ()
    assert report.totals.macs == 5 * 4 * 8 + 5 * 8 * 2  # = 240
    assert {n.module_path for n in report.nodes if n.is_op} == {"0", "1", "2"}


# ------------------------------------------------------------------ a real model, three references


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_resnet18_eager_counts_like_symbolic_and_flopcountermode(grad):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.set_grad_enabled(grad):
        eager = fxinspect.analyze(model, x, method="eager", timing=False)
        symbolic = fxinspect.analyze(model, x, method="symbolic", timing=False)
        expected = reference_flops(model, (x,))
    assert eager.capture.method == "eager"
    assert eager.totals.params == symbolic.totals.params == unique_param_count(model)  # 11,689,512
    assert 2 * eager.totals.macs == 2 * symbolic.totals.macs == expected  # 3,628,146,688
    assert eager.totals.flops == symbolic.totals.flops
    ops = [n for n in eager.nodes if n.is_op]
    under = [n for n in ops if n.module_path]
    assert len(under) >= 0.99 * len(ops)
    # the one op ResNet.forward runs itself: torch.flatten -> aten.view
    assert [n.target for n in ops if not n.module_path] == ["aten.view.default"]
    for path in ("conv1", "layer1.0.conv1", "layer4.1.bn2", "fc"):
        assert eager.modules[path].macs == symbolic.modules[path].macs, path
        assert eager.modules[path].calls == symbolic.modules[path].calls == 1, path
    # autograd's own detach of saved outputs is not part of the program
    assert "aten.detach.default" not in {n.target for n in ops}


def test_every_op_node_carries_its_innermost_module():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    with torch.no_grad():
        cap = _trace(model, torch.randn(1, 3, 64, 64))
    ops = op_nodes(cap.graph_module.graph)
    assert all(MODULE_KEY in n.meta for n in ops)
    convs = [module_of(n) for n in ops if n.target is aten.convolution.default]
    assert convs[0] == ("conv1", "Conv2d") and ("layer2.0.downsample.0", "Conv2d") in convs
    assert len(convs) == 20
    assert cap.calls["layer1.0.relu"] == 2  # BasicBlock calls its ReLU twice
    assert cap.calls[""] == 1


# ------------------------------------------------------------------ views, in-place, out=, constants


class InPlaceOnView(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        v = y.view(-1)
        v.add_(1)  # writes y through the view
        y.t_()  # in place, metadata only
        y.unsqueeze_(0)
        y[0, 0].zero_()  # select + in-place on a view of a view
        return y, v


class OutArgument(nn.Module):
    def forward(self, x):
        buf = torch.empty_like(x)
        torch.mul(x, 3, out=buf)
        torch.add(buf, 1, out=buf)  # out= the tensor being read
        return buf


class ReluChain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.act(self.fc(x))
        return self.act(y - 0.5) + y  # y was written in place by the second ReLU


class Constants(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.offsets = torch.arange(4.0)  # a plain attribute, neither parameter nor buffer
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x):
        literal = torch.tensor([1.0, -1.0, 1.0, -1.0])
        return self.fc(x) * self.scale + self.offsets * literal


class ItemAndSplit(nn.Module):
    """``.item()`` decides a repeat count; ``split``/``unbind`` return lists of tensors."""

    def forward(self, x):
        n = int(x.abs().max().item() > 0) + 1  # 2 for any non-zero input
        parts = torch.split(x.repeat(n, 1), 2)
        rows = torch.unbind(parts[-1])
        return torch.cat([parts[0], rows[1][None]]).sum(0)


class DataAttribute(nn.Module):
    """``.data`` gives a new tensor object over the same storage: still the same node."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return y.data * 2 + self.fc.weight.data.sum()


class Temporaries(nn.Module):
    """Hundreds of short-lived tensors: Python ids and storage addresses get reused."""

    def forward(self, x):
        acc = torch.zeros(())
        for i in range(200):
            acc = acc + (x * i).view(-1)[i % x.numel()] * torch.tensor(float(i))  # literal: new object
        return acc


@pytest.mark.parametrize(
    "model_cls, grad",
    [
        pytest.param(cls, grad, id=f"{cls.__name__}-{'grad' if grad else 'no_grad'}")
        for cls in (InPlaceOnView, OutArgument, ReluChain, Constants, ItemAndSplit, DataAttribute, Temporaries)
        for grad in (False, True)
        if not (cls is OutArgument and grad)  # out= ops do not support autograd
    ],
)
def test_graph_computes_what_the_model_computes(model_cls, grad):
    torch.manual_seed(0)
    model = model_cls()
    x = torch.randn(4, 4)
    with torch.set_grad_enabled(grad):
        cap = _trace(model, x)
        _assert_same_outputs(cap, model, x)
    assert all(MODULE_KEY in n.meta for n in op_nodes(cap.graph_module.graph))


def test_in_place_and_out_ops_are_nodes_of_the_program():
    cap = _trace(InPlaceOnView(), torch.randn(2, 4))
    targets = _aten_targets(cap)
    assert [t for t in targets if t._opname.endswith("_")] == [
        aten.add_.Tensor,
        aten.t_.default,
        aten.unsqueeze_.default,
        aten.zero_.default,
    ]
    # the second output (v) is the node that wrote it last
    out = cap.graph_module.graph.find_nodes(op="output")[0]
    assert out.args[0][1].target is aten.add_.Tensor
    with torch.no_grad():
        cap = _trace(OutArgument(), torch.randn(3))
    nodes = op_nodes(cap.graph_module.graph)
    assert [n.target for n in nodes] == [aten.empty_like.default, aten.mul.out, aten.add.out]
    assert nodes[2].kwargs["out"] is nodes[1] and nodes[2].args[0] is nodes[1]


def test_constants_and_parameters_are_attributes_referencing_the_users_tensors():
    model = Constants()
    cap = _trace(model, torch.randn(2, 4))
    gm = cap.graph_module
    assert gm.get_parameter("fc.weight") is model.fc.weight
    assert gm.get_buffer("scale") is model.scale
    # a fresh container: none of the user's modules is held
    held = {id(m) for m in gm.modules()}
    assert not held & {id(m) for m in model.modules()}
    attrs = sorted(str(n.target) for n in gm.graph.nodes if n.op == "get_attr")
    constants = [a for a in attrs if a.startswith("_fxinspect_const")]
    assert sorted(set(attrs) - set(constants)) == ["fc.bias", "fc.weight", "scale"]
    # the unregistered attribute and the torch.tensor literal
    assert len(constants) == 2 and any(getattr(gm, c) is model.offsets for c in constants)
    assert any("constants" in note for note in cap.notes)
    assert cap.attr_prefix == ""


def test_item_value_is_baked_in_and_noted():
    cap = _trace(ItemAndSplit(), torch.randn(4, 3))
    assert aten._local_scalar_dense.default in _aten_targets(cap)
    repeat = next(n for n in op_nodes(cap.graph_module.graph) if n.target is aten.repeat.default)
    assert repeat.args[1] == [2, 1]  # the value this input gave, fixed
    assert any(".item()" in note for note in cap.notes)


def test_data_alias_maps_to_the_producing_node_not_a_constant():
    cap = _trace(DataAttribute(), torch.randn(2, 4))
    assert not any(str(n.target).startswith("_fxinspect_const") for n in cap.graph_module.graph.nodes)


# ------------------------------------------------------------------ outputs, inputs, randomness


class PytreeOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, extra=None, *, scale=1.0, flag=True):
        y = self.fc(x) * scale
        return {"y": y, "pair": (y.sum(), x.shape[0]), "none": None, "flag": flag, "same": extra}


def test_pytree_outputs_and_keyword_inputs():
    model = PytreeOut()
    x, extra = torch.randn(2, 4), torch.randn(5)
    cap = _trace(model, x, extra, scale=0.5, flag=False)
    placeholders = [n.name for n in cap.graph_module.graph.nodes if n.op == "placeholder"]
    assert placeholders == cap.inputs.names == ["x", "extra"]
    _assert_same_outputs(cap, model, x, extra, scale=0.5, flag=False)
    out = cap.graph_module(*cap.inputs.tensors)
    assert out[-1] is extra  # an input returned as is: the placeholder itself
    report = fxinspect.analyze(model, (x, extra), kwargs={"scale": 0.5, "flag": False}, method="eager", timing=False)
    assert [m.shape for m in report.outputs] == [(2, 3), (), (5,)]


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x)) + torch.randn_like(x)


def test_random_ops_stay_random():
    model = Noisy().train()
    x = torch.randn(4, 16)
    with torch.no_grad():
        cap = _trace(model, x)
        a, b = cap.graph_module(x)[0], cap.graph_module(x)[0]
    assert not torch.equal(a, b)
    assert aten.randn_like.default in _aten_targets(cap)
    assert any("random" in note for note in cap.notes)
    dropout = [
        module_of(n)
        for n in op_nodes(cap.graph_module.graph)
        if "dropout" in str(n.target) or "bernoulli" in str(n.target)
    ]
    assert dropout and all(m == ("drop", "Dropout") for m in dropout)


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(4, 4), nn.Tanh())

    def forward(self, x):
        return self.inner(self.inner(x)) + F.gelu(x)


def test_module_calls_and_hooks_leave_no_trace():
    model = Shared()
    x = torch.randn(2, 4)
    before = state_fingerprint(model)
    globals_before = (
        dict(torch.nn.modules.module._global_forward_pre_hooks),
        dict(torch.nn.modules.module._global_forward_hooks),
    )
    report = fxinspect.analyze(model, x, method="eager", timing=False)
    assert_same_state(before, state_fingerprint(model))
    assert (
        dict(torch.nn.modules.module._global_forward_pre_hooks),
        dict(torch.nn.modules.module._global_forward_hooks),
    ) == globals_before
    assert report.modules["inner"].calls == 2 and report.modules["inner.0"].calls == 2
    assert report.modules["inner.0"].macs == 2 * 2 * 4 * 4  # two calls of (2,4)@(4,4)
    gelu = [n for n in report.nodes if n.is_op and n.label == "gelu"]
    assert [n.module_path for n in gelu] == [""]


def test_hooks_removed_when_the_model_raises():
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    count = len(torch.nn.modules.module._global_forward_hooks)
    with pytest.raises(ValueError, match="boom"):
        _trace(Broken(), torch.randn(2))
    assert len(torch.nn.modules.module._global_forward_hooks) == count


def test_capture_through_the_tier_dispatcher():
    cap = capture(Branch(), (torch.rand(2, 8),), {}, method="eager")
    assert cap.method == "eager" and cap.failures == ()


# ------------------------------------------------------------------ a detection model


@pytest.mark.slow
def test_detection_model_through_eager():
    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None
    ).eval()
    images = [torch.rand(3, 240, 320), torch.rand(3, 200, 260)]
    with torch.no_grad():
        report = fxinspect.analyze(model, (images,), method="eager", timing=False)
        cap = capture(model, (images,), {}, method="eager")
        _assert_same_outputs(cap, model, images)
    assert report.capture.method == "eager"
    assert report.totals.params == unique_param_count(model)
    assert len(report.outputs) == 2 * 3  # boxes, labels, scores per image
    ops = [n for n in report.nodes if n.is_op]
    # methods such as self.transform.postprocess(...) are found through the call stack
    assert sum(1 for n in ops if n.module_path) >= 0.99 * len(ops)
    assert any(n.module_path == "transform" for n in ops)  # normalize, resize, postprocess
    assert report.modules["backbone"].macs > 0 and report.modules["rpn"].calls == 1
    assert report.modules["roi_heads.box_roi_pool"].macs == 0  # RoIAlign is pooling, not MACs
    assert any(n.target == "torchvision.roi_align.default" for n in ops)


class NoGradInside(nn.Module):
    def __init__(self, tail: bool = False):
        super().__init__()
        self.gate = nn.Linear(4, 4)
        self.fc = nn.Linear(4, 4)
        self.tail = tail

    def forward(self, x):
        with torch.no_grad():
            g = torch.sigmoid(self.gate(x))
        y = self.fc(x) * g
        if self.tail:  # the forward ends inside a no_grad region
            with torch.no_grad():
                y = y.clamp(min=0)
        return y, torch.is_grad_enabled()


@pytest.mark.parametrize(
    "tail, switches",
    [(False, ["set_grad_enabled"] * 2), (True, ["set_grad_enabled"] * 4)],
)
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_grad_mode_regions_inside_forward_are_reproduced(grad, tail, switches):
    model, x = NoGradInside(tail), torch.randn(2, 4, requires_grad=True)
    with torch.set_grad_enabled(grad):
        cap = _trace(model, x)
        out, enabled = cap.graph_module(x)
        assert torch.is_grad_enabled() == grad  # the graph leaves the mode as it found it
        expected = model(x)[0]
    assert enabled == grad and out.requires_grad == (grad and not tail)
    torch.testing.assert_close(out, expected)
    nodes = [n for n in op_nodes(cap.graph_module.graph) if not isinstance(n.target, torch._ops.OpOverload)]
    assert [n.target.__name__ for n in nodes] == (switches if grad else [])
    # the switches belong to the code that made them: the root's forward
    assert all(module_of(n) == ("", "NoGradInside") for n in nodes)


def test_first_graph_run_replays_the_captured_random_draws():
    model = Noisy().train()
    x = torch.randn(4, 16)
    with torch.no_grad():
        torch.manual_seed(1)
        expected = model(x)
        torch.manual_seed(1)
        cap = _trace(model, x)
        (first,) = cap.graph_module(x)
    torch.testing.assert_close(first, expected)


def test_meta_model_through_eager_and_what_it_cannot_do():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    report = fxinspect.analyze(model, torch.empty(8, 16, device="meta"), method="eager", timing=False)
    assert report.totals.macs == 8 * 16 * 32 + 8 * 32 * 4  # = 5120
    assert not [n for n in report.nodes if n.is_op and n.target.startswith("prim.")]
    # a value-dependent branch needs values: the reason says so
    with pytest.raises(fxinspect.errors.CaptureError, match="needs tensor values"):
        fxinspect.analyze(Branch(), torch.randn(2, 8), method="eager", timing=False, device="meta")


# ------------------------------------------------------------------ values not written yet


class MaskedLog(nn.Module):
    """Dropout as the eager tier sees it (an ``empty_like`` filled in place by
    ``bernoulli_``), then a log: log(0) = -inf wherever the mask dropped a value."""

    def forward(self, x):
        mask = torch.empty_like(x).bernoulli_(0.5)
        return torch.log(x.abs() * mask + 1.0), torch.log(x.abs() * mask)


@pytest.mark.parametrize("method", ["eager", "symbolic", "export"])
def test_memory_an_empty_op_returns_is_no_value_and_a_real_inf_is_still_found(method):
    torch.manual_seed(0)
    x = torch.randn(64, 64)  # 4096 values: read at once, not batched with the small ones
    report = fxinspect.analyze(MaskedLog(), x, method=method, timing=False)
    nodes = {n.name: n for n in report.nodes}
    (empty,) = [n for n in report.nodes if n.name.startswith("empty")]
    assert empty.outputs[0].stats is None and empty.nan_count is None  # uninitialised: unknown, not garbage
    (mask,) = [n for n in report.nodes if n.name.startswith("bernoulli")]
    stats = mask.outputs[0].stats  # what bernoulli_ wrote: 0s and 1s, about half of each
    assert (stats.min, stats.max, stats.nan_count) == (0.0, 1.0, 0) and 0.45 < stats.mean < 0.55
    found = report.nonfinite  # the second log: -inf where a value was dropped (about 2048 of 4096)
    logs = [n for n in report.nodes if n.is_op and n.name.startswith("log")]
    assert found.root_cause == logs[1].name and str(found.kind) == "inf"
    assert logs[0].outputs[0].stats.finite and 1500 < nodes[found.root_cause].inf_count < 2600


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_gpt2_training_in_eager_has_no_nonfinite_finding(attention):
    """Dropout's ``empty_like`` outputs were read as values (garbage that changed from
    run to run, now and then a NaN); torch's SDPA on CPU builds a ``-inf`` causal mask of
    its own (``scalar_tensor(-inf)``, ``where``), which softmax absorbs: the model has
    no NaN/Inf, and the symbolic and export tiers, where SDPA is one node, find none."""
    from transformers import GPT2Config, GPT2LMHeadModel

    for seed in range(3):
        torch.manual_seed(seed)
        config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, attn_implementation=attention)
        model = GPT2LMHeadModel(config).train()
        ids = torch.randint(0, 128, (2, 32))
        report = fxinspect.analyze(model, {"input_ids": ids}, method="eager", backward=True, timing=False)
        assert report.nonfinite is None and report.grad_nonfinite is None
        empty = [n for n in report.nodes if n.name.startswith("empty_like")]
        assert len(empty) == 7  # embeddings, 2 x (attention, its output, the MLP): every dropout
        assert all(n.outputs[0].stats is None for n in empty)
    if attention == "sdpa":  # the mask is there, with its -inf, and is SDPA's own
        masks = [n for n in report.nodes if n.name.startswith("scalar_tensor") and n.inf_count]
        assert len(masks) == 2 and all(n.module_path.endswith("attn") for n in masks)


class CausalAttention(nn.Module):
    """Training SDPA on CPU: its math kernel, twenty-odd aten ops in the eager tier."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, q):
        q = q * self.scale
        return F.scaled_dot_product_attention(q, q, q, is_causal=True, dropout_p=0.5).relu()


@pytest.mark.parametrize("scale", [1.0, 1e20])
def test_a_torch_calls_own_values_are_judged_at_the_call_as_in_the_other_tiers(scale):
    """``scale`` 1e20: q.k is 1e40 and more, beyond float32 (3.4e38): the scores overflow to
    inf, softmax makes NaN of inf - inf, and that NaN is the call's result."""
    torch.manual_seed(0)
    x = torch.randn(2, 2, 8, 4, requires_grad=True)
    found = {}
    for method in ("eager", "symbolic"):
        report = fxinspect.analyze(CausalAttention(scale).train(), x, method=method, backward=True, timing=False)
        found[method] = report.nonfinite
    if scale == 1.0:  # the -inf mask inside the call is no finding
        assert found == {"eager": None, "symbolic": None}
        return
    eager, symbolic = found["eager"], found["symbolic"]
    assert symbolic.root_cause == "scaled_dot_product_attention" and str(symbolic.kind) == "nan"
    cap = _trace(CausalAttention(scale).train(), x)
    nodes = {n.name: n for n in cap.graph_module.graph.nodes}
    root = nodes[eager.root_cause]  # the eager node holding the call's result ...
    (relu,) = [n for n in op_nodes(cap.graph_module.graph) if n.target is aten.relu.default]
    assert relu.args[0] is root and WITHIN_CALL not in root.meta
    inside = [n for n in op_nodes(cap.graph_module.graph) if n.meta.get(WITHIN_CALL)]
    assert len(inside) > 10 and {n.meta[WITHIN_CALL] for n in inside} == {"scaled_dot_product_attention"}
    assert str(eager.kind) == "nan" and eager.downstream == symbolic.downstream == ("relu",)
