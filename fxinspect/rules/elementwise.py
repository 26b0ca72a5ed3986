"""Pointwise ops: flops per element of the result.

Every op here costs a fixed number of flops per output element (broadcasting counts
the output, in-place ``op_`` and ``out=`` variants count the same as ``op``). A
special function (``exp``, ``erf``, ``tanh``, an activation such as ``gelu`` or
``silu``) counts 1, like an add; an op defined as several tensor-tensor operations
counts each of them. A result that is not floating point (comparisons, logical and
bitwise ops, integer arithmetic) costs 0 flops; the op is still counted.

Dropout costs its one multiply per element on every path: CUDA's ``native_dropout``
counts 1, and the unfused path (CPU, meta; feature and alpha dropout everywhere) draws a
mask with ``bernoulli_`` and scales it (``div_(1 - p)``) before that multiply. Arithmetic
whose only tensor arguments are such random masks is part of drawing the mask: it costs 0
and its result is a mask too (``_util.RANDOM_MASK``). So ``Dropout`` counts 1 flop per
element, ``Dropout2d`` 1 (the broadcast multiply), ``AlphaDropout`` 2 (multiply, add),
``p=1`` 1 (a multiply by zero), eval 0.

====  ===========================================================================
cost  ops
====  ===========================================================================
1     arithmetic (add, sub, mul, div, pow, fmod, ...), unary math (exp, log, sqrt,
      rsqrt, sin, erf, ...), special functions (Bessel, gamma and zeta functions,
      orthogonal polynomials: ``special_*``, ``igamma``, ``mvlgamma``, ``frexp``),
      min/max/clamp, rounding, activations (relu, gelu,
      silu, sigmoid, tanh, hardswish, leaky_relu, elu, softplus, mish, prelu, ...),
      comparisons and logical ops (0: bool result), native_dropout (the multiply;
      drawing the mask is free), masking backward ops (threshold_backward,
      hardtanh_backward, *shrink_backward, native_dropout_backward)
2     addcmul, addcdiv (a product or quotient, then an add), glu (sigmoid, multiply),
      activation backward ops (derivative, then the multiply by grad_output:
      sigmoid_backward, gelu_backward, silu_backward, ...)
3     lerp (``start + weight * (end - start)``), linalg_cross (per component two
      products and a difference)
0     where, masked_fill (a selection: no arithmetic)
====  ===========================================================================
"""

from __future__ import annotations

from ._util import aten, aten_packets, per_output_element, per_output_element_but_masks
from .registry import register_rule

PER_OUTPUT_ELEMENT: dict[int, tuple[str, ...]] = {
    1: (
        # arithmetic
        "add",
        "sub",
        "rsub",
        "mul",
        "div",
        "floor_divide",
        "neg",
        "reciprocal",
        "pow",
        "fmod",
        "remainder",
        "copysign",
        "hypot",
        "xlogy",
        "special_xlog1py",
        "heaviside",
        "logaddexp",
        "logaddexp2",
        "polar",
        "conj_physical",
        "_conj_physical",
        "nextafter",
        "ldexp",
        # unary math
        "abs",
        "sqrt",
        "rsqrt",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "erf",
        "erfc",
        "erfinv",
        "special_erfcx",
        "lgamma",
        "digamma",
        "polygamma",
        "i0",
        "sinc",
        "logit",
        "nan_to_num",
        "deg2rad",
        "rad2deg",
        "angle",
        "igamma",
        "igammac",
        "mvlgamma",
        "frexp",
        "special_entr",
        "special_i0e",
        "special_i1",
        "special_i1e",
        "special_log_ndtr",
        "special_ndtri",
        "special_zeta",
        "special_airy_ai",
        "special_bessel_j0",
        "special_bessel_j1",
        "special_bessel_y0",
        "special_bessel_y1",
        "special_modified_bessel_i0",
        "special_modified_bessel_i1",
        "special_modified_bessel_k0",
        "special_modified_bessel_k1",
        "special_scaled_modified_bessel_k0",
        "special_scaled_modified_bessel_k1",
        "special_spherical_bessel_j0",
        "special_chebyshev_polynomial_t",
        "special_chebyshev_polynomial_u",
        "special_chebyshev_polynomial_v",
        "special_chebyshev_polynomial_w",
        "special_shifted_chebyshev_polynomial_t",
        "special_shifted_chebyshev_polynomial_u",
        "special_shifted_chebyshev_polynomial_v",
        "special_shifted_chebyshev_polynomial_w",
        "special_hermite_polynomial_h",
        "special_hermite_polynomial_he",
        "special_laguerre_polynomial_l",
        "special_legendre_polynomial_p",
        # min, max, clamp, rounding, sign
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "clamp",
        "clamp_min",
        "clamp_max",
        "floor",
        "ceil",
        "round",
        "trunc",
        "frac",
        "sign",
        "sgn",
        # activations
        "relu",
        "sigmoid",
        "tanh",
        "hardtanh",
        "threshold",
        "leaky_relu",
        "elu",
        "celu",
        "gelu",
        "silu",
        "mish",
        "hardswish",
        "hardsigmoid",
        "softplus",
        "softshrink",
        "hardshrink",
        "log_sigmoid_forward",
        "_prelu_kernel",
        "rrelu_with_noise",
        # the multiply of dropout; masks of backward ops
        "native_dropout",
        "native_dropout_backward",
        "threshold_backward",
        "hardtanh_backward",
        "hardshrink_backward",
        "softshrink_backward",
        # bool or integer results: 0 flops, counted
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_xor",
        "logical_not",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_not",
        "bitwise_left_shift",
        "bitwise_right_shift",
        "isnan",
        "isinf",
        "isposinf",
        "isneginf",
        "isfinite",
        "signbit",
    ),
    2: (
        "addcmul",
        "addcdiv",
        "glu",
        "sigmoid_backward",
        "tanh_backward",
        "gelu_backward",
        "silu_backward",
        "mish_backward",
        "hardswish_backward",
        "hardsigmoid_backward",
        "leaky_relu_backward",
        "elu_backward",
        "softplus_backward",
        "log_sigmoid_backward",
        "logit_backward",
        "rrelu_with_noise_backward",
        "_prelu_kernel_backward",
        "glu_backward",
    ),
    3: ("lerp", "linalg_cross"),
    0: ("where", "masked_fill"),
}

for _cost, _names in PER_OUTPUT_ELEMENT.items():
    register_rule(*aten_packets(_names, inplace=True))(per_output_element_but_masks(_cost))

# max/min between two tensors are pointwise; their other overloads are reductions.
register_rule(aten.max.other, aten.min.other)(per_output_element(1))
