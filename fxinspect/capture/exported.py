"""Tier ``export``: ``torch.export.export(..., strict=False)`` with module attribution.

Export traces the model's Python with fake tensors, so it handles what symbolic
tracing cannot: loops over tensor dimensions, item assignment, ``isinstance`` checks
on inputs, dataclass outputs (every Hugging Face transformer). Its graph is at aten
level (the default, non-decomposed training IR: ``aten.linear``, ``aten.conv2d``,
``aten.scaled_dot_product_attention``), specialised to the example inputs' shapes.

The model is exported through a thin root whose ``forward`` takes the flat tensor
inputs, rebuilds the user's ``(args, kwargs)`` (non-tensor leaves are constants) and
returns the output's leaves, so the calling convention matches every other tier. The
unlifted program (``ExportedProgram.module()``) is then cleaned into a plain
``GraphModule``:

* export's input guard call and ``aten._assert_tensor_metadata`` checks are dropped;
* grad-mode and autocast regions (``torch.no_grad()`` inside a forward becomes a
  ``wrap_with_set_grad_enabled`` call of a sub-graph) are inlined between two nodes
  that set and restore the mode, so their ops are nodes of their own
  (:mod:`fxinspect.capture.regions`);
* each ``torch.utils.checkpoint`` call's ops are put between a ``checkpoint`` and an
  ``end_checkpoint`` node, so that the program frees and recomputes as the model does
  (:mod:`fxinspect.capture.checkpoints`);
* the readers of an op that returns its argument itself (``x.to(torch.float32)`` on a
  float32 ``x``) read that argument, so that edges follow values
  (:mod:`fxinspect.capture.aliases`);
* the model's forward runs with ``torch.compiler.is_compiling()`` and
  ``is_exporting()`` off, so that it takes the branches of its eager call
  (:mod:`fxinspect.capture.eager_branches`), and the fake kernels of ops whose meta
  kernel refuses what the device's kernel runs are the device's
  (:mod:`fxinspect.capture.fake_kernels`);
* an SDPA call given an explicit causal mask made of constants gets
  ``is_causal=True`` instead (:mod:`fxinspect.capture.causal_masks`);
* placeholders get the readable input names, the pytree code generation is replaced
  by a plain one, unused attribute reads are removed;
* attribute reads use the model's own names (``fc.weight``, not ``model.fc.weight``)
  and its own tensors, so ``Capture.attr_prefix`` is empty.

Each node is then tagged with its module (:mod:`fxinspect.capture.exported_modules`).

Example
-------
>>> import torch
>>> from fxinspect.capture.base import MODULE_KEY
>>> from fxinspect.capture.inputs import FlatInputs
>>> m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU())
>>> cap = trace_export(m, FlatInputs.build((torch.randn(1, 4),), {}))
>>> [(n.name, n.meta[MODULE_KEY][0]) for n in cap.graph_module.graph.nodes if n.op == "call_function"]
[('linear', '0'), ('relu', '1')]
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.fx as fx
from torch.fx._lazy_graph_module import _LazyGraphModule, _use_lazy_graph_module
from torch.utils import _pytree as pytree

from .aliases import follow_values
from .attributes import AttributeWatch, named_writes
from .base import Capture, Method, one_line, resolve_attr, type_name
from .blame import raised_by_model
from .causal_masks import causal_mask_note, causal_masks_to_flags
from .checkpoints import keep_checkpoints, kept_checkpoint_notes, tagging_checkpoints
from .eager_branches import compiler_branch_note, eager_branches
from .export_frames import ExportFrames
from .exported_modules import ROOT_ATTR, model_path, tag_modules
from .fake_kernels import device_fake_kernels
from .functions import functions_traced_through, lost_function_notes
from .inputs import FlatInputs
from .kept import checkpoints_traced_through, lost_checkpoint_notes
from .regions import inline_regions

__all__ = ["trace_export"]

_DROPPED = tuple(
    getattr(torch.ops.aten, name).default for name in ("_assert_tensor_metadata",) if hasattr(torch.ops.aten, name)
)
"""Checks export inserts around ``.to()`` calls: not part of the model's computation."""


@contextlib.contextmanager
def _without_stack_traces() -> Iterator[None]:
    """Export keeps each node's Python stack (``node.meta["stack_trace"]``), taken and
    symbolised node by node: a tenth of the export of a large model. Nothing in the
    analysis reads it, so it is not taken."""
    before = fx.config.do_not_emit_stack_traces
    fx.config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        fx.config.do_not_emit_stack_traces = before


