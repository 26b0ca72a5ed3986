"""The instrumented program: the captured graph with a probe point around every op.

Built once from a :class:`~fxinspect.capture.Capture`; every pass runs it. A probe
point is an op node's name: a pass's :class:`Probe` says what happens ``before`` the
node runs and ``after`` it, with its output. ``print(program)`` shows the generated
source with both probes in place (the source the compiled runs execute, with the
probes a pass does not use left out); a pass that runs once is interpreted over the
same nodes instead of compiled (see :mod:`~fxinspect.run.interpret`).

Example
-------
>>> import torch, fxinspect
>>> program = fxinspect.instrument(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()),
...                                torch.randn(3, 4))
>>> print(program.code, end="")
def forward(input_1):
    before('_0')
    _0 = self_0(input_1);  input_1 = None
    after('_0', _0)
    before('_1')
    _1 = self_1(_0);  _0 = None
    after('_1', _1)
    return (_1, )
>>> program(torch.ones(3, 4)).shape          # runs like the model, outputs as the model gives them
torch.Size([3, 2])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from .. import formatting
from ..capture import Capture, module_of, normalize
from ..capture.base import one_line, resolve_attr
from ..capture.inputs import FlatInputs
from ..errors import InputError, NodeExecutionError, add_where
from ..tensors import tensors_in
from .codegen import Program, compile_graph
from .graphs import op_nodes
from .interpret import Interpreted, NodeFailed

__all__ = ["InstrumentedProgram", "Probe"]


def _tensor_text(t: torch.Tensor) -> str:
    return formatting.tensor(tuple(t.shape), str(t.dtype).removeprefix("torch."))


@dataclass(frozen=True)
class Probe:
    """What a pass does at the probe points: ``before(node name)``, ``after(node name,
    output)``; either may be ``None`` (then that call is not made at all)."""

    before: Callable[[str], Any] | None = None
    after: Callable[[str, Any], Any] | None = None


def _show(*_: Any) -> None:
    """The probe printed in :attr:`InstrumentedProgram.code` (does nothing when run)."""


class InstrumentedProgram:
    """The captured graph with probe points before and after each op node.

    Call it like the model (the same argument structure as the example inputs) to run
    the captured program; :meth:`run` runs it with a pass's probes on flat tensors.
    The graph is read, never changed; the model's own modules and parameters are the
    ones the program calls.
    """

    runs_the_model = False
    """Whether :meth:`run` runs the model itself (a parallel step) rather than the graph."""

    def __init__(self, capture: Capture):
        self.capture = capture
        self.graph_module: fx.GraphModule = capture.graph_module
        self._ops = op_nodes(self.graph_module.graph)
        self.probe_points: tuple[str, ...] = tuple(n.name for n in self._ops)
        self._interpreted: Interpreted | None = None
        self._plain: Program | None = None

    @property
    def graph(self) -> fx.Graph:
        """The captured graph (the probe points are its op nodes)."""
        return self.graph_module.graph

    @property
    def method(self) -> str:
        """The capture tier that produced the graph."""
        return self.capture.method

    @property
    def inputs(self) -> list[torch.Tensor]:
        """The example inputs' tensors, in placeholder order."""
        return self.capture.inputs.tensors

    @property
    def code(self) -> str:
        """The generated source with every probe point shown."""
        return compile_graph(self.graph_module, _show, _show, self.capture.user_path).source

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"<InstrumentedProgram: {len(self.probe_points)} probe points, captured by {self.method}>"

    def attribute(self, node: fx.Node) -> Any:
        """What a ``get_attr`` node reads (a parameter, buffer or constant)."""
        return resolve_attr(self.graph_module, str(node.target))

    def run(self, inputs: list[Any], probe: Probe = Probe(), compiled: bool = False) -> Any:
        """Run the program once on flat ``inputs`` with ``probe``; the graph's raw output.

        ``compiled=False`` walks the nodes (cheapest for one run); an op that fails
        raises its own exception, with a note naming the node and what it was given;
        ``True`` generates code for this probe first (cheapest per run: use
        :meth:`compile` to keep it).
        """
        if compiled:
            return self.compile(probe)(*inputs)
        if self._interpreted is None:
            self._interpreted = Interpreted(self.graph_module)
        try:
            return self._interpreted(inputs, probe.before, probe.after)
        except NodeFailed as failed:
            error, node, values = failed.__cause__, failed.node, failed.inputs
        # outside the except block, so that the model's exception is raised as it was,
        # not as one raised while handling ours
        raise self._where(error, node, values)

    def _where(self, error: BaseException, node: fx.Node, values: dict[str, Any]) -> BaseException:
        """The model's own ``error`` with a note naming the node, its module, and the
        shapes and dtypes it was given (its parameters' too, for a module call)."""
        path, mtype = module_of(node)
        shapes = [f"{name}: {_tensor_text(t)}" for name, value in values.items() for t in tensors_in(value)]
        if node.op == "call_module":
            sub = self.graph_module.get_submodule(str(node.target))
            shapes += [f"{path}.{n}: {_tensor_text(p)}" for n, p in sub.named_parameters(recurse=False)]
        where = f"module {path!r}" if path else "the root module"
        noted = add_where(error, f"by node {node.name!r} ({where}, {mtype}) on inputs [{', '.join(shapes)}]")
        if getattr(noted, "__notes__", None):
            return noted
        return NodeExecutionError(node.name, path, mtype, shapes, one_line(error, limit=1000)).with_traceback(
            error.__traceback__
        )

    def compile(self, probe: Probe = Probe()) -> Program:
        """The program as generated code with ``probe``'s calls in it, to run many times."""
        if probe.before is None and probe.after is None:
            if self._plain is None:
                self._plain = compile_graph(self.graph_module, user_path=self.capture.user_path)
            return self._plain
        return compile_graph(self.graph_module, probe.before, probe.after, self.capture.user_path)

    def parameters(self) -> list[torch.nn.Parameter]:
        """Every parameter the program uses, once: the graph's and the captured model's (a
        checkpointed block's parameters are called from a node, not held by the graph)."""
        model = self.capture.model
        return list(
            dict.fromkeys([*self.graph_module.parameters(), *(model.parameters() if model is not None else ())])
        )

    def buffers(self) -> list[torch.Tensor]:
        """Every buffer the program uses, once (as :meth:`parameters`)."""
        model = self.capture.model
        return list(dict.fromkeys([*self.graph_module.buffers(), *(model.buffers() if model is not None else ())]))

    def flat_inputs(self, args: Any, kwargs: dict | None = None) -> list[torch.Tensor]:
        """The tensors of ``(args, kwargs)``, as many as the example inputs had (their other
        arguments were constants of the capture)."""
        args, kwargs = normalize(args, kwargs)
        given = FlatInputs.build(args, kwargs).tensors
        expected = self.capture.inputs.names
        if len(given) != len(expected):  # (non-tensor arguments are constants of the graph)
            raise InputError(
                f"the program takes {len(expected)} tensor input(s) ({', '.join(expected)}), as the "
                f"example inputs it was captured with; got {len(given)}"
            )
        return given

    def output_structure(self, flat: Any) -> Any:
        """The graph's raw output (the model's output leaves) in the model's structure."""
        spec = self.capture.out_spec
        return pytree.tree_unflatten(list(flat), spec) if spec is not None else flat

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the captured program like the model: outputs in the model's structure."""
        return self.output_structure(self.compile()(*self.flat_inputs(args, kwargs)))
