"""Checkpointed regions of an exported forward: every op a node, the recomputation kept.

``torch.export`` traces through ``torch.utils.checkpoint``: the graph holds the ops the
checkpointed function ran, and a program made of them keeps every activation the
checkpoint would free. :func:`tagging_checkpoints` marks, while export traces, the
nodes each checkpoint call creates (``node.meta[REGION_KEY]``); :func:`keep_checkpoints`
then puts each region between two nodes, as grad-mode regions are
(:mod:`fxinspect.capture.regions`):

* ``checkpoint`` (a :class:`CheckpointRegion`) enters non-reentrant checkpointing with
  the region's inputs, exactly as ``torch.utils.checkpoint`` does before it calls the
  function (it keeps the inputs and the RNG state, and from then on saves nothing the
  region's ops would save for backward);
* the region's ops run as nodes of their own, with their modules, so every figure of
  the forward is the one without checkpointing;
* ``end_checkpoint`` leaves it. The backward recomputes the region from a copy of its
  nodes (the function the checkpoint calls again), as the model's own backward would.

Not kept, so traced through as before (the capture says so, and ``method="auto"``
prefers another tier): a reentrant checkpoint (``use_reentrant=True``: export records
its forward, and ops after it, under ``no_grad``, so the program's backward could not
run anyway), one with a ``context_fn`` (selective activation checkpointing), and one
whose ops do not follow each other in the graph.

Example
-------
>>> import torch
>>> from torch.utils.checkpoint import checkpoint
>>> from fxinspect.capture import capture
>>> class Net(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
...     def forward(self, x):
...         return checkpoint(self.block, x, use_reentrant=False) + x
>>> cap = capture(Net(), (torch.randn(2, 4),), {}, method="export")
>>> [n.name for n in cap.graph_module.graph.nodes if n.op == "call_function"]
['checkpoint', 'linear', 'relu', 'end_checkpoint', 'add']
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.utils.checkpoint as _checkpoint
from torch.fx._lazy_graph_module import _LazyGraphModule

from ..records import OP_KINDS
from .kept import checkpoint_name

__all__ = [
    "REGION_KEY",
    "CheckpointRegion",
    "end_checkpoint",
    "keep_checkpoints",
    "kept_checkpoint_notes",
    "tagging_checkpoints",
]

REGION_KEY = "fxinspect_checkpoint"
"""``node.meta[REGION_KEY]``: the checkpoint call (an index) whose function made the node."""

_NOOP_CONTEXT = getattr(_checkpoint, "noop_context_fn", None)


@dataclass
class Seen:
    """One ``torch.utils.checkpoint`` call while export traced."""

    name: str  # the module (quoted path) or function it ran
    options: dict[str, Any]


@contextlib.contextmanager
def tagging_checkpoints(model: torch.nn.Module) -> Iterator[list[Seen]]:
    """While export traces ``model``, tag the nodes each checkpoint call creates with the
    call's index in the list this yields (nested calls: the outermost)."""
    seen: list[Seen] = []
    impl = getattr(_checkpoint, "_checkpoint_impl", None)
    if impl is None or not hasattr(_checkpoint, "_checkpoint_without_reentrant_generator_impl"):
        # an older torch: checkpoints stay traced through
        yield seen
        return
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    paths = {id(m): p for p, m in model.named_modules()}

    def watched(function, args, kwargs, **options):
        mode = get_proxy_mode()
        graph = getattr(getattr(mode, "tracer", None), "graph", None)
        last = next(iter(reversed(graph.nodes)), None) if graph is not None else None
        out = impl(function, args, kwargs, **options)
        if graph is not None:
            index = len(seen)
            seen.append(Seen(checkpoint_name(function, paths), options))
            node = last.next if last is not None else next(iter(graph.nodes), None)
            while node is not None and node.op != "root":
                node.meta[REGION_KEY] = index
                node = node.next
        return out

    _checkpoint._checkpoint_impl = watched
    try:
        yield seen
    finally:
        _checkpoint._checkpoint_impl = impl


