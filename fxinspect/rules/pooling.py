"""Pooling and resampling: flops per output element, by window or neighbourhood.

=================================  =================================================
op                                  flops
=================================  =================================================
max/avg pooling (1d/2d/3d,          ``out.numel() * prod(kernel_size)`` (a compare or
fractional)                         an add per window element; the average's divide
                                    is not counted)
adaptive avg/max pooling            the exact sum of the window sizes (windows of
                                    adaptive pooling overlap when sizes don't divide)
max pooling backward                1 per grad_output element (scatter-add)
avg pooling backward                as the forward (every window spread back)
upsample/grid_sample               ``2 * n - 1`` per output element for a weighted
                                    sum of ``n`` neighbours: nearest 0, linear 3,
                                    bilinear 7, trilinear 15, bicubic 31 (the weights,
                                    computed once per row/column, are not counted)
upsample backward                   the same per grad_output element
grid_sample backward                twice that (grads of the input and of the grid)
=================================  =================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._util import arg, aten, aten_packets, first_tensor, is_float, numel, per_input_element, per_output_element
from .registry import Cost, Rule, register_rule


def window_size(kernel_size: int | Sequence[int], dims: int) -> int:
    """Elements in a pooling window; a one-element kernel size applies to every dim."""
    sizes = list(kernel_size) if isinstance(kernel_size, Sequence) else [kernel_size]
    return numel(sizes * dims if len(sizes) == 1 else sizes)


def _pool_rule(dims: int, backward: bool = False) -> Rule:
    """Window elements per output element of a forward ``(self, kernel_size, ...)``, or
    per grad_output element of an avg-pool backward ``(grad_output, self, kernel_size, ...)``."""
    kernel_at = 2 if backward else 1

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        result = first_tensor(out)
        if not is_float(result):
            return Cost()
        elements = args[0].numel() if backward else result.numel()
        return Cost(flops=elements * window_size(arg(args, kwargs, kernel_at, "kernel_size"), dims))

    rule.__name__ = rule.__qualname__ = f"pool{dims}d{'_backward' if backward else ''}"
    return rule


def adaptive_window_total(in_sizes: Sequence[int], out_sizes: Sequence[int]) -> int:
    """Sum of the window sizes of adaptive pooling from ``in_sizes`` to ``out_sizes``:
    window ``j`` of a dim spans ``[floor(j * in / out), ceil((j + 1) * in / out))``."""
    total = 1
    for size_in, size_out in zip(in_sizes, out_sizes, strict=True):
        total *= sum(-(-(j + 1) * size_in // size_out) - (j * size_in // size_out) for j in range(size_out))
    return total


def _adaptive_rule(dims: int, input_at: int) -> Rule:
    """Exact window sums; the output (or grad_output, argument 0 of a backward) gives
    the pooled sizes, the argument ``input_at`` the input sizes."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        result = first_tensor(out)
        if not is_float(result):
            return Cost()
        pooled = args[0] if input_at else result
        leading = pooled.numel() // max(numel(pooled.shape[-dims:]), 1)
        return Cost(flops=leading * adaptive_window_total(args[input_at].shape[-dims:], pooled.shape[-dims:]))

    rule.__name__ = rule.__qualname__ = f"adaptive_pool{dims}d{'_backward' if input_at else ''}"
    return rule


# Explicit tables (the tests check every name exists); 1-d pooling ops other than
# quantized_max_pool1d are composites of the 2-d ones.
WINDOWED: dict[int, tuple[str, ...]] = {
    1: ("quantized_max_pool1d",),
    2: ("max_pool2d_with_indices", "avg_pool2d", "fractional_max_pool2d", "mkldnn_max_pool2d", "quantized_max_pool2d"),
    3: ("max_pool3d_with_indices", "avg_pool3d", "fractional_max_pool3d", "mkldnn_max_pool3d", "quantized_max_pool3d"),
}
WINDOWED_BACKWARD: dict[int, tuple[str, ...]] = {2: ("avg_pool2d_backward",), 3: ("avg_pool3d_backward",)}
ADAPTIVE: dict[int, tuple[str, ...]] = {
    2: ("_adaptive_avg_pool2d", "adaptive_max_pool2d", "mkldnn_adaptive_avg_pool2d"),
    3: ("_adaptive_avg_pool3d", "adaptive_max_pool3d"),
}
ADAPTIVE_BACKWARD: dict[int, tuple[str, ...]] = {
    2: ("_adaptive_avg_pool2d_backward", "mkldnn_adaptive_avg_pool2d_backward"),
    3: ("_adaptive_avg_pool3d_backward",),
}
SCATTER_BACKWARD: tuple[str, ...] = (  # max pooling: each grad_output element added once
    "max_pool2d_with_indices_backward",
    "max_pool3d_with_indices_backward",
    "mkldnn_max_pool2d_backward",
    "mkldnn_max_pool3d_backward",
    "fractional_max_pool2d_backward",
    "fractional_max_pool3d_backward",
    "adaptive_max_pool2d_backward",
    "adaptive_max_pool3d_backward",
)

