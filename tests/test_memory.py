"""The memory model: hand-computed peaks, saved tensors once per storage, the allocator's
measurement of the same run, meta equal to real, checkpointing, optimizer state."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torchvision
from torch.utils.checkpoint import checkpoint

import fxinspect
from fxinspect.records import Phase, TensorRole

F32 = 4
ON_CPU = pytest.mark.skipif(torch.cuda.is_available(), reason="the allocator figures here are the CPU's")


def mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)), torch.randn(
        64, 256
    )


HIDDEN = 64 * 1024 * F32  # 262,144: the (64, 1024) activations
OUT = 64 * 256 * F32  # 65,536
PARAMS = (256 * 1024 + 1024 + 1024 * 256 + 256) * F32  # 2,102,272


def test_forward_peak_by_hand_and_the_tensors_alive_at_it():
    model, x = mlp()
    with torch.no_grad():
        r = fxinspect.analyze(model, x, timing=False)
    m = r.memory
    # fc1's output lives until relu has made its own: the peak is both, at relu
    assert (m.peak, m.peak_node, m.peak_phase) == (2 * HIDDEN, "_1", Phase.FORWARD)
    assert sorted((t.node, t.shape, t.nbytes) for t in m.alive_at_peak) == [
        ("_0", (64, 1024), HIDDEN),
        ("_1", (64, 1024), HIDDEN),
    ]
    assert [n.output_bytes for n in r.nodes if n.is_op] == [HIDDEN, HIDDEN, OUT]
    assert m.saved == 0 and r.totals.saved_bytes == 0  # no_grad: autograd saves nothing
    assert (m.params, m.buffers, m.inputs) == (PARAMS, 0, 64 * 256 * F32)
    assert m.timeline[0] == (0, 0) and max(b for _, b in m.timeline) == m.peak


def test_views_and_in_place_results_share_storage():
    class Net(torch.nn.Module):
        def forward(self, x):
            y = x * 2  # 4*8*4 = 128 new bytes
            z = y.view(8, 4).t()  # views: nothing new
            return torch.relu_(z)  # in place: nothing new

    with torch.no_grad():
        r = fxinspect.analyze(Net(), torch.randn(4, 8), timing=False)
    assert {n.name: n.output_bytes for n in r.nodes if n.is_op} == {"mul": 128, "view": 0, "t": 0, "relu_": 0}
    assert r.memory.peak == 128


@ON_CPU
def test_estimate_equals_the_cpu_allocator_on_a_model_without_kernel_scratch():
    model, x = mlp()
    with torch.no_grad():
        forward = fxinspect.analyze(model, x, timing=False, measure_memory=True).memory
    training = fxinspect.analyze(model, x, timing=False, backward=True, measure_memory=True).memory
    assert forward.measured_by == "torch.profiler"
    assert forward.measured_peak == forward.peak == 2 * HIDDEN
    assert training.measured_peak == training.peak and training.measured_forward_peak == training.forward_peak


def test_training_saves_each_storage_once_however_many_autograd_nodes_save_it():
    model, x = mlp()
    packed = []  # what autograd hands the hooks: relu's output twice (relu and fc2 save it)

    def pack(t):
        packed.append(t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    assert packed.count(HIDDEN) == 2
    r = fxinspect.analyze(model, x, timing=False, backward=True)
    m = r.memory
    assert m.saved == HIDDEN and r.node("_1").saved_bytes == HIDDEN and r.totals.saved_bytes == HIDDEN
    assert m.gradients == PARAMS  # every parameter's .grad
    assert m.forward_peak == 2 * HIDDEN and m.backward_start is not None
    assert sum(t.nbytes for t in m.alive_at_peak) == m.peak
    roles = {t.role for t in m.alive_at_peak}
    assert TensorRole.PARAMETER_GRADIENT in roles and m.peak_phase is Phase.BACKWARD


def test_optimizer_state_and_full_step_peak():
    model, x = mlp()
    r = fxinspect.analyze(model, x, timing=False, backward=True, optimizer=torch.optim.AdamW)
    m = r.memory
    assert m.optimizer == "AdamW"
    assert m.optimizer_state == 2 * PARAMS + 4 * F32  # two moments per parameter + a float32 step per tensor
    sgd = fxinspect.analyze(
        model, x, timing=False, backward=True, optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ).memory
    assert sgd.optimizer_state == PARAMS  # one momentum buffer
    resident = PARAMS + 64 * 256 * F32 + m.optimizer_state
    # step() runs beside the gradients, the output and the loss the loop still holds
    held = m.gradients + sum(t.nbytes for t in r.outputs) + F32
    assert m.held_after_backward == held
    assert m.total_peak == max(resident + m.peak, resident + held + m.optimizer_step)
    with pytest.raises(fxinspect.InputError, match="needs backward=True"):
        fxinspect.analyze(model, x, timing=False, optimizer=torch.optim.AdamW)


class Blocks(torch.nn.Module):
    def __init__(self, checkpointed: bool, width: int = 256):
        super().__init__()
        self.checkpointed = checkpointed
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))
            for _ in range(2)
        )

    def forward(self, x):
        for block in self.blocks:
            x = x + (checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x))
        return x


def test_checkpointing_is_kept_saves_only_block_inputs_and_recomputes_in_backward():
    x = torch.randn(4, 64, 256)
    torch.manual_seed(0)
    plain = Blocks(False)
    kept = Blocks(True)
    kept.load_state_dict(plain.state_dict())
    a = fxinspect.analyze(plain, x, timing=False, backward=True, measure_memory=True)
    b = fxinspect.analyze(kept, x, timing=False, backward=True, measure_memory=True)
    act, hidden = 4 * 64 * 256 * F32, 4 * 64 * 1024 * F32
    # plain: per block GELU's input and output (fc1 and fc2 save them), + block 1's input
    assert a.memory.saved == 2 * 2 * hidden + act
    # checkpointed: only block 1's input (block 0's is the model input, resident)
    assert b.memory.saved == act
    # (auto takes export's capture: each checkpointed block's ops are nodes of their own)
    block = ["linear", "gelu", "linear_1"], ["linear_2", "gelu_1", "linear_3"]
    assert [n.name for n in b.nodes if n.is_op] == [
        *("checkpoint", *block[0], "end_checkpoint", "add"),
        *("checkpoint_1", *block[1], "end_checkpoint_1", "add_1"),
    ]
    assert b.node("checkpoint").module_path == "blocks.0"
    # the backward recomputes each block's forward as far as the last tensor it needs (GELU's
    # output, for fc2's weight gradient; checkpoint stops early): fc1 and GELU, 2 blocks
    recomputed = sum(a.node(f"blocks_{i}_{j}").flops for i in (0, 1) for j in (0, 1))
    assert recomputed == 2 * (2 * 256 * 256 * 1024 + 256 * 1024 + 256 * 1024)  # matmul, bias, GELU
    assert b.totals.backward_flops - a.totals.backward_flops == recomputed
    if not torch.cuda.is_available():
        # the allocator sees every tensor the model counts, and kernel scratch besides (here
        # 256,000 bytes inside the 3-d Linear's backward at blocks.1.2)
        assert a.memory.peak <= a.memory.measured_peak <= 1.04 * a.memory.peak
        # checkpoint keeps a copy of the CPU RNG state per block (torch.get_rng_state(), made
        # outside the dispatcher, so outside the tensor model): the allocator sees it
        rng_state = torch.get_rng_state().nbytes
        assert b.memory.measured_peak - b.memory.peak == rng_state


def test_export_keeps_checkpoints_with_every_op_a_node():
    """export traces through checkpoint: the checkpointed blocks' ops are nodes of their
    modules, and the program still saves, frees and recomputes what checkpoint does."""
    x = torch.randn(4, 64, 256)
    torch.manual_seed(0)
    plain = Blocks(False)
    kept = Blocks(True)
    kept.load_state_dict(plain.state_dict())
    a = fxinspect.analyze(plain, x, timing=False, backward=True, measure_memory=True, method="export")
    b = fxinspect.analyze(kept, x, timing=False, backward=True, measure_memory=True, method="export")
    act = 4 * 64 * 256 * F32
    assert b.memory.saved == act  # block 1's input only, as the symbolic tier's kept checkpoints
    ops = [(n.name, n.module_path, n.flops) for n in b.nodes if n.is_op]
    assert [o[:2] for o in ops] == [
        ("checkpoint", "blocks.0"),
        ("linear", "blocks.0.0"),
        ("gelu", "blocks.0.1"),
        ("linear_1", "blocks.0.2"),
        ("end_checkpoint", "blocks.0"),
        ("add", ""),
        ("checkpoint_1", "blocks.1"),
        ("linear_2", "blocks.1.0"),
        ("gelu_1", "blocks.1.1"),
        ("linear_3", "blocks.1.2"),
        ("end_checkpoint_1", "blocks.1"),
        ("add_1", ""),
    ]
    assert [o for o in ops if "checkpoint" not in o[0]] == [
        (n.name, n.module_path, n.flops) for n in a.nodes if n.is_op
    ]
    # the backward recomputes fc1 and GELU of each block (see the symbolic test above)
    recomputed = 2 * (2 * 256 * 256 * 1024 + 256 * 1024 + 256 * 1024)  # 2 blocks: matmul, bias, GELU
    assert b.totals.backward_flops - a.totals.backward_flops == recomputed
    if not torch.cuda.is_available():  # the allocator: the program's tensors, and an RNG state
        assert b.memory.measured_peak - b.memory.peak == torch.get_rng_state().nbytes


def test_meta_device_memory_equals_the_real_run_byte_for_byte():
    model, x = torchvision.models.resnet18(weights=None).train(), torch.randn(2, 3, 224, 224)
    real = fxinspect.analyze(model, x, timing=False, backward=True).memory
    meta = fxinspect.analyze(model, x, timing=False, backward=True, device="meta").memory
    # (the notes say where each learnt the kernels' scratch: both on this CPU, the same bytes)
    measured = ("measured_by", "measured_peak", "measured_forward_peak", "measured_peak_node", "notes")
    assert meta.measured_peak is None
    assert dataclasses.replace(meta, **dict.fromkeys(measured)) == dataclasses.replace(real, **dict.fromkeys(measured))
    assert meta.peak > 0 and len(meta.timeline) > 100


def test_memory_pass_leaves_gradients_and_inputs_as_they_were():
    model, x = mlp()
    model[0].weight.grad = torch.ones_like(model[0].weight)
    before = [p.detach().clone() for p in model.parameters()]
    fxinspect.analyze(model, x, timing=False, backward=True, optimizer=torch.optim.AdamW)
    assert torch.equal(model[0].weight.grad, torch.ones_like(model[0].weight)) and model[2].weight.grad is None
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))


def test_no_memory_pass_leaves_the_figures_unknown():
    model, x = mlp()
    r = fxinspect.analyze(model, x, timing=False, memory=False)
    assert r.memory is None and r.totals.output_bytes is None and r.node("_0").saved_bytes is None


def test_memory_survives_json_and_shows_in_the_summary_and_tables():
    model, x = mlp()
    r = fxinspect.analyze(model, x, timing=False, backward=True, optimizer=torch.optim.SGD)
    assert fxinspect.Report.from_json(r.to_json()) == r
    text = str(r)
    assert "memory       peak 2.32 MiB at node '_0' (backward)" in text  # 2,429,960 bytes
    assert "saved        256.00 KiB kept by autograd" in text and "optimizer    SGD" in text
    table = r.table(by="node")
    assert "output grads" in table and "64×1024" in table and "saved" in table


def test_plot_memory_draws_the_timeline_the_peak_and_the_contributors(tmp_path):
    model, x = mlp()
    r = fxinspect.analyze(model, x, timing=False, backward=True)
    fig = r.plot_memory(tmp_path / "memory.png")
    assert (tmp_path / "memory.png").read_bytes()[:4] == b"\x89PNG"
    timeline, side = fig.axes
    notes = [t.get_text() for t in timeline.texts]
    # resident 2,102,272 params + 65,536 input, + the run's 2,429,960 at its peak = 4,597,768 B
    assert "peak 4.38 MiB at _0 (backward)" in notes
    assert "backward" in " ".join(notes) and timeline.get_ylabel() == "memory held (MiB)"
    labels = [t.get_text() for t in side.get_yticklabels()]
    # module "0" (fc1): weight 1,048,576 + bias 4,096 gradient bytes, the largest group
    assert labels[:2] == ["0 · parameter gradient, 2 tensors", "2 · parameter gradient, 2 tensors"]
    plain = fxinspect.analyze(model, x, timing=False, memory=False)
    with pytest.raises(ValueError, match="memory=True"):
        plain.plot_memory()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_memory_is_measured_by_the_cuda_allocator():
    model, x = mlp()
    model, x = model.cuda(), x.cuda()
    with torch.no_grad():
        m = fxinspect.analyze(model, x, timing=False, measure_memory=True).memory
    assert m.measured_by == "torch.cuda" and m.device.startswith("cuda")
    # the caching allocator rounds blocks up (512 bytes) and may keep a cuBLAS workspace:
    # never below the tensors, and not far above them
    assert m.peak == 2 * HIDDEN and m.peak <= m.measured_peak <= m.peak + 2**20


class Counted(torch.nn.Module):
    """A leaf that counts how often it runs (the analysis calls it as one op)."""

    runs = 0

    def forward(self, x):
        Counted.runs += 1
        return x * 2


@pytest.mark.parametrize("grad", [False, True])
def test_the_default_analysis_runs_the_forward_once_and_models_memory_as_its_own_pass(grad):
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), Counted(), torch.nn.Linear(256, 8))
    x = torch.randn(16, 64)
    Counted.runs = 0
    with torch.set_grad_enabled(grad):
        one = fxinspect.analyze(model, x, timing=False, leaf_modules=[Counted])
        assert Counted.runs == 1  # counts, values and memory: one run
        two = fxinspect.analyze(model, x, timing=False, leaf_modules=[Counted], measure_memory=True)
        # the allocator's measurements: a run of the program and a call of the model
        assert Counted.runs == 1 + 3
    a, b = one.memory, two.memory
    # the run that also counts and reads values models the same memory, byte for byte
    assert (a.peak, a.peak_node, a.forward_peak, a.saved, a.timeline) == (
        b.peak,
        b.peak_node,
        b.forward_peak,
        b.saved,
        b.timeline,
    )
    assert a.alive_at_peak == b.alive_at_peak
    assert [(n.output_bytes, n.saved_bytes) for n in one.nodes] == [(n.output_bytes, n.saved_bytes) for n in two.nodes]
    # the first Linear's 16x256, ReLU's, the leaf's, then the last Linear's 16x8 (float32)
    assert sum(n.output_bytes for n in one.nodes if n.is_op) == 3 * 16 * 256 * 4 + 16 * 8 * 4
    # with grad on autograd keeps ReLU's output (its mask) and the leaf's (the last
    # Linear's input); x and the weights are resident, x * 2 saves nothing
    assert a.saved == b.saved == (2 * 16 * 256 * 4 if grad else 0)
    assert a.measured_peak is None and b.measured_by == "torch.profiler"
    assert "an estimate of the tensor model; measure_memory=True measures the allocator" in one.summary(width=None)


class _NanMidway(torch.nn.Module):
    """A residual CNN whose backward turns finite gradients into NaN at ``sqrt`` of a zero."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))) + self.conv(x)
        z = torch.sqrt(y - y)  # d sqrt / dx at 0 is inf; times 0 upstream: NaN
        return self.head((y + z).mean((2, 3)))


