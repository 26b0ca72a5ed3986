"""Forward memory of models captured by ``torch.export``: values live as the eager
model's frames keep them, checked against the CPU allocator on the model's own call."""

from __future__ import annotations

import pytest
import torch
from test_memory import _LocalKeptToReturn

import fxinspect

F32 = 4
ON_CPU = pytest.mark.skipif(torch.cuda.is_available(), reason="the allocator figures here are the CPU's")


class _LocalKeptFromANoGradBlock(_LocalKeptToReturn):
    """The same, ``y`` and ``z`` made in a ``torch.no_grad()`` block (export's region
    sub-graph, inlined after the trace)."""

    def forward(self, x):
        with torch.no_grad():
            y = self.up(x)
            z = torch.relu(y)
        return self.head(z)


@ON_CPU
@pytest.mark.parametrize("method", ["symbolic", "export"])
@pytest.mark.parametrize("cls", [_LocalKeptToReturn, _LocalKeptFromANoGradBlock])
def test_a_forwards_local_lives_until_it_returns_whichever_tier_captured(method, cls):
    model, x = cls().eval(), torch.randn(64, 64)
    with torch.no_grad() if cls is _LocalKeptToReturn else torch.enable_grad():
        m = fxinspect.analyze(model, x, method=method, timing=False, measure_memory=True).memory
    y, out = 64 * 4096 * F32, 64 * 16 * F32
    # relu is y's last reader, but the local y lives to the end: at head, y + relu's z + out
    assert m.peak == m.measured_eager_peak == y + y + out


class _Down(torch.nn.Module):
    """Two layers whose outputs are kept as residuals, then a 2x2 average pool."""

    def __init__(self, c):
        super().__init__()
        self.a, self.b = torch.nn.Linear(c, c), torch.nn.Linear(c, c)

    def forward(self, x):
        n, h, w, c = x.shape
        x = torch.relu(self.a(x))
        r1 = x
        x = torch.relu(self.b(x))
        r2 = x
        x = x.view(n, h // 2, 2, w // 2, 2, c).mean((2, 4))
        return x, (r1, r2, x)


class _Up(torch.nn.Module):
    """Takes its residuals off the end of a tuple, one per layer (diffusers' up blocks)."""

    def __init__(self, c):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(2 * c, c) for _ in range(3))

    def forward(self, x, res):
        for i, layer in enumerate(self.layers):
            r, res = res[-1], res[:-1]
            x = torch.relu(layer(torch.cat([x, r], -1)))
            if i == 0:
                x = x.repeat_interleave(2, 1).repeat_interleave(2, 2)
        return x


class _TupleSliceUNet(torch.nn.Module):
    """A U-Net in channels-last linear layers (no kernel scratch: the allocator sees only
    tensors), its residuals sliced off a tuple as diffusers' ``UNet2DModel`` does:
    ``res_samples, res = res[-3:], res[:-3]``; each slice is let go by the next one."""

    def __init__(self, c=16, n=3):
        super().__init__()
        self.inp = torch.nn.Linear(3, c)
        self.downs = torch.nn.ModuleList(_Down(c) for _ in range(n))
        self.ups = torch.nn.ModuleList(_Up(c) for _ in range(n))

    def forward(self, x):
        x = self.inp(x)
        res = ()
        for down in self.downs:
            x, r = down(x)
            res += r
        for up in self.ups:
            r, res = res[-3:], res[:-3]
            x = up(x, r)
        return x


class _ListPopUNet(_TupleSliceUNet):
    """The same U-Net keeping its residuals in one list, which a helper of its own (a
    method, not a module) pops one off per layer while the forward waits on it."""

    def forward(self, x):
        x = self.inp(x)
        skips = []
        for down in self.downs:
            x, r = down(x)
            skips.extend(r)
        for up in self.ups:
            x = self._up(up, x, skips)
        return x

    @staticmethod
    def _up(up, x, skips):
        for i, layer in enumerate(up.layers):
            x = torch.relu(layer(torch.cat([x, skips.pop()], -1)))
            if i == 0:
                x = x.repeat_interleave(2, 1).repeat_interleave(2, 2)
        return x


@ON_CPU
@pytest.mark.parametrize("method", ["symbolic", "export"])
@pytest.mark.parametrize("make", [_TupleSliceUNet, _ListPopUNet], ids=["tuple slices", "a callee pops"])
def test_residuals_are_let_go_as_the_model_lets_them_go(make, method):
    model, x = make().eval(), torch.randn(2, 64, 64, 3)
    with torch.no_grad():
        m = fxinspect.analyze(model, x, method=method, timing=False, measure_memory=True).memory
    # the truth is the allocator on the model's own call: every op here allocates only the
    # tensors it returns, so the estimate must equal it to the byte. Before: under export
    # the residuals entering the loop over `ups` were held through it (+3.1 %); and the
    # forward's list was read only when the forward itself last ran, so each residual the
    # helper popped after its first op was held until the helper returned (+18.6 %)
    assert m.peak == m.measured_eager_peak


def _tiny_gpt2():
    from transformers import AutoModel, GPT2Config

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=64, vocab_size=1000)
    return AutoModel.from_config(config).eval(), {"input_ids": torch.randint(0, 1000, (2, 64))}


@ON_CPU
def test_a_tiny_gpt2_captured_by_export_is_within_3_percent_of_the_allocator():
    model, inputs = _tiny_gpt2()
    with torch.no_grad():
        report = fxinspect.analyze(model, inputs, method="export", timing=False, measure_memory=True)
    m = report.memory
    # transformers' forward binds hidden states, attention outputs and masks to locals that
    # outlive their last use; before the frames were read under export the estimate was
    # 6.4 % low
    assert abs(m.peak / m.measured_eager_peak - 1) < 0.03
    assert report.capture.method == "export"
