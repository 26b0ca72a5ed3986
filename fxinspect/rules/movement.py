"""Data movement and factories: no flops, but bytes are read and written.

* Copies, concatenation, padding, permuting copies, scatters, sorting, selection by
  mask: 0 flops, the default bytes (all tensor arguments read, all results written);
  scatters in place write only their positions (:mod:`.scatters`).
  Accumulating scatters (``index_add``, ``scatter_add``, ``index_put(accumulate=True)``,
  ``embedding_dense_backward``) are counted as movement too: their adds are few next to
  the bytes they move.
* Gathers (``embedding``, ``index_select``, ``gather``, ``index``): read the indices and
  only the elements they return (the result's bytes), not the whole source.
* Factories and fills (``zeros``, ``arange``, ``rand*``, ``full``, ``*_like``,
  ``new_*``, ``fill_``, ``zero_``, in-place random fills): read nothing, write the result.
* ``copy_(self, src)`` and functional ``copy``: read ``src``, write ``self``'s size.
* ``_embedding_bag``: gathers rows and sums (or averages) each bag: one add per
  gathered element.
"""

from __future__ import annotations

from ._util import arg, aten, aten_packets, first_tensor, is_float, mark_random_mask, nbytes
from .registry import Cost, register_rule

MOVES: tuple[str, ...] = (
    # copies and layout changes
    "_to_copy",
    "clone",
    "lift_fresh_copy",
    "_copy_from",
    "_copy_from_and_resize",
    "resolve_conj",
    "resolve_neg",
    "_reshape_copy",
    "alias_copy",
    "view_copy",
    "as_strided_copy",
    "permute_copy",
    "transpose_copy",
    "t_copy",
    "expand_copy",
    "squeeze_copy",
    "unsqueeze_copy",
    "select_copy",
    "slice_copy",
    "split_copy",
    "split_with_sizes_copy",
    "unbind_copy",
    "diagonal_copy",
    "unfold_copy",
    "detach_copy",
    "narrow_copy",
    "view_as_real_copy",
    "view_as_complex_copy",
    # joins, repeats, pads, reorders
    "cat",
    "stack",
    "repeat",
    "repeat_interleave",
    "roll",
    "flip",
    "tril",
    "triu",
    "tril_",
    "triu_",
    "constant_pad_nd",
    "reflection_pad1d",
    "reflection_pad2d",
    "reflection_pad3d",
    "replication_pad1d",
    "replication_pad2d",
    "replication_pad3d",
    "reflection_pad1d_backward",
    "reflection_pad2d_backward",
    "reflection_pad3d_backward",
    "replication_pad1d_backward",
    "replication_pad2d_backward",
    "replication_pad3d_backward",
    "pixel_shuffle",
    "pixel_unshuffle",
    "channel_shuffle",
    "native_channel_shuffle",
    "rot90",
    "diag_embed",
    "block_diag",
    "_chunk_cat",
    "lu_unpack",
    "put",
    "put_",
    # layouts: sparse, packed and nested sequences (and an integer hash: no float arithmetic)
    "_to_sparse",
    "_pack_padded_sequence",
    "_pad_packed_sequence",
    "_nested_tensor_from_mask",
    "to_padded_tensor",
    "hash_tensor",
    "im2col",
    "col2im",
    "max_unpool2d",
    "max_unpool3d",
    # scatters and their backward counterparts
    "index_put",
    "_unsafe_index_put",
    "index_add",
    "index_copy",
    "index_fill",
    "masked_scatter",
    "masked_scatter_",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "select_scatter",
    "slice_scatter",
    "diagonal_scatter",
    "as_strided_scatter",
    "select_backward",
    "slice_backward",
    "diagonal_backward",
    "embedding_dense_backward",
    "_embedding_bag_backward",
    "_embedding_bag_dense_backward",
    "unfold_backward",
    "_unsafe_masked_index_put_accumulate",
    "complex",
    # selection by mask or order
    "masked_select",
    "nonzero",
    "nonzero_static",
    "topk",
    "sort",
    "kthvalue",
    "median",
    "nanmedian",
    "mode",
    "_unique2",
    "unique_dim",
    "unique_consecutive",
    "searchsorted",
    "bucketize",
    "bincount",
    "isin",
    "equal",
    # random draws that read a tensor of parameters (probabilities, means, rates)
    "normal",
    "poisson",
    "multinomial",
    # a scalar read back to Python
    "_local_scalar_dense",
)
GATHERS: tuple[str, ...] = (
    "embedding",
    "index_select",
    "gather",
    "index",
    "_unsafe_index",
    "_unsafe_masked_index",
    "take",
)
FACTORIES: tuple[str, ...] = (
    "zeros",
    "ones",
    "full",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "scalar_tensor",
    "rand",
    "randn",
    "randint",
    "randperm",
    "zeros_like",
    "ones_like",
    "full_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "new_zeros",
    "new_ones",
    "new_full",
    "tril_indices",
    "triu_indices",
    "fill",
    "fill_",
    "zero",
    "zero_",
    # random fills: only the shape of ``self`` is used
    "normal_",
    "uniform",
    "uniform_",
    "exponential",
    "exponential_",
    "geometric",
    "geometric_",
    "cauchy",
    "cauchy_",
    "log_normal",
    "log_normal_",
    "random",
    "random_",
)


@register_rule(*aten_packets(MOVES))
def move(args, kwargs, out):
    """No arithmetic; the default bytes."""
    return Cost()


@register_rule(*aten_packets(GATHERS))
def gather_like(args, kwargs, out):
    """Reads the indices and the elements it returns, not the whole source tensor."""
    # Index tensors follow the source tensor (aten.index takes a list of them).
    return Cost(bytes_read=nbytes(args[1:]) + nbytes(out))


@register_rule(*aten_packets(FACTORIES))
def factory(args, kwargs, out):
    """Writes its result, reads nothing (shape and fill value come from Python)."""
    return Cost(bytes_read=0)


@register_rule(aten.bernoulli_)
def bernoulli_(args, kwargs, out):
    """A random fill (reads the shape of ``self``, and ``p`` if a tensor); the result is a
    random mask (:data:`._util.RANDOM_MASK`)."""
    mark_random_mask(out)
    return Cost(bytes_read=nbytes(arg(args, kwargs, 1, "p")))


@register_rule(aten.bernoulli)
def bernoulli(args, kwargs, out):
    """A random draw reading a tensor of probabilities; the result is a random mask
    (:data:`._util.RANDOM_MASK`)."""
    mark_random_mask(out)
    return Cost()


@register_rule(aten.copy_, aten.copy)
def copy_(args, kwargs, out):
    """Reads ``src``, writes ``self`` (or, functional ``copy``, a tensor of its size)."""
    return Cost(bytes_read=nbytes(args[1]), bytes_written=nbytes(args[0]))


@register_rule(aten._embedding_bag, aten._embedding_bag_forward_only)
def embedding_bag(args, kwargs, out):
    """(weight, indices, offsets, ...): one add per gathered element; reads those rows."""
    weight, indices = args[0], args[1]
    gathered = indices.numel() * weight.shape[-1]
    row_bytes = gathered * weight.element_size()
    flops = gathered if is_float(first_tensor(out)) else 0
    return Cost(flops=flops, bytes_read=nbytes(args[1:3]) + row_bytes)
