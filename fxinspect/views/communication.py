"""What a rank communicated: a line for the summary and a table by module or call.

Example
-------
>>> from fxinspect.records import Collective, Communication
>>> c = Collective("all_gather", "c10d._allgather_base_", "forward", "layers.0", None, 4, "torch.float32", 4096, 3072, "(n-1)/n")
>>> comm = Communication(0, 4, (("dp", 4),), (c, c))
>>> print(communication_table(comm))
module    phase    kind          calls    group  dtype      tensor    sent (ring)  factor
--------  -------  ----------  -------  -------  -------  --------  -------------  --------
layers.0  forward  all_gather        2        4  float32  8.00 KiB       6.00 KiB  (n-1)/n
total                                2                    8.00 KiB       6.00 KiB
"""

from __future__ import annotations

from tabulate import tabulate

from .. import formatting as fmt
from ..records.communication import Communication

__all__ = ["communication_lines", "communication_table"]


def communication_lines(comm: Communication) -> list[str]:
    """The summary's text: the rank, the mesh, and per phase and kind the calls and bytes."""
    mesh = " x ".join(f"{n}={s}" for n, s in comm.mesh)
    head = (
        f"rank {comm.rank} of {comm.world_size} ({mesh}): {fmt.plural(len(comm.collectives), 'collective')}, "
        f"{fmt.nbytes(comm.tensor_bytes)} of tensors, {fmt.nbytes(comm.wire_bytes)} sent (ring algorithms)"
    )
    parts = [
        f"{phase} {kind.replace('_', '-')} {calls}x {fmt.nbytes(tensor)}"
        for (phase, kind), (calls, tensor, _) in comm.by_kind().items()
    ]
    lines = [head] + (["; ".join(parts)] if parts else [])
    if comm.link_note:
        total = comm.predicted_time
        known = fmt.seconds(total) if total is not None else "not every collective"
        lines.append(f"predicted on the wire: {known} ({comm.link_note})")
    return lines


def communication_table(comm: Communication, by: str = "module", tablefmt: str = "simple") -> str:
    """Calls and bytes per ``(module, phase, kind, group, dtype)`` (``by="module"``), or one
    row per call in the order the step issued them (``by="call"``)."""
    if by not in ("module", "call"):
        raise ValueError(f"communication_table(by=) expects 'module' or 'call', got {by!r}")
    timed = any(c.predicted_time is not None for c in comm.collectives)
    rows: dict[tuple, list] = {}
    for i, c in enumerate(comm.collectives):
        key = (c.module_path or "(root)", c.phase, c.kind, c.group_size, c.dtype.replace("torch.", ""), c.factor)
        if by == "call":
            key = (i, *key)
        acc = rows.setdefault(key, [0, 0, 0, 0.0])
        acc[0] += 1
        acc[1] += c.tensor_bytes
        acc[2] += c.wire_bytes
        acc[3] = None if acc[3] is None or c.predicted_time is None else acc[3] + c.predicted_time
    if by == "module":  # each module's calls together, modules in the order they first communicated
        first = {key[0]: i for i, key in reversed(list(enumerate(rows)))}
        rows = dict(sorted(rows.items(), key=lambda kv: (first[kv[0][0]], kv[0][1] != "forward", kv[0][2])))
    cells = []
    for key, (calls, tensor, wire, seconds) in rows.items():
        *head, group, dtype, factor = key[1:] if by == "call" else key
        cells.append([*head, calls, group, dtype, fmt.nbytes(tensor), fmt.nbytes(wire), factor])
        if timed:
            cells[-1].append(fmt.seconds(seconds))
    total = [
        "total",
        "",
        "",
        len(comm.collectives),
        "",
        "",
        fmt.nbytes(comm.tensor_bytes),
        fmt.nbytes(comm.wire_bytes),
        "",
    ]
    cells.append(total + ([fmt.seconds(comm.predicted_time)] if timed else []))
    headers = ["module", "phase", "kind", "calls", "group", "dtype", "tensor", "sent (ring)", "factor"]
    align = ("left",) * 3 + ("right",) * 2 + ("left", "right", "right", "left")
    if timed:
        headers, align = headers + ["on the wire"], align + ("right",)
    return tabulate(cells, headers=headers, tablefmt=tablefmt, disable_numparse=True, colalign=align)
