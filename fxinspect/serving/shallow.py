"""A generation's fitted steps through shallow copies of its model (:mod:`.layers` applied).

:meth:`Layered.of` makes, for a meta decoder whose layers repeat, the generations of its
copies with 2, 3 and 4 blocks of layers; :meth:`Layered.ask` asks each of them for one
result (a step's figures, a prefill's) and extrapolates it to the whole model, or answers
``None`` where the copies cannot give it (the third not what the first two predict, or a
copy that does not run as the whole model does): the whole model is then analysed.
"""

from __future__ import annotations

from typing import Any

import torch

from .figures import by_node, flat
from .layers import extrapolate, repeating, shallow_copy

__all__ = ["Layered"]


class Layered:
    """The generations of a model's copies with 2, 3 and 4 blocks of layers, and how many
    blocks the whole model has after its first (its own, see :mod:`.layers`)."""

    def __init__(self, blocks: int, copies: list[Any]) -> None:
        self.blocks, self.copies = blocks, copies

    @classmethod
    def of(cls, gen: Any) -> Layered | None:
        """For ``gen`` (a Generation) on the meta device whose model's layers repeat, the
        copies' generations (as ``gen``'s, analysed whole), else ``None``."""
        if gen.device.type != "meta" or (gen.cache is not None and not isinstance(gen.cache, str)):
            return None  # (a cache object given is made for every layer of the whole model)
        found = repeating(gen.model)
        if found is None:
            return None
        path, count, period = found
        copies = [_generation_of(gen, shallow_copy(gen.model, path, k * period)) for k in (2, 3, 4)]
        return cls(count // period - 1, copies)

    def ask(self, what: str, *args: int) -> Any:
        """The copies' ``what(*args)`` (a method's name) extrapolated to the whole model, or ``None``."""
        try:
            found = extrapolate([by_node(getattr(copy, what)(*args)) for copy in self.copies], self.blocks)
        except Exception:  # (a copy the model cannot run as it runs whole: the whole model then, as it is)
            return None
        return None if found is None else flat(found)


def _generation_of(gen: Any, model: torch.nn.Module) -> Any:
    """The generation of ``model`` made as ``gen`` was, analysed whole, its progress shown with ``gen``'s."""
    device_spec, options, _ = gen._given
    made = type(gen)(model, gen.batch, gen.prompt, gen.new_tokens, gen.device, device_spec, gen.dtype, gen.cache,
                     options, shallow=False)  # fmt: skip
    made._parts = gen._parts
    return made
