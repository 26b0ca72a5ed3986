"""``fxinspect.watch``: exact histograms over steps, and the findings they reveal."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from reference import count_binned

import fxinspect
from fxinspect.training.binning import log2_histogram


def cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(inplace=True),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 10),
    )


def train(model, steps, lr=0.05, seed=0):
    torch.manual_seed(seed)
    x, y = torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return x


def test_histograms_keep_every_value_and_equal_numpy_on_power_of_two_edges():
    torch.manual_seed(0)
    x = torch.randn(50_000, dtype=torch.float64) * 1e-3
    x[::5] = 0
    x[1], x[2], x[3] = float("nan"), float("inf"), float("-inf")
    x[4] = 5e-324  # the smallest subnormal: still in a bin
    h = log2_histogram(x)
    assert (h.zeros, h.nan, h.pos_inf, h.neg_inf, h.total) == (10_000, 1, 1, 1, 50_000)
    assert h.finite_nonzero + h.zeros + h.nonfinite == h.total
    for sign, counts in ((1, h.positive), (-1, h.negative)):
        values = (sign * x[(sign * x > 0) & torch.isfinite(x)]).numpy()
        edges = [2.0**e for e in range(h.low, h.low + len(counts) + 1)]
        assert list(np.histogram(values, bins=edges)[0]) == list(counts)
    assert h.low == -1074


def _reference(x: torch.Tensor) -> tuple:
    """Counts by numpy, value by value: (low, negative, positive, zeros, nan, +inf, -inf)."""
    v = x.double().numpy() if x.dtype != torch.bfloat16 else x.float().double().numpy()
    finite = np.isfinite(v) & (v != 0)
    exps = np.floor(np.log2(np.abs(v[finite]))).astype(int)  # exact for floats of <= 53 bits
    signs = np.sign(v[finite])
    return exps, signs, int((v == 0).sum()), int(np.isnan(v).sum()), int((v == np.inf).sum()), int((v == -np.inf).sum())


def _values(n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """``n`` values over 16 orders of magnitude; zeros, a subnormal, NaN and ±Inf among them."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, dtype=torch.float64, generator=g) * 10.0 ** torch.randint(-8, 8, (n,), generator=g)).to(dtype)
    if dtype.is_floating_point and n > 10:
        info = torch.finfo(dtype)
        x[:6] = torch.tensor([0.0, -0.0, info.tiny / 4, float("nan"), float("inf"), float("-inf")], dtype=dtype)
    return x


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["+0.0 only", "-0.0 only"])
def test_zeros_of_one_sign_beside_subnormals_are_counted_exactly(sign):
    """Zeros are counted from the bits alone when no value has the sign bit (a ReLU's
    output), with the sign shifted out otherwise; subnormals are never zeros."""
    x = sign * torch.relu(torch.randn(100_000, generator=torch.Generator().manual_seed(0)))
    x[:3] = sign * torch.finfo(torch.float32).tiny / torch.tensor([2.0, 4.0, 8.0])  # subnormals, not zeros
    h = log2_histogram(x)
    exps, signs, zeros, *_ = _reference(x)
    assert h.zeros == zeros == int((x == 0).sum()) > 40_000
    counts = h.positive if sign > 0 else h.negative
    assert list(counts) == [int((exps == h.low + i).sum()) for i in range(len(counts))]


def test_a_tensor_binned_in_chunks_equals_numpy_value_by_value():
    """A CPU tensor of 2.5 chunks: +0.0 in the first chunk only, -0.0 and NaN in the last
    only, a subnormal in the middle one: each chunk's zeros are counted as it is binned,
    and the counts add up to numpy's over the whole tensor."""
    from fxinspect.training.binning import CHUNK

    x = _values(5 * CHUNK // 2, torch.float32, seed=3)
    x[:6] = 1.0  # (_values puts its special values at the front: place them by chunk here)
    x[:1000] = 0.0
    x[CHUNK + 5] = torch.finfo(torch.float32).tiny / 8
    x[-1000:] = -0.0
    x[-1] = float("nan")
    scratch = {}
    h = log2_histogram(x, scratch=scratch)
    exps, signs, zeros, nan, pos_inf, neg_inf = _reference(x)
    assert (h.zeros, h.nan, h.total) == (zeros, nan, x.numel()) == (1999, 1, 5 * CHUNK // 2)
    for sign, counts in ((1, h.positive), (-1, h.negative)):
        found = exps[signs == sign]
        assert list(counts) == [int((found == h.low + i).sum()) for i in range(len(counts))]
    assert h.low == -129  # the subnormal in the middle chunk, tiny / 8 = 2**-126 / 2**3, is the lowest bin
    assert [b.numel() for b in scratch.values()] == [CHUNK]  # the buffer: one chunk, never the tensor


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64])
def test_small_tensors_binned_together_equal_each_binned_alone_and_numpy(dtype):
    from fxinspect.training.binning import SmallBatch

    sizes = (1, 7, 300, 4096)
    batch = SmallBatch()
    tensors = [_values(n, dtype, seed) for seed, n in enumerate(sizes)]
    entries = [batch.add(t) for t in tensors]
    for t in tensors:
        t.zero_()  # written after it was added: the copy is what counts
    for seed, (n, entry) in enumerate(zip(sizes, entries)):
        h, x = entry.read(), _values(n, dtype, seed)
        assert h == log2_histogram(x)
        exps, signs, zeros, nan, pos_inf, neg_inf = _reference(x)
        assert (h.zeros, h.nan, h.pos_inf, h.neg_inf, h.total) == (zeros, nan, pos_inf, neg_inf, n)
        for sign, counts in ((1, h.positive), (-1, h.negative)):
            found = exps[signs == sign]
            assert list(counts) == [int((found == h.low + i).sum()) for i in range(len(counts))]
            assert len(found) == sum(counts)


