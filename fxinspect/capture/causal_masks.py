"""Give SDPA ``is_causal=True`` where export captured an explicit causal mask made of constants.

Under ``torch.export`` libraries cannot read tensor values, so they build an explicit
``(batch, 1, seq, seq)`` attention mask where their eager call reads the inputs, finds
nothing padded and hands ``is_causal=True`` to ``scaled_dot_product_attention``
(transformers' ``masking_utils`` does; its check asks whether the tensor is fake). The
captured program then makes, keeps alive and attends through a tensor quadratic in the
sequence that the user's call never makes (+7.5 % forward memory for a small Llama at
2,048 tokens), and SDPA with a mask takes another kernel than SDPA with ``is_causal``.

The capture is specialised to the example inputs, so where a mask depends on no input
(only on shapes, ``arange``, constants and the model's buffers) its value is known: it
is computed here on the real tensors, and when it is exactly the lower-triangular
causal mask (``True``/``0`` on and below the diagonal, ``False``/``-inf`` or the dtype's
minimum above) the SDPA call gets ``is_causal=True`` instead: the same attention for
these inputs. Where that call's key and value are the model's shared key/value heads
repeated once per query head (grouped-query attention's ``repeat_kv``), it gets the
shared heads and ``enable_gqa=True``, as the no-mask branch passes them. The mask's
nodes and the repeats, then unused, are removed. A mask that depends on an
input (a user's ``attention_mask``) or on the model's weights on the meta device, that
is not causal, or that is too large to compute here (an intermediate over 256 MiB) is
left as it was. On the meta device the mask's ops run on the CPU: its value depends on
shapes only.

Example
-------
>>> import torch, torch.fx as fx
>>> class Attend(torch.nn.Module):
...     def forward(self, q):
...         n = q.shape[-2]
...         mask = torch.ones(n, n, dtype=torch.bool).tril()
...         return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
>>> gm = torch.export.export(Attend(), (torch.randn(1, 2, 4, 8),), strict=False).module()
>>> causal_masks_to_flags(gm.graph, gm, (torch.randn(1, 2, 4, 8),))
(1, 0)
>>> [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"]
['scaled_dot_product_attention.default']
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.operator_schemas import normalize_function

__all__ = ["causal_masks_to_flags", "causal_mask_note"]

SDPA = torch.ops.aten.scaled_dot_product_attention.default
_LIMIT = 1 << 28
"""Bytes of one intermediate value above which a mask is not computed (256 MiB)."""

_UNKNOWN = object()


def causal_masks_to_flags(
    graph: fx.Graph, owner: torch.nn.Module, inputs: tuple[torch.Tensor, ...] = ()
) -> tuple[int, int]:
    """Rewrite each SDPA call whose mask is a constant causal mask: how many were
    rewritten, and how many calls kept a mask made from the inputs.

    ``inputs`` are the example tensors of the graph's placeholders, in order: their
    shapes are known (a mask may be expanded to the batch), never their values.
    """
    # (a virtual run captures under a fake mode: the masks are computed outside it)
    with unset_fake_temporarily():
        return _rewrite(graph, owner, inputs)


def _rewrite(graph: fx.Graph, owner: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[int, int]:
    """:func:`causal_masks_to_flags`, outside any fake mode."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    values: dict[fx.Node, Any] = {
        node: torch.empty(tuple(t.shape), dtype=t.dtype, device="meta") if isinstance(t, torch.Tensor) else _UNKNOWN
        for node, t in zip(placeholders, inputs)
    }
    rewritten, from_inputs, freed = 0, 0, {}
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not SDPA:
            continue
        bound = normalize_function(SDPA, node.args, node.kwargs, normalize_to_only_use_kwargs=True)
        if bound is None:
            continue
        arguments = dict(bound.kwargs)
        mask = arguments.get("attn_mask")
        if not isinstance(mask, fx.Node) or arguments.get("is_causal"):
            continue
        if not _is_causal(_value(mask, owner, values), arguments["query"], arguments["key"]):
            from_inputs += _reads_an_input(mask)
            continue
        q, k, v = arguments.pop("query"), arguments.pop("key"), arguments.pop("value")
        arguments.update(attn_mask=None, is_causal=True)
        heads_k, heads_v = _repeated_heads(k), _repeated_heads(v)
        if heads_k and heads_v and heads_k[1] == heads_v[1] and not arguments.get("enable_gqa"):
            # the no-mask branch hands SDPA the shared key/value heads (enable_gqa)
            # rather than copies repeated per query head
            freed.update({k: None, v: None})
            (k, _), (v, _) = heads_k, heads_v
            arguments["enable_gqa"] = True
        node.args, node.kwargs = (q, k, v), arguments
        rewritten += 1
        freed[mask] = None  # (one mask often serves every layer)
    for mask in freed:
        _erase_unused(mask)
    return rewritten, from_inputs


