"""What the report concludes from its node records: uncounted ops, the NaN root cause.

Example
-------
>>> import torch, fxinspect
>>> r = fxinspect.analyze(torch.nn.Linear(2, 2), torch.tensor([[1.0, float("nan")]]), timing=False)
>>> r.nonfinite.root_cause, r.nonfinite.sources, str(r.nonfinite.kind)
('linear', ('input input_1',), 'nan')
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import torch

from ..records import NodeRecord, NonFinite, NonFiniteKind, OpStatus, UncountedOp
from ..tensors import has_data
from .values import STAT_DTYPES

__all__ = ["find_nonfinite", "nonfinite_tensors", "uncounted_ops"]


def uncounted_ops(nodes: Sequence[NodeRecord]) -> list[UncountedOp]:
    """Aten ops without a rule: op, calls, and the nodes and modules that issued them."""
    found: dict[str, tuple[int, dict[str, None], dict[str, None]]] = {}
    for node in nodes:
        for call in node.aten:
            if call.status is not OpStatus.UNCOUNTED:
                continue
            calls, names, modules = found.get(call.op, (0, {}, {}))
            names[node.name] = None
            modules[node.module_path] = None
            found[call.op] = (calls + call.calls, names, modules)
    return [UncountedOp(op, calls, tuple(n), tuple(m)) for op, (calls, n, m) in found.items()]


def _kind(nan: int, inf: int) -> NonFiniteKind:
    return NonFiniteKind.BOTH if nan and inf else NonFiniteKind.NAN if nan else NonFiniteKind.INF


def find_nonfinite(
    nodes: Sequence[NodeRecord], sources: Sequence[str], within_calls: Collection[str] = ()
) -> NonFinite | None:
    """The first op node that turned finite inputs into NaN/Inf, and all it reached.

    When no node did (the NaN came in with an input, parameter or buffer), the first
    non-finite op node is named, and ``sources`` says where the NaN came from.
    ``within_calls``: nodes that are a torch function's own workings (the eager tier's
    ``F.scaled_dot_product_attention`` builds a ``-inf`` mask and absorbs it): never a
    finding themselves, and a node's inputs are then those of the call that made them.
    """
    bad = [n for n in nodes if n.is_op and n.nonfinite and n.name not in within_calls]
    if not bad:
        return None
    by_name = {n.name: n for n in nodes} if within_calls else {}

    def inputs_finite(n: NodeRecord) -> bool:
        if not within_calls:
            return all(m.stats is None or m.stats.finite for m in n.inputs)
        todo, seen = list(n.args), set()
        while todo:  # through the call's own workings, to what it was given
            name = todo.pop()
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            record = by_name[name]
            if name in within_calls:
                todo += record.args
            elif not all(m.stats is None or m.stats.finite for m in record.outputs):
                return False
        return True

    root = next((n for n in bad if inputs_finite(n)), bad[0])
    after_root = bad[bad.index(root) + 1 :]  # `bad` is in graph order
    return NonFinite(
        root_cause=root.name,
        module_path=root.module_path,
        module_type=root.module_type,
        kind=_kind(root.nan_count or 0, root.inf_count or 0),
        inputs=root.inputs,
        downstream=tuple(n.name for n in after_root),
        sources=tuple(sources),
    )


def nonfinite_tensors(model: torch.nn.Module) -> list[str]:
    """Names of the parameters and buffers holding a NaN or Inf, each tensor checked once.

    One pass per tensor: a NaN or Inf makes the sum non-finite (a finite sum that
    overflows is then checked element by element), where full statistics would cost
    three passes over every weight.
    """
    bad, seen = [], set()
    named = list(model.named_parameters(remove_duplicate=False)) + list(model.named_buffers(remove_duplicate=False))
    with torch._C._DisableTorchDispatch():
        for name, t in named:
            if id(t) in seen or not (t.is_floating_point() and t.numel() and has_data(t)):
                continue
            seen.add(id(t))
            x = t.detach()
            if x.dtype not in STAT_DTYPES:  # (a dtype= argument makes sum several times slower)
                x = x.float()
            if not math.isfinite(x.sum().item()):
                if not bool(torch.isfinite(x).all()):
                    bad.append(name)
    return bad