def test_watch_logs_every_n_training_steps_and_leaves_the_model_as_it_was(tmp_path):
    model = cnn()
    watcher = fxinspect.watch(model, every=5)
    x = train(model, 12)
    model.eval()
    with torch.no_grad():
        model(x)  # evaluation: not a step, not logged
    watcher.remove()
    assert watcher.steps("0", "io") == [0, 5, 10] and watcher.step == 11
    assert not model._forward_hooks and not model._forward_pre_hooks and not model[0]._forward_hooks
    out = model[0](x)  # the first conv's output at step 11 is not logged; step 10's count is all of it
    assert watcher.histogram("0", "io", 10).total == out.numel()
    assert watcher.histogram("0", "io_grad", 10).total == 16  # one norm per sample
    assert watcher.histogram("0", "params", 10).total == 8 * 3 * 9 + 8
    assert watcher.histogram("7", "params_grad", 5).total == 16 * 10 + 10
    watcher.save(tmp_path / "w.json")
    back = fxinspect.Watch.load(tmp_path / "w.json")
    assert back.histogram("3", "io", 5) == watcher.histogram("3", "io", 5)
    fig = back.plot("^3$", tmp_path / "w.png")
    assert len(fig.axes) == 8 and (tmp_path / "w.png").exists()  # 4 quantities, each with its colour bar
    frame = watcher.to_frame()
    assert set(frame["quantity"]) == {"io", "io_grad", "params", "params_grad"}


def test_findings_name_the_dead_layer_the_exploding_run_and_the_first_nan():
    dead = cnn()
    with torch.no_grad():
        dead[3].weight.zero_()
        dead[3].bias.zero_()
    w = fxinspect.watch(dead, every=5)
    train(dead, 11)
    w.remove()
    assert (
        "dead units: '3' (Conv2d): at least 90% of its outputs exactly 0 at every logged step since step 0 (100% at step 10)"
        in w.summary()
    )

    wild = cnn()
    w = fxinspect.watch(wild, every=5)
    train(wild, 26, lr=50.0)
    w.remove()
    assert "exploding gradients" in w.summary()

    class NanAt(torch.nn.Module):  # a layer that goes wrong at its 8th call
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * float("nan") if self.calls == 8 else x

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), NanAt(), torch.nn.Linear(4, 2))
    w = fxinspect.watch(model, every=1)
    for _ in range(10):
        model(torch.randn(3, 4)).sum().backward()
    w.remove()
    first = "first NaN/Inf: step 7, in the model's output (checked every step); module '1' (NanAt), io: 12 NaN"
    assert w.summary().splitlines()[0].startswith(first)


def test_watch_rejects_bad_options():
    with pytest.raises(fxinspect.InputError, match="every"):
        fxinspect.watch(cnn(), every=0)
    with pytest.raises(fxinspect.InputError, match="log="):
        fxinspect.watch(cnn(), log=("activations",))


