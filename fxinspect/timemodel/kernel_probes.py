"""The workloads a calibration times, per kernel class: representative shapes, not a model's.

Each class of :data:`~.kernel_classes.CLASSES` gets a few calls spread over the measure
its curve is over (:func:`~.kernel_classes.scale`): GEMMs as a Linear runs them, from one
row to a square 1024, each call the next of weights that together outgrow the caches (a
model reads each layer's weights once a forward, from memory), batched GEMMs of attention heads, convolutions depthwise (3×3, 5×5, 7×7), grouped
(4 to 32 channels a group), small and large dense ones (1×1, 3×3, a 7×7 stem), each kind
a curve of its own, scaled
dot-product attention over 16 to 256 positions, and the streaming classes from a few
KiB to tens of MiB per call (elementwise arithmetic, transcendental activations,
reductions and softmax over the last dimension, layer norm, batch norm in eval and in
training (and its backward), max and average pooling (a global average is a mean: a reduction), embedding
lookups, dropout's random mask). On CUDA each is 8 times larger
(batch 8, or 8 times the rows), a GPU's kernels reaching their roofs only there.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from .probes import linear_over

__all__ = ["workloads"]

_STREAM = 64 * 2**20  # bytes of a GEMM's weights taken in turn: a model's next layer reads its own from memory


def _elementwise(x: torch.Tensor, y: torch.Tensor) -> None:
    torch.relu(x * 0.5 + y)  # a mul, an add and a relu: the arithmetic a residual block does


def _activations(x: torch.Tensor) -> None:
    F.gelu(x), torch.tanh(x), torch.sigmoid(x), F.silu(x)


def _reductions(x: torch.Tensor) -> None:
    torch.softmax(x, -1), x.mean(-1), x.amax(-1)


def _batch_norm(x: torch.Tensor, stats: tuple[torch.Tensor, ...], mode: str) -> None:
    F.batch_norm(x, *stats, training=mode == "train")  # (in training, the batch's statistics too)


def _random(x: torch.Tensor) -> None:
    x.bernoulli_(0.9)  # dropout's mask, drawn in place


def _batch_norm_backward(x: torch.Tensor, weight: torch.Tensor):
    """The gradients of a batch norm in training (of its input, weight and bias), as autograd asks for them."""
    _, mean, invstd = torch.ops.aten.native_batch_norm.default(x, weight, None, None, None, True, 0.1, 1e-5)
    op = torch.ops.aten.native_batch_norm_backward.default
    return functools.partial(op, torch.randn_like(x), x, weight, None, None, mean, invstd, True, 1e-5, [True] * 3)


# the convolutions whose backward is measured too: (in, out, kernel, size)
_BACKWARDS = {
    (64, 64, 3, 56),
    (672, 672, 5, 14),
    (128, 128, 3, 28),
    (448, 448, 3, 14),
    (64, 256, 1, 56),
    (512, 2048, 1, 7),
    (256, 256, 3, 14),
    (128, 32, 3, 56),
}


def _conv_backward(x: torch.Tensor, weight: torch.Tensor, stride: int, groups: int):
    """The gradients of ``x`` and ``weight`` of their convolution, as autograd asks for them."""
    out = F.conv2d(x, weight, None, stride, weight.shape[-1] // 2, 1, groups)
    grad = torch.randn_like(out)
    op = torch.ops.aten.convolution_backward.default
    padding = [weight.shape[-1] // 2] * 2
    return functools.partial(
        op, grad, x, weight, None, [stride] * 2, padding, [1, 1], False, [0, 0], groups, [True, True, False]
    )


def workloads(device: str) -> dict[str, list[tuple[str, object]]]:
    """Per kernel class, ``(label, call)`` of its workloads on ``device``, float32."""

    def t(*shape):
        return torch.randn(*shape, device=device)

    n = 1 if device == "cpu" else 8  # (the batch of the image workloads, the multiple of rows)
    out: dict[str, list[tuple[str, object]]] = {}
    out["gemm"] = [
        (
            f"{m}x{k} @ {k}x{o}",
            functools.partial(linear_over, t(m * n, k), [t(o, k) for _ in range(-(-_STREAM * n // (4 * k * o)))]),
        )
        for m, k, o in ((1, 1024, 1024), (16, 1024, 1024), (128, 768, 768), (128, 768, 3072), (1024, 1024, 1024))
    ]
    out["bmm"] = [
        (f"{b}x{m}x{k} @ {k}x{o}", functools.partial(torch.bmm, t(b * n, m, k), t(b * n, k, o)))
        for b, m, k, o in ((12, 128, 64, 128), (12, 128, 128, 64), (12, 16, 64, 16), (4, 512, 512, 512))
    ]
    convs = (  # (in, out, kernel, stride, groups, size)
        # depthwise: 3×3, 5×5 and 7×7 (about 2.25, 6 and 12 FLOPs per byte)
        (32, 32, 3, 1, 32, 112),
        (64, 64, 3, 1, 64, 56),
        (240, 240, 3, 1, 240, 28),
        (240, 240, 5, 1, 240, 28),
        (672, 672, 5, 1, 672, 14),
        (96, 96, 7, 1, 96, 56),
        (384, 384, 7, 1, 384, 14),
        # grouped, 4 to 32 channels a group
        (256, 256, 3, 1, 64, 56),
        (128, 128, 3, 1, 16, 28),
        (448, 448, 3, 1, 56, 14),
        (512, 512, 3, 1, 32, 28),
        (1024, 1024, 3, 1, 32, 14),
        # dense: 1×1 from few to many channels, 3×3 to few and many, the stems
        (16, 64, 1, 1, 1, 112),
        (64, 256, 1, 1, 1, 56),
        (512, 128, 1, 1, 1, 28),
        (160, 960, 1, 1, 1, 7),
        (512, 2048, 1, 1, 1, 7),
        (128, 32, 3, 1, 1, 56),
        (64, 64, 3, 1, 1, 56),
        (256, 256, 3, 1, 1, 14),
        (3, 32, 3, 2, 1, 224),
        (3, 64, 7, 2, 1, 224),
    )
    out["conv"] = [
        (
            f"{i}->{o} {k}x{k}/{s} g{g} @{h}",
            functools.partial(F.conv2d, t(n, i, h, h), t(o, i // g, k, k), None, s, k // 2, 1, g),
        )
        for i, o, k, s, g, h in convs
    ]
    out["conv"] += [  # the backwards of some, the gradients of the input and the weight
        (f"backward {i}->{o} {k}x{k}/{s} g{g} @{h}", _conv_backward(t(n, i, h, h), t(o, i // g, k, k), s, g))
        for i, o, k, s, g, h in convs
        if (i, o, k, h) in _BACKWARDS
    ]
    out["attention"] = [
        (
            f"12 heads x {q}",
            functools.partial(F.scaled_dot_product_attention, t(n, 12, q, 64), t(n, 12, q, 64), t(n, 12, q, 64)),
        )
        for q in (16, 64, 128, 256)
    ]
    sizes = (4096, 65536, 524288, 4194304)
    out["elementwise"] = [(f"{e} elements", functools.partial(_elementwise, t(n * e), t(n * e))) for e in sizes]
    out["activation"] = [(f"{e} elements", functools.partial(_activations, t(n * e))) for e in sizes]
    out["reduction"] = [(f"{r}x1024", functools.partial(_reductions, t(n * r, 1024))) for r in (4, 64, 512, 4096)]
    out["layer_norm"] = [
        (f"{r}x768", functools.partial(F.layer_norm, t(n * r, 768), (768,), t(768), t(768))) for r in (1, 16, 197, 2048)
    ]
    out["batch_norm"] = [
        (f"{mode} {c}@{h}", functools.partial(_batch_norm, t(n, c, h, h), (t(c), t(c).abs(), t(c), t(c)), mode))
        for c, h in ((960, 7), (2048, 7), (256, 56), (64, 112))
        for mode in ("eval", "train")
    ]
    out["batch_norm"] += [
        (f"backward {c}@{h}", _batch_norm_backward(t(n, c, h, h), t(c))) for c, h in ((2048, 7), (256, 56), (64, 112))
    ]
    out["random"] = [(f"{e} elements", functools.partial(_random, t(n * e))) for e in sizes]
    out["pool"] = [
        ("max 3x3/2 64@112", functools.partial(F.max_pool2d, t(n, 64, 112, 112), 3, 2, 1)),
        ("max 3x3/2 16@56", functools.partial(F.max_pool2d, t(n, 16, 56, 56), 3, 2, 1)),
        ("avg 2x2/2 128@56", functools.partial(F.avg_pool2d, t(n, 128, 56, 56), 2, 2)),
        ("avg 2x2/2 512@14", functools.partial(F.avg_pool2d, t(n, 512, 14, 14), 2, 2)),
    ]
    table = t(30000, 768)
    out["index"] = [
        (f"{r} of 30000x768", functools.partial(F.embedding, torch.randint(0, 30000, (n * r,), device=device), table))
        for r in (1, 16, 128, 1024)
    ]
    return out
