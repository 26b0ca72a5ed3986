"""Whether each module's parameters changed since its last logged step, for all at once.

``watch`` tells frozen parameters from trained ones (:mod:`.findings`). A strided sample
of each module's parameters (at most :data:`SAMPLE` values of each) is kept from one
logged step to the next: when it differs, they changed, and no pass over all the values
is made (a float64 sum of GPT-2's tied 38.6M-value embedding cost more than the step).
When it does not (frozen parameters, a dead network whose optimizer adds zeros), the sum
of ``|p|`` in float64 decides, so that a change the sample missed still shows;
parameters unchanged from their first logged step are told from their third on.

The samples of every module that ran are taken and compared in a few ops for them all
(a cat, a comparison, a ``bincount`` per module): a logged step pays no ops per module.

Example
-------
>>> import torch
>>> a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
>>> samples = ParameterSamples()
>>> samples.fingerprints(0, {"a": list(a.parameters()), "b": list(b.parameters())})["a"]
'first logged at step 0'
>>> with torch.no_grad():
...     _ = a.weight.add_(1.0)
>>> found = samples.fingerprints(5, {"a": list(a.parameters()), "b": list(b.parameters())})
>>> found["a"], isinstance(found["b"], float)       # b unchanged: the sum of its |p| decides
('changed by step 5', True)
"""

from __future__ import annotations

import torch

from .binning import places

__all__ = ["SAMPLE", "ParameterSamples"]

SAMPLE = 4096
"""Values of each parameter compared between logged steps."""


class ParameterSamples:
    """The last logged step's samples, per module; :meth:`fingerprints` compares the next."""

    def __init__(self) -> None:
        self._last: dict[str, torch.Tensor] = {}  # module -> its slice of the last sample
        self._layout: tuple | None = None  # (module, values) of the last sample, in order
        self._sample: torch.Tensor | None = None

    def fingerprints(self, step: int, modules: dict[str, list[torch.Tensor]]) -> dict[str, float | str]:
        """Per module, what its parameters were at ``step``: a string when they are seen
        for the first time or changed since the module's last logged step, else the sum
        of their ``|p|`` (float64)."""
        names = list(modules)
        with torch.no_grad():  # (no op to detach a parameter; a small one is its own sample)
            pieces = {
                n: [p if p.numel() <= SAMPLE else p.reshape(-1)[:: p.numel() // SAMPLE] for p in modules[n]]
                for n in names
            }
            sizes = [sum(piece.numel() for piece in pieces[n]) for n in names]
            # (one call lays them end to end; one piece alone would be a view of its parameter)
            laid = [piece for n in names for piece in pieces[n]]
            sample = torch._C._nn.flatten_dense_tensors(laid) if len(laid) > 1 else laid[0].reshape(-1).clone()
            layout = tuple(zip(names, sizes))
            if layout == self._layout and (sample.dtype, sample.device) == (self._sample.dtype, self._sample.device):
                changed = self._changed_together(sample, len(names))
            else:
                changed = [self._changed_alone(n, s) for n, s in zip(names, sample.split(sizes))]
            self._keep(layout, sample, names, sizes)
            found: dict[str, float | str] = {}
            for name, moved in zip(names, changed):
                if moved is None:
                    found[name] = f"first logged at step {step}"
                elif moved:
                    found[name] = f"changed by step {step}"
                else:
                    found[name] = sum(float(torch.linalg.vector_norm(p, 1, dtype=torch.float64)) for p in modules[name])
            return found

    def _changed_together(self, sample: torch.Tensor, modules: int) -> list[bool | None]:
        """Each module's sample against its last, in one pass (the same modules and sizes)."""
        owners = places(tuple(size for _, size in self._layout), sample.device)
        differs = torch.bincount(owners, weights=(sample != self._sample).to(torch.float32), minlength=modules)
        return [count > 0 for count in differs.tolist()]

    def _changed_alone(self, name: str, sample: torch.Tensor) -> bool | None:
        before = self._last.get(name)
        if before is None:
            return None
        if (before.shape, before.dtype, before.device) != (sample.shape, sample.dtype, sample.device):
            return True
        return not torch.equal(before, sample)

    def _keep(self, layout: tuple, sample: torch.Tensor, names: list[str], sizes: list[int]) -> None:
        self._layout, self._sample = layout, sample
        self._last.update(zip(names, sample.split(sizes)))
