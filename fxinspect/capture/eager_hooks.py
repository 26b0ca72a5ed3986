"""The eager tier's module stack: which module of the user's model runs each recorded op.

Global module hooks (``register_module_forward_pre_hook`` and its forward
counterpart) keep a stack of the user's modules that are running, count how often
each ran, and set ``GraphBuilder.module`` to the innermost one. Hooks see only
``module(...)`` calls: an op in a method of a submodule
(``self.transform.postprocess(...)``) or in a direct ``.forward()`` call is placed by
the ``self`` of the frames on the call stack between the op and the running module
(``calls`` counts hooked calls only). Hooks run in other threads are ignored.

Example
-------
>>> import torch
>>> from fxinspect.capture.eager_graph import GraphBuilder
>>> from fxinspect.capture.inputs import FlatInputs
>>> m = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.ReLU())
>>> x = torch.ones(2)
>>> modules = RunningModules(m, GraphBuilder(m, FlatInputs.build((x,), {})))
>>> with modules.hooked():
...     _ = m(x)
>>> modules.calls
{'': 1, '0': 1, '1': 1}
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import torch

from ..paths import within
from .base import type_name
from .eager_graph import GraphBuilder

__all__ = ["RunningModules"]

_MAX_FRAMES = 48  # how far up the call stack an op looks for the method's module


class RunningModules:
    """Global forward hooks: which module of the user's model is running, and how often
    each ran (counted before the forward)."""

    def __init__(self, model: torch.nn.Module, builder: GraphBuilder):
        self.paths = {id(m): (p, type_name(m)) for p, m in model.named_modules()}
        self.thread = threading.get_ident()  # the hooks are global: ignore other threads
        self.builder = builder
        self.stack: list[tuple[int, tuple[str, str]]] = []
        self.root = ("", type_name(model))
        self.calls: dict[str, int] = {}
        builder.locate = self.innermost

    @contextlib.contextmanager
    def hooked(self) -> Iterator[None]:
        """Keep the stack while the block runs (the hooks are removed on the way out)."""
        hooks = []
        try:
            hooks.append(torch.nn.modules.module.register_module_forward_pre_hook(self.pre))
            hooks.append(torch.nn.modules.module.register_module_forward_hook(self.post, always_call=True))
            yield
        finally:
            for handle in hooks:
                handle.remove()

    def innermost(self) -> tuple[str, str]:
        """The running module, refined by the call stack: hooks see ``module(...)`` calls
        only, so an op in a method such as ``self.transform.postprocess(...)`` (called
        from the parent's forward) is found by the ``self`` of the frames between the op
        and the hooked module's own frame."""
        top_id = self.stack[-1][0] if self.stack else None
        frame = sys._getframe(3)  # innermost() <- record() <- __torch_dispatch__ <- caller
        for _ in range(_MAX_FRAMES):
            if frame is None:
                break
            if frame.f_code.co_argcount and frame.f_code.co_varnames[0] == "self":
                owner = frame.f_locals.get("self")
                key = id(owner)
                if key == top_id:
                    break
                found = self.paths.get(key)
                if found is not None and within(found[0], self.builder.module[0]):
                    return found
            frame = frame.f_back
        return self.builder.module

    def pre(self, module: torch.nn.Module, args: Any) -> None:
        found = self.paths.get(id(module))
        if found is None or threading.get_ident() != self.thread:  # outside the model: ops go to the caller
            return
        self.calls[found[0]] = self.calls.get(found[0], 0) + 1
        self.builder.sync_grad_mode()
        self.stack.append((id(module), found))
        self._update(found)

    def post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        key = id(module)
        if key not in self.paths or threading.get_ident() != self.thread or all(k != key for k, _ in self.stack):
            return
        self.builder.sync_grad_mode()
        while self.stack:  # also drops frames a caught exception left behind
            if self.stack.pop()[0] == key:
                break
        self._update(self.stack[-1][1] if self.stack else self.root)

    def _update(self, running: tuple[str, str]) -> None:
        """Tell the builder the running module and the stack of calls it runs in (a new
        dict each time: the nodes recorded so far keep the one they ran in)."""
        self.builder.module = running
        self.builder.calls = {f"{path}@{self.calls[path] - 1}": (path, cls) for _, (path, cls) in self.stack}
