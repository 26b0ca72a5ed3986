"""The dataflow of a report as a ``networkx.DiGraph``, per node or per module.

Node level: one graph node per :class:`~fxinspect.records.NodeRecord`, keyed by its
name, carrying the record's fields as plain attributes; an edge from each producer
to each consumer carries the producer's output ``tensor`` (a ``TensorMeta``, or a
tuple of them for a multi-output producer) and its ``bytes``.

Module level: op nodes collapse into their module, cut to ``depth`` path components;
model inputs and outputs become the graph nodes ``"input"`` and ``"output"``. A module
node's figures are those of the ops collapsed into it, so they add up to the totals over
the graph at any depth; ``subtree_<figure>`` holds the module's whole subtree.

Example
-------
>>> import torch, fxinspect
>>> blocks = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()) for _ in range(3)])
>>> report = fxinspect.analyze(blocks, torch.randn(2, 4), timing=False, memory=False)
>>> g = to_networkx(report)
>>> g.nodes["_0_0"]["flops"], g.edges["input_1", "_0_0"]["tensor"].shape     # 2 * 2*4*4 + 2*4 bias adds
(72, (2, 4))
>>> m = to_networkx(report, by="module", depth=1)
>>> list(m.nodes), list(m.successors("input"))
(['input', '0', '1', '2', 'output'], ['0'])
"""

from __future__ import annotations

import dataclasses
from typing import Any

import networkx as nx

from . import paths
from .choices import Choice
from .errors import renamed
from .records import NodeRecord, ReportRecord, TensorMeta
from .records.fields import sums

__all__ = ["Level", "to_networkx"]

INPUT, OUTPUT = "input", "output"


class Level(Choice):
    """What one graph node stands for."""

    NODE = "node"
    MODULE = "module"
    DIAGRAM = "diagram"


def _attributes(record: Any) -> dict[str, Any]:
    """A record's fields as plain Python values (nested records become dicts)."""
    return dataclasses.asdict(record)


def _tensor(producer: NodeRecord) -> TensorMeta | tuple[TensorMeta, ...] | None:
    """What an edge from ``producer`` carries: its output, or a tuple of several."""
    outs = producer.outputs
    return outs[0] if len(outs) == 1 else (tuple(outs) or None)


def _size(producer: NodeRecord) -> int:
    """Bytes of everything ``producer`` outputs."""
    return sum(t.nbytes for t in producer.outputs)


def _node_graph(report: ReportRecord) -> nx.DiGraph:
    """One graph node per record, one edge per (producer, consumer) pair."""
    g = nx.DiGraph(level=Level.NODE.value)
    by_name = {n.name: n for n in report.nodes}
    for n in report.nodes:
        g.add_node(n.name, **_attributes(n))
    for n in report.nodes:
        for arg in n.args:
            if arg not in by_name:
                raise KeyError(f"node {n.name!r} reads {arg!r}, which is not a node of the report")
            if g.has_edge(arg, n.name):  # x + x: one edge, read twice
                g.edges[arg, n.name]["reads"] += 1
                continue
            producer = by_name[arg]
            g.add_edge(arg, n.name, tensor=_tensor(producer), bytes=_size(producer), reads=1)
    return g


def _module_graph(report: ReportRecord, depth: int | None) -> nx.DiGraph:
    """Op nodes collapsed into their modules cut to ``depth``; see :func:`to_networkx`."""
    g = nx.DiGraph(level=Level.MODULE.value, depth=depth)
    # a module may itself be called "input"/"output": the endpoints then step aside
    source = INPUT if INPUT not in report.modules else f"({INPUT})"
    sink = OUTPUT if OUTPUT not in report.modules else f"({OUTPUT})"

    def group(n: NodeRecord) -> str:
        if n.op == "placeholder":
            return source
        if n.op == "output":
            return sink
        # a path the capture made up (not a module of the report) joins its nearest module
        return paths.nearest(paths.cut(n.module_path, depth), report.modules)

    groups = {n.name: group(n) for n in report.nodes}
    g.add_node(source, kind="input", tensors=tuple(report.inputs), bytes=sum(t.nbytes for t in report.inputs))
    for n in report.nodes:
        key = groups[n.name]
        if key in (source, sink) or key in g:
            continue
        record = report.modules.get(key)
        attrs = _attributes(record) if record else {"path": key}
        g.add_node(key, kind="module", **attrs)
    g.add_node(sink, kind="output", tensors=tuple(report.outputs), bytes=sum(t.nbytes for t in report.outputs))

    members: dict[str, list[NodeRecord]] = {k: [] for k, kind in g.nodes(data="kind") if kind == "module"}
    for n in report.nodes:
        if n.is_op and groups[n.name] in members:
            members[groups[n.name]].append(n)
    for key, nodes in members.items():
        attrs = g.nodes[key]
        attrs["members"] = tuple(n.name for n in nodes)
        for name, total in _flat(sums(nodes)).items():  # the record's subtree figure steps aside
            attrs[f"subtree_{name}"] = attrs.get(name)
            attrs[name] = total

    by_name = {n.name: n for n in report.nodes}
    seen: set[tuple[str, str]] = set()  # (producer, target group)
    for n in report.nodes:
        dst = groups[n.name]
        for arg in n.args:
            src = groups[arg]
            if src == dst or (arg, dst) in seen:
                continue  # a tensor crosses into a module once, however many ops read it
            seen.add((arg, dst))
            size = _size(by_name[arg])
            if g.has_edge(src, dst):
                g.edges[src, dst]["count"] += 1
                g.edges[src, dst]["bytes"] += size
            else:
                g.add_edge(src, dst, count=1, bytes=size)
    return g


