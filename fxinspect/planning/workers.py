"""Points of a meta-device sweep analysed side by side, in forked worker processes.

A virtual step of a large model is seconds of Python on one core (fake-tensor dispatch,
op by op), and a sweep analyses several. On the meta device a point needs no data and
touches no device, so a *forked* copy of the process, which shares the prepared model
and the capture already made, can analyse one and hand back its figures: the points run
on as many cores as there are, and each is what the parent would have computed (the
same function on the same objects).

Forking is used only where it is safe: Linux, a meta-device run, CUDA not initialised,
and autograd still able to run in a child. PyTorch's autograd engine refuses to run in
a process forked after its parent started the engine's device threads (they do not
survive a fork), which a backward on fake tensors does. So a sweep forks its workers
before its own first backward, and not at all when this process ran one before (an
earlier ``analyze(..., device="meta", backward=True)`` or sweep): :func:`can_fork` tries
a backward in a child. In a script, or the command line, the first sweep forks; a
later one in the same process analyses its points in turn.

A worker sends back only a result. One that raises, or dies (killed, out of memory),
sends nothing, and the caller analyses that point itself: an error is then raised in the
caller's own process, with its own traceback. Workers not waited for are killed when
the :class:`Workers` block ends.

>>> import os
>>> with Workers() as pool:
...     job = pool.start(os.getpid)
...     job.result() != os.getpid()     # another process
True
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch

from ..errors import InputError
from ..run.memory.scratch import probe_threads

__all__ = ["DEFAULT_MOST", "Job", "Workers", "can_fork", "worker_count"]

_autograd_forks: bool | None = None  # whether a forked child can run a backward (once not, never again)


def can_fork(device: Any) -> bool:
    """Whether points may be analysed in forked processes: Linux, the meta device, no CUDA,
    and a child forked now can run autograd's backward."""
    global _autograd_forks
    if not sys.platform.startswith("linux") or str(device) != "meta":
        return False
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return False
    if _autograd_forks is not False:
        with Workers() as pool:
            probe = pool.start(_backward)
            _autograd_forks = probe is not None and probe.result() is True
    return _autograd_forks


def _backward() -> bool:
    x = torch.ones(1, requires_grad=True)
    (x * 2).sum().backward()
    return True


DEFAULT_MOST = 4
"""The most workers a sweep forks unasked: each holds a copy of what it touches of this
process (about 1 GB for Llama-2-70B on meta), and a sweep rarely has more points to
analyse ahead."""


def worker_count(workers: int | None) -> int:
    """How many worker processes may analyse points beside this one: ``workers``, or one
    a core this process may run on, at most :data:`DEFAULT_MOST`."""
    if workers is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return min(cores, DEFAULT_MOST)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise InputError(f"workers= expects an int >= 0 (or None: one a core), got {workers!r}")
    return workers


class Job:
    """One call running in a forked process; its result goes through a file it writes."""

    def __init__(self, pid: int, path: str) -> None:
        self.pid, self.path = pid, path
        self.status: int | None = None  # the exit status, once the process is reaped

    def result(self) -> Any:
        """The call's value, once it is done; ``None`` if it raised or died."""
        if self.status is None:
            self.status = os.waitpid(self.pid, 0)[1]
        try:
            with open(self.path, "rb") as file:
                data = file.read()
        finally:
            os.unlink(self.path)
        return pickle.loads(data) if self.status == 0 and data else None

    def kill(self) -> None:
        """Stop the process if it still runs, and forget its result."""
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            self.status = os.waitpid(self.pid, 0)[1]
        if os.path.exists(self.path):
            os.unlink(self.path)


class Workers:
    """The jobs forked in one block; those still running or unread at its end are killed."""

    def __init__(self) -> None:
        self._jobs: list[Job] = []

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: Any) -> None:
        for job in self._jobs:
            job.kill()

    def start(self, call: Callable[..., Any], *args: Any) -> Job | None:
        """``call(*args)`` in a forked process (``None`` if the system would not fork one)."""
        fd, path = tempfile.mkstemp(prefix="fxinspect-worker-")
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:  # (no memory or processes to spare: the caller analyses it itself)
            os.close(fd)
            os.unlink(path)
            return None
        if pid == 0:  # the worker: compute, write, and leave without running the parent's exit code
            code = 1  # (nothing written: the caller computes it itself)
            try:
                # (the cores are the workers'; the kernels' scratch is the caller's threads',
                # so that a point is the one analysed in turn)
                probe_threads(torch.get_num_threads())
                torch.set_num_threads(1)
                data = pickle.dumps(call(*args))
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                code = 0
            finally:
                os._exit(code)
        os.close(fd)
        job = Job(pid, path)
        self._jobs.append(job)
        return job
