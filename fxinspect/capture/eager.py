"""Tier ``eager``: record the aten ops one real run executes, as an FX graph.

The model runs once for real under a ``TorchDispatchMode`` that appends one
``call_function`` node per aten op (target: the ``OpOverload`` itself; see
:mod:`fxinspect.capture.eager_graph` for how tensors become nodes) and global
module hooks that keep a stack of running modules, so each op is attributed to the
innermost module of the user's model that was running
(:mod:`fxinspect.capture.eager_hooks`). The graph is one *executed*
path: Python control flow, data-dependent branches and values read back with
``.item()`` (``aten._local_scalar_dense``) are fixed to this input; random ops stay
random ops (the global RNG is rewound after the run, so the graph's first run draws
the same numbers the captured run drew).

Also reproduced: grad-mode switches inside the forward (``torch.no_grad()`` regions,
with the export tier's ``set_grad_enabled`` nodes). Left out: ``detach`` calls nothing
used (autograd's own, when it saves an output for backward), ``prim`` ops (fake
tensors asking for their device) and ``profiler`` ops (``record_function`` ranges).
On meta/fake tensors the tier works until the model needs a value (``.item()``, a
data-dependent shape), and says so. The run gets fresh containers around the inputs'
own tensors: a state object among them (a ``DynamicCache``) that the run grows keeps the
step's tensors, which the memory model frees as the step replaces them.

Example
-------
>>> import torch
>>> from fxinspect.capture.inputs import FlatInputs
>>> m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU())
>>> cap = trace_eager(m, FlatInputs.build((torch.randn(3, 4),), {}))
>>> [(str(n.target), n.meta["fxinspect_module"][0]) for n in cap.graph_module.graph.nodes if n.op == "call_function"]
[('aten.t.default', '0'), ('aten.addmm.default', '0'), ('aten.relu.default', '1')]
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
from torch.utils._python_dispatch import TorchDispatchMode

from ..tensors import NOT_WORK, holds_dtensors
from .attributes import AttributeWatch, named_writes
from .autocast_cache import fresh_autocast_cache
from .autocast_casts import hold_cached_casts
from .base import Capture, Method, resolve_attr, type_name
from .calls import number_calls
from .eager_calls import CCalls
from .eager_graph import CONST_PREFIX, GraphBuilder
from .eager_hooks import RunningModules
from .functions import functions_traced_through, lost_function_notes
from .inputs import FlatInputs, flatten_outputs
from .kept import checkpoints_traced_through, lost_checkpoint_notes

__all__ = ["trace_eager"]


class _Recorder(TorchDispatchMode):
    """Runs every aten op and records it with the builder."""

    def __init__(self, builder: GraphBuilder):
        super().__init__()
        self.builder = builder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if holds_dtensors(types):
            return NotImplemented  # (DTensor runs it as local ops and collectives: those are recorded)
        calls = self.builder.c_calls
        profile = calls.profile if calls is not None else None
        if profile is not None:  # (recording is not the model's work: its calls are not profiled)
            sys.setprofile(None)
        try:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func.namespace not in NOT_WORK:  # (fake tensors' queries, profiler ranges)
                self.builder.record(func, args, kwargs, out)
        finally:
            if profile is not None:
                sys.setprofile(profile)
        return out


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor] | None]) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _notes(builder: GraphBuilder) -> list[str]:
    """What the capture fixed or left out, for ``Capture.notes``."""
    notes = ["eager: one executed path; data-dependent branches are fixed to this input"]
    if builder.scalars:
        notes.append(
            f"eager: {builder.scalars} value(s) read back from tensors (.item(), bool) are baked into later ops"
        )
    if builder.random_ops:
        ops = ", ".join(f"{op} x{n}" for op, n in sorted(builder.random_ops.items()))
        notes.append(f"eager: random ops draw new values on every run ({ops})")
    constants = [k for k, v in builder.attrs.items() if k.startswith(CONST_PREFIX) and isinstance(v, torch.Tensor)]
    if constants:
        notes.append(f"eager: {len(constants)} tensor(s) made outside any recorded op are constants")
    return notes


def trace_eager(model: torch.nn.Module, inputs: FlatInputs, leaf_modules: Iterable[Any] = ()) -> Capture:
    """Run ``model`` once and capture the aten ops it executed (``leaf_modules`` need no
    special handling here: every op inside them is a node of its own)."""
    builder = GraphBuilder(model, inputs)
    calls = builder.c_calls = CCalls()
    modules = RunningModules(model, builder)
    rng = _rng_state()
    attributes = AttributeWatch(model)
    try:
        # (autocast's cache emptied: a weight cast before would be recorded as its cached copy)
        with fresh_autocast_cache(), modules.hooked(), _Recorder(builder), checkpoints_traced_through(model) as lost:
            # (calls: which ops are a torch function's own workings, see eager_calls)
            with functions_traced_through(model) as functions, calls.watched():
                # on fresh objects around the same tensors: a state object among the inputs
                # (a DynamicCache) grown by the run would no longer hold the step's own tensors
                args, kwargs = inputs.rebuild(list(inputs.tensors))
                out = model(*args, **kwargs)
    except (DataDependentOutputException, DynamicOutputShapeException) as exc:
        path, cls = builder.module
        where = f"module {path!r} ({cls})" if path else f"the root module ({cls})"
        raise RuntimeError(
            f"{exc.args[0] if exc.args else type(exc).__name__} in {where} needs tensor values, which meta/fake "
            "tensors do not have (a value-dependent branch, .item() or output shape); analyse with real tensors"
        ) from exc
    finally:
        _set_rng_state(rng)  # the graph's random ops draw what the captured run drew
    leaves, spec = flatten_outputs(out)
    builder.finish_grad_mode()
    builder.graph.output(tuple(builder.value(leaf) for leaf in leaves))
    written = attributes.resolved(builder.known)
    builder.prune()
    calls.mark(builder.graph)
    number_calls(builder.graph, lambda entry: entry[0])
    gm = fx.GraphModule(builder.attrs, builder.graph, class_name=type_name(model))
    hold_cached_casts(gm.graph, lambda target: resolve_attr(gm, target))
    return Capture(
        graph_module=gm,
        method=Method.EAGER,
        inputs=inputs,
        calls=modules.calls,
        notes=_notes(builder) + lost_checkpoint_notes("eager", lost) + lost_function_notes("eager", functions),
        out_spec=spec,
        lost_checkpoints=lost,
        lost_functions=functions,
        attribute_writes=named_writes(written, builder.graph),
    )
