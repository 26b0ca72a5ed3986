"""Kernel classes: which measured efficiency curve prices an aten op.

A calibrated spec (:mod:`.calibration`) holds, per kernel class, the share of the
roofline an op of that class reaches, as a curve over one measure of the op
(:func:`scale`): FLOPs per byte for the classes whose work is arithmetic (GEMMs,
convolutions, attention), bytes moved per call for those that stream memory
(elementwise ops, activations, reductions, normalizations, pooling, lookups). This
module is the one place that says which class an op is in; :mod:`.pricing` prices with
it and the benchmarks group ops by it.

``kernel_class(op)`` reads the overload's name (``"aten.convolution.default"``, as a
report's :class:`~fxinspect.records.nodes.AtenCall` gives it, or the op itself); a
backward is in its forward's class. The name does not tell a convolution's kind, which
its arguments do (:func:`~fxinspect.rules.kinds.call_kind`): ``"depthwise"`` (one input
channel per group), ``"grouped"`` or ``"dense"``; nor whether a batch norm computes its
batch's statistics (``"train"``). The counting keeps it on the call
(:attr:`~fxinspect.records.nodes.AtenCall.kind`), and a calibration measures each kind
on a curve of its own (:data:`KIND_CURVES`, :func:`curve_of`): at the same FLOPs per
byte they run far apart (a 7×7 depthwise convolution does about 12 per byte in
float32, as a 1×1 one on 16 channels does, and reaches a fraction of its share on a
CPU). :func:`priced_class` is the class a kind's curve belongs to.

Example
-------
>>> kernel_class("aten.convolution.default")
'conv'
>>> import torch
>>> x, w = torch.randn(1, 32, 8, 8), torch.randn(32, 1, 3, 3)
>>> kernel_class("aten.convolution.default", (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 32))
'conv.depthwise'
>>> kernel_class("aten.gelu_backward.default"), kernel_class("aten.bmm.default")
('activation', 'bmm')
"""

from __future__ import annotations

from typing import Any

from ..rules.kinds import call_kind

__all__ = [
    "BY_INTENSITY",
    "CLASSES",
    "CONV_KINDS",
    "KIND_CURVES",
    "MEASURED_BY_KIND",
    "curve_of",
    "kernel_class",
    "priced_class",
    "scale",
]

# op names (the overload's packet name, without "aten." and the overload), per class
_NAMES: dict[str, tuple[str, ...]] = {
    "gemm": ("mm", "addmm", "linear", "_addmm_activation", "addmv", "mv", "dot", "vdot", "addr", "outer"),
    "bmm": ("bmm", "baddbmm"),
    "conv": (
        "convolution",
        "_convolution",
        "mkldnn_convolution",
        "conv2d",
        "conv1d",
        "conv3d",
        "conv_transpose2d",
        # (the device's own kernels, as a profiler names what a convolution ran)
        "cudnn_convolution",
        "cudnn_convolution_transpose",
        "miopen_convolution",
        "_conv_depthwise2d",
    ),
    "attention": (
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_attention_math",
        "scaled_dot_product_attention",
        "_flash_attention_forward",
        "_efficient_attention_forward",
        # (a whole attention block, projections included, as nn.MultiheadAttention's fast path runs it)
        "_native_multi_head_attention",
        "_transformer_encoder_layer_fwd",
    ),
    "layer_norm": ("native_layer_norm", "native_group_norm", "_fused_rms_norm", "rms_norm", "_weight_norm_interface"),
    "batch_norm": (
        "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_functional",
        "native_batch_norm",
        "cudnn_batch_norm",
        "miopen_batch_norm",
    ),
    "pool": (
        "max_pool2d_with_indices",
        "max_pool2d",
        "max_pool3d_with_indices",
        "avg_pool2d",
        "avg_pool3d",
        "adaptive_avg_pool2d",
        "_adaptive_avg_pool2d",
        "adaptive_max_pool2d",
        "avg_pool1d",
        "max_pool1d",
        "upsample_nearest2d",
        "upsample_bilinear2d",
    ),
    "reduction": (
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "var",
        "var_mean",
        "std",
        "norm",
        "linalg_vector_norm",
        "_softmax",
        "_log_softmax",
        "softmax",
        "log_softmax",
        "cumsum",
        "prod",
        "logsumexp",
        "any",
        "all",
        "topk",
        "sort",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
    ),
    # transcendental: several instructions an element, where the others take one or two
    "activation": (
        "gelu",
        "tanh",
        "sigmoid",
        "silu",
        "exp",
        "log",
        "erf",
        "softplus",
        "mish",
        "elu",
        "log_sigmoid_forward",
        "pow",
        "sin",
        "cos",
        "rsqrt",
        "sqrt",
        "reciprocal",
    ),
    "index": ("embedding", "embedding_dense_backward", "index_select", "gather", "index", "take", "index_put"),
    # random numbers: a generator's arithmetic an element (dropout's mask), far below a copy on a CPU
    "random": (
        "bernoulli",
        "native_dropout",
        "rand",
        "randn",
        "rand_like",
        "randn_like",
        "randint",
        "uniform",
        "normal",
        "exponential",
        "random",
        "multinomial",
    ),
}
_BY_NAME = {name: cls for cls, names in _NAMES.items() for name in names}
_BACKWARD = {  # backwards whose names are not their forward's with "_backward" added
    "convolution_backward": "conv",
    "cudnn_convolution_backward": "conv",
    "_efficient_attention_backward": "attention",
    "_flash_attention_backward": "attention",
    "native_batch_norm_backward": "batch_norm",
    "threshold_backward": "elementwise",
    "native_dropout_backward": "elementwise",  # (the gradient times the mask)
    "max_pool2d_with_indices_backward": "pool",
}

