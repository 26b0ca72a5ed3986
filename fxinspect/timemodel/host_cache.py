"""Where this host's measured figures are kept, and for how long they are used.

One JSON file per host, torch version, thread count, device and layout (:data:`FORMAT`),
under ``$XDG_CACHE_HOME/fxinspect`` (``~/.cache/fxinspect``); :mod:`.host` measures and
checks what goes in it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import datetime, timedelta, timezone
from pathlib import Path

import torch

__all__ = ["BUSY_MAX_AGE", "FORMAT", "MAX_AGE", "age", "cache_file", "max_age", "read", "taken", "write"]

# the cache's layout: older files are measured again (3: matmul_rates, eager launches, copy of
# written pages; 4: the kernel classes' efficiencies, calibration-<key>.json, beside the roofs;
# 5: curves per kind, a convolution's and a batch norm's in training; trials after a cache flush)
FORMAT = 5
MAX_AGE = timedelta(days=7)
BUSY_MAX_AGE = timedelta(hours=1)  # figures taken with the load average above the CPUs


def cache_file(device: str = "cpu", kind: str = "device") -> Path:
    """Where :func:`measured` keeps this host's figures for ``device`` (``kind="calibration"``:
    where :func:`~.calibration.calibrate` keeps its efficiencies)."""
    key = "|".join([platform.node(), platform.processor(), torch.__version__, str(torch.get_num_threads()), device])
    key += f"|format {FORMAT}" if FORMAT > 2 else ""  # (a file per layout: older code keeps its own)
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "fxinspect" / f"{kind}-{digest}.json"


def max_age(data: dict) -> timedelta:
    """How long ``data`` is used: :data:`MAX_AGE`, or :data:`BUSY_MAX_AGE` when it was
    taken on a busy machine (a set slowed alike in every figure passes the checks)."""
    load, cpus = data.get("load_before"), data.get("cpus")
    return BUSY_MAX_AGE if load and cpus and load[0] > cpus else MAX_AGE


def age(data: dict) -> timedelta:
    """How long ago ``data`` was taken; unbounded when it does not say or says the future."""
    try:
        age = datetime.now(timezone.utc) - datetime.fromisoformat(data["taken_at"])
    except (KeyError, TypeError, ValueError):
        return timedelta.max
    return age if age >= -timedelta(minutes=5) else timedelta.max


def read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (ValueError, OSError):
        return None  # none yet, or damaged: measure again
    return data if isinstance(data, dict) else None


def write(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
    except OSError:
        pass  # a read-only home: the figures are still returned


def taken(device: str, load: tuple[float, ...] | None) -> dict:
    """How and when figures for ``device`` are taken now: the cache's format, the host, torch,
    its threads, the time in UTC, the load average before (``load``) and the CPUs this process may use."""
    return {
        "format": FORMAT,
        "device": device,
        "host": platform.node(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_before": list(load) if load else None,
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