def test_watch_and_track_on_resnet18_and_bert_in_train_mode_change_nothing():
    import torchvision
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).train()
    bert = BertModel(
        BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    ).train()
    cases = [
        (resnet, (torch.randn(2, 3, 32, 32),), {}),
        (bert, (), {"input_ids": torch.randint(0, 100, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.long)}),
    ]
    for model, args, kwargs in cases:

        def loss(model=model, args=args, kwargs=kwargs):
            out = model(*args, **kwargs)
            return (out if isinstance(out, torch.Tensor) else out.last_hidden_state).pow(2).mean()

        torch.manual_seed(1)
        plain = loss()
        plain.backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        model.zero_grad()
        torch.manual_seed(1)
        with fxinspect.track(model, include=r"layer1|encoder.layer.0") as tracker:
            w = fxinspect.watch(model, every=1)
            watched = loss()
            watched.backward()
            w.remove()
        assert torch.equal(watched, plain)  # the same forward, the same gradients
        assert all(torch.equal(p.grad, g) for p, g in zip([p for p in model.parameters() if p.grad is not None], grads))
        assert any(s.kind == "grad" for s in tracker.stashes) and w.names("io_grad")
        model.zero_grad()


def test_the_heat_maps_are_one_row_per_module_and_bounded():
    from fxinspect.training.plot import MAX_ROWS, ROW_INCHES

    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 8) for _ in range(14)]
    model = torch.nn.Sequential(*layers)
    w = fxinspect.watch(model, every=1)
    for _ in range(6):
        model(torch.randn(4, 8)).pow(2).mean().backward()
    w.remove()
    few = w.plot(r"^[0-4]$")  # 5 modules, 4 quantities each
    assert few.get_size_inches()[1] == pytest.approx(5 * ROW_INCHES + 0.6)
    titles = [ax.get_title(loc="left") for ax in few.axes if ax.get_title(loc="left")]
    rows = [titles[i : i + 4] for i in range(0, 20, 4)]
    assert [{t.split(" · ")[0] for t in row} for row in rows] == [{str(i)} for i in range(5)]  # no wrapping
    many = w.plot(".*")  # 15 modules with the model: the first MAX_ROWS, said in the title
    assert many.get_size_inches()[1] == pytest.approx(MAX_ROWS * ROW_INCHES + 0.6)
    assert f"the first {MAX_ROWS} of 15 modules" in many._suptitle.get_text()


class _Poison(torch.nn.Module):
    """Passes its input through, except on the steps listed, where it makes a NaN."""

    def __init__(self):
        super().__init__()
        self.steps: set[int] = set()
        self.step = -1

    def forward(self, x):
        self.step += 1
        return x * float("nan") if self.step in self.steps else x


def _poisoned(steps):
    torch.manual_seed(0)
    poison = _Poison()
    poison.steps = set(steps)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), poison, torch.nn.Linear(8, 1))
    return model, poison


def _run(model, w, steps, skip_nonfinite=True):
    """A loop that skips the optimizer step when the loss is not finite, as GradScaler does."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        if torch.isfinite(loss) or not skip_nonfinite:
            opt.step()


def test_a_nan_between_logged_steps_is_found_at_its_exact_step():
    model, _ = _poisoned({17})
    w = fxinspect.watch(model, every=5)
    _run(model, w, 25)
    w.remove()
    text = w.summary()
    # step 17 is not logged (0, 5, 10, 15, 20): the per-step check finds it, the loop skipped it
    assert "first NaN/Inf: step 17, in the model's output (checked every step)" in text
    assert "no logged step holds it" in text


def test_the_module_that_made_a_nan_is_named_and_dead_units_survive_it():
    model, _ = _poisoned({10})
    with torch.no_grad():  # the ReLU is dead from step 0: every pre-activation negative
        model[0].weight.fill_(-1.0)
        model[0].bias.fill_(-10.0)
    w = fxinspect.watch(model, every=5)
    _run(model, w, 16, skip_nonfinite=False)  # the NaN reaches the weights: every later step is NaN
    w.remove()
    text = w.summary()
    assert "first NaN/Inf: step 10, in the model's output (checked every step); module '2' (_Poison), io" in text
    assert "dead units: '1' (ReLU)" in text and "since step 0" in text  # not hidden by the NaN steps


def test_an_inspect_block_inside_a_watched_loop_does_not_shift_its_steps():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    w = fxinspect.watch(model, every=2)
    with fxinspect.inspect(model) as ins:
        model(torch.randn(8, 4)).pow(2).mean().backward()  # step 0, inspected (its capture is not a step)
    for _ in range(3):
        model(torch.randn(8, 4)).pow(2).mean().backward()  # steps 1, 2, 3
    w.remove()
    assert w.step == 3 and w.steps("0", "io") == [0, 2] and ins.report.totals.macs == 8 * 4 * 8 + 8 * 8 * 1


class _Tied(torch.nn.Module):
    """An embedding whose weight is also the output layer's, then an in-place ReLU: the
    model's output is the last layer's output tensor, written in place by the ReLU."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.head = torch.nn.Linear(8, 32, bias=False)
        self.head.weight = self.embed.weight
        self.act = torch.nn.ReLU(inplace=True)

    def forward(self, ids):
        return self.act(self.head(self.embed(ids)))