def causal_mask_note(counts: tuple[int, int]) -> list[str]:
    """The capture notes for ``causal_masks_to_flags``'s counts (none for none)."""
    rewritten, from_inputs = counts
    notes = []
    if rewritten:
        notes.append(
            f"export: {rewritten} attention call(s) took an explicit causal mask built from constants "
            "(libraries build one under torch.export, where their eager call passes is_causal=True); "
            "given is_causal=True instead, the same attention for these inputs, and the mask dropped"
        )
    if from_inputs:
        notes.append(
            f"export: {from_inputs} attention call(s) take a mask made from the inputs (an attention_mask), "
            "kept as captured: a library's eager call may make none when no token is padded (transformers "
            "passes is_causal=True then), and this program holds it"
        )
    return notes


def _reads_an_input(node: fx.Node) -> bool:
    """Whether a placeholder is among ``node``'s inputs, near or far."""
    seen, pending = set(), [node]
    while pending:
        node = pending.pop()
        if node.op == "placeholder":
            return True
        seen.add(node)
        pending.extend(n for n in node.all_input_nodes if n not in seen)
    return False


def _value(node: fx.Node, owner: torch.nn.Module, values: dict[fx.Node, Any]) -> Any:
    """The node's real value when it depends on no input, else ``_UNKNOWN`` (memoised)."""
    if node in values:
        return values[node]
    values[node] = _UNKNOWN  # a cycle cannot happen; this only guards a failure below
    if node.op == "get_attr":
        value = _attribute(owner, str(node.target))
    elif node.op == "call_function" and not _is_random(node.target):
        # a mask made on the meta device is made on the CPU here: its value depends on
        # shapes only, and so the model on meta gets the same program as on a real device
        args = _resolve(fx.node.map_aggregate((node.args, node.kwargs), _off_meta), owner, values)
        value = _UNKNOWN
        if args is not _UNKNOWN:
            try:
                value = node.target(*args[0], **args[1])
            except Exception:  # an op that needs what a fake run had: leave the mask
                value = _UNKNOWN
    else:  # a placeholder (an input), or anything with an effect
        value = _UNKNOWN
    if not _is_real(value):  # (an input's meta stand-in makes a meta value: unknown)
        value = _UNKNOWN
    values[node] = value
    return value


def _resolve(tree: Any, owner: torch.nn.Module, values: dict[fx.Node, Any]) -> Any:
    """``tree`` with its nodes replaced by their values; ``_UNKNOWN`` if any has none."""
    unknown = False

    def value_of(node: fx.Node) -> Any:
        nonlocal unknown
        value = _value(node, owner, values)
        unknown |= value is _UNKNOWN
        return value

    resolved = fx.node.map_arg(tree, value_of)
    return _UNKNOWN if unknown else resolved


def _off_meta(value: Any) -> Any:
    return torch.device("cpu") if isinstance(value, torch.device) and value.type == "meta" else value


def _attribute(owner: torch.nn.Module, target: str) -> Any:
    value: Any = owner
    for part in target.split("."):
        value = getattr(value, part, _UNKNOWN)
        if value is _UNKNOWN:
            break
    return value


