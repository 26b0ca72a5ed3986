"""``analyze``: capture -> instrument -> run -> Report.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> report = fxinspect.analyze(model, torch.randn(4, 16), timing=False)
>>> report.totals.params, report.totals.macs      # 16*8+8 + 8*2+2 ; 4*16*8 + 4*8*2
(154, 576)
"""

from __future__ import annotations

import contextlib
import gc
import platform
import sys
from typing import Any, Iterable

import torch

from . import formatting
from .capture import Capture, capture, module_of, normalize, unwrap
from .capture.base import one_line, resolve_attr
from .errors import InputError, NodeExecutionError
from .records import CaptureInfo, Environment, TimingInfo, Totals
from .report import Report
from .run.assemble import RunRecords, aggregate_modules, find_nonfinite, node_records, uncounted_ops
from .run.guard import preserved
from .run.params import module_infos, tensor_bytes
from .run.passes import CountingRun, TimingRun, op_nodes
from .run.virtual import virtual
from .run.values import ValueReader, describe, has_data, nonfinite_tensors, tensor_meta, version


def analyze(
    model: torch.nn.Module,
    example_inputs: Any = None,
    *,
    kwargs: dict | None = None,
    method: str = "auto",
    leaf_modules: Iterable[Any] = (),
    timing: bool = True,
    warmup: int = 2,
    repeats: int = 10,
    check_finite: bool = True,
    device: str | torch.device | None = None,
) -> Report:
    """Analyse ``model`` on ``example_inputs``: every op and module, one immutable Report.

    Parameters
    ----------
    model : the ``torch.nn.Module`` (``DataParallel``/``torch.compile`` wrappers are
        unwrapped). It is left exactly as it was, also when this raises.
    example_inputs : a tensor, a tuple/list of positional arguments, or a dict of
        keyword arguments; nested tuples/lists/dicts of tensors are fine.
    kwargs : keyword arguments added to positional ``example_inputs``.
    method : ``"auto"`` or a capture tier's name (see ``fxinspect.capture.TIERS``).
    leaf_modules : module classes, instances or dotted paths captured as one node.
    timing : run warm-up and timing passes for per-node latency (``False`` skips them).
    warmup, repeats : timing passes; latencies are medians over ``repeats``.
    check_finite : read output values for NaN/Inf and statistics.
    device : ``"meta"`` analyses without allocating the model's weights (a copy with fake
        tensors is run; shapes, parameters, FLOPs, MACs and bytes are exact). A model
        whose tensors are on the ``meta`` device, or meta/fake example inputs, do the
        same without asking. Timing, NaN/Inf checks and value statistics need real
        data: they are ``None`` then, never zero. ``None`` runs where the model is.

    The forward runs in the model's current mode (``train()``/``eval()``) and the
    current grad mode (wrap the call in ``torch.no_grad()`` for inference).
    """
    if repeats < 1 or warmup < 0:
        raise InputError(f"repeats must be >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    with _no_gc_pauses():
        return _analyze(model, example_inputs, kwargs, method, leaf_modules, timing, warmup, repeats, check_finite, device)


@contextlib.contextmanager
def _no_gc_pauses():
    """Hold the cyclic garbage collector for the duration of the call.

    Tracing and assembling a large graph allocate hundreds of thousands of small
    objects; every collection that triggers then walks all of them (and the model), and
    such pauses were most of the cost on a graph of 2,000 tiny ops. Nothing here makes
    cycles that need collecting mid-call; the collector's previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _analyze(model, example_inputs, kwargs, method, leaf_modules, timing, warmup, repeats, check_finite, device) -> Report:
    model, unwrap_notes = unwrap(model)
    args, kw = normalize(example_inputs, kwargs)
    # meta.virtual: fake copies of the model and inputs when the run is virtual (device="meta" or
    # meta/fake tensors); `model` is the copy from here on, preserved() guards the user's model.
    with preserved(model), virtual(model, args, kw, device) as run:
        model, args, kw = run.model, run.args, run.kwargs
        cap = capture(model, args, kw, method=method, leaf_modules=leaf_modules)
        cap.notes[:0] = unwrap_notes + run.notes
        tensors = cap.inputs.tensors
        reader = ValueReader() if check_finite else None
        # inputs and weights are read before the run: the model may write them in place
        placeholder_outputs, attr_outputs, sources = _static_values(cap, reader)
        counting = CountingRun(reader)
        versions = [version(t) for t in tensors]
        try:
            counting.run(cap.graph_module, tensors)
        except Exception as exc:
            raise _node_error(cap, counting, exc) from exc
        written = [name for name, t, v in zip(cap.inputs.names, tensors, versions) if v is not None and version(t) != v]
        stats = reader.finish() if reader else []
        # where a NaN came from matters only when one appeared: a pass over every weight
        # (5 ms on resnet50) is skipped when every value read was finite
        bad_weights = nonfinite_tensors(model) if any(s is not None and not s.finite for s in stats) else []
        latencies, timing_info = None, None
        if timing and not run.virtual and all(has_data(t) for t in tensors):
            # the counting run wrote these inputs as calling the model would; the timing
            # runs must not write them again (each gets copies of them as they are now)
            latencies, timing_info = _time(cap, tensors, warmup, repeats, copy_inputs=bool(written))
        if written:
            cap.notes.append(
                f"the forward writes its input(s) {', '.join(written)} in place: the analysed run wrote them "
                "once, as calling the model does" + ("; timing runs used copies" if latencies is not None else "")
            )
    runs = RunRecords(
        costs=counting.mode.costs,
        outputs=counting.outputs,
        latencies=latencies,
        placeholder_outputs=placeholder_outputs,
        attr_outputs=attr_outputs,
        stats=stats,
    )
    bad_sources = [name for name, slot in sources if stats and _bad(stats, slot)] + bad_weights
    return _report(model, cap, runs, timing_info, bad_sources, virtual=run.virtual)


def _bad(stats: list, slot: int | None) -> bool:
    return slot is not None and stats[slot] is not None and not stats[slot].finite


def _static_values(cap: Capture, reader: ValueReader | None):
    """Metadata (and queued statistics) of the inputs and of the tensors get_attr nodes
    read; ``sources`` names each input with its statistics slot."""
    read = reader.read if reader else (lambda t: None)
    placeholders = {}
    tensors = iter(cap.inputs.tensors)
    sources: list[tuple[str, int | None]] = []
    for node in cap.graph_module.graph.nodes:
        if node.op == "placeholder":
            t = next(tensors)
            slot = read(t)
            placeholders[node.name] = [(describe(t), slot)]
            sources.append((f"input {node.name}", slot))
    seen: dict[int, int | None] = {}
    attrs = {}
    for node in cap.graph_module.graph.nodes:
        if node.op == "get_attr":
            value = resolve_attr(cap.graph_module, str(node.target))
            if isinstance(value, torch.Tensor):
                if id(value) not in seen:  # a weight read at many places is read once
                    seen[id(value)] = read(value)
                attrs[cap.user_path(str(node.target))] = [(describe(value), seen[id(value)])]
    return placeholders, attrs, sources


def _time(cap: Capture, tensors: list[torch.Tensor], warmup: int, repeats: int, copy_inputs: bool = False):
    device = tensors[0].device if tensors else torch.device("cpu")
    per_node, whole, plain = TimingRun(device).measure(cap.graph_module, tensors, warmup, repeats, copy_inputs)
    batch = int(tensors[0].shape[0]) if tensors and tensors[0].dim() > 0 else None
    info = TimingInfo(
        device=str(device),
        warmup=warmup,
        repeats=repeats,
        forward=whole,
        plain_forward=plain,
        node_sum=sum(per_node),
        batch_size=batch,
        throughput=batch / plain if batch and plain > 0 else None,
    )
    return per_node, info


def _node_error(cap: Capture, counting: CountingRun, exc: Exception) -> NodeExecutionError:
    """Name the node that raised, its module, and the shapes it was given."""
    index = counting.mode.node
    ops = op_nodes(cap.graph_module.graph)
    if not 0 <= index < len(ops):
        index = len(counting.outputs)  # failed between probes: the next node to run
    node = ops[min(index, len(ops) - 1)]
    path, mtype = module_of(node)
    order = {n: i for i, n in enumerate(ops)}
    placeholders = {n.name: t for n, t in zip((n for n in cap.graph_module.graph.nodes if n.op == "placeholder"), cap.inputs.tensors)}
    shapes = []
    for arg in node.all_input_nodes:
        if arg.name in placeholders:
            metas = [tensor_meta(placeholders[arg.name])]
        else:
            metas = [tensor_meta(d) for d, _ in counting.outputs.get(order.get(arg, -1), ())]
        shapes += [f"{arg.name}: {formatting.tensor(m.shape, m.dtype)}" for m in metas]
    if node.op == "call_module":
        sub = cap.graph_module.get_submodule(str(node.target))
        shapes += [f"{path}.{n}: {formatting.shape(tuple(p.shape))}" for n, p in sub.named_parameters(recurse=False)]
    return NodeExecutionError(node.name, path, mtype, shapes, one_line(exc, limit=1000))


def _report(
    model: torch.nn.Module, cap: Capture, runs: RunRecords, timing: TimingInfo | None, sources: list[str], virtual: bool
) -> Report:
    nodes = node_records(cap, runs)
    infos, shared = module_infos(model)
    modules = aggregate_modules(nodes, infos, cap.calls, timed=runs.latencies is not None, leaves=cap.leaves)
    root = modules[""]
    uncounted = uncounted_ops(nodes)
    param_bytes, buffer_bytes = tensor_bytes(model)
    totals = Totals(
        params=root.params,
        trainable_params=root.trainable_params,
        buffers=root.buffers,
        param_bytes=param_bytes,
        buffer_bytes=buffer_bytes,
        flops=root.flops,  # the root module's figures are the sums over every op node
        macs=root.macs,
        bytes_read=root.bytes_read,
        bytes_written=root.bytes_written,
        latency=sum(n.latency for n in nodes if n.is_op) if runs.latencies is not None else None,
        partial=bool(uncounted),
    )
    inputs = tuple(m for n in nodes if n.op == "placeholder" for m in n.outputs)
    output_node = next(n for n in nodes if n.op == "output")
    device = inputs[0].device if inputs else str(next(model.parameters(), torch.empty(0)).device)
    return Report(
        nodes=tuple(nodes),
        modules=modules,
        totals=totals,
        capture=CaptureInfo(cap.method, tuple(cap.notes), tuple(cap.failures)),
        uncounted=tuple(uncounted),
        nonfinite=find_nonfinite(nodes, sources),
        shared=tuple(shared),
        inputs=inputs,
        outputs=output_node.inputs,
        timing=timing,
        environment=Environment(
            torch_version=torch.__version__,
            python_version=sys.version.split()[0],
            platform=platform.platform(),
            device=device,
            num_threads=torch.get_num_threads(),
            virtual=virtual,
        ),
    )
