"""Turn what the runs recorded into the report's records.

Pure bookkeeping: per-node costs and output metadata become :class:`NodeRecord`\\ s in
graph order, module figures are summed from them, and the non-finite root cause is
found by walking the nodes in order.

Example
-------
>>> import torch, fxinspect
>>> r = fxinspect.analyze(torch.nn.Linear(2, 2), torch.tensor([[1.0, float("nan")]]), timing=False)
>>> r.nonfinite.root_cause, r.nonfinite.sources
('linear', ('input input_1',))
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import torch
import torch.fx as fx

from ..capture import Capture, module_of
from ..records import (
    AtenCall,
    ModuleRecord,
    NodeRecord,
    NonFinite,
    TensorMeta,
    UncountedOp,
    ValueStats,
)
from .dispatch import OpCost
from .graphs import OP_KINDS
from .values import Description


def node_label(node: fx.Node, module_type: str) -> str:
    """The short op name a table groups by: ``Conv2d``, ``add``, ``view``, ``convolution``."""
    if node.op == "call_module":
        return module_type
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_function":
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            return target._opname
        return getattr(target, "__name__", str(target))
    return node.op


def node_target(node: fx.Node, cap: Capture) -> str:
    """A readable target: module path, attribute path, function or method name."""
    if node.op in ("call_module", "get_attr"):
        return cap.user_path(str(node.target))
    if node.op == "call_function":
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            return str(target)
        module = getattr(target, "__module__", None) or ""
        name = getattr(target, "__qualname__", None) or getattr(target, "__name__", str(target))
        if target.__class__.__name__ == "builtin_function_or_method" and module in ("", "builtins"):
            return name
        return f"{module}.{name}" if module and target not in (operator.getitem,) else name
    return str(node.target)


Described = Sequence[tuple[Description, "int | None"]]
"""Tensors as recorded: each one's :func:`~fxinspect.values.describe` tuple and its slot in ``stats``."""


@dataclass
class RunRecords:
    """What the counting run recorded: op nodes by op index (position among op nodes),
    placeholders by name, attributes by path; statistics by the slots recorded with them."""

    costs: Mapping[int, Mapping[str, OpCost]]
    outputs: Mapping[int, Described]
    latencies: Sequence[float] | None
    placeholder_outputs: Mapping[str, Described]
    attr_outputs: Mapping[str, Described]
    stats: Sequence[ValueStats | None] = ()  # None: written in place after it was read

    def metas(self, described: Described) -> tuple[TensorMeta, ...]:
        stats = self.stats
        if len(described) == 1:  # the common case, without a list
            (shape, dtype, device, nbytes), slot = described[0]
            return (TensorMeta.of(shape, dtype, device, nbytes, stats[slot] if slot is not None else None),)
        return tuple([TensorMeta.of(*d, stats[slot] if slot is not None else None) for d, slot in described])


def _aten_calls(costs: Mapping[str, OpCost]) -> tuple[tuple[AtenCall, ...], int, int, int, int]:
    """The node's aten calls as records, and their flops, macs, bytes read and written."""
    if len(costs) == 1:  # the common case, without a loop
        ((op, c),) = costs.items()
        call = AtenCall.of(op, c.calls, c.flops, c.macs, c.bytes_read, c.bytes_written, c.status)
        return (call,), c.flops, c.macs, c.bytes_read, c.bytes_written
    calls = []
    flops = macs = read = written = 0
    for op, c in costs.items():
        calls.append(AtenCall.of(op, c.calls, c.flops, c.macs, c.bytes_read, c.bytes_written, c.status))
        flops += c.flops
        macs += c.macs
        read += c.bytes_read
        written += c.bytes_written
    return tuple(calls), flops, macs, read, written


def node_records(cap: Capture, runs: RunRecords) -> list[NodeRecord]:
    """One record per graph node, in graph order."""
    # (a loop over every node of graphs with thousands of them: lookups are hoisted)
    produced: dict[fx.Node, Sequence[TensorMeta]] = {}
    names: dict[tuple, tuple[str, str]] = {}  # (op, target, module type) -> (target, label)
    records = []
    op_index = 0
    for node in cap.graph_module.graph.nodes:
        path, mtype = module_of(node)
        args = node.all_input_nodes
        if len(args) == 1:
            inputs = produced.get(args[0], ())
        else:
            inputs = tuple([m for arg in args for m in produced.get(arg, ())])
        aten: tuple[AtenCall, ...] = ()
        flops = macs = read_bytes = written_bytes = 0
        latency = None
        op = node.op
        is_op = op in OP_KINDS
        if is_op:
            outputs = runs.metas(runs.outputs.get(op_index, ()))
            aten, flops, macs, read_bytes, written_bytes = _aten_calls(runs.costs.get(op_index, {}))
            if runs.latencies is not None:
                latency = runs.latencies[op_index]
            op_index += 1
        elif op == "placeholder":
            outputs = runs.metas(runs.placeholder_outputs.get(node.name, ()))
        elif op == "get_attr":
            outputs = runs.metas(runs.attr_outputs.get(cap.user_path(str(node.target)), ()))
        else:  # output
            outputs = ()
        produced[node] = outputs
        stats = [m.stats for m in outputs if m.stats is not None]
        if len(stats) == 1:
            nan_count, inf_count = stats[0].nan_count, stats[0].inf_count
        elif stats or (is_op and not any(_floating(m) for m in outputs)):
            # counts are known when values were read, or when nothing floating came out
            nan_count, inf_count = sum(s.nan_count for s in stats), sum(s.inf_count for s in stats)
        else:
            nan_count = inf_count = None
        key = (op, node.target, mtype)
        try:
            target, label = names[key]
        except (KeyError, TypeError):  # TypeError: an unhashable target
            target, label = node_target(node, cap), node_label(node, mtype)
            try:
                names[key] = (target, label)
            except TypeError:
                pass
        records.append(
            NodeRecord.of(
                node.name,
                op,
                target,
                label,
                path,
                mtype,
                (args[0].name,) if len(args) == 1 else tuple([a.name for a in args]),
                inputs,
                outputs,
                flops,
                macs,
                read_bytes,
                written_bytes,
                latency,
                nan_count,
                inf_count,
                aten,
            )
        )
    return records


