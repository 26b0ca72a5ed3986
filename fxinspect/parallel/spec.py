"""How a step is parallelised: the device mesh, the rank analysed, and the wrapping.

:class:`Parallel` is what ``analyze(..., parallel=...)`` takes. ``apply(model, mesh)``
parallelises the analysed copy of the model on the mesh exactly as the user's training
script does (``fully_shard``, ``parallelize_module``, or both on a 2-D mesh); the
shorthands :meth:`Parallel.fsdp` and :meth:`Parallel.tp` build the common ones.

Example
-------
>>> spec = Parallel.fsdp(8)
>>> spec.world_size, spec.mesh, spec.rank
(8, (('dp', 8),), 0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import InputError

__all__ = ["Parallel"]


@dataclass(frozen=True)
class Parallel:
    """The mesh (``(name, size)`` per dimension, outermost first), the rank whose step is
    analysed, and ``apply(model, mesh)``, which parallelises the model on the mesh."""

    mesh: tuple[tuple[str, int], ...]
    apply: Callable[[torch.nn.Module, Any], Any]
    rank: int = 0
    label: str = "custom"  # what apply does, for the report's notes

    def __post_init__(self) -> None:
        mesh = tuple(dict(self.mesh).items()) if isinstance(self.mesh, dict) else tuple(self.mesh)
        if not mesh or any(not isinstance(n, str) or not isinstance(s, int) or s < 1 for n, s in mesh):
            raise InputError(f"parallel mesh= expects (name, size) pairs with sizes >= 1, got {self.mesh!r}")
        object.__setattr__(self, "mesh", mesh)
        if not callable(self.apply):
            raise InputError(f"parallel apply= expects a callable apply(model, mesh), got {type(self.apply).__name__}")
        if not 0 <= self.rank < self.world_size:
            raise InputError(f"parallel rank={self.rank} is outside the world of {self.world_size} ranks")

    @property
    def world_size(self) -> int:
        """The number of ranks: the product of the mesh's sizes."""
        return math.prod(s for _, s in self.mesh)

    @classmethod
    def fsdp(cls, world_size: int, blocks: Any = None, rank: int = 0, **fully_shard_options: Any) -> Parallel:
        """FSDP2 over ``world_size`` ranks: ``fully_shard`` on each block, then on the root.

        ``blocks``: module classes (or a predicate on a module) to shard one by one; by
        default every member of an outermost ``nn.ModuleList`` (the layers of a
        transformer; a model without one is sharded as one unit, the root).
        """

        def apply(model: torch.nn.Module, mesh: Any) -> None:
            from torch.distributed.fsdp import fully_shard

            for module in _blocks(model, blocks):
                fully_shard(module, mesh=mesh, **fully_shard_options)
            fully_shard(model, mesh=mesh, **fully_shard_options)

        return cls((("dp", world_size),), apply, rank, "FSDP2 (fully_shard per block and on the root)")

    @classmethod
    def tp(cls, world_size: int, plan: dict[str, Any] | None = None, rank: int = 0) -> Parallel:
        """Tensor parallel over ``world_size`` ranks: ``parallelize_module(model, mesh, plan)``;
        without a plan, the model's own (:func:`~fxinspect.parallel.plans.model_tp_plan`:
        a transformers model's ``tp_plan``, else the Megatron plan by module names)."""

        def apply(model: torch.nn.Module, mesh: Any) -> None:
            from torch.distributed.tensor.parallel import parallelize_module

            from .plans import model_tp_plan

            parallelize_module(model, mesh, model_tp_plan(model, mesh.size()) if plan is None else plan)

        label = "tensor parallel (parallelize_module)" if plan is not None else "tensor parallel (the model's own plan)"
        return cls((("tp", world_size),), apply, rank, label)


def _blocks(model: torch.nn.Module, blocks: Any) -> Iterable[torch.nn.Module]:
    """The modules :meth:`Parallel.fsdp` shards one by one, innermost last is fine: FSDP2
    takes a parent after its children."""
    if blocks is None:  # the members of the outermost ModuleLists (a layer's own lists stay in it)
        found: list[torch.nn.Module] = []
        inside: set[int] = set()
        for m in model.modules():  # (parents before their children)
            if id(m) in inside:
                continue
            if isinstance(m, torch.nn.ModuleList):
                found.extend(m)
                inside.update(id(sub) for member in m for sub in member.modules())
        return found
    if isinstance(blocks, type) or (isinstance(blocks, tuple) and all(isinstance(b, type) for b in blocks)):
        return [m for m in model.modules() if isinstance(m, blocks) and m is not model]
    if callable(blocks):
        return [m for m in model.modules() if m is not model and blocks(m)]
    raise InputError(f"Parallel.fsdp blocks= expects module classes or a predicate, got {type(blocks).__name__}")