def _tiny_gpt2() -> tuple[torch.nn.Module, dict]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=32, vocab_size=100, attn_pdrop=0.0)
    config.resid_pdrop = config.embd_pdrop = 0.0  # (no randomness: two runs must agree)
    return GPT2LMHeadModel(config).train(), {"input_ids": torch.randint(0, 100, (2, 16))}


_STEP_MODELS = {
    "cnn, NaN in the backward": lambda: (_NanMidway().train(), torch.randn(2, 3, 8, 8)),
    "gpt2 (export)": _tiny_gpt2,
    "checkpointed blocks": lambda: (Blocks(checkpointed=True), torch.randn(4, 256)),
}


def _figures(node, field: str):
    """A node's field; of its aten calls, those that are not ``detach``: the saved-tensor
    hooks that mark what autograd keeps change where autograd detaches (it skips the
    detach of a saved output, and detaches a saved tensor as it unpacks it), and a detach
    is free (no FLOPs, no bytes), so only the listing would differ."""
    value = getattr(node, field)
    if field in ("aten", "backward_aten") and value is not None:
        return tuple(c for c in value if c.op != "aten.detach.default")
    return value


@pytest.mark.parametrize("make", _STEP_MODELS.values(), ids=_STEP_MODELS.keys())
def test_a_training_step_is_one_run_with_the_figures_of_three(make):
    """The default training analysis runs the forward once, counting, modelling memory
    and differentiating in the same run; measure_memory=True makes the backward and the
    memory passes run on their own. Every figure of the one run equals the three runs'."""
    model, x = make()
    options = {"timing": False, "backward": True, "optimizer": torch.optim.AdamW}
    one = fxinspect.analyze(model, x, **options)
    three = fxinspect.analyze(model, x, measure_memory=True, **options)
    fields = [f.name for f in dataclasses.fields(one.nodes[0]) if not f.name.startswith("measured")]
    for a, b in zip(one.nodes, three.nodes, strict=True):
        assert [_figures(a, f) for f in fields] == [_figures(b, f) for f in fields], a.name
    assert one.grad_nonfinite == three.grad_nonfinite
    assert one.totals.backward_flops == three.totals.backward_flops > 0
    keep = [f.name for f in dataclasses.fields(one.memory) if not f.name.startswith("measured")]
    assert [getattr(one.memory, f) for f in keep] == [getattr(three.memory, f) for f in keep]
    assert one.memory.optimizer_state > 0 and three.memory.measured_peak is not None


