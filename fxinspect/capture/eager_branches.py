"""Export the branches a model takes when it is called, not those it keeps for compilers.

Libraries ask ``torch.compiler.is_compiling()`` / ``is_exporting()`` and take other code
under ``torch.export``: transformers builds an explicit ``(batch, 1, seq, seq)``
attention mask there, where its eager call hands ``is_causal=True`` to SDPA and builds
none. The exported graph then computes, and keeps alive, what the user's call never
does (+30 % forward memory on a small Qwen2 at 512 tokens). Those branches exist so that
a graph stays valid for other inputs; the capture is specialised to the example inputs
anyway, so the model's own forward is traced with both flags off.

A forward that cannot be exported that way (its eager branch reads tensor values, say)
is exported again with the flags as export sets them; :func:`compiler_branch_note` says
so in the capture notes.

Example
-------
>>> import torch
>>> with eager_branches():
...     torch.compiler.is_compiling(), torch.compiler.is_exporting()
(False, False)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch.compiler

__all__ = ["compiler_branch_note", "eager_branches"]


@contextlib.contextmanager
def eager_branches(on: bool = True) -> Iterator[None]:
    """Within: ``torch.compiler.is_compiling()`` and ``is_exporting()`` answer ``False``."""
    if not on:
        yield
        return
    # export sets these two module globals around its trace (torch._export.utils); every
    # other "is compiling" query of torch (torch._utils, torch._dynamo) reads them
    before = torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag
    torch.compiler._is_compiling_flag = torch.compiler._is_exporting_flag = False
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag = before


def compiler_branch_note(why: str) -> str:
    """The capture note for a forward exported on the branches it keeps for export."""
    return (
        "export: the forward's eager branches could not be exported "
        f"({why}); captured the code it runs under torch.export (is_compiling()/is_exporting() "
        "branches), so the captured ops, and the memory they keep alive, can differ from its eager call"
    )
