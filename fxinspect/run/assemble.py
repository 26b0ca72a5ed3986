"""Assembly: the passes' results merged by node name into the report's records.

Each node's record is its place in the graph (name, op, target, module) plus what
every pass measured for it, merged by the node's name; module and total figures are
summed from the node records as :mod:`fxinspect.records.fields` declares (exact integer sums;
``None`` for a figure no pass measured, or that some part of the sum lacks).

Example
-------
>>> import torch, fxinspect
>>> r = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), torch.randn(2, 4), timing=False)
>>> r.modules["0"].macs, r.modules[""].macs, r.totals.macs, r.modules[""].latency      # 2*4*3
(24, 24, 24, None)
"""

from __future__ import annotations

import dataclasses
import operator
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
import torch.fx as fx

from .. import paths
from ..capture import Capture, module_of
from ..capture.calls import CALL_KEY
from ..capture.eager_calls import WITHIN_CALL
from ..records import (
    CaptureInfo,
    Environment,
    ModuleRecord,
    NodeRecord,
    TensorMeta,
    Totals,
)
from ..records.fields import sums
from ..records.registry import RECORDERS, compute_registered, registered_values
from .findings import find_nonfinite, uncounted_ops
from .params import ModuleInfo, module_infos, tensor_bytes
from .passes import PassResult
from .program import InstrumentedProgram

__all__ = ["aggregate_modules", "node_records", "report_fields", "sum_nodes"]

# every NodeRecord field with its default, in field order (a dict keeps that order
# through updates, so a merged row's values are the record's positional arguments)
_DEFAULTS = {
    f.name: (f.default if f.default is not dataclasses.MISSING else None) for f in dataclasses.fields(NodeRecord)
}


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


def node_records(cap: Capture, results: Sequence[PassResult]) -> list[NodeRecord]:
    """One record per graph node, in graph order, with every pass's values merged by name."""
    # (a loop over every node of graphs with thousands of them: lookups are hoisted)
    per_pass = [r.nodes for r in results]
    produced: dict[str, tuple[TensorMeta, ...]] = {}
    names: dict[tuple, tuple[str, str]] = {}  # (op, target, module type) -> (target, label)
    records, make, width = [], NodeRecord.of, len(_DEFAULTS)
    for node in cap.graph_module.graph.nodes:
        name, op = node.name, node.op
        path, mtype = module_of(node)
        args = node.all_input_nodes
        key = (op, node.target, mtype)
        try:
            target, label = names[key]
        except (KeyError, TypeError):  # TypeError: an unhashable target
            target, label = node_target(node, cap), node_label(node, mtype)
            try:
                names[key] = (target, label)
            except TypeError:
                pass
        row = _DEFAULTS.copy()
        row["name"], row["op"], row["target"], row["label"] = name, op, target, label
        row["module_path"], row["module_type"] = path, mtype
        row["args"] = tuple([a.name for a in args])
        row["inputs"] = tuple([m for a in args for m in produced.get(a.name, ())])
        row["outputs"] = ()
        row["call"] = node.meta.get(CALL_KEY, ())
        for measured in per_pass:
            values = measured.get(name)
            if values:
                row.update(registered_values(values) if RECORDERS else values)  # (a registered recorder's figures)
        if len(row) != width:
            unknown = sorted(set(row) - set(_DEFAULTS))
            raise ValueError(f"node {name!r}: a pass returned {unknown}, which are not NodeRecord fields")
        produced[name] = row["outputs"]
        records.append(make(*row.values()))
    return records


def sum_nodes(nodes: Iterable[NodeRecord], measured: Iterable[str] = ()) -> dict[str, Any]:
    """Every summed figure over the op nodes: ``{field name: sum}``; a figure that may be
    unknown is ``None`` unless a pass measured it."""
    return sums([n for n in nodes if n.is_op], set(measured))


