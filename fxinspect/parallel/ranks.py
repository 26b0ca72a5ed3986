"""Whether the other ranks' steps differ from the one analysed.

One rank's step is analysed; the others run the same program on shards of the same
sizes, unless a dimension does not divide evenly among the ranks: then DTensor gives
some ranks a smaller shard, and tensor parallelism computes on it. FSDP2 pads its own
shards to the largest and computes on the gathered parameter, so its unevenness
changes neither memory nor collectives: its mesh dimensions are left out.
:func:`uneven` reads every sharded parameter's placements and says which ranks' shards
differ from the analysed rank's: one note, so that a user analyses those ranks too
(``Parallel(..., rank=k)``).

Example
-------
>>> from torch.distributed.tensor import Shard
>>> _local((10, 4), (4,), (Shard(0),), [3])     # 10 rows over 4 ranks: 3, 3, 3 and 1
(1, 4)
"""

from __future__ import annotations

import itertools

import torch

__all__ = ["uneven"]


def _local(shape: tuple, mesh_shape: tuple, placements: tuple, coordinate: list[int]) -> tuple[int, ...]:
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset

    return tuple(_compute_local_shape_and_global_offset(shape, mesh_shape, coordinate, placements, skip_offset=True)[0])


def _fsdp_dims(model: torch.nn.Module) -> dict[int, int]:
    """Per parameter FSDP2 manages (by id), how many leading mesh dimensions are FSDP's."""
    dims: dict[int, int] = {}
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)
        group = getattr(state(), "_fsdp_param_group", None) if callable(state) else None
        for fsdp_param in getattr(group, "fsdp_params", ()):
            dims[id(fsdp_param.sharded_param)] = fsdp_param.mesh_info.mesh.ndim
    return dims


def uneven(model: torch.nn.Module, rank: int) -> str | None:
    """A note naming the ranks whose parameter shards differ in shape from ``rank``'s,
    or ``None`` when every rank holds shards of the same shapes."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.distributed.tensor import Replicate

    fsdp = _fsdp_dims(model)
    meshes: dict[int, tuple[list, list]] = {}  # id(mesh) -> (coordinates, ranks), read once a mesh
    differ: dict[int, str] = {}
    for name, p in model.named_parameters():
        placements = getattr(p, "placements", None)
        if placements is None:
            continue
        placements = tuple(Replicate() if i < fsdp.get(id(p), 0) else q for i, q in enumerate(placements))
        mesh = p.device_mesh
        if id(mesh) not in meshes:
            with unset_fake_temporarily():  # (the mesh's ranks are a real tensor)
                ranks = mesh.mesh.flatten().tolist()
            meshes[id(mesh)] = ([list(c) for c in itertools.product(*(range(s) for s in mesh.shape))], ranks)
        coordinates, ranks = meshes[id(mesh)]
        shapes = {
            r: _local(tuple(p.shape), tuple(mesh.shape), tuple(placements), c) for r, c in zip(ranks, coordinates)
        }
        mine = shapes.get(rank)
        for r, shape in shapes.items():
            if shape != mine and r not in differ:
                differ[r] = f"{name} {tuple(shape)} where rank {rank} has {tuple(mine)}"
    if not differ:
        return None
    first = next(iter(differ.items()))
    return (
        f"ranks differ: {len(differ)} rank(s) hold parameter shards of other shapes (uneven sharding), "
        f"for example rank {first[0]}: {first[1]}; analyse them with Parallel(..., rank=k)"
    )