def test_watch_bins_each_tensor_once_whoever_holds_it(monkeypatch):
    binned = count_binned(monkeypatch, lambda t: tuple(t.shape))
    model, ids = _Tied().train(), torch.randint(0, 32, (4, 6))
    watcher = fxinspect.watch(model, every=1, log=("io", "params", "params_grad"))
    model(ids).sum().backward()
    watcher.remove()
    # embed's output, head's output (before the ReLU), the tied weight once and its
    # gradient once: 4, where 8 were binned before. The ReLU wrote head's output in place
    # (its version moved): its histogram is made from head's, and the model's output is
    # that same tensor, not binned again
    assert sorted(binned) == sorted([(4, 6, 8), (4, 6, 32), (32, 8), (32, 8)])
    head, act = watcher.histogram("head", "io", 0), watcher.histogram("act", "io", 0)
    assert sum(head.negative) > 0 and sum(act.negative) == 0  # the ReLU's own values, not the head's
    with torch.no_grad():
        assert act == log2_histogram(model(ids))  # made from head's, equal to binning the output
    assert watcher.histogram("", "io", 0) == act
    assert watcher.histogram("embed", "params", 0) == watcher.histogram("head", "params", 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_histograms_of_narrow_floats_count_zeros_signed_zeros_and_subnormals(dtype):
    info = torch.finfo(dtype)
    x = torch.tensor([0.0, -0.0, info.smallest_normal / 2, -info.tiny, 1.5, -3.0, float("nan"), 0.0], dtype=dtype)
    h = log2_histogram(x)
    # zeros: 0, -0 and 0 (three); a NaN is no zero; the subnormal half of the smallest normal
    # falls in the bin below the smallest normal's
    assert (h.zeros, h.nan, h.total) == (3, 1, 8)
    smallest = int(torch.log2(torch.tensor(info.tiny, dtype=torch.float64)))
    assert h.positive[smallest - 1 - h.low] == 1 and h.negative[smallest - h.low] == 1
    assert h.positive[0 - h.low] == 1 and h.negative[1 - h.low] == 1  # 1.5 in [1, 2), -3 in [-4, -2)


def test_modules_are_hooked_only_while_a_step_is_logged():
    model = cnn()
    watcher = fxinspect.watch(model, every=3)
    hooks = torch.nn.modules.module._global_forward_hooks
    before = len(hooks)
    train(model, 1)  # step 0: logged: one forward hook for all modules; no hook on a parameter
    assert len(hooks) == before + 1 and not model[0]._forward_hooks
    assert not next(model[0].parameters())._post_accumulate_grad_hooks  # (gradients are read as the backward ends)
    train(model, 1)  # step 1: not logged, no hook but the root's two
    assert len(hooks) == before and not model[0]._forward_hooks
    assert len(model._forward_hooks) == len(model._forward_pre_hooks) == 1
    train(model, 2)  # steps 2 and 3: 3 is logged
    watcher.remove()
    assert watcher.steps("0", "params_grad") == [0, 3] and not model[0]._forward_hooks and len(hooks) == before
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_frozen_parameters_are_told_from_written_ones_also_through_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model[0].parameters(), lr=0.1)  # layer 0 trained by the optimizer (in place)
    watcher = fxinspect.watch(model, every=2)
    for _ in range(6):
        opt.zero_grad()
        model(torch.randn(16, 4)).pow(2).mean().backward()
        opt.step()
        model[3].weight.data.mul_(0.9)  # layer 3 written through .data: no version counter moves
    watcher.remove()
    found = watcher.summary()
    # layer 2 is in no optimizer and never written: frozen; 0 and 3 changed at every logged step
    assert "frozen parameters: '2'" in found
    assert "'0'" not in found.split("frozen")[1] and "'3'" not in found.split("frozen")[1]


def test_parameters_an_optimizer_writes_without_changing_are_frozen():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    with torch.no_grad():
        model[0].bias.fill_(-100.0)  # the ReLU outputs zeros: no gradient reaches layer 0
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # its step still writes layer 0 in place (adding zeros)
    watcher = fxinspect.watch(model, every=2)
    for _ in range(8):
        opt.zero_grad()
        model(torch.randn(16, 4)).sum().backward()
        opt.step()
    watcher.remove()
    assert model[0].weight._version > 0  # written by every step ...
    assert "frozen parameters: '0'" in watcher.summary()  # ... and never changed