for _dims, _names in WINDOWED.items():
    register_rule(*aten_packets(_names))(_pool_rule(_dims))
for _dims, _names in WINDOWED_BACKWARD.items():
    register_rule(*aten_packets(_names))(_pool_rule(_dims, backward=True))
for _dims, _names in ADAPTIVE.items():
    register_rule(*aten_packets(_names))(_adaptive_rule(_dims, input_at=0))
for _dims, _names in ADAPTIVE_BACKWARD.items():
    register_rule(*aten_packets(_names))(_adaptive_rule(_dims, input_at=1))
register_rule(*aten_packets(SCATTER_BACKWARD))(per_input_element(1))


def interpolation_flops(neighbours: int) -> int:
    """A weighted sum of ``neighbours`` values: ``n`` multiplies and ``n - 1`` adds."""
    return 2 * neighbours - 1 if neighbours > 1 else 0


NEIGHBOURS: dict[str, int] = {
    "upsample_nearest1d": 1,
    "upsample_nearest2d": 1,
    "upsample_nearest3d": 1,
    "_upsample_nearest_exact1d": 1,
    "_upsample_nearest_exact2d": 1,
    "_upsample_nearest_exact3d": 1,
    "upsample_linear1d": 2,
    "upsample_bilinear2d": 4,
    "_upsample_bilinear2d_aa": 4,
    "upsample_trilinear3d": 8,
    "upsample_bicubic2d": 16,
    "_upsample_bicubic2d_aa": 16,
}

for _name, _n in NEIGHBOURS.items():
    register_rule(*aten_packets([_name]))(per_output_element(interpolation_flops(_n)))
    register_rule(*aten_packets([_name + "_backward"]))(per_input_element(interpolation_flops(_n)))

# grid_sampler interpolation_mode: 0 bilinear, 1 nearest, 2 bicubic.
_GRID_NEIGHBOURS = {2: {0: 4, 1: 1, 2: 16}, 3: {0: 8, 1: 1, 2: 64}}


def _grid_sampler_rule(dims: int, mode_at: int | None, backward: bool = False) -> Rule:
    """Interpolation flops per output (grad_output) element; ``mode_at`` is the index
    of ``interpolation_mode`` (``None``: cudnn's, always bilinear)."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        if not is_float(first_tensor(out)):
            return Cost()
        mode = 0 if mode_at is None else arg(args, kwargs, mode_at, "interpolation_mode", 0)
        per_element = interpolation_flops(_GRID_NEIGHBOURS[dims].get(mode, 1))
        if backward:
            grad_output = args[2] if mode_at is None else args[0]
            return Cost(flops=2 * per_element * grad_output.numel())
        return Cost(flops=per_element * first_tensor(out).numel())

    rule.__name__ = rule.__qualname__ = f"grid_sampler_{dims}d{'_backward' if backward else ''}"
    return rule


register_rule(*aten_packets(["grid_sampler_2d", "_grid_sampler_2d_cpu_fallback"]))(_grid_sampler_rule(2, 2))
register_rule(aten.grid_sampler_3d)(_grid_sampler_rule(3, 2))
register_rule(*aten_packets(["cudnn_grid_sampler"]))(_grid_sampler_rule(2, None))
register_rule(*aten_packets(["grid_sampler_2d_backward", "_grid_sampler_2d_cpu_fallback_backward"]))(
    _grid_sampler_rule(2, 3, backward=True)
)
register_rule(aten.grid_sampler_3d_backward)(_grid_sampler_rule(3, 3, backward=True))
register_rule(*aten_packets(["cudnn_grid_sampler_backward"]))(_grid_sampler_rule(2, None, backward=True))