class _Root(torch.nn.Module):
    """Calls the user's model on rebuilt inputs and returns the output's leaves."""

    def __init__(self, model: torch.nn.Module, inputs: FlatInputs):
        super().__init__()
        self.model = model  # the attribute named ROOT_ATTR
        self._inputs = inputs
        # export restores the module's own attributes (lists too) after tracing: the
        # output's tree spec is kept on a plain object the root refers to
        self._seen = _Seen()
        self.eager_branches = True

    def forward(self, *tensors: torch.Tensor) -> tuple:
        args, kwargs = self._inputs.rebuild(list(tensors))
        attributes = AttributeWatch(self.model)
        with eager_branches(self.eager_branches):
            out = self.model(*args, **kwargs)
        leaves, spec = pytree.tree_flatten(out)
        self._seen.spec = spec
        # tensors the forward set on its modules leave as extra outputs, so that the graph
        # says which nodes compute them (split off again by _attribute_writes)
        written = attributes.resolved(lambda leaf: leaf if isinstance(leaf, torch.Tensor) else None)
        self._seen.written = [(path, name, len(tensors), spec) for path, name, tensors, spec in written]
        return (*leaves, *(t for _, _, tensors, _ in written for t in tensors))

    @property
    def out_spec(self) -> pytree.TreeSpec | None:
        return self._seen.spec


class _Seen:
    spec: pytree.TreeSpec | None = None
    written: list[tuple[str, str, int, Any]] = []  # (module, attribute, its tensors: extra outputs, structure)


def _for_every_batch(root: _Root, inputs: FlatInputs, frames: ExportFrames) -> tuple[Any, FlatInputs, str]:
    """Export with the batch a symbol, for batches from 2; ``(None, inputs without
    batch_dims, why)`` when the model fixes its batch.

    Not from 1: asked for a range from 1, export still assumes the batch is not 1 (a
    model that takes another path for a lone sample is exported on the other path,
    without a word), so batch 1 needs a capture of its own.
    """
    batch = torch.export.Dim("batch", min=2)
    # (the root's forward takes ``*tensors``: one argument, a tuple, to export)
    shapes = (tuple({d: batch for d in dims} or None for dims in inputs.batch_dims),)
    try:
        with frames.during():
            program = torch.export.export(root, tuple(inputs.tensors), dynamic_shapes=shapes, strict=False)
    except Exception as exc:  # the model fixes the batch (or export cannot show it does not)
        why = f"export: the batch could not stay a symbol, captured for this size only ({one_line(exc)})"
        return None, dataclasses.replace(inputs, batch_dims=None), why
    return program, dataclasses.replace(inputs, batch_min=2), "export: captured for every batch from 2"


def _export(root: _Root, inputs: FlatInputs, frames: ExportFrames) -> tuple[Any, FlatInputs, list[str]]:
    """Export for every batch where the model allows it, else for this one; with its notes."""
    program, said = None, []
    if inputs.batch_dims is not None:
        program, inputs, why = _for_every_batch(root, inputs, frames)
        said.append(why)
    if program is None:
        with frames.during():
            program = torch.export.export(root, tuple(inputs.tensors), strict=False)
    return program, inputs, said


# -- cleaning the unlifted program ---------------------------------------------------


def _drop_checks(graph: fx.Graph) -> None:
    """Remove export's guard call and metadata assertions (nodes nothing uses)."""
    for node in list(graph.nodes):
        guard = node.op == "call_module" and str(node.target).startswith("_guards_fn")
        if (guard or (node.op == "call_function" and node.target in _DROPPED)) and not node.users:
            graph.erase_node(node)


def _rename(graph: fx.Graph, inputs: FlatInputs) -> None:
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs.names):
        raise RuntimeError(f"export produced {len(placeholders)} inputs for {len(inputs.names)} tensor inputs")
    for node, name in zip(placeholders, inputs.names):
        node._rename(name)
        node.target = node.name
    for node in graph.nodes:
        if node.op == "get_attr":
            if not node.users:
                graph.erase_node(node)
            elif node.name.startswith(ROOT_ATTR + "_"):  # "model_layer1_0_conv1_weight"
                node._rename(node.name[len(ROOT_ATTR) + 1 :])


