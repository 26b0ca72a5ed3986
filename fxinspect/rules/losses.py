"""Loss functions: flops per element of the prediction.

The forward is counted per element of the input (the reduction to a scalar included);
its backward costs the same per element of the gradient it writes. Negative
log-likelihood picks one element per target: 1 flop per target element.

====  ===========================================================================
cost  ops (and their ``*_backward``)
====  ===========================================================================
3     mse_loss (subtract, square, sum)
4     smooth_l1_loss, huber_loss (subtract, abs, the quadratic/linear branch, sum);
      multi_margin_loss, multilabel_margin_loss (subtract, add margin, clamp, sum)
5     soft_margin_loss (``log(1 + exp(-y * x))`` summed)
7     binary_cross_entropy (two logs, ``1 - p``, two products, add, sum),
      binary_cross_entropy_with_logits (its stable form: the same count)
1     nll_loss, nll_loss2d (per target element)
====  ===========================================================================
"""

from __future__ import annotations

from ._util import aten_packets, first_tensor, is_float, per_input_element, per_output_element
from .registry import Cost, register_rule

FORWARD: dict[int, tuple[str, ...]] = {
    3: ("mse_loss",),
    4: ("smooth_l1_loss", "huber_loss", "multi_margin_loss", "multilabel_margin_loss_forward"),
    5: ("soft_margin_loss",),
    7: ("binary_cross_entropy", "binary_cross_entropy_with_logits"),
}
BACKWARD: dict[int, tuple[str, ...]] = {
    3: ("mse_loss_backward",),
    4: (
        "smooth_l1_loss_backward",
        "huber_loss_backward",
        "multi_margin_loss_backward",
        "multilabel_margin_loss_backward",
    ),
    5: ("soft_margin_loss_backward",),
    7: ("binary_cross_entropy_backward",),  # with_logits' backward is pointwise ops
}

for _cost, _names in FORWARD.items():
    register_rule(*aten_packets(_names))(per_input_element(_cost))
for _cost, _names in BACKWARD.items():
    register_rule(*aten_packets(_names))(per_output_element(_cost))


def _nll_rule(target_index: int):
    def rule(args: tuple, kwargs: dict, out) -> Cost:
        return Cost(flops=args[target_index].numel() if is_float(first_tensor(out)) else 0)

    rule.__name__ = rule.__qualname__ = "nll_loss_per_target"
    return rule


register_rule(*aten_packets(["nll_loss_forward", "nll_loss2d_forward"]))(_nll_rule(1))  # (self, target, ...)
register_rule(*aten_packets(["nll_loss_backward", "nll_loss2d_backward"]))(_nll_rule(2))  # (grad, self, target, ...)
