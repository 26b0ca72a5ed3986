"""The step program: a parallel step's recorded forward, run by running the model itself.

:class:`StepProgram` is an :class:`~fxinspect.run.program.InstrumentedProgram` whose
graph was recorded by the eager tier from one step; its :meth:`~StepProgram.run` calls
the model again and, at each op the recording saw, the passes' probes with that op's
node (:class:`_Matched`, a dispatch mode), so the counting run, the backward and the
memory model work on it as on any capture. :mod:`.step` makes and runs it.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..capture.base import module_of
from ..capture.inputs import flatten_outputs
from ..capture.states import holds_states
from ..errors import FxInspectError
from ..run.owners import AutogradOwners
from ..run.program import InstrumentedProgram, Probe
from ..tensors import NOT_WORK, holds_dtensors

__all__ = ["StepProgram"]


class _Matched(TorchDispatchMode):
    """Calls the probes at each op the recording saw, with that op's node."""

    def __init__(self, order: list[torch.fx.Node], probe: Probe, after: dict[str, list[torch.fx.Node]]) -> None:
        super().__init__()
        self.order, self.probe, self.at = order, probe, 0
        self.following = after  # per op node, the graph's other nodes up to the next op (getitem, grad mode)
        self.done = False  # the forward has returned
        self.current: torch.fx.Node | None = None  # the node of the op running, or of the last one

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if holds_dtensors(types):
            return NotImplemented  # (as the recording: DTensor's local ops come back here)
        kwargs = kwargs or {}
        if func.namespace in NOT_WORK:
            return func(*args, **kwargs)
        order, at = self.order, self.at
        if at >= len(order) or order[at].target is not func:
            if func is torch.ops.aten.detach.default:  # (autograd's own, pruned from the recording)
                return func(*args, **kwargs)
            expected = f"{order[at].target} in module {module_of(order[at])[0]!r}" if at < len(order) else "no more ops"
            raise FxInspectError(
                f"the analysed step ran {func} as its op {at}, where the recorded step ran {expected}: "
                "the parallel step changes from one call to the next, so it cannot be analysed op by op"
            )
        self.at += 1
        self.current = order[at]
        out = func(*args, **kwargs)
        self.probe.after(order[at].name, out)
        self._follow(order[at].name, out)
        if at + 1 < len(order):  # (before the next op's autograd node is made)
            self.probe.before(order[at + 1].name)
        return out

    def _follow(self, name: str, out: Any) -> None:
        """Probe the nodes that follow an op in the graph without being ops of their own:
        its outputs' items (``getitem``) and grad-mode switches, as a graph's run would."""
        extra = self.following.get(name)
        if not extra:
            return
        values = {name: out}  # (held only while its items are probed)
        for node in extra:
            value = None
            if node.target is operator.getitem and node.args[0].name in values:
                value = values[node.args[0].name][node.args[1]]
                values[node.name] = value
            self.probe.before(node.name)
            self.probe.after(node.name, value)


class StepProgram(InstrumentedProgram):
    """The recorded forward of a parallel step; running it runs the model itself.

    The next node's ``before`` is called right after an op ends, not as it starts: the
    autograd node of an op is made above the dispatcher, before the op reaches any mode,
    and the node that owns it must already be open then.
    """

    runs_the_model = True

    def __init__(self, capture: Any, model: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        super().__init__(capture)
        self.model, self.args, self.kwargs = model, args, kwargs
        self.order = [
            n
            for n in capture.graph_module.graph.nodes
            if n.op == "call_function"
            and isinstance(n.target, torch._ops.OpOverload)
            and n.target.namespace not in NOT_WORK
        ]
        self.following: dict[str, list[torch.fx.Node]] = {}
        ops = set(self.order)
        current = None
        for n in capture.graph_module.graph.nodes:
            if n in ops:
                current = n.name
            elif n.op == "call_function":  # ("" : before the first op)
                self.following.setdefault(current or "", []).append(n)
        self.running: _Matched | None = None
        self.owners = AutogradOwners()
        self.nodes = {n.name: n for n in self.order}

    def run(self, inputs: list[Any], probe: Probe = Probe(), compiled: bool = False) -> Any:  # noqa: B008
        """Run the model's step forward with ``probe`` at each recorded op (``inputs`` are
        the prepared ones, always)."""
        owners = self.owners = AutogradOwners()  # (whose backward runs: for the collectives' modules)

        def before(name: str) -> None:
            owners.before(name)
            if probe.before is not None:
                probe.before(name)

        def after(name: str, out: Any) -> None:
            owners.after(name)
            if probe.after is not None:
                probe.after(name, out)

        self.running = matched = _Matched(self.order, Probe(before, after), self.following)
        matched._follow("", None)
        if self.order:
            before(self.order[0].name)
        args, kwargs = self.args, self.kwargs
        if holds_states(args, kwargs):  # (a state object, a KV cache: a fresh copy per run, see capture.states)
            given = self.capture.inputs
            args, kwargs = given.rebuild(given.tensors)
        with matched:
            out = self.model(*args, **kwargs)
        matched.done = True
        if matched.at != len(self.order):
            raise FxInspectError(
                f"the analysed step ran {matched.at} of the {len(self.order)} ops the recorded step ran: "
                "the parallel step changes from one call to the next"
            )
        return tuple(flatten_outputs(out)[0])

    def parameters(self) -> list[torch.nn.Parameter]:
        """The model's parameters as it holds them between steps (sharded ones are
        DTensors); the recording's constants are FSDP's own working tensors: the
        gathered parameters, the sharded storage, the communication buffers."""
        return list(self.model.parameters())

    def buffers(self) -> list[torch.Tensor]:
        """The model's buffers (see :meth:`parameters`)."""
        return list(self.model.buffers())

    def compile(self, probe: Probe = Probe()) -> Any:  # noqa: B008
        raise FxInspectError("a parallel step runs the model itself: it has no generated code")
