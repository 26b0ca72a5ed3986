"""torchvision's custom ops (detection and deformable convolution).

They exist only once torchvision is imported, so :func:`register_torchvision_rules`
registers them then: at import of :mod:`fxinspect.rules` if torchvision is already
loaded, and otherwise the first time the counting run meets a ``torchvision::`` op
(through the registry's namespace loader).

=========================  ========================================================
op                          cost
=========================  ========================================================
nms                         0 flops (its result is indices), bytes moved
roi_align (and backward)    per output element: ``samples * 8`` (a bilinear sample,
                            7, plus its share of the average); ``samples`` is
                            ``sampling_ratio ** 2``, or 4 when adaptive (a
                            data-dependent count, estimated)
deform_conv2d               the convolution's MACs (as ``aten.convolution``) plus 8
                            flops per sampled column element (bilinear sample and
                            mask); backward twice that
=========================  ========================================================
"""

from __future__ import annotations

import sys

import torch

from ._util import arg, first_tensor, is_float, numel
from .registry import Cost, register_namespace_loader, register_rule, registered_ops

BILINEAR_SAMPLE = 7  # 4 multiplies and 3 adds
ADAPTIVE_SAMPLES = 4  # sampling_ratio <= 0: ceil(roi / bins) per side, taken as 2


def _roi_align_flops(grad_or_out, sampling_ratio: int) -> int:
    samples = sampling_ratio * sampling_ratio if sampling_ratio > 0 else ADAPTIVE_SAMPLES
    return grad_or_out.numel() * samples * (BILINEAR_SAMPLE + 1)


def roi_align(args, kwargs, out):
    """(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned)."""
    result = first_tensor(out)
    return Cost(flops=_roi_align_flops(result, arg(args, kwargs, 5, "sampling_ratio")) if is_float(result) else 0)


def roi_align_backward(args, kwargs, out):
    """(grad, rois, spatial_scale, ph, pw, batch, channels, height, width, sampling_ratio, aligned)."""
    grad = args[0]
    return Cost(flops=_roi_align_flops(grad, arg(args, kwargs, 9, "sampling_ratio")) if is_float(grad) else 0)


def _deform_conv_cost(x, weight, out_spatial: int, factor: int) -> Cost:
    # Columns: every (input channel, kernel tap) sampled at every output position.
    batch, c_in = x.shape[0], x.shape[1]
    macs = batch * weight.shape[0] * out_spatial * numel(weight.shape[1:])
    columns = batch * c_in * numel(weight.shape[2:]) * out_spatial
    return Cost(flops=factor * (2 * macs + columns * (BILINEAR_SAMPLE + 1)), macs=factor * macs)


def deform_conv2d(args, kwargs, out):
    """(input, weight, offset, mask, bias, stride, padding, dilation, groups, ...); plus
    the bias add, 1 flop per output element, as for every convolution (torchvision's op
    always adds one: zeros when the layer has none)."""
    result = first_tensor(out)
    cost = _deform_conv_cost(args[0], args[1], numel(result.shape[2:]), 1)
    return cost._replace(flops=cost.flops + result.numel())


def deform_conv2d_backward(args, kwargs, out):
    """(grad, input, weight, offset, ...): gradients of input, weight and offsets."""
    return _deform_conv_cost(args[1], args[2], numel(args[0].shape[2:]), 2)


def nms(args, kwargs, out):
    """Returns indices: no floating-point result, bytes only."""
    return Cost()


RULES = {
    "nms": nms,
    "roi_align": roi_align,
    "_roi_align_backward": roi_align_backward,
    "deform_conv2d": deform_conv2d,
    "_deform_conv2d_backward": deform_conv2d_backward,
}


def register_torchvision_rules() -> bool:
    """Register the rules above if torchvision's ops are loaded; safe to call again."""
    if "torchvision" not in sys.modules:
        return False
    namespace = torch.ops.torchvision
    known = registered_ops()
    for name, rule in RULES.items():
        try:
            packet = getattr(namespace, name)
        except (AttributeError, RuntimeError):  # an older torchvision without this op
            continue
        if packet not in known:
            register_rule(packet)(rule)
    return True


register_torchvision_rules()
register_namespace_loader("torchvision", register_torchvision_rules)
