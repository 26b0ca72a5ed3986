"""Free ops: views, metadata, assertions and bare allocations: no flops, no bytes.

Each is registered with its :class:`~.registry.FreeReason`. A view shares its input's
storage, so it moves nothing. ``empty*`` and ``new_empty*`` allocate without writing:
free too (the op that fills the memory is counted), as are ``set_``/``resize_`` (they
rebind or grow storage, writing no element). Some names here are composites that never
reach a dispatch mode (``flatten``, ``movedim``); they are listed so that a lookup on an
export graph's node target answers as well.
"""

from __future__ import annotations

import torch

from ._util import aten_packets
from .registry import FreeReason, register_free

FREE_OPS: dict[FreeReason, tuple[str, ...]] = {
    FreeReason.VIEW: (
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "transpose_",
        "t",
        "t_",
        "unsqueeze",
        "unsqueeze_",
        "squeeze",
        "squeeze_",
        "select",
        "slice",
        "narrow",
        "as_strided",
        "as_strided_",
        "detach",
        "detach_",
        "alias",
        "split",
        "split_with_sizes",
        "unsafe_split",
        "unsafe_split_with_sizes",
        "unbind",
        "chunk",
        "unsafe_chunk",
        "tensor_split",
        "unflatten",
        "flatten",
        "view_as",
        "view_as_real",
        "view_as_complex",
        "diagonal",
        "movedim",
        "moveaxis",
        "swapaxes",
        "swapdims",
        "unfold",
        "real",
        "imag",
        "conj",
        "_conj",
        "_neg_view",
        "lift",
        "lift_fresh",
        # a sparse tensor's own index and value tensors
        "_indices",
        "_values",
        "indices",
        "values",
        "crow_indices",
        "col_indices",
    ),
    FreeReason.METADATA: (
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "sym_is_contiguous",
        "is_same_size",
        "is_non_overlapping_and_dense",
        "_nested_tensor_size",
    ),
    FreeReason.CHECK: (
        "_assert_async",
        "_assert_scalar",
        "_assert_tensor_metadata",
        "_functional_assert_async",
        "_functional_assert_scalar",
        "sym_constrain_range",
        "sym_constrain_range_for_size",
        "_functional_sym_constrain_range",
        "_functional_sym_constrain_range_for_size",
        "_make_dep_token",  # the token that orders the functional assertions
        # validation: whether a mask is all true, whether a factorisation succeeded
        "_is_all_true",
        "_is_any_true",
        "_linalg_check_errors",
        "_nested_tensor_from_mask_left_aligned",
    ),
    FreeReason.ALLOCATION: (
        "empty",
        "empty_like",
        "empty_strided",
        "empty_permuted",
        "new_empty",
        "new_empty_strided",
        "set_",
        "resize_",
        "resize_as_",
        "_efficientzerotensor",
        "record_stream",  # tells the caching allocator which stream uses the storage
    ),
}

for _reason, _names in FREE_OPS.items():
    register_free(*aten_packets(_names), reason=_reason)
register_free(torch.ops.prim.device, reason=FreeReason.METADATA)  # fake tensors ask for their device through it