def test_the_nan_models_backward_root_cause_is_found_in_the_one_run():
    model, x = _NanMidway().train(), torch.randn(2, 3, 8, 8)
    report = fxinspect.analyze(model, x, timing=False, backward=True)
    assert report.grad_nonfinite is not None and report.grad_nonfinite.root_cause == "sqrt"


def test_a_leaf_runs_once_in_a_training_analysis():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), Counted(), torch.nn.Linear(8, 2))
    Counted.runs = 0
    fxinspect.analyze(model, torch.randn(4, 8), timing=False, backward=True, leaf_modules=[Counted])
    assert Counted.runs == 1  # counts, values, memory and the backward: one forward


def _optimizers() -> list[type]:
    found = [getattr(torch.optim, n) for n in dir(torch.optim)]
    return [
        c
        for c in found
        if isinstance(c, type) and issubclass(c, torch.optim.Optimizer) and c is not torch.optim.Optimizer
    ]


@pytest.mark.parametrize("cls", _optimizers(), ids=lambda c: c.__name__)
def test_every_torch_optimizer_as_class_or_instance_keeps_its_settings(cls):
    from fxinspect.errors import InputError
    from fxinspect.run.memory.optimizer import optimizer_footprint

    params = [torch.nn.Parameter(torch.zeros(100, 10))]
    instance = cls([torch.nn.Parameter(torch.zeros(4, 4))])  # rebuilt for the model's parameters
    if cls is torch.optim.SparseAdam:  # it refuses dense gradients, as it would in training
        with pytest.raises(InputError, match="SparseAdam cannot step"):
            optimizer_footprint(cls, params)
        return
    assert optimizer_footprint(instance, params) == optimizer_footprint(cls, params)


