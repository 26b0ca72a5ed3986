"""One rank's parallel training step, analysed as it really runs.

A parallel model cannot be captured and replayed: FSDP2 gathers each block's
parameters in hooks around its forward and backward, frees them by resizing their
storage to nothing, and reduces the gradients in autograd callbacks; none of that is in
a graph of the forward. So the step is run as the user's script runs it, three times on
fake tensors over the fake process group:

1. a warm-up step (forward and backward): the lazy initialisation (FSDP's buffers and
   state) happens here, as in a first training step;
2. the forward recorded by the eager tier (:mod:`fxinspect.capture.eager`): the graph
   the report is about, every op with its module (then its backward, which FSDP
   expects after each forward);
3. the analysed step: :class:`~fxinspect.parallel.program.StepProgram` runs the model
   itself, and at each op the recording saw calls the passes' probes with that op's
   node, so the counting run's recorders (count, gradients, memory) work as on any
   capture, with one more: the collectives' (:class:`~fxinspect.parallel.collectives.CollectiveRecorder`,
   every collective logged). Storages resized in place are followed (:mod:`~fxinspect.run.memory.resizes`).

The third step must run the ops the second recorded, in the same order; if it does not
(a step that changes from one call to the next), the analysis stops and says where.
The model run is the analysis's fake copy (:func:`~fxinspect.run.prepare.prepared`):
the wrapping is applied to it, never to the user's model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from typing import Any

import torch

from ..capture.base import module_of
from ..capture.eager import trace_eager
from ..capture.inputs import FlatInputs
from ..capture.states import held_tensors, holds_states, rewound
from ..errors import InputError, add_where
from ..options import Options
from ..run.choose import Counted
from ..run.memory.resizes import follow_resizes
from ..run.passes.counted import counted_run
from ..run.prepare import Prepared
from ..run.recorders import loss_for
from ..timemodel import devices
from .collectives import CollectiveRecorder, kind_of
from .group import fake_world
from .program import StepProgram
from .ranks import uneven
from .spec import Parallel

__all__ = ["rank_counted"]


@contextlib.contextmanager
def _propagation_unseen() -> Iterator[None]:
    """Keep DTensor's shape propagation out of the analysis.

    On a cache miss DTensor runs each op once more on fake tensors of the *global*
    shapes, to learn its output's shape; that is bookkeeping, not this rank's work, but
    our dispatch modes would price it and follow its storages. While the block runs it
    happens with no mode of ours on the stack.
    """
    from torch.distributed.tensor._sharding_prop import ShardingPropagator
    from torch.utils._python_dispatch import _disable_current_modes

    original = ShardingPropagator._propagate_tensor_meta_non_cached

    def unseen(self: Any, op_schema: Any) -> Any:
        with _disable_current_modes():
            return original(self, op_schema)

    ShardingPropagator._propagate_tensor_meta_non_cached = unseen
    try:
        yield
    finally:
        ShardingPropagator._propagate_tensor_meta_non_cached = original


@contextlib.contextmanager
def _noted(where: str) -> Iterator[None]:
    """Let the user's own exception through, with a note saying where in the analysis."""
    try:
        yield
    except Exception as exc:
        add_where(exc, where)
        raise


def _issuer(paths: dict[int, str]) -> str | None:
    """The module whose FSDP parameter group is issuing a collective, found up the stack."""
    frame = sys._getframe(2)
    for _ in range(40):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        modules = getattr(owner, "modules", None) if type(owner).__name__ == "FSDPParamGroup" else None
        if modules:
            return paths.get(id(modules[0]))
        frame = frame.f_back
    return None


def _charged_nodes(order: list[torch.fx.Node]) -> dict[str, torch.fx.Node]:
    """Per module path, the node its FSDP unit's collectives are charged to: the first
    collective op that ran in the module itself (the unit's forward all-gather, a node
    of the module's own ops, the root's too), else the last op node that ran in the
    module itself (else in its submodules): the one that makes its output."""
    own: dict[str, torch.fx.Node] = {}
    inner: dict[str, torch.fx.Node] = {}
    gathers: dict[str, torch.fx.Node] = {}
    for node in order:
        path = module_of(node)[0]
        own[path] = node
        if kind_of(node.target) is not None:
            gathers.setdefault(path, node)  # (a prefetch issued in another module is not this one's node)
        parts = path.split(".") if path else []
        for depth in range(len(parts)):
            inner[".".join(parts[:depth])] = node
    return inner | own | gathers


