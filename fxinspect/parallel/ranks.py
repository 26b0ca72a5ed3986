"""Whether the other ranks' steps differ from the one analysed.

One rank's step is analysed; the others run the same program on shards of the same
sizes, unless a dimension does not divide evenly among the ranks: then DTensor gives
some ranks a smaller shard (``torch.chunk``'s split: 10 rows over 3 ranks are 4, 4 and
2; 2 rows are 1, 1 and none). Tensor parallelism computes on that shard, so those
ranks' FLOPs, activations and collectives differ. FSDP2 pads its own shards to the
largest (each rank allocates ``ceil(n / ranks)`` rows, and its gradient is a view of a
padded reduce-scatter output) and computes on the gathered parameter, so parameters,
gradients, activations and collectives are the same on every rank; but the optimizer
makes its state like the unpadded shard, so a rank with a shorter shard holds less
state (checked on real gloo runs in ``tests/test_parallel.py``).
:func:`uneven` reads every sharded parameter's placements and says which ranks' shards
differ from the analysed rank's and what that changes: one note, so that a user
analyses those ranks too (``Parallel(..., rank=k)``).

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


def _sharded(model: torch.nn.Module) -> list[tuple[str, torch.Tensor, int]]:
    """Every parameter as the ranks hold it between steps, by name, with how many of its
    leading mesh dimensions are FSDP's: FSDP2's sharded parameter (the module holds the
    gathered one after a forward that keeps it, as the root's), else the module's."""
    paths = {id(m): p for p, m in model.named_modules()}
    found: dict[str, tuple[torch.Tensor, int]] = {}
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)
        group = getattr(state(), "_fsdp_param_group", None) if callable(state) else None
        for fsdp_param in getattr(group, "fsdp_params", ()):
            info = fsdp_param._module_info
            name = ".".join(filter(None, (paths.get(id(info.module), "?"), info.param_name)))
            found[name] = (fsdp_param.sharded_param, fsdp_param.mesh_info.mesh.ndim)
    for name, p in model.named_parameters():
        found.setdefault(name, (p, 0))
    return [(name, p, dims) for name, (p, dims) in found.items()]


def _differing(model: torch.nn.Module, rank: int) -> tuple[dict[int, str], dict[int, str]]:
    """Per other rank, the first parameter whose shard it computes on differs from
    ``rank``'s (tensor parallelism), and the first whose shard it holds differs only
    through FSDP's dimensions (padded by FSDP2)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.distributed.tensor import Replicate

    meshes: dict[int, tuple[list, list]] = {}  # id(mesh) -> (coordinates, ranks), read once a mesh
    computed: dict[int, str] = {}
    held: dict[int, str] = {}
    for name, p, fsdp in _sharded(model):
        placements = getattr(p, "placements", None)
        if placements is None:
            continue
        mesh = p.device_mesh
        if id(mesh) not in meshes:
            with unset_fake_temporarily():  # (the mesh's ranks are a real tensor)
                ranks = mesh.mesh.flatten().tolist()
            meshes[id(mesh)] = ([list(c) for c in itertools.product(*(range(s) for s in mesh.shape))], ranks)
        coordinates, ranks = meshes[id(mesh)]
        # what the rank computes on: FSDP's dimensions gathered before use
        gathered = tuple(Replicate() if i < fsdp else q for i, q in enumerate(placements))
        for differ, where in ((computed, gathered), (held, tuple(placements))):
            shapes = {r: _local(tuple(p.shape), tuple(mesh.shape), where, c) for r, c in zip(ranks, coordinates)}
            mine = shapes.get(rank)
            for r, shape in shapes.items():
                if shape != mine and r not in differ:
                    differ[r] = f"{name} {tuple(shape)} where rank {rank} has {tuple(mine)}"
    return computed, {r: said for r, said in held.items() if r not in computed}


def uneven(model: torch.nn.Module, rank: int) -> str | None:
    """A note naming the ranks whose parameter shards differ in shape from ``rank``'s,
    and what differs on them, or ``None`` when every rank holds shards of the same shapes."""
    computed, held = _differing(model, rank)
    if not computed and not held:
        return None
    said = []
    if computed:
        first = next(iter(computed.items()))
        said.append(
            f"{len(computed)} rank(s) compute on parameter shards of other shapes, for example rank {first[0]}: "
            f"{first[1]} (their FLOPs, activations and collectives differ)"
        )
    if held:
        first = next(iter(held.items()))
        said.append(
            f"{len(held)} rank(s) hold FSDP shards of other shapes, for example rank {first[0]}: {first[1]} "
            "(FSDP2 pads parameters and gradients to the largest shard, the same on every rank, but the "
            "optimizer state is the size of the unpadded shard)"
        )
    return f"ranks differ (uneven sharding): {'; '.join(said)}; analyse them with Parallel(..., rank=k)"