def test_optimizer_instances_are_rebuilt_with_their_own_settings():
    from fxinspect.run.memory.optimizer import optimizer_footprint

    params = [torch.nn.Parameter(torch.zeros(100, 10))]
    # Adam/AdamW: two float32 moments of 1,000 elements and a float32 step: 2*4000 + 4
    assert optimizer_footprint(torch.optim.AdamW(params), params)[1] == 2 * 4000 + 4
    # SGD keeps a momentum buffer only when the instance was made with momentum
    assert optimizer_footprint(torch.optim.SGD(params), params)[1] == 0
    assert optimizer_footprint(torch.optim.SGD(params, lr=0.1, momentum=0.9), params)[1] == 4000
    model, x = mlp()
    r = fxinspect.analyze(model, x, timing=False, backward=True, optimizer=torch.optim.AdamW(model.parameters()))
    assert r.memory.optimizer == "AdamW" and r.memory.optimizer_state == 2 * r.memory.params + 4 * len(
        list(model.parameters())
    )
    with pytest.raises(fxinspect.InputError, match="torch.optim.Optimizer class or instance"):
        fxinspect.analyze(model, x, timing=False, backward=True, optimizer="adamw")


def test_the_optimizer_step_runs_beside_the_gradients_the_output_and_the_loss():
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 4096))
    x = torch.randn(64, 256)
    m = fxinspect.analyze(model, x, timing=False, backward=True, optimizer=torch.optim.AdamW).memory
    params = (256 * 1024 + 1024 + 1024 * 4096 + 4096) * F32
    output, loss = 64 * 4096 * F32, F32  # what `out = model(x); loss = ...; loss.backward()` still holds
    assert m.gradients == params
    assert m.held_after_backward == params + output + loss
    # AdamW's step is this step's peak: resident (params, input, two moments and a step
    # per parameter) + what the loop holds + the step's own scratch
    resident = params + 64 * 256 * F32 + 2 * params + 4 * F32
    assert m.resident == resident
    assert m.total_peak == resident + params + output + loss + m.optimizer_step > resident + m.peak