class _Relus(torch.nn.Module):
    """A ReLU in place and one not, after a layer whose outputs hold every kind of value."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Identity(), torch.nn.Identity()
        self.relu_, self.relu = torch.nn.ReLU(inplace=True), torch.nn.ReLU()

    def forward(self, x):
        a = self.relu_(self.first(x * 1))  # (x * 1: not the user's tensor written in place)
        return a + self.relu(self.second(x * 2))


def test_a_relus_histogram_made_from_its_inputs_equals_binning_its_output(monkeypatch):
    binned = count_binned(monkeypatch)
    tiny = torch.finfo(torch.float32).tiny
    special = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), tiny / 4, -tiny / 4, 3.0, -3.0, 1e30, -1e-30, 1.0]
    x = torch.cat([torch.tensor(special), torch.randn(20000) * 100]).reshape(4, -1)  # 20,012 values: not small
    model = _Relus().train()
    watcher = fxinspect.watch(model, log=("io",))
    model(x)
    watcher.remove()
    # the two Identity layers' outputs and the sum: 3 binned; both ReLUs' made from their inputs'
    assert binned == [x.numel()] * 3
    for relu, layer, scale in (("relu_", "first", 1), ("relu", "second", 2)):
        made, direct = watcher.histogram(relu, "io", 0), log2_histogram(torch.relu(x * scale))
        assert made == direct  # every bin, the zeros (-0.0, negatives, -Inf), NaN and +Inf
        assert made.zeros == 2 + (x < 0).sum().item() and made.nan == 1 and made.pos_inf == 1
        assert sum(watcher.histogram(layer, "io", 0).negative) > 0 and sum(made.negative) == 0


def test_a_relu_whose_input_was_written_since_it_was_binned_is_binned_itself():
    class Written(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer, self.relu = torch.nn.Identity(), torch.nn.ReLU()

        def forward(self, x):
            h = self.layer(x * 1)
            h.add_(-1.0)  # after layer's histogram was taken: the ReLU's input is not what was binned
            return self.relu(h)

    x = torch.randn(64, 8)
    model = Written().train()
    watcher = fxinspect.watch(model, log=("io",))
    model(x)
    watcher.remove()
    assert watcher.histogram("relu", "io", 0) == log2_histogram(torch.relu(x - 1.0))


def test_merging_with_an_empty_histogram_equals_binning_the_values_together():
    zeros, values = torch.zeros(5), torch.tensor([3.0, -0.5, float("nan")])
    together = log2_histogram(torch.cat([zeros, values]))
    # an all-zero tensor has no bin: it widens neither side (it did to 2**-149 before)
    assert log2_histogram(zeros).merged(log2_histogram(values)) == together
    assert log2_histogram(values).merged(log2_histogram(zeros)) == together
    assert together.low == -1 and together.zeros == 5 and together.nan == 1


class _PoisonGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


class _PoisonBackward(_Poison):
    """Passes its input through; on the steps listed its backward makes a NaN (the output
    and the gradient reaching the model's output stay finite)."""

    def forward(self, x):
        self.step += 1
        return _PoisonGradient.apply(x) if self.step in self.steps else x


@pytest.mark.parametrize(
    "poison, at, first, module",
    [
        # step 25 is logged: module '2' made it there, before module '3' received it
        (_Poison, 25, "step 25, in the model's output (checked every step); module '2' (_Poison), io", "2"),
        # step 23 is not: by step 25 the weights of every module are NaN, module '0' leads
        (
            _Poison,
            23,
            "step 23, in the model's output (checked every step); the module is unknown: step 23 was not logged",
            None,
        ),
        # a backward at step 24 wrote NaN into the weights: the output at step 25 (logged) is
        # the first NaN the checks see, and module '0' only the first to hold the weights
        (
            _PoisonBackward,
            24,
            "step 25, in the model's output (checked every step); the module is unknown: the parameters already held NaN/Inf at step 25",
            None,
        ),
    ],
)
def test_a_nan_is_named_by_the_module_that_made_it_or_said_unknown_never_a_later_one(poison, at, first, module):
    from fxinspect.training.watch_page import watch_data

    torch.manual_seed(0)
    bad = poison()
    bad.steps = {at}
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), bad, torch.nn.Linear(8, 1))
    w = fxinspect.watch(model, every=5)
    _run(model, w, 30, skip_nonfinite=False)  # the NaN reaches the weights: every later step is NaN
    w.remove()
    line = w.summary().splitlines()[0]
    assert line.startswith(f"first NaN/Inf: {first}"), line
    if module is None:
        assert "module '" not in line  # no module named: not the first to hold it at a later step
    assert watch_data(w)["findings"][0]["module"] == module  # the page links the same module, or none