def _finish(out: Any, model: torch.nn.Module, loss_fn: Any) -> None:
    """The backward of a step whose forward gave ``out`` (FSDP expects one after each
    forward that records for it), and the gradients dropped again; none without ``loss_fn``."""
    if loss_fn is not None:
        loss_fn(out).backward()
        for p in model.parameters():
            p.grad = None


def rank_counted(run: Prepared, opts: Options) -> Counted:
    """The counting run (with the memory model and the backward) of one rank's step, on
    the fake process group; its report carries the rank's :class:`Communication`."""
    spec = opts.parallel
    if not isinstance(spec, Parallel):
        raise InputError(
            "parallel= expects a fxinspect.Parallel (Parallel.fsdp(8), Parallel.tp(4, plan), "
            f"Parallel(mesh, apply)), got {type(spec).__name__}"
        )
    model = run.model
    paths = {id(m): p for p, m in model.named_modules()}
    loss_fn = loss_for(opts.backward, opts.loss_fn)
    rank = f"rank {spec.rank} of {spec.world_size}"
    # a state object among the inputs (a KV cache) is given to each call as the caller
    # gave it: a fresh copy around the same tensors, their in-place writes put back
    given = FlatInputs.build(run.args, run.kwargs)
    states = held_tensors(run.args, run.kwargs)
    fresh = holds_states(run.args, run.kwargs)
    with fake_world(spec) as mesh, _propagation_unseen():
        with _noted(f"in apply(model, mesh) of parallel= ({spec.label}), {rank}"):
            spec.apply(model, mesh)
        paths.update({id(m): p for p, m in model.named_modules()})  # (wrapping may swap classes, not objects)
        with _noted(f"in the warm-up step of {rank} (parallel=, on fake tensors)"), rewound(states):
            args, kwargs = given.rebuild(given.tensors) if fresh else (run.args, run.kwargs)
            _finish(model(*args, **kwargs), model, loss_fn)
        kept: list[Any] = []  # the recorded step's output, to finish that step with its backward
        handle = model.register_forward_hook(lambda _m, _a, out: kept.append(out))
        try:
            with rewound(states):
                cap = trace_eager(model, FlatInputs.build(*given.rebuild(given.tensors)) if fresh else given)
        finally:
            handle.remove()
        _finish(kept.pop(), model, loss_fn)
        # (the recording grew its copy of a state object: the program's inputs are the caller's)
        cap = dataclasses.replace(
            cap, model=model, inputs=FlatInputs.build(*given.rebuild(given.tensors)) if fresh else cap.inputs
        )
        program = StepProgram(cap, model, run.args, run.kwargs)

        charged = _charged_nodes(program.order)

        def where() -> tuple[str, str, str | None]:
            """The phase, the module and the node a collective is charged to: FSDP's are
            its parameter group's (the node of its forward all-gather, so the root's are
            the root's own, not its last op's), wherever they were issued from (a
            prefetch runs in another module's backward); others the running node's."""
            running = program.running
            backward = torch._C._current_autograd_node() is not None or running is None or running.done
            node = running.current if not backward else program.nodes.get(program.owners.running() or "")
            issuer = _issuer(paths)
            if issuer is not None:
                node = charged.get(issuer, node)
            module = issuer if issuer is not None else (module_of(node)[0] if node is not None else "")
            return ("backward" if backward else "forward"), module, node.name if node is not None else None

        device = devices.get(opts.device_spec) if opts.device_spec is not None else None
        collectives = CollectiveRecorder(program, where, spec, device)
        with follow_resizes():
            result = counted_run(program, opts, model, collectives)
        differ = uneven(model, spec.rank)
    units = [path or "the root" for path, m in model.named_modules() if hasattr(m, "_get_fsdp_state")]
    fsdp = f"; {len(units)} FSDP unit(s): {', '.join(units[:3])}{', ...' if len(units) > 3 else ''}" if units else ""
    if units == ["the root"]:
        fsdp += " (the whole model gathered at once: Parallel.fsdp(n, blocks=...) shards it layer by layer)"
    notes = (
        f"parallel: rank {spec.rank} of {spec.world_size} on mesh "
        f"{' x '.join(f'{n}={s}' for n, s in spec.mesh)}, {spec.label}{fsdp}; run on the fake process group "
        "(collectives move no data), after one warm-up step",
        *([differ] if differ else []),
    )
    return Counted(program, result, notes=notes)
