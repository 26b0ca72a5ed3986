"""``torch._dynamo`` imported before a followed run, and only where the run may need it.

torch imports ``torch._dynamo`` (about 2 s) the first time a function it guards against
dynamo runs (``torch._disable_dynamo``): ``torch.utils.checkpoint``, the Python kernels
of custom ops, torch's reference decompositions, a tensor subclass's dispatch, the
optimizers' steps. Imported in the middle of a run whose storages are followed, it keeps
alive the frames it ran under, and so the tensors their locals hold: the first run in a
process would see its module's inputs outlive the backward. So the memory model imports
it before such a run (:func:`import_dynamo`).

fxinspect's own dispatch modes need no import (:class:`~fxinspect.tensors.DispatchMode`),
and a run on the CPU of nothing but torch's layers, functions and tensor methods reaches
no guarded function: :func:`may_reach_dynamo` tells those runs apart, and says yes for
any code it does not know (a leaf module of the user's, a hook, a custom loss).

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU())
>>> may_reach_dynamo(fxinspect.instrument(model, torch.randn(1, 4)))
False
>>> class Checkpointed(torch.nn.Module):
...     def forward(self, x):
...         return torch.utils.checkpoint.checkpoint(torch.relu, x, use_reentrant=False)
>>> may_reach_dynamo(fxinspect.instrument(Checkpointed(), torch.randn(1, 4), leaf_modules=[Checkpointed]))
True
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.modules import module as _module

from ..tensors import has_data
from .program import InstrumentedProgram

__all__ = ["import_dynamo", "may_reach_dynamo"]

_C_FUNCTIONS = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)
_TORCH_PYTHON = ("torch.nn.functional", "torch.functional", "torch._tensor")
"""torch's Python modules of functions that call only C kernels on CPU tensors."""
_LAYERS = "torch.nn.modules."
_LAYERS_NOT = ("torch.nn.modules.linear_cross_entropy",)  # (a custom op's Python kernel)
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def import_dynamo() -> None:
    """Import ``torch._dynamo`` now, before a followed run, not in the middle of it."""
    if "torch._dynamo" not in sys.modules:
        import torch._dynamo  # noqa: F401


def may_reach_dynamo(program: InstrumentedProgram, loss_fn: Callable | None = None) -> bool:
    """Whether a run of ``program`` (and the backward of ``loss_fn``) may call a function
    torch guards against dynamo: ``False`` only for a CPU run on real tensors of torch's own
    layers, functions and tensor methods, with no hook and fxinspect's own loss."""
    if program.runs_the_model:  # (the model's own code runs: anything may)
        return True
    if loss_fn is not None and not getattr(loss_fn, "__module__", "").startswith("fxinspect."):
        return True
    tensors = [*program.inputs, *program.parameters(), *program.buffers()]
    if any(t.device.type != "cpu" or not has_data(t) for t in tensors):
        return True  # (fake tensors' dispatch is guarded; CUDA's deterministic paths decompose)
    if any(getattr(_module, f"_global{name}", None) for name in _HOOKS):
        return True
    graph_module = program.graph_module
    return not all(_known(node, graph_module) for node in graph_module.graph.nodes)


def _known(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> bool:
    """Whether ``node`` runs only code known never to reach a guarded function on the CPU."""
    if node.op in ("placeholder", "output", "get_attr"):
        return True
    if node.op == "call_method":  # (a tensor's; a hook it registers would run the user's code)
        return "hook" not in str(node.target)
    if node.op == "call_function":
        return _known_function(node.target)
    if node.op == "call_module":
        module = graph_module.get_submodule(str(node.target))
        name = type(module).__module__
        if not name.startswith(_LAYERS) or name.startswith(_LAYERS_NOT):
            return False
        return not any(getattr(module, hooks, None) for hooks in _HOOKS)
    return False


def _known_function(target: Any) -> bool:
    if isinstance(target, _C_FUNCTIONS):  # torch's C functions and tensor methods, operator, builtins
        return True
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace == "aten"
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.startswith("aten::")
    return isinstance(target, types.FunctionType) and target.__module__ in _TORCH_PYTHON
