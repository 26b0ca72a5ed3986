"""Normalisation layers: flops per input element, by what the kernel computes.

=========================  ====================================  =====================
part                        mean/variance norms (batch, layer,    RMS norm
                            group, instance)
=========================  ====================================  =====================
statistics, if computed     3 (sum x; square and sum)             2 (square and sum)
normalise                   2 (subtract mean, multiply by rstd)   1 (multiply by rstd)
affine                      1 per present weight / bias           1 if weight
backward                    2 x the forward's cost, same mode     2 x the forward's cost
=========================  ====================================  =====================

Statistics are computed in training and by layer/group/RMS norm; batch norm in eval
(``_native_batch_norm_legit_no_training``, ``training=False``, ``_batch_norm_no_update``
with running stats) is given them, so e.g. ``BatchNorm2d`` costs 7 flops/element in
training and 4 in eval. Per-channel work (running-stat updates, ``rsqrt(var + eps)``) is
not counted: it does not grow with the input -- except in RMS norm, whose CPU path is a
decomposition (``pow``, ``mean``, ``add_``, ``rsqrt``, ``mul``) that counts
``rsqrt(mean + eps)``, 2 flops per normalised row: CUDA's fused ``_fused_rms_norm``
counts them too, so that ``nn.RMSNorm`` gives one figure on every device. ``_weight_norm_interface`` costs 3 per
element of ``v`` (square and sum for the norm, one scale), backward 6.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._util import arg, aten, aten_packets, first_tensor, is_float, nbytes, numel
from .registry import Cost, Rule, register_rule

STATISTICS = {"mean_var": 3, "rms": 2}
NORMALISE = {"mean_var": 2, "rms": 1}


def norm_flops(numel: int, kind: str, stats_computed: bool = True, affine: int = 0, backward: bool = False) -> int:
    """Flops of normalising ``numel`` elements (``kind``: ``"mean_var"`` or ``"rms"``)."""
    per_element = (STATISTICS[kind] if stats_computed else 0) + NORMALISE[kind] + affine
    return numel * per_element * (2 if backward else 1)


Predicate = Callable[[tuple, dict], Any]


def _norm_rule(kind: str, computed: Predicate, affine: Predicate, backward: bool = False) -> Rule:
    """A rule: ``computed(args, kwargs)`` says whether statistics are computed,
    ``affine(args, kwargs)`` how many of weight/bias are present; elements are those of
    the first argument (the input, or grad_out of the same shape)."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        if not is_float(first_tensor(out)):
            return Cost()
        numel = args[0].numel()
        return Cost(flops=norm_flops(numel, kind, bool(computed(args, kwargs)), int(affine(args, kwargs)), backward))

    rule.__name__ = rule.__qualname__ = f"{kind}_norm{'_backward' if backward else ''}"
    return rule


def _flag(index: int, name: str) -> Predicate:
    return lambda args, kwargs: arg(args, kwargs, index, name, True)


def _present(*where: tuple[int, str]) -> Predicate:
    return lambda args, kwargs: sum(arg(args, kwargs, i, n) is not None for i, n in where)


def _weight_and_bias_if_weight(index: int) -> Predicate:
    # Backward ops get only the weight; a norm with a weight has a bias in practice.
    return lambda args, kwargs: 2 * (arg(args, kwargs, index, "weight") is not None)


_ALWAYS: Predicate = lambda args, kwargs: True  # noqa: E731
_NEVER: Predicate = lambda args, kwargs: False  # noqa: E731
_WEIGHT_BIAS_1_2 = _present((1, "weight"), (2, "bias"))

# -- forward ------------------------------------------------------------------------
BATCH_NORMS_WITH_TRAINING_FLAG = (  # (input, weight, bias, running_mean, running_var, training, ...)
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional",
    "cudnn_batch_norm",
    "miopen_batch_norm",
)
# These update running_mean/running_var in place in training without saying so in their
# schema (``Tensor?``, not ``Tensor(a!)``), so the counting mode cannot see those writes;
# the others declare them (or return the new statistics) and are handled generically.
UNDECLARED_STATISTICS_WRITES = ("native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm")


def _writes_running_statistics(rule: Rule) -> Rule:
    """``rule``, plus the bytes of the running statistics a training batch norm writes."""

    def with_statistics(args: tuple, kwargs: dict, out: Any) -> Cost:
        cost = rule(args, kwargs, out)
        stats = [arg(args, kwargs, i, n) for i, n in ((3, "running_mean"), (4, "running_var"))]
        if not arg(args, kwargs, 5, "training", True) or all(t is None for t in stats):
            return cost
        return cost._replace(bytes_written=nbytes(out) + nbytes(stats))

    return with_statistics