CLASSES = (
    "gemm",
    "bmm",
    "conv",
    "attention",
    "elementwise",
    "activation",
    "reduction",
    "layer_norm",
    "batch_norm",
    "pool",
    "index",
    "random",
)
"""The classes a calibration measures; any other op (and any op of an uncalibrated spec) is priced at the roofline."""
CONV_KINDS = ("depthwise", "grouped", "dense")
KIND_CURVES = (
    *(f"conv.{kind}" for kind in CONV_KINDS),
    *(f"conv.{kind}.backward" for kind in CONV_KINDS),
    "batch_norm.train",
    "batch_norm.train.backward",
)
"""The curves a calibration measures by kind (:func:`~fxinspect.rules.kinds.call_kind`)
besides the classes': a convolution's kinds, forward and backward (``"conv"`` is their
forwards' points together), a batch norm computing its batch's statistics, and its backward."""
MEASURED_BY_KIND = frozenset({"conv"})
"""The classes whose every workload has a kind: their own curve is their kinds' forwards together."""
BY_INTENSITY = frozenset({"gemm", "bmm", "conv", "attention"})
"""The classes whose curve is over FLOPs per byte; the others' is over bytes moved per call."""


def kernel_class(op: Any, args: tuple | None = None) -> str:
    """The kernel class of aten ``op`` (an overload, or its name as ``str(op)`` gives
    it); with its ``args``, a convolution's kind (see the module). Ops of no class of
    :data:`CLASSES` are ``"elementwise"`` (pointwise arithmetic, copies, concatenation:
    a read and a write of each element)."""
    name, _, overload = str(op).removeprefix("aten.").partition(".")
    name = name.rstrip("_") if not name.endswith("__") else name  # (in place: ``relu_`` is ``relu``'s class)
    if overload.startswith("other"):  # (``max.other``: two tensors' elementwise maximum, no reduction)
        return "elementwise"
    cls = _BY_NAME.get(name) or _BACKWARD.get(name)
    if cls is None and name.endswith("_backward"):
        cls = _BY_NAME.get(name.removesuffix("_backward"))
        cls = cls or next((c for n, c in _BY_NAME.items() if name.startswith(n) and len(n) > 3), None)
    cls = cls or "elementwise"
    kind = call_kind(op, args) if args is not None else ""
    return f"{cls}.{kind}" if kind else cls


def curve_of(cls: str, kind: str, backward: bool, curves) -> str:
    """The curve of ``curves`` (a spec's efficiencies) that prices an op of class ``cls``
    and ``kind``: its kind's backward's (``"conv.depthwise.backward"``) for a
    ``backward`` op, else its kind's (``"conv.depthwise"``), where measured; else its class's."""
    if kind:
        own = f"{cls}.{kind}"
        if backward and f"{own}.backward" in curves:
            return f"{own}.backward"
        if own in curves:
            return own
    return cls


def priced_class(cls: str) -> str:
    """The class a curve belongs to: a convolution kind's, ``"conv.depthwise"``, is ``"conv"``'s."""
    return cls.split(".")[0]


def scale(cls: str, flops: float, moved: float, calls: int) -> float:
    """The measure ``cls``'s curve is over: FLOPs per byte moved, or bytes moved per call."""
    if priced_class(cls) in BY_INTENSITY:
        return flops / moved if moved else 0.0
    return moved / max(calls, 1)
