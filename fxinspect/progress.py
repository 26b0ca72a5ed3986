"""Progress of long work on stderr: ``fxinspect: sweep 2/5 batch 16 · timing 3/10``.

Long calls (``analyze``'s timed runs, ``sweep``, ``max_batch``, ``checkpoint_plan``,
``generation``'s analyses, the command line) mark their work with :func:`task` (or
:func:`tracked` around a loop); the innermost tasks are shown after their outermost one,
each with its fraction. A line is shown only when

* stderr is a terminal (an interactive session: the line is rewritten in place with
  ``\\r`` and cleared when the work ends), or ``FXINSPECT_PROGRESS=1`` forces it (a line
  each, at most one every 2 s: for a log);
* the work has run at least :data:`AFTER` seconds (short calls print nothing); from
  then the line is redrawn every second with the time so far, also while a phase
  with no fraction (a capture) runs;
* nothing turned it off: ``FXINSPECT_PROGRESS=0``, ``progress=False`` (an option of
  ``analyze`` and the planning calls, ``--no-progress`` on the command line), or
  :func:`reporting` ``(False)`` around a block.

Only the process that started the work prints (a forked worker of a sweep does not).

Example
-------
>>> import io
>>> out = io.StringIO()
>>> with reporting(stream=out, interactive=True, after=0, interval=0, tick=0):  # a terminal, at once
...     for batch in tracked("sweep", [1, 4], detail=lambda b: f"batch {b}"):
...         pass
>>> out.getvalue().replace("\\x1b[K", "").split("\\r")   # each line rewrites the last; cleared at the end
['', 'fxinspect: sweep 0/2', 'fxinspect: sweep 0/2 batch 1', 'fxinspect: sweep 1/2 batch 1', 'fxinspect: sweep 1/2 batch 4', 'fxinspect: sweep 2/2 batch 4', '']
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["AFTER", "SKIP_TIMING", "Parts", "Task", "note", "reported", "reporting", "say", "task", "tracked"]

AFTER = 2.0
"""Seconds of work before a line is shown."""

SKIP_TIMING = "(timing=False skips it)"
"""Said beside the timed runs' fraction: they are what an analysis can do without."""


@dataclass(eq=False)  # (a task is itself: two of the same phase and count are not one)
class Task:
    """One phase of work: ``done`` of ``total`` (``None``: not known), and what it is on now."""

    phase: str
    total: int | None = None
    done: int = 0
    detail: str = ""

    def advance(self, detail: str | None = None) -> None:
        """One more unit done (``detail``: what comes next, e.g. ``"batch 16"``)."""
        self.done += 1
        if detail is not None:
            self.detail = detail
        _refresh(final=self.total is not None and self.done >= self.total)

    def label(self) -> str:
        fraction = f" {self.done}/{self.total}" if self.total is not None else ""
        return f"{self.phase}{fraction}{' ' + self.detail if self.detail else ''}"


@dataclass
class _Reporter:
    """Where and when lines are shown (see the module)."""

    on: bool = True  # False: none
    stream: TextIO | None = None  # None: sys.stderr at the time
    interactive: bool | None = None  # None: stream.isatty()
    after: float = AFTER
    interval: float | None = None  # seconds between lines (None: 0.1 interactive, 2 otherwise)
    tick: float = 1.0  # seconds between redraws while nothing advances (0: none)
    clock: Callable[[], float] = time.monotonic
    tasks: list[Task] = field(default_factory=list)
    started: float = 0.0
    shown: float | None = None  # when a line was last shown (None: none yet)
    pid: int = field(default_factory=os.getpid)
    lock: Any = field(default_factory=threading.Lock)
    stop: threading.Event | None = None

    def out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def is_interactive(self) -> bool:
        if self.interactive is not None:
            return self.interactive
        isatty = getattr(self.out(), "isatty", None)
        return bool(isatty and isatty())

    def enabled(self) -> bool:
        if not self.on or os.getpid() != self.pid:  # (a forked worker: the parent reports)
            return False
        env = os.environ.get("FXINSPECT_PROGRESS", "").strip().lower()
        if env in ("0", "false", "no", "off"):
            return False
        return env in ("1", "true", "yes", "on") or self.is_interactive()

    def show(self, final: bool) -> None:
        with self.lock:
            now = self.clock()
            tasks = list(self.tasks)
            if not tasks or now - self.started < self.after or not self.enabled():
                return
            interactive = self.is_interactive()
            every = self.interval if self.interval is not None else (0.1 if interactive else 2.0)
            if self.shown is not None and now - self.shown < every and not final:
                return
            self.shown = now
            elapsed = now - self.started
            line = (
                "fxinspect: " + " · ".join(t.label() for t in tasks) + (f" ({elapsed:.0f} s)" if elapsed >= 1 else "")
            )
            self.out().write(f"\r{line}\x1b[K" if interactive else line + "\n")
            self.out().flush()

    def begin(self, since: float | None = None) -> None:
        """The outermost task starts: the clock, and the thread that redraws the line."""
        self.started, self.shown = (self.clock() if since is None else since), None
        if self.tick > 0 and self.enabled():
            self.stop = threading.Event()
            threading.Thread(target=self._redraw, args=(self.stop,), name="fxinspect-progress", daemon=True).start()

    def _redraw(self, stop: threading.Event) -> None:
        while not stop.wait(self.tick):
            self.show(final=False)

    def end(self) -> None:
        if self.stop is not None:
            self.stop.set()
            self.stop = None
        with self.lock:
            if self.shown is not None and self.is_interactive():
                self.out().write("\r\x1b[K")  # (the line cleared: what is printed next starts clean)
                self.out().flush()
            self.shown = None