class CheckpointRegion:
    """Enters non-reentrant checkpointing of a region; returns what leaving needs.

    ``function`` computes the region from its inputs: it runs again in the backward.
    """

    def __init__(self, function: fx.GraphModule, options: dict[str, Any]):
        self.function = function
        self.options = options
        # (named for the graph; a module outside torch, or fx's code generation would
        # import torch.utils.checkpoint.checkpoint by that name in its place)
        self.__name__ = self.__qualname__ = "checkpoint"
        self.__module__ = __name__

    def __call__(self, *inputs: Any) -> Any:
        options = self.options
        gen = _checkpoint._checkpoint_without_reentrant_generator_impl(
            self.function,
            inputs,
            {},
            preserve_rng_state=options.get("preserve_rng_state", True),
            determinism_check=options.get("determinism_check", _checkpoint._DEFAULT_DETERMINISM_MODE),
            early_stop=options.get("early_stop", True),
        )
        next(gen)
        return gen

    def __repr__(self) -> str:
        return "checkpoint(region)"


def end_checkpoint(gen: Any) -> None:
    """Leave the checkpointed region entered by a :class:`CheckpointRegion`."""
    for _ in gen:  # (it yields once more only when something is wrong)
        raise RuntimeError("torch.utils.checkpoint: the checkpoint's generator yielded more than twice")


def _common_stack(nodes: list[fx.Node]) -> dict[str, Any]:
    """The module calls every node of ``nodes`` ran in (outermost first)."""
    stacks = [n.meta.get("nn_module_stack") or {} for n in nodes]
    common = dict(stacks[0])
    for stack in stacks[1:]:
        keys = list(common)
        for i, key in enumerate(keys):
            if key not in stack:
                common = {k: common[k] for k in keys[:i]}
                break
    return common


def _keep_one(graph: fx.Graph, nodes: list[fx.Node], options: dict[str, Any], attributes: dict[str, Any]) -> bool:
    """Put one region between ``checkpoint`` and ``end_checkpoint``; ``False`` if it cannot be kept."""
    members = set(nodes)
    walk = nodes[0]
    while walk is not nodes[-1]:  # the region's nodes follow each other (attribute reads aside)
        if walk not in members and walk.op != "get_attr":
            return False
        walk = walk.next
    inputs = list(dict.fromkeys(a for n in nodes for a in n.all_input_nodes if a not in members and a.op != "get_attr"))
    used_after = [n for n in nodes if any(u not in members for u in n.users)]
    sub = fx.Graph()
    env: dict[fx.Node, fx.Node] = {a: sub.placeholder(a.name) for a in inputs}
    read: dict[str, Any] = {}
    for n in nodes:
        for a in n.all_input_nodes:
            if a.op == "get_attr" and a not in env:
                read[str(a.target)] = attributes[str(a.target)]
                env[a] = sub.get_attr(str(a.target))
        env[n] = sub.node_copy(n, lambda a: env[a])
    sub.output(tuple(env[n] for n in used_after))
    function = _LazyGraphModule(read, sub, class_name="CheckpointedRegion")
    stack = _common_stack(nodes)
    with graph.inserting_before(nodes[0]):
        enter = graph.call_function(CheckpointRegion(function, options), tuple(inputs))
    with graph.inserting_after(nodes[-1]):
        leave = graph.call_function(end_checkpoint, (enter,))
    for made in (enter, leave):
        made.meta["nn_module_stack"] = stack
    return True


def keep_checkpoints(graph: fx.Graph, seen: list[Seen], attributes: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Put every tagged region of ``graph`` between checkpoint nodes; ``(names kept,
    names left traced through)``. ``attributes``: what the graph's ``get_attr`` nodes read."""
    regions: dict[int, list[fx.Node]] = {}
    for node in graph.nodes:
        index = node.meta.get(REGION_KEY)
        if index is not None and node.op in OP_KINDS:
            regions.setdefault(index, []).append(node)
    kept: list[str] = []
    lost: list[str] = []
    for index, nodes in regions.items():
        call = seen[index]
        options = call.options
        plain = options.get("context_fn", _NOOP_CONTEXT) in (_NOOP_CONTEXT, None) and not options.get("use_reentrant")
        ok = plain and _keep_one(graph, nodes, options, attributes)
        names = kept if ok else lost
        if call.name not in names:
            names.append(call.name)
    return [name for name in kept if name not in lost], lost


def kept_checkpoint_notes(tier: str, kept: list[str]) -> list[str]:
    """What a tier that kept checkpoints as regions says."""
    if not kept:
        return []
    names = f"{', '.join(kept[:4])}{', ...' if len(kept) > 4 else ''}"
    return [
        f"{tier}: torch.utils.checkpoint kept for {names}: their ops are nodes of their own, the "
        "program frees what the checkpoint frees and the backward recomputes them"
    ]