def _attribute_writes(graph: fx.Graph, written: list[tuple[str, str, int, Any]]) -> list[tuple[str, str, tuple, Any]]:
    """Split the attributes' tensors off the output (see ``_Root.forward``): each write
    with the nodes that compute its tensors, as ``AttributeWatch.resolved`` gives them."""
    output = graph.output_node()
    leaves = list(output.args[0])
    extra = sum(count for _, _, count, _ in written)
    kept, nodes = leaves[: len(leaves) - extra], iter(leaves[len(leaves) - extra :])
    output.args = (tuple(kept),)
    return [(path, name, tuple(next(nodes) for _ in range(count)), spec) for path, name, count, spec in written]


def _user_targets(unlifted: fx.GraphModule, graph: fx.Graph) -> dict[str, Any]:
    """Retarget attribute reads to the user's names (``"model.fc.weight"`` ->
    ``"fc.weight"``); returns ``{target: value}``, the new module's attributes (the
    model's own tensors, not copies; lifted constants and sub-graphs keep their names)."""
    attributes: dict[str, Any] = {}
    for node in graph.nodes:
        if node.op not in ("get_attr", "call_module"):
            continue
        target = str(node.target)
        value = resolve_attr(unlifted, target)
        new = model_path(target) or target
        if attributes.get(new, value) is not value:  # a name taken by another attribute
            new = target
        attributes[new] = value
        node.target = new
    return attributes


def trace_export(model: torch.nn.Module, inputs: FlatInputs, leaf_modules: Iterable[Any] = ()) -> Capture:
    """Export ``model`` (non-strict) and turn the program into a tagged flat GraphModule."""
    notes: list[str] = []
    if tuple(leaf_modules):
        notes.append(
            "export: leaf_modules not applied (the export graph is aten-level; every module is traced through)"
        )
    root = _Root(model, inputs)
    frames = ExportFrames(_Root.forward.__code__)  # what the model's frames hold, as it runs
    with (
        checkpoints_traced_through(model) as lost,
        tagging_checkpoints(model) as seen,
        functions_traced_through(model) as functions,
        _without_stack_traces(),
        device_fake_kernels(),  # (a CPU float32 grouped matmul: an eager branch export can take)
        warnings.catch_warnings(),
        # export's passes recompile its graph module about ten times, each generating and
        # compiling the whole program's Python (a third of export's time on a large
        # model): lazily, only what is run is compiled, once
        _use_lazy_graph_module(True),
    ):
        # export asks for tensors the forward sets on self to be buffers: they are
        # attribute writes here (see _Root.forward), replayed by ``inspect``
        warnings.filterwarnings("ignore", message=r"The tensor attributes? .* (was|were) assigned during export")
        try:
            program, inputs, said = _export(root, inputs, frames)
        except Exception as exc:
            if raised_by_model(exc):
                raise  # the model's own error (a plain call shows whose): not a branch's
            # the eager branches read values, say: export the branches kept for it
            root.eager_branches = False
            program, inputs, said = _export(root, inputs, frames)
            said.insert(0, compiler_branch_note(one_line(exc)))
        notes += said
        unlifted = program.module()
    graph = unlifted.graph
    _drop_checks(graph)
    inlined = inline_regions(unlifted)
    if inlined:
        notes.append(f"export: inlined {inlined} grad-mode/autocast region(s) of the forward")
    notes += causal_mask_note(causal_masks_to_flags(graph, unlifted, tuple(inputs.tensors)))
    follow_values(graph)
    graph._codegen = fx.graph.CodeGen()  # flat inputs in, flat tuple of output leaves out
    _rename(graph, inputs)
    written = _attribute_writes(graph, root._seen.written)
    attributes = _user_targets(unlifted, graph)
    kept, not_kept = keep_checkpoints(graph, seen, attributes)
    lost = [name for name in lost if name not in kept or name in not_kept]
    notes += lost_checkpoint_notes("export", lost) + kept_checkpoint_notes("export", kept)
    notes += lost_function_notes("export", functions)
    # compiled on first call only: the analysis runs probed copies of it
    gm = _LazyGraphModule(attributes, graph, class_name=type_name(model))
    gm.graph.lint()
    frames_seen = frames.apply(gm.graph)
    calls, unknown = tag_modules(gm, model)
    if unknown:
        notes.append(
            f"export: {unknown} node(s) ran in modules the model does not register; attributed to the nearest registered parent"
        )
    return Capture(
        graph_module=gm,
        method=Method.EXPORT,
        inputs=inputs,
        calls=calls,
        notes=notes,
        out_spec=root.out_spec,
        lost_checkpoints=lost,
        lost_functions=functions,
        attribute_writes=named_writes(written, graph),
        frames_seen=frames_seen,
    )
