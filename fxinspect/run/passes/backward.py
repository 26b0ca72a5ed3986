"""The backward pass: each node's backward cost and its output gradients.

One forward of the program with gradients on, then one backward of a scalar loss
(``loss_fn(output)``; by default the sum of every floating output that requires grad).

* Attribution: :class:`~fxinspect.run.owners.AutogradOwners` maps each autograd node
  to the fx node whose forward created it (autograd's sequence numbers); in the
  backward, :class:`BackwardMode` charges each aten op, priced by the same rules as the
  forward, to the fx node whose autograd node is running. Ops of no forward node
  (accumulating into a leaf's ``.grad``) are reported apart, never dropped.
* Gradients: the probe after each node hooks its floating outputs; the gradient that
  reaches each is recorded as a ``TensorMeta`` with its value statistics (NaN/Inf
  counts included, read as the forward's outputs are), in the order they arrive.
* Root cause: a hook on every autograd node sums the gradients it makes
  (:class:`NonFiniteTurns`); the first, in the order the backward ran, whose gradients
  are not finite turned finite ones into non-finite ones and names its fx node
  (``report.grad_nonfinite``). Every node with a non-finite output gradient is listed.

Every op node gets figures (0 when its outputs needed no gradient), so module sums are
exact; in a report without a backward they are ``None``.

Example
-------
>>> import torch, fxinspect
>>> program = fxinspect.instrument(torch.nn.Linear(3, 2), torch.randn(4, 3))
>>> node = BackwardPass().run(program).nodes["linear"]
>>> node["backward_macs"], node["grad_outputs"][0].shape     # the weight gradient: 4*3*2
(24, (4, 2))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...capture import module_of
from ...options import Options
from ...records import NonFinite, NonFiniteKind, TensorMeta
from ...tensors import has_data, tensors_in
from ..dispatch import UNATTRIBUTED, CountingMode
from ..owners import AutogradOwners
from ..program import InstrumentedProgram
from ..recorders import Recorder, loss_for
from ..values import ValueReader, describe
from . import PassResult
from .count import aten_calls
from .one_run import OneRun, run_once

__all__ = [
    "BackwardMode",
    "BackwardPass",
    "BackwardRecorder",
    "Gradients",
    "NonFiniteTurns",
    "backward_result",
]


class BackwardMode(CountingMode):
    """The counting mode, charging each op to the fx node whose autograd node runs it."""

    def __init__(self, owners: AutogradOwners, before_write=None) -> None:
        super().__init__(before_write)
        self.owners = owners

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.node = self.owners.running()  # (None is UNATTRIBUTED)
        return super().__torch_dispatch__(func, types, args, kwargs)


class Gradients:
    """The gradients reaching each node's floating outputs, in the order they arrive.

    :meth:`watch` is the probe after a node: it hooks the node's outputs that require
    grad. With a ``reader``, each gradient's statistics are read as it arrives.
    """

    def __init__(self, reader: ValueReader | None) -> None:
        self.reader = reader
        self.slots: dict[str, list[Any]] = {}  # per node, per floating output: (description, stats slot)
        self.arrived: list[str] = []  # node names, in the order their gradients reached them

    def watch(self, name: str, out: Any) -> None:
        slots = self.slots[name] = []
        for t in tensors_in(out):
            if t.requires_grad and t.is_floating_point():
                slots.append(None)
                t.register_hook(_recorder(name, slots, len(slots) - 1, self.arrived, self.reader))

    def metas(self, stats: list[Any]) -> dict[str, tuple[TensorMeta, ...]]:
        """Per node, its output gradients as ``TensorMeta`` (with ``stats``: the reader's)."""
        # (a slot stays None when no gradient reached that output: it is off the loss's path)
        return {
            name: tuple(TensorMeta.of(*d, stats[s] if s is not None else None) for d, s in filter(None, slots))
            for name, slots in self.slots.items()
        }


def backward_result(
    program: InstrumentedProgram,
    costs: dict[Any, Any],
    gradients: Gradients,
    stats: list[Any],
    turned: str | None = None,
) -> PassResult:
    """A backward's figures per node (``costs`` keyed by node, as a counting mode keeps
    them), its output gradients, and where NaN/Inf first appeared in it (``turned``: the
    node :class:`NonFiniteTurns` found, when it checked)."""
    metas = gradients.metas(stats)
    result = PassResult()
    for name in program.probe_points:
        calls, flops, macs, read, written = aten_calls(costs.get(name, {}))
        entry = result.nodes[name] = {
            "backward_aten": calls,
            "backward_flops": flops,
            "backward_macs": macs,
            "backward_bytes_read": read,
            "backward_bytes_written": written,
        }
        if metas.get(name):
            entry["grad_outputs"] = metas[name]
    result.report["grad_nonfinite"] = gradient_root_cause(program, metas, gradients.arrived, turned)
    unattributed = costs.get(UNATTRIBUTED)
    if unattributed:  # ops of no forward node (the loss's backward, accumulating into .grad)
        result.report["backward_unattributed"] = aten_calls(unattributed)[0]
    return result


class BackwardRecorder(Recorder):
    """The backward's costs per node, the gradients reaching each node's outputs, and
    where NaN/Inf first appeared in them (with a ``reader``: values read).

    It leads the backward's dispatch (a :class:`BackwardMode`). A live step, whose mode
    counts the backward itself, gives ``costs()``: that mode's table of backward costs
    (then nothing is reported until the backward ran). ``reader`` may be another
    recorder's (the run finishes it once).
    """

    def __init__(self, program: InstrumentedProgram, reader: ValueReader | None, costs: Any = None) -> None:
        self.program, self.reader, self.costs = program, reader, costs
        self.owned = costs is not None  # (a live step's backward runs after the run: owners followed)
        self.gradients = Gradients(reader)
        self.turns: NonFiniteTurns | None = None
        self.owners: AutogradOwners | None = None

    def start(self, run: OneRun) -> None:
        self.owners = run.owners

    def after(self, name: str, out: Any) -> None:
        self.gradients.watch(name, out)

    def backward_mode(self) -> BackwardMode | None:
        if self.costs is not None:  # (a live step's mode counts the backward)
            return None
        reader = self.reader
        mode = BackwardMode(self.owners, before_write=reader.flush if reader else None)
        self.costs = lambda: mode.costs
        return mode

    def differentiating(self, roots: Any) -> None:
        if self.reader is not None:  # which autograd node first makes NaN/Inf
            self.turns = NonFiniteTurns(self.owners, roots)

    def result(self, run: OneRun) -> PassResult:
        costs = self.costs() if self.costs is not None else None
        if not costs:  # (no backward ran)
            return PassResult()
        turned = self.turns.first() if self.turns is not None else None
        return backward_result(self.program, costs, self.gradients, run.stats(self.reader), turned)


class BackwardPass:
    """A forward with gradients on and one backward of ``loss_fn(output)``."""

    def __init__(self, loss_fn: Callable[[Any], torch.Tensor] | None = None):
        self.loss_fn = loss_for(True, loss_fn)

    @classmethod
    def planned(cls, options: Options, program: InstrumentedProgram, counted: PassResult) -> BackwardPass | None:
        """The pass ``options`` ask for (``backward=True``), or ``None``: also when the
        counting run differentiated the loss already (:mod:`.counted`)."""
        if not options.backward or BackwardRecorder in counted.recorded:
            return None
        return cls(options.loss_fn)

    def run(self, program: InstrumentedProgram) -> PassResult:
        reader = ValueReader() if all(has_data(t) for t in program.inputs) else None
        return run_once(program, [BackwardRecorder(program, reader)], self.loss_fn)


class NonFiniteTurns:
    """Which autograd node's backward first turned finite gradients into NaN/Inf.

    A hook on every autograd node of the graph behind the loss sums, as the node runs,
    each gradient it makes (float32; a NaN or ±Inf anywhere makes the sum non-finite, and
    only a sum beyond float32, values near 1e38 / numel, would be a false alarm),
    kept on the device and read once after the backward. The first node, in the order
    the backward ran them, whose gradients are not finite is the root cause, whatever
    order the forward's statements had: every gradient it was given came from nodes that
    ran before it, all finite. Its fx node is the one whose forward created it.
    """

    def __init__(self, owners: AutogradOwners, roots: Any) -> None:
        """Hook the autograd graph behind ``roots`` (the loss, or the model's outputs)."""
        self.owners = owners
        self.sums: list[tuple[int, torch.Tensor]] = []  # (sequence nr, sum of the gradients it made)
        seen: set[Any] = set()
        stack = [t.grad_fn for t in tensors_in(roots) if t.grad_fn is not None]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            node.register_hook(self._hook(node._sequence_nr()))
            stack.extend(f for f, _ in node.next_functions)

    def _hook(self, sequence_nr: int) -> Callable[..., None]:
        sums = self.sums

        def check(grad_inputs: tuple, grad_outputs: tuple) -> None:
            made = [g for g in grad_inputs if isinstance(g, torch.Tensor) and g.is_floating_point()]
            if made:
                with torch.no_grad(), torch._C._DisableTorchDispatch():  # (not the model's work: not counted)
                    total = made[0].sum(dtype=torch.float32)
                    for g in made[1:]:
                        total = total + g.sum(dtype=torch.float32).to(total.device)
                sums.append((sequence_nr, total))

        return check

    def first(self) -> str | None:
        """The fx node whose autograd node made non-finite gradients first, or ``None``
        (none did, or one no fx node created: the loss's own)."""
        if not self.sums:
            return None
        with torch._C._DisableTorchDispatch():  # one transfer, on the sums' device
            device = next((t.device for _, t in self.sums if t.device.type != "cpu"), "cpu")
            finite = torch.isfinite(torch.stack([t.to(device) for _, t in self.sums])).tolist()
        return next((self.owners.owner(nr) for (nr, _), ok in zip(self.sums, finite) if not ok), None)


def _recorder(name: str, slots: list, index: int, arrived: list[str], reader: ValueReader | None):
    def record(grad: torch.Tensor | None) -> None:
        if grad is None:
            # an output of a multi-output autograd node that the loss does not depend on
            # (an LSTM's final states): autograd calls its hook with no gradient. None
            # reached it, as for an output off the loss's path (its slot stays None)
            return
        slots[index] = (describe(grad), reader.read(grad) if reader else None)
        arrived.append(name)

    return record


def _finite(metas: tuple[TensorMeta, ...]) -> bool:
    return all(m.stats is None or m.stats.finite for m in metas)


def gradient_root_cause(
    program: InstrumentedProgram,
    metas: dict[str, tuple[TensorMeta, ...]],
    arrived: list[str],
    turned: str | None = None,
) -> NonFinite | None:
    """Where NaN/Inf first appeared in the backward, and every gradient it reached.

    ``turned`` (the node whose autograd node was seen turning finite gradients into
    non-finite ones) is the root cause when known. Otherwise: the first non-finite
    gradient came from the backward of the nodes that read that output, and the culprit
    is one whose own output gradients arrived and were all finite (a comparison or a
    detached use makes no gradient: it cannot be one); with none such, the loss.
    """
    bad = list(dict.fromkeys(n for n in arrived if not _finite(metas.get(n, ()))))
    if not bad:
        return None
    nodes = {n.name: n for n in program.graph.nodes}
    first = nodes[bad[0]]
    if turned in nodes:
        culprit = nodes[turned]
    else:
        readers = [u for u in first.users if u.op != "output" and metas.get(u.name)]
        culprit = next((u for u in readers if _finite(metas[u.name])), first)
    nan = sum(m.stats.nan_count for m in metas[first.name] if m.stats)
    inf = sum(m.stats.inf_count for m in metas[first.name] if m.stats)
    path, mtype = module_of(culprit)
    return NonFinite(
        root_cause=culprit.name,
        module_path=path,
        module_type=mtype,
        kind=NonFiniteKind.BOTH if nan and inf else NonFiniteKind.NAN if nan else NonFiniteKind.INF,
        inputs=metas.get(culprit.name, ()),
        downstream=tuple(bad),
    )
