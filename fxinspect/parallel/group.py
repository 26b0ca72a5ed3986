"""A world of ranks in one process: torch's ``fake`` process-group backend and a mesh.

The ``fake`` backend (``torch.testing._internal.distributed.fake_pg``) answers every
collective at once without moving data, so one process can run the step of any rank of
any world size: with fake tensors nothing is allocated, and every collective still
reaches the dispatcher with its tensors and group, as in a real run.

Example
-------
>>> import torch
>>> from fxinspect.parallel.spec import Parallel
>>> with fake_world(Parallel.fsdp(4, rank=1)) as mesh:
...     mesh.size(), torch.distributed.get_rank()
(4, 1)
>>> torch.distributed.is_initialized()
False
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..errors import InputError
from .spec import Parallel

__all__ = ["fake_world"]


@contextlib.contextmanager
def fake_world(spec: Parallel, device_type: str = "cpu") -> Iterator[Any]:
    """The default process group on the fake backend as ``spec``'s rank, and its mesh;
    both are torn down when the block ends."""
    if not dist.is_available():
        raise InputError("parallel= needs torch.distributed, which this build of torch does not have")
    if dist.is_initialized():
        raise InputError(
            "parallel= runs the step on a fake process group of its own, but a default process group is "
            "already initialised in this process; analyse before init_process_group (or after "
            "destroy_process_group)"
        )
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    # a mesh's rank map is a real tensor, read with tolist(): meshes are made outside the
    # fake mode, also those FSDP2 makes when it combines a data- and a tensor-parallel mesh
    original = DeviceMesh.__init__

    def outside_fake(self: Any, *args: Any, **kwargs: Any) -> None:
        with unset_fake_temporarily():
            original(self, *args, **kwargs)

    hook = sys.excepthook  # (init_process_group installs one that prefixes every traceback with the rank)
    _forget_sharding()  # (a plan found for another rank or world must not be reused)
    dist.init_process_group("fake", store=FakeStore(), rank=spec.rank, world_size=spec.world_size)
    DeviceMesh.__init__ = outside_fake
    try:
        names = tuple(n for n, _ in spec.mesh)
        with unset_fake_temporarily():
            mesh = init_device_mesh(device_type, tuple(s for _, s in spec.mesh), mesh_dim_names=names)
        yield mesh
    finally:
        DeviceMesh.__init__ = original
        dist.destroy_process_group()
        sys.excepthook = hook
        _forget_sharding()


def _forget_sharding() -> None:
    """Clear DTensor's caches of sharding decisions: they are keyed by specs that compare
    equal across worlds of the same shape, while the local shards they imply depend on
    the rank (an uneven shard of rank 0 was reused for rank 3)."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._redistribute import _gen_transform_infos

    clear = getattr(torch._C, "_clear_DTensor_sharding_propagator_cache", None)
    if clear is not None:
        clear()
    _gen_transform_infos.cache_clear()
    DTensor._op_dispatcher.sharding_propagator.propagate_op_sharding.cache_clear()