def _is_random(target: Any) -> bool:
    tags = getattr(target, "tags", ())
    return torch.Tag.nondeterministic_seeded in tags


def _is_real(value: Any) -> bool:
    """Plain values, or tensors with data on a real device within the size limit."""
    leaves = value if isinstance(value, (tuple, list)) else (value,)
    for leaf in leaves:
        if leaf is _UNKNOWN:
            return False
        if isinstance(leaf, torch.Tensor):
            if leaf.is_meta or type(leaf) is not torch.Tensor and not isinstance(leaf, torch.nn.Parameter):
                return False
            if leaf.numel() * leaf.element_size() > _LIMIT:
                return False
    return True


def _is_causal(mask: Any, query: fx.Node, key: fx.Node) -> bool:
    """Whether ``mask``, broadcast to the scores' shape, is the upper-left causal mask."""
    if not isinstance(mask, torch.Tensor) or mask.is_meta or mask.dim() < 2:
        return False  # (an input's meta stand-in: its values are not known)
    q, k = query.meta.get("val"), key.meta.get("val")
    if q is None or k is None:
        return False
    rows, columns = int(q.shape[-2]), int(k.shape[-2])
    if tuple(mask.shape[-2:]) not in ((rows, columns),):
        return False
    below = torch.ones(rows, columns, dtype=torch.bool, device=mask.device).tril()
    if mask.dtype == torch.bool:
        return bool((mask == below).all())
    if not mask.is_floating_point():
        return False
    lowest = torch.finfo(mask.dtype).min
    return bool(((mask == 0) == below).all()) and bool((mask[..., ~below] <= lowest).all())


def _repeated_heads(node: fx.Node) -> tuple[fx.Node, int] | None:
    """``(shared, n)`` when ``node`` repeats each head of ``shared`` ``n`` times in a row
    (``x[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)``), else ``None``."""
    merged = node.meta.get("val")
    if node.op != "call_function" or node.target not in _RESHAPES or merged is None or merged.dim() != 4:
        return None
    expanded = node.args[0]
    if not isinstance(expanded, fx.Node) or expanded.target is not torch.ops.aten.expand.default:
        return None
    source = expanded.args[0]
    while isinstance(source, fx.Node) and source.target in _SAME_SHAPE and _same_shape(source):
        source = source.args[0]
    if not isinstance(source, fx.Node) or source.target is not torch.ops.aten.unsqueeze.default:
        return None
    shared, e, u = source.args[0], expanded.meta.get("val"), source.meta.get("val")
    base = shared.meta.get("val") if isinstance(shared, fx.Node) else None
    if base is None or e is None or u is None or base.dim() != 4 or source.args[1] != 2:
        return None
    b, h, s, d = base.shape
    n = e.shape[2]
    if (
        tuple(u.shape) != (b, h, 1, s, d)
        or tuple(e.shape) != (b, h, n, s, d)
        or tuple(merged.shape) != (b, h * n, s, d)
    ):
        return None
    return shared, int(n)


def _same_shape(node: fx.Node) -> bool:
    """A slice that keeps its input whole (``x[:, :]``)."""
    source = node.args[0]
    before, after = getattr(source, "meta", {}).get("val"), node.meta.get("val")
    return before is not None and after is not None and tuple(before.shape) == tuple(after.shape)


_RESHAPES = (torch.ops.aten.reshape.default, torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)
_SAME_SHAPE = (torch.ops.aten.slice.Tensor,)


def _erase_unused(node: fx.Node) -> None:
    """Erase ``node`` and then its inputs, as long as nothing else reads them."""
    pending, erased = [node], set()
    while pending:
        node = pending.pop()
        if node in erased or node.users or node.op in ("placeholder", "output"):
            continue  # (an input reached by two paths is met twice)
        inputs = list(node.all_input_nodes)
        node.graph.erase_node(node)
        erased.add(node)
        pending.extend(inputs)
