"""In-place indexed writes: the bytes of the positions they write, not of the whole tensor.

``index_copy_``, ``index_put_`` (integer indices), ``scatter_``, ``index_fill_`` and
their accumulating forms (``index_add_``, ``scatter_add_``, ``scatter_reduce_``,
``index_put_(accumulate=True)``) write only the positions their index names, as
gathers (:mod:`.movement`) read only the elements they return. A static KV cache is
written this way: ``cache.index_copy_(2, position, new)`` for one new token writes that
token's keys, not the cache (which the default, "all results written", would count,
4,096 times over for a cache of 4,096 positions). Each reads its index and what it
writes from (the source's elements the index uses; ``value`` scalars are not tensors);
the accumulating ones also read the positions they add to. 0 flops, as all scatters
(their adds are few next to the bytes). A boolean mask's positions are known only from
its values: ``index_put_`` with one keeps the default bytes, as ``masked_fill_`` and
``masked_scatter_`` do.
"""

from __future__ import annotations

import math

import torch

from ._util import arg, aten, nbytes
from .registry import Cost, register_rule


def _slice_elements(self: torch.Tensor, dim: int) -> int:
    """Elements of one index along ``dim`` (the product of the other dimensions)."""
    if self.dim() == 0:
        return 1
    return math.prod(s for d, s in enumerate(self.shape) if d != dim % self.dim())


def _cost(self: torch.Tensor, written: int, read: int, accumulates: bool) -> Cost:
    """``written`` elements of ``self``, plus ``read`` bytes; an accumulating write reads
    the positions it adds to as well."""
    size = written * self.element_size()
    return Cost(bytes_read=read + (size if accumulates else 0), bytes_written=size)


@register_rule(aten.index_copy_)
def index_copy_(args, kwargs, out):
    """(self, dim, index, source): writes the source's elements into ``self``."""
    self, index, source = args[0], arg(args, kwargs, 2, "index"), arg(args, kwargs, 3, "source")
    return _cost(self, source.numel(), nbytes(index) + nbytes(source), accumulates=False)


@register_rule(aten.index_add_)
def index_add_(args, kwargs, out):
    """(self, dim, index, source, alpha): adds the source's elements to their positions."""
    self, index, source = args[0], arg(args, kwargs, 2, "index"), arg(args, kwargs, 3, "source")
    return _cost(self, source.numel(), nbytes(index) + nbytes(source), accumulates=True)


@register_rule(aten.index_fill_)
def index_fill_(args, kwargs, out):
    """(self, dim, index, value): fills the slices the index names (``value`` a scalar
    or a 0-d tensor)."""
    self, dim, index = args[0], arg(args, kwargs, 1, "dim"), arg(args, kwargs, 2, "index")
    value = arg(args, kwargs, 3, "value")
    if not isinstance(dim, int):  # (a named dimension: the default bytes)
        return Cost()
    return _cost(self, index.numel() * _slice_elements(self, dim), nbytes(index) + nbytes(value), accumulates=False)


def _scatter(args, kwargs, accumulates: bool) -> Cost:
    """(self, dim, index, src or value, ...): one element per index element, read from
    ``src`` where it is a tensor (the part the index spans)."""
    self, index = args[0], arg(args, kwargs, 2, "index")
    src = args[3] if len(args) > 3 else kwargs.get("src", kwargs.get("value"))
    n = index.numel()
    read = nbytes(index) + (n * src.element_size() if isinstance(src, torch.Tensor) else 0)
    return _cost(self, n, read, accumulates)


@register_rule(aten.scatter_)
def scatter_(args, kwargs, out):
    """Writes its positions; ``reduce="add"/"multiply"`` reads them too."""
    return _scatter(args, kwargs, accumulates=arg(args, kwargs, 4, "reduce") is not None)


@register_rule(aten.scatter_add_)
def scatter_add_(args, kwargs, out):
    """Adds to its positions: reads and writes them."""
    return _scatter(args, kwargs, accumulates=True)


@register_rule(aten.scatter_reduce_)
def scatter_reduce_(args, kwargs, out):
    """(self, dim, index, src, reduce, include_self=True): reads its positions unless
    ``include_self=False``."""
    return _scatter(args, kwargs, accumulates=bool(arg(args, kwargs, 5, "include_self", True)))


@register_rule(aten.index_put_, aten._index_put_impl_)
def index_put_(args, kwargs, out):
    """(self, indices, values, accumulate=False): integer indices write the elements
    they select (their broadcast shape times the dimensions left whole); a boolean
    mask keeps the default bytes."""
    self, indices = args[0], list(arg(args, kwargs, 1, "indices"))
    values, accumulate = arg(args, kwargs, 2, "values"), bool(arg(args, kwargs, 3, "accumulate", False))
    given = [i for i in indices if i is not None]
    if not given or any(i.dtype in (torch.bool, torch.uint8) for i in given):
        return Cost()
    selected = math.prod(torch.broadcast_shapes(*(i.shape for i in given)))
    whole = math.prod(s for d, s in enumerate(self.shape) if d >= len(indices) or indices[d] is None)
    return _cost(self, selected * whole, nbytes(given) + nbytes(values), accumulate)