def _floating(meta: TensorMeta) -> bool:
    return meta.dtype.startswith(("float", "bfloat", "complex"))


def uncounted_ops(nodes: Sequence[NodeRecord]) -> list[UncountedOp]:
    """Aten ops without a rule: op, calls, and the nodes and modules that issued them."""
    found: dict[str, tuple[int, dict[str, None], dict[str, None]]] = {}
    for node in nodes:
        for call in node.aten:
            if call.status != "uncounted":
                continue
            calls, names, modules = found.get(call.op, (0, {}, {}))
            names[node.name] = None
            modules[node.module_path] = None
            found[call.op] = (calls + call.calls, names, modules)
    return [UncountedOp(op, calls, tuple(n), tuple(m)) for op, (calls, n, m) in found.items()]


def _kind(nan: int, inf: int) -> str:
    return "nan+inf" if nan and inf else "nan" if nan else "inf"


def find_nonfinite(nodes: Sequence[NodeRecord], sources: Sequence[str]) -> NonFinite | None:
    """The first op node that turned finite inputs into NaN/Inf, and all it reached.

    When no node did (the NaN came in with an input, parameter or buffer), the first
    non-finite op node is named, and ``sources`` says where the NaN came from.
    """
    bad = [n for n in nodes if n.is_op and n.nonfinite]
    if not bad:
        return None

    def inputs_finite(n: NodeRecord) -> bool:
        return all(m.stats is None or m.stats.finite for m in n.inputs)

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

@dataclass(frozen=True)
class ModuleInfo:
    """What the analyser knows of one module before its nodes are summed."""

    path: str
    type: str
    params: int
    trainable_params: int
    buffers: int
    own_params: int
    own_buffers: int
    children: tuple[str, ...]


_SUMMED = ("flops", "macs", "bytes_read", "bytes_written")


def _ancestors(path: str) -> Iterable[str]:
    """``"a.b.c"`` -> ``"a.b.c", "a.b", "a", ""``."""
    while path:
        yield path
        path = path.rpartition(".")[0]
    yield ""


def aggregate_modules(
    nodes: Iterable[NodeRecord],
    infos: Iterable[ModuleInfo],
    calls: Mapping[str, int],
    timed: bool,
    leaves: Iterable[str] = (),
) -> dict[str, ModuleRecord]:
    """Sum node figures into every enclosing module, exactly (integers; latency only
    when ``timed``). Modules strictly inside one of ``leaves`` (captured as one node)
    get ``counted_in`` set to that leaf.

    A node whose module path is not among ``infos`` (an attribute path the capture
    produced) is summed into its nearest known ancestor's subtree.
    """
    infos = list(infos)
    known = {i.path for i in infos}
    # per module: [flops, macs, bytes_read, bytes_written, latency, node names] (the order of _SUMMED)
    sums: dict[str, list[Any]] = {p: [0, 0, 0, 0, 0.0, []] for p in known}
    chains: dict[str, list[list[Any]]] = {}  # module path -> its known ancestors' sums
    for node in nodes:
        if not node.is_op:
            continue
        chain = chains.get(node.module_path)
        if chain is None:
            chain = chains[node.module_path] = [sums[p] for p in _ancestors(node.module_path) if p in known]
        flops, macs, read, written, name = node.flops, node.macs, node.bytes_read, node.bytes_written, node.name
        for acc in chain:
            acc[0] += flops
            acc[1] += macs
            acc[2] += read
            acc[3] += written
            acc[5].append(name)
            if timed:
                acc[4] += node.latency
    leaves = set(leaves)
    records = {}
    for info in infos:
        acc = sums[info.path]
        counted_in = next((p for p in _ancestors(info.path) if p in leaves and p != info.path), "")
        records[info.path] = ModuleRecord(
            path=info.path,
            type=info.type,
            depth=0 if not info.path else info.path.count(".") + 1,
            calls=calls.get(info.path, 0),
            params=info.params,
            trainable_params=info.trainable_params,
            buffers=info.buffers,
            own_params=info.own_params,
            own_buffers=info.own_buffers,
            **dict(zip(_SUMMED, acc)),
            latency=acc[4] if timed else None,
            nodes=tuple(acc[5]),
            children=info.children,
            counted_in=counted_in,
        )
    return records


def sum_nodes(nodes: Iterable[NodeRecord], name: str) -> int:
    """Sum one integer figure over the op nodes."""
    return sum(getattr(n, name) for n in nodes if n.is_op)