_batch_norm = _norm_rule("mean_var", _flag(5, "training"), _WEIGHT_BIAS_1_2)
register_rule(*aten_packets(UNDECLARED_STATISTICS_WRITES))(_writes_running_statistics(_batch_norm))
register_rule(*aten_packets(sorted(set(BATCH_NORMS_WITH_TRAINING_FLAG) - set(UNDECLARED_STATISTICS_WRITES))))(
    _batch_norm
)
register_rule(aten._native_batch_norm_legit.no_stats, aten._native_batch_norm_legit.no_stats_out)(
    _norm_rule("mean_var", _flag(3, "training"), _WEIGHT_BIAS_1_2)
)
register_rule(aten._native_batch_norm_legit_no_training)(_norm_rule("mean_var", _NEVER, _WEIGHT_BIAS_1_2))
register_rule(*aten_packets(["_batch_norm_with_update"]))(_norm_rule("mean_var", _ALWAYS, _WEIGHT_BIAS_1_2))
register_rule(*aten_packets(["_batch_norm_no_update"]))(
    # Without running statistics (track_running_stats=False) eval uses batch statistics.
    _norm_rule("mean_var", lambda args, kwargs: arg(args, kwargs, 3, "running_mean") is None, _WEIGHT_BIAS_1_2)
)
register_rule(aten.native_layer_norm)(_norm_rule("mean_var", _ALWAYS, _present((2, "weight"), (3, "bias"))))
register_rule(aten.native_group_norm)(_norm_rule("mean_var", _ALWAYS, _WEIGHT_BIAS_1_2))
_fused_rms_norm_elements = _norm_rule("rms", _ALWAYS, _present((2, "weight")))


@register_rule(*aten_packets(["_fused_rms_norm"]))
def fused_rms_norm(args, kwargs, out):
    """CUDA's fused ``F.rms_norm``: as :func:`norm_flops`, plus 2 flops per normalised
    row (``rsqrt(mean + eps)``), which the decomposition CPU and meta run counts as its
    own ``add_`` and ``rsqrt``: the same figure on every device."""
    cost = _fused_rms_norm_elements(args, kwargs, out)
    if not cost.flops:
        return cost
    rows = args[0].numel() // max(1, numel(arg(args, kwargs, 1, "normalized_shape")))
    return Cost(flops=cost.flops + 2 * rows)


# -- backward -----------------------------------------------------------------------
register_rule(aten.native_batch_norm_backward)(
    _norm_rule("mean_var", _flag(7, "train"), _weight_and_bias_if_weight(2), backward=True)
)
register_rule(*aten_packets(["batch_norm_backward"]))(
    _norm_rule(
        "mean_var",
        lambda args, kwargs: arg(args, kwargs, 7, "update", True) or arg(args, kwargs, 3, "running_mean") is None,
        _weight_and_bias_if_weight(2),
        backward=True,
    )
)
register_rule(*aten_packets(["cudnn_batch_norm_backward", "miopen_batch_norm_backward"]))(
    _norm_rule("mean_var", _ALWAYS, _weight_and_bias_if_weight(2), backward=True)
)
register_rule(aten.native_layer_norm_backward)(
    _norm_rule("mean_var", _ALWAYS, _present((5, "weight"), (6, "bias")), backward=True)
)
register_rule(aten.native_group_norm_backward)(
    _norm_rule("mean_var", _ALWAYS, _weight_and_bias_if_weight(4), backward=True)
)
register_rule(*aten_packets(["_fused_rms_norm_backward"]))(
    _norm_rule("rms", _ALWAYS, _present((4, "weight")), backward=True)
)


def _weight_norm_rule(per_element: int, name: str) -> Rule:
    # v (forward) and grad_w (backward), the first arguments, have the same shape.
    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        return Cost(flops=per_element * args[0].numel()) if is_float(first_tensor(out)) else Cost()

    rule.__name__ = rule.__qualname__ = name
    return rule


register_rule(aten._weight_norm_interface)(_weight_norm_rule(3, "weight_norm"))
register_rule(aten._weight_norm_interface_backward)(_weight_norm_rule(6, "weight_norm_backward"))