def aggregate_modules(
    nodes: Iterable[NodeRecord],
    infos: Iterable[ModuleInfo],
    calls: Mapping[str, int],
    measured: Iterable[str] = (),
    leaves: Iterable[str] = (),
) -> dict[str, ModuleRecord]:
    """Sum node figures into every enclosing module, exactly. Figures not in ``measured``
    (no pass measured them) stay ``None`` for figures that may be unknown. Modules
    strictly inside one of ``leaves`` (captured as one node) get ``counted_in`` set.

    A node whose module path is not among ``infos`` (an attribute path the capture
    produced) is summed into its nearest known ancestor's subtree.
    """
    infos = list(infos)
    measured = set(measured)
    known = {i.path for i in infos}
    members: dict[str, list[NodeRecord]] = {p: [] for p in known}  # in graph order
    chains: dict[str, list[list[NodeRecord]]] = {}  # module path -> its known ancestors' lists
    for node in nodes:
        if node.is_op:
            chain = chains.get(node.module_path)
            if chain is None:
                chain = chains[node.module_path] = [members[p] for p in paths.ancestors(node.module_path) if p in known]
            for group in chain:
                group.append(node)
    leaves = set(leaves)
    records = {}
    for info in infos:
        counted_in = next((p for p in paths.ancestors(info.path) if p in leaves and p != info.path), None)
        records[info.path] = ModuleRecord(
            path=info.path,
            type=info.type,
            depth=paths.depth(info.path),
            calls=calls.get(info.path, 0),
            params=info.params,
            trainable_params=info.trainable_params,
            buffers=info.buffers,
            own_params=info.own_params,
            own_buffers=info.own_buffers,
            **sums(members[info.path], measured),
            nodes=tuple([n.name for n in members[info.path]]),
            children=info.children,
            counted_in=counted_in,
            **_receptive(members[info.path]),
        )
    return records


def _receptive(members: list[NodeRecord]) -> dict[str, Any]:
    """A module's receptive field: its output's, the last op node it ran."""
    last = members[-1] if members else None
    if last is None or last.receptive_field is None:
        return {}
    return {name: getattr(last, name) for name in ("receptive_field", "effective_stride", "effective_padding")}


def _leaves(cap: Capture) -> set[str]:
    """Modules that ran as one op: the capture's leaves, and any module a ``call_module``
    node calls (the root itself, when the whole model is one torch leaf)."""
    called = {cap.user_path(str(n.target)) for n in cap.graph_module.graph.nodes if n.op == "call_module"}
    return set(cap.leaves) | called


def report_fields(
    model: torch.nn.Module,
    program: InstrumentedProgram,
    results: Sequence[PassResult],
    virtual: bool,
    *,
    notes: Sequence[str] = (),
    chosen_notes: Sequence[str] = (),
    failures: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """Every field of :class:`~fxinspect.records.ReportRecord`, from the passes' results.

    ``report.capture.notes`` are, in order: ``notes`` (what preparing the run did), the
    capture's own, ``chosen_notes`` (why ``method="auto"`` kept this capture) and the
    passes'; ``failures`` follow the capture's own.
    """
    cap = program.capture
    measured = {f for r in results for f in r.fields}
    nodes = compute_registered(node_records(cap, results))  # (figures added by register_figure)
    infos, shared = module_infos(model)
    uncounted = uncounted_ops(nodes)
    param_bytes, buffer_bytes = tensor_bytes(model)
    root = next(i for i in infos if i.path == "")
    inputs = tuple(m for n in nodes if n.op == "placeholder" for m in n.outputs)
    output_node = next(n for n in nodes if n.op == "output")
    device = inputs[0].device if inputs else str(next(model.parameters(), torch.empty(0)).device)
    fields: dict[str, Any] = dict(
        nodes=tuple(nodes),
        modules=aggregate_modules(nodes, infos, cap.calls, measured, leaves=_leaves(cap)),
        totals=Totals(
            params=root.params,
            trainable_params=root.trainable_params,
            buffers=root.buffers,
            param_bytes=param_bytes,
            buffer_bytes=buffer_bytes,
            **sum_nodes(nodes, measured),  # over every op node, apart from the module chains
            partial=bool(uncounted),
        ),
        capture=CaptureInfo(
            cap.method,
            (*notes, *cap.notes, *chosen_notes, *(n for r in results for n in r.notes)),
            (*cap.failures, *failures),
            cap.lost_checkpoints,
        ),
        uncounted=tuple(uncounted),
        nonfinite=find_nonfinite(
            nodes,
            [s for r in results for s in r.nonfinite_sources],
            {n.name for n in cap.graph_module.graph.nodes if WITHIN_CALL in n.meta},
        ),
        shared=tuple(shared),
        inputs=inputs,
        outputs=output_node.inputs,
        timing=None,
        environment=Environment(
            torch_version=torch.__version__,
            python_version=sys.version.split()[0],
            platform=platform.platform(),
            device=device,
            num_threads=torch.get_num_threads(),
            virtual=virtual,
        ),
    )
    for r in results:
        fields.update(r.report)
    return fields
