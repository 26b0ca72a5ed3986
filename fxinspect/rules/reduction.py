"""Reductions, scans and softmax: flops per element of the input.

A reduction's work grows with what it reads, so it is counted per input element; a
result that is not floating point (``argmax``, ``any``, ``count_nonzero``) costs 0.

====  ===========================================================================
cost  ops
====  ===========================================================================
1     sum, nansum, mean, prod, amax, amin, max/min (reducing), argmax, argmin,
      cumsum, cumprod, cummax, cummin, any, all, count_nonzero, histc
2     norm, linalg_vector_norm (``|x|`` or ``x * x``, then the sum), aminmax
3     logcumsumexp
4     var, std, var_mean, std_mean (the mean: 1; squared deviations summed: 3),
      logsumexp (max, subtract, exp, sum);
      softmax backward, log_softmax backward (per element of grad_output)
5     softmax, log_softmax, safe_softmax (max, subtract, exp, sum, divide / subtract)
====  ===========================================================================

``trace`` costs one add per diagonal element. Distances ``_cdist_forward`` cost 3 per
(pair, coordinate) (difference, power, sum), their backward twice that.
"""

from __future__ import annotations

from ._util import aten, aten_packets, first_tensor, float_numel, is_float, per_input_element
from .registry import Cost, register_rule

PER_INPUT_ELEMENT: dict[int, tuple[str, ...]] = {
    1: (
        "sum", "nansum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin",
        "cumsum", "cumprod", "cummax", "cummin", "any", "all", "count_nonzero", "histc",
    ),
    2: ("norm", "linalg_vector_norm", "aminmax"),
    3: ("logcumsumexp",),
    4: (
        "var", "std", "var_mean", "std_mean", "logsumexp",
        "_softmax_backward_data", "_log_softmax_backward_data",
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


@register_rule(aten._cdist_backward)
def cdist_backward(args, kwargs, out):
    """Twice the forward (arguments: grad, x1, x2, p, cdist)."""
    return Cost(flops=2 * _cdist_flops(args[1], args[4]))
