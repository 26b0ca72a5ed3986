"""Reductions, scans and softmax: flops per element of the input.

A reduction's work grows with what it reads, so it is counted per input element; a
result that is not floating point (``argmax``, ``any``, ``count_nonzero``) costs 0.

====  ===========================================================================
cost  ops
====  ===========================================================================
1     sum, nansum, mean, prod, amax, amin, max/min (reducing), argmax, argmin,
      cumsum, cumprod, cummax, cummin, any, all, count_nonzero, histc,
      segment_reduce, index_reduce (one combine per element reduced)
2     norm, linalg_vector_norm (``|x|`` or ``x * x``, then the sum), aminmax,
      histogram, histogramdd (an element's bin: subtract the lower edge, scale)
3     logcumsumexp, dist (difference, power, sum), renorm (a slice's norm: power
      and sum, then the scaling multiply)
4     var, std, var_mean, std_mean (the mean: 1; squared deviations summed: 3),
      logsumexp (max, subtract, exp, sum);
      softmax backward, log_softmax backward (per element of grad_output)
5     softmax, log_softmax, safe_softmax (max, subtract, exp, sum, divide / subtract),
      allclose (``|a - b| <= atol + rtol * |b|``: subtract, two abs, multiply, add)
====  ===========================================================================

``trace`` costs one add per diagonal element. Distances ``_cdist_forward`` cost 3 per
(pair, coordinate) (difference, power, sum), their backward twice that;
``_pdist_forward`` the same per pair of rows (``n (n - 1) / 2`` pairs).
``_euclidean_dist``, the matmul path of ``cdist`` (p = 2, many rows), computes what its
kernel computes: each row's squared norm (2 per element), then one matmul of the rows
augmented with their norms (``m * n * (d + 2)`` MACs), then a clamp and a square root
per distance.
"""

from __future__ import annotations

from ._util import aten, aten_packets, first_tensor, float_numel, is_float, per_input_element
from .registry import Cost, register_rule

PER_INPUT_ELEMENT: dict[int, tuple[str, ...]] = {
    1: (
        "sum",
        "nansum",
        "mean",
        "prod",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "cumsum",
        "cumprod",
        "cummax",
        "cummin",
        "any",
        "all",
        "count_nonzero",
        "histc",
        "segment_reduce",
    ),
    2: (
        "norm",
        "linalg_vector_norm",
        "aminmax",
        "histogram",
        "_histogramdd_from_bin_cts",
        "_histogramdd_from_bin_tensors",
        "_histogramdd_bin_edges",
    ),
    3: ("logcumsumexp", "dist", "renorm"),
    4: (
        "var",
        "std",
        "var_mean",
        "std_mean",
        "logsumexp",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
    ),
    5: ("_softmax", "_log_softmax", "_safe_softmax"),
}

for _cost, _names in PER_INPUT_ELEMENT.items():
    register_rule(*aten_packets(_names, inplace=True))(per_input_element(_cost))


@register_rule(aten.trace)
def trace(args, kwargs, out):
    """One add per diagonal element."""
    return Cost(flops=min(args[0].shape) if is_float(first_tensor(out)) else 0)


def _cdist_flops(x1, distances) -> int:
    return 3 * float_numel(distances) * x1.shape[-1]


@register_rule(aten._cdist_forward)
def cdist_forward(args, kwargs, out):
    """Pairwise p-norm distances: 3 flops per pair and coordinate."""
    return Cost(flops=_cdist_flops(args[0], first_tensor(out)))


@register_rule(*aten_packets(["index_reduce"], inplace=True))
def index_reduce(args, kwargs, out):
    """One combine per element of ``source`` (``self, dim, index, source, reduce``)."""
    source = args[3] if len(args) > 3 else kwargs["source"]
    return Cost(flops=float_numel(source))


@register_rule(aten.allclose)
def allclose(args, kwargs, out):
    """5 per element compared; the result is a Python bool, the arithmetic floating."""
    return Cost(flops=5 * float_numel(args[0]))


@register_rule(aten._euclidean_dist)
def euclidean_dist(args, kwargs, out):
    """``x1 (.., m, d)``, ``x2 (.., n, d)``: norms, one augmented matmul, clamp and sqrt."""
    x1, x2 = args[0], args[1]
    distances = first_tensor(out)
    macs = distances.numel() * (x1.shape[-1] + 2)
    return Cost(flops=2 * macs + 2 * (x1.numel() + x2.numel()) + x1.numel() + 2 * distances.numel(), macs=macs)


@register_rule(aten._pdist_forward)
def pdist_forward(args, kwargs, out):
    """Distances between every pair of rows: 3 flops per pair and coordinate."""
    return Cost(flops=_cdist_flops(args[0], first_tensor(out)))


@register_rule(aten._cdist_backward)
def cdist_backward(args, kwargs, out):
    """Twice the forward (arguments: grad, x1, x2, p, cdist)."""
    return Cost(flops=2 * _cdist_flops(args[1], args[4]))
