"""Keep what a capture tier prints out of the user's terminal, and file it instead.

``torch.export`` prints the graph it was building when it gives up, and torch's
loggers warn about symbols they cannot place; a user who asked for an analysis sees
none of that. :func:`quiet` collects it while a tier runs; the lines worth keeping
(log messages, the first line of anything printed) go to the capture's notes. Printed
source code (the graph an exporter dumps as it gives up) is not worth a note: its
reason is the tier's failure, which the report gives.

Example
-------
>>> import logging
>>> with quiet() as said:
...     print("graph cannot be exported;\\n    see above")
...     print("def forward(self):\\n    pass")        # a dumped program: not kept
...     logging.getLogger("torch.fx").warning("Unable to find user code")
>>> said
['printed 4 lines (graph cannot be exported;)', 'torch.fx: Unable to find user code']
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from collections.abc import Iterator

__all__ = ["quiet"]


_CODE = re.compile(r"^(def|class|import|from|graph\(|GraphModule|ExportedProgram)\b")  # a dumped program
_GLOG = re.compile(r"^[WEIF]\d{4} [\d:.]+ +\d+ (?P<where>[^\]]+)\] (?P<message>.*)$")


class _Collect(logging.Handler):
    def __init__(self, lines: list[str]):
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage().strip().splitlines()[0]}")


@contextlib.contextmanager
def quiet() -> Iterator[list[str]]:
    """Collect printed text and torch's warnings while the block runs; yields the lines."""
    lines: list[str] = []
    out = io.StringIO()
    torch_log = logging.getLogger("torch")
    handlers, propagate = torch_log.handlers[:], torch_log.propagate
    torch_log.handlers, torch_log.propagate = [_Collect(lines)], False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            yield lines
    finally:
        torch_log.handlers, torch_log.propagate = handlers, propagate
        printed = []
        for line in out.getvalue().splitlines():
            logged = _GLOG.match(line)  # torch's own log format, written to stderr by its handlers
            if logged:
                lines.append(f"{logged['where']}: {logged['message'].strip()}")
            elif line.strip():
                printed.append(line.strip())
        if printed and not _CODE.match(printed[0]):
            lines.insert(0, f"printed {len(printed)} lines ({printed[0][:60]})")