def _flat(summed: dict[str, Any]) -> dict[str, Any]:
    """Summed figures with the registered ones (``fxinspect.register_figure``) beside the declared."""
    return {**{k: v for k, v in summed.items() if k != "registered"}, **summed.get("registered", {})}


def _diagram_graph(report: ReportRecord, depth: int | None, fold: bool) -> nx.DiGraph:
    """The boxes and edges that ``report.plot(depth=depth, fold=fold)`` draws."""
    from .views.boxgraph import box_graph  # (views import nothing from here)
    from .views.edge_labels import edge_label

    graph = box_graph(report, depth, fold)
    found = graph.found
    g = nx.DiGraph(level=Level.DIAGRAM.value, depth=depth, fold=fold)
    for key, box in found.items():
        g.add_node(
            key,
            title=box.title,
            kind=box.kind,
            type=box.type,
            repeats=box.repeats,
            call=box.call,
            calls=box.calls,
            shape=box.shape,
            members=tuple(n.name for n in box.nodes),
            constants=tuple(box.constants),
            **_flat(sums(box.nodes)),
        )
    for edge, carried in graph.carries.items():
        g.add_edge(*edge, carries=tuple(n.name for n in carried), label=edge_label(carried))
    return g


def to_networkx(
    report: ReportRecord,
    by: Level | str = Level.NODE,
    depth: int | None = None,
    fold: bool = True,
    *,
    level: Level | str | None = None,
) -> nx.DiGraph:
    """The report's dataflow graph.

    Parameters
    ----------
    by : ``"node"``: every ``NodeRecord`` (placeholders and output included) is a
        graph node keyed by name with the record's fields as attributes; edges
        ``producer -> consumer`` carry ``tensor`` (the producer's ``TensorMeta``, a tuple
        for several outputs), ``bytes`` and ``reads`` (how many arguments use it).
        ``"module"``: op nodes collapse to their module path cut to ``depth``
        components (a path that is no module of the report to its nearest module);
        model inputs and outputs are the nodes ``"input"`` and ``"output"``. A module
        node carries ``kind="module"``, the fields of its ``ModuleRecord``, ``members``
        (the op nodes collapsed into it), and for every summed figure of
        :data:`fxinspect.records.fields.FIELDS` (``flops``, ``macs``, ``bytes_read``,
        ``bytes_written``, ``latency``, ...) the sum over ``members``, by the figure's
        aggregate, with the record's whole-subtree value as ``subtree_<figure>``. An
        edge ``A -> B`` has ``count`` (tensors flowing from A into B) and ``bytes``
        (their size).
        ``"diagram"``: the boxes and edges ``report.plot(depth=depth, fold=fold)``
        draws, keyed as the plot keys them: ``title``, ``kind`` (input, module, op,
        output), ``type``, ``repeats`` (the blocks a folded box stands for), ``call`` and
        ``calls`` (a module run several times has a box per call), ``shape`` and
        ``members`` (its op nodes: every repeat's), with their figures summed. For a
        feed-forward model it has no cycle at any depth. At ``depth=None`` a box per op,
        repeated blocks folded (an op of a later repeat joins the box of the same op in
        the first), and ``constants`` lists the ops drawn inside a box that compute only
        from weights and constants (a weight's transpose, a lifted scalar): their edges
        are left out. An edge has ``carries`` (the nodes whose outputs it carries, in
        graph order) and ``label`` (their shapes and dtypes, as ``plot`` and the
        explorer write them on the edge: ``1×8 float32``).
    depth : module and diagram levels; ``None`` keeps full module paths (the diagram:
        every op node).
    fold : diagram level only: draw a run of repeated blocks once.
    level : the deprecated name of ``by`` (as ``table(by=...)`` names it; a ``DeprecationWarning``).

    What adds up over module nodes: ``members`` partition the op nodes, so every
    figure sums to ``report.totals`` at any ``depth``, also where a module and one of
    its descendants are both graph nodes (the root ``""`` at ``depth >= 1`` when it runs
    ops of its own: its ``flops`` are those ops', its ``subtree_flops`` the whole
    model's). Parameter counts (``params``, ...) are the record's, for the subtree.
    """
    if level is not None:
        by = renamed("to_networkx", "level=", "by=", level)
    try:
        level = Level(by)
    except ValueError:
        raise ValueError(f"by must be 'node', 'module' or 'diagram', got {by!r}") from None
    if depth is not None and (level is Level.NODE or depth < 0):
        raise ValueError(f"depth={depth!r}: depth is a non-negative module depth for by='module' or 'diagram'")
    if level is Level.DIAGRAM:
        return _diagram_graph(report, depth, fold)
    return _node_graph(report) if level is Level.NODE else _module_graph(report, depth)