class _ExpandThenBlock(torch.nn.Module):
    """``y = expand(x)`` (1 MiB), then ``block(y)``: block's first op is y's last reader,
    but the caller holds y until block returns."""

    def __init__(self):
        super().__init__()
        self.expand = torch.nn.Linear(64, 4096)
        self.block = torch.nn.Sequential(torch.nn.Linear(4096, 16), torch.nn.Linear(16, 4096))

    def forward(self, x):
        return self.block(self.expand(x))


@ON_CPU
def test_a_module_calls_inputs_live_until_it_returns_as_in_the_eager_model():
    model, x = _ExpandThenBlock().eval(), torch.randn(64, 64)
    with torch.no_grad():
        m = fxinspect.analyze(model, x, timing=False).memory
    y, small = 64 * 4096 * F32, 64 * 16 * F32
    # at block.1: y (held by the caller), block.0's output (its input) and its own output
    assert m.peak == y + small + y == _eager_allocator_peak(model, x)
    assert m.peak_node == "block_1"


class _LocalKeptToReturn(torch.nn.Module):
    """``y = up(x)``, ``z = relu(y)``, ``head(z)``: the forward's local ``y`` lives until
    it returns, though ``relu`` was its last reader."""

    def __init__(self):
        super().__init__()
        self.up, self.head = torch.nn.Linear(64, 4096), torch.nn.Linear(4096, 16)

    def forward(self, x):
        y = self.up(x)
        z = torch.relu(y)
        return self.head(z)