_REPORTER: contextvars.ContextVar[_Reporter | None] = contextvars.ContextVar("fxinspect_progress", default=None)


@contextlib.contextmanager
def reporting(
    on: bool = True,
    *,
    stream: TextIO | None = None,
    interactive: bool | None = None,
    after: float | None = None,
    interval: float | None = None,
    tick: float | None = None,
    clock: Callable[[], float] | None = None,
) -> Iterator[None]:
    """Progress inside the block: ``on=False`` shows none; ``stream`` (default stderr),
    ``interactive`` (``None``: ``stream.isatty()``; ``True`` shows it on any stream),
    ``after`` (seconds before the first line), ``interval`` (at least this between
    lines), ``tick`` (a redraw this often while nothing advances; 0: none) and ``clock``
    (``time.monotonic``) say where and when. Inside work already reporting (a sweep's own ``analyze`` calls) the block
    shows as part of it, unless ``on=False``."""
    outer = _REPORTER.get()
    if outer is not None and outer.tasks:  # nested in work reporting already
        reporter = outer if on and outer.on else _Reporter(on=False)
    else:
        base = outer or _Reporter()
        given = {"stream": stream, "interactive": interactive, "after": after, "interval": interval}
        given.update(tick=tick, clock=clock)
        kept = {k: getattr(base, k) for k, v in given.items() if v is None}
        reporter = _Reporter(on=on and base.on, **{**given, **kept})
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


@contextlib.contextmanager
def task(phase: str, total: int | None = None, detail: str = "", since: float | None = None) -> Iterator[Task]:
    """A phase of work (``total`` units, or ``None`` when not known): call its
    :meth:`Task.advance` as each unit ends. ``since``: when the work began, if before
    (the reporter's clock; :class:`Parts`)."""
    reporter = _REPORTER.get()
    token = _REPORTER.set(reporter := _Reporter()) if reporter is None else None
    if not reporter.tasks:
        reporter.begin(since)
    entry = Task(phase, total, 0, detail)
    reporter.tasks.append(entry)
    try:
        reporter.show(final=False)
        yield entry
    finally:
        reporter.tasks.remove(entry)
        if reporter.tasks:
            reporter.show(final=False)
        else:
            reporter.end()
        if token is not None:
            _REPORTER.reset(token)


def tracked(
    phase: str, items: Iterable[Any], total: int | None = None, detail: str | Callable[[Any], str] = ""
) -> Iterator[Any]:
    """``items``, one at a time, as a :func:`task` of ``total`` (``len(items)`` when it
    has one) units, each done as the next is asked for; ``detail``: shown beside the
    fraction (a function: of the item being worked on)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    with task(phase, total, detail if isinstance(detail, str) else "") as t:
        for item in items:
            if callable(detail):
                t.detail = detail(item)
                _refresh(final=False)
            yield item
            t.advance()


def reported(phase: str) -> Callable[[Callable], Callable]:
    """A function whose every call is a :func:`task` of ``phase``, quiet when called with
    ``progress=False`` (a planning call: its other work marked inside with :func:`note`)."""

    def wrap(function: Callable) -> Callable:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            with reporting(kwargs.get("progress", True) is not False), task(phase):
                return function(*args, **kwargs)

        return call

    return wrap


def note(detail: str) -> None:
    """Say what the innermost task is on now (``"batch 64"``), shown beside it."""
    reporter = _REPORTER.get()
    if reporter is not None and reporter.tasks:
        reporter.tasks[-1].detail = detail
        reporter.show(final=False)


class Parts:
    """Work done in parts as it is asked for (a ``Generation``'s analyses, run when a
    figure first needs them): each part a :func:`task` of ``phase``, timed from the first
    part's start, so parts shorter than :data:`AFTER` that add up to more are shown."""

    def __init__(self, phase: str, on: bool = True) -> None:
        self.phase, self.on, self.began = phase, on, None

    @contextlib.contextmanager
    def part(self, detail: str = "") -> Iterator[Task]:
        with reporting(self.on), task(self.phase, detail=detail, since=self.began) as t:
            if self.began is None:
                self.began = _REPORTER.get().started
            yield t


def say(text: str) -> None:
    """One line on stderr, when progress would be shown there now (it is interactive, or
    forced, and not turned off): what a long call will do, said before it starts."""
    reporter = _REPORTER.get() or _Reporter()
    if reporter.enabled():
        reporter.out().write(f"fxinspect: {text}\n")
        reporter.out().flush()


def _refresh(final: bool) -> None:
    reporter = _REPORTER.get()
    if reporter is not None:
        reporter.show(final)