@ON_CPU
def test_a_forwards_local_lives_until_it_returns_in_the_estimate_as_in_the_model():
    model, x = _LocalKeptToReturn().eval(), torch.randn(64, 64)
    with torch.no_grad():
        m = fxinspect.analyze(model, x, timing=False, measure_memory=True).memory
    y, out = 64 * 4096 * F32, 64 * 16 * F32
    # relu is y's last reader, but the local y lives to the end: at head, y + z + out.
    # The truth is the allocator on the model's own call; the program, holding y as the
    # model does, agrees with it
    assert m.measured_eager_peak == m.measured_eager_forward_peak == y + y + out
    assert m.peak == m.forward_peak == m.measured_peak == y + y + out
    assert m.peak_node == "head"
    assert "on the model's own call" in fxinspect.analyze(model, x, timing=False, measure_memory=True).summary()


def _widen_then_mix(a, b, x):
    """A plain function, not a module: its local ``wide`` lives until it returns."""
    wide = torch.cat([x, x], dim=1)
    return b(torch.relu(a(wide)))


class _HelperLocal(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(128, 4096), torch.nn.Linear(4096, 16)

    def forward(self, x):
        return _widen_then_mix(self.a, self.b, x)


class _Rebinds(torch.nn.Module):
    """``h = stem(x)``, then ``h = block(h)`` per block: each rebinding lets the old h go."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Linear(64, 4096)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(4096, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4096)) for _ in range(3)
        )

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return h


def _eager_allocator_peak(model, x) -> int:
    """The allocator's peak growth over the model's own call, under ``torch.no_grad()``."""
    from fxinspect.run.memory.allocator import AllocatorWatch

    watch = AllocatorWatch(torch.device("cpu"), None)
    with torch.no_grad(), watch:
        model(x)
    return watch.peak


@ON_CPU
def test_a_helper_functions_local_lives_until_it_returns():
    model, x = _HelperLocal().eval(), torch.randn(64, 64)
    with torch.no_grad():
        m = fxinspect.analyze(model, x, timing=False).memory
    wide, big = 64 * 128 * F32, 64 * 4096 * F32
    # at relu: wide (the function's local, though a was its last reader), a's output, relu's
    assert m.peak == wide + big + big == _eager_allocator_peak(model, x)
    assert m.peak_node == "relu"


@ON_CPU
def test_a_name_rebound_in_a_loop_lets_its_old_value_go():
    model, x = _Rebinds().eval(), torch.randn(64, 64)
    with torch.no_grad():
        m = fxinspect.analyze(model, x, timing=False).memory
    big = 64 * 4096 * F32
    # in each block: its input h (held by the call and the name) and its output, never a
    # third 1 MiB value (the stem's output held through the loop would be one)
    assert m.peak == _eager_allocator_peak(model, x) == big + 64 * 64 * F32 + big
    assert m.peak < 3 * big


def test_densenets_feature_lists_and_locals_as_the_eager_model_keeps_them():
    model, x = torchvision.models.densenet121(weights=None).eval(), torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        m = fxinspect.analyze(model, x, timing=False).memory
    # the truth: storages followed through the model's own eager call (its lists of
    # features and bn_function's concatenation live until the calls that bind them return)
    # (and the kernels' scratch, probed as the estimate probes it: the lifetimes are the point)
    from fxinspect.run.memory.scratch import Scratch
    from fxinspect.run.memory.storages import StorageTracker

    tracker = StorageTracker([*model.parameters(), *model.buffers(), x], Scratch())
    with torch.no_grad(), tracker:
        model(x)
    tracker.settle()
    assert m.peak == tracker.peak


@ON_CPU
def test_measure_memory_measures_the_models_own_training_step():
    model, x = _ExpandThenBlock(), torch.randn(64, 64)
    m = fxinspect.analyze(model, x, timing=False, backward=True, measure_memory=True).memory
    # the same step as the estimate models it: forward, sum, backward, every .grad from None
    assert m.measured_eager_peak is not None and m.measured_eager_forward_peak is not None
    assert m.measured_eager_peak == pytest.approx(m.peak, rel=0.02)
    assert m.measured_eager_forward_peak == pytest.approx(m.forward_peak, rel=0.02)
    assert all(p.grad is None for p in model.parameters())  # the user's .grad untouched


@ON_CPU
def test_the_summary_calls_the_memory_an_estimate_only_when_nothing_measured_it():
    import dataclasses

    model, x = _ExpandThenBlock().eval(), torch.randn(64, 64)
    with torch.no_grad():
        estimated = fxinspect.analyze(model, x, timing=False)
        measured = fxinspect.analyze(model, x, timing=False, measure_memory=True)
    assert "an estimate of the tensor model" in estimated.summary()
    assert "an estimate of the tensor model" not in measured.summary()
    # the program measured, the model's own call not (a capture that keeps no model)
    program_only = dataclasses.replace(measured, memory=dataclasses.replace(measured.memory, measured_eager_peak=None))
    text = program_only.summary()
    assert "by torch.profiler" in text and "an estimate of the tensor model" not in text
    assert "on the model's own call" not in text


_FIRST_AND_SECOND = """
import torch, fxinspect
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
runs = [fxinspect.analyze(model, torch.randn(2, 8), timing=False, backward=True).memory for _ in range(2)]
print(runs[0].timeline == runs[1].timeline, runs[0].held_after_backward, runs[1].held_after_backward)
"""


def test_the_first_analysis_in_a_process_models_the_same_memory_as_the_next():
    """torch imports torch._dynamo lazily in the first forward under a dispatch mode, and
    that import kept the frames it ran under (and the ReLU's output they held) alive."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _FIRST_AND_SECOND], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # held after the backward: the output 2x2 and the loss (4 B), the gradients of
    # 8*32+32 + 32*2+2 weights (4 B each): 16 + 4 + 1416 bytes
    assert done.stdout.split() == ["True", "1436", "1436"]
