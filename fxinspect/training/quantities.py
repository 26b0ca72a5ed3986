"""What ``watch`` logs: the one declaration of its quantities, their order and titles.

A quantity is a ``str`` (``Quantity.IO == "io"``), so ``log=("io", "params")``, saved
runs and tables use the plain names.

Example
-------
>>> [str(q) for q in Quantity], Quantity("io_grad").title
(['io', 'io_grad', 'params', 'params_grad'], 'output-gradient norms (per sample)')
"""

from __future__ import annotations

from ..choices import Choice

__all__ = ["FORWARD_ORDER", "GRADIENTS", "Quantity"]


class Quantity(Choice):
    """One thing ``watch`` bins per module and step."""

    IO = "io"  # the module's outputs
    IO_GRAD = "io_grad"  # per-sample l2 norms of the gradients reaching them
    PARAMS = "params"  # its own parameters, at its forward
    PARAMS_GRAD = "params_grad"  # their gradients, as accumulated

    @property
    def title(self) -> str:
        """What a heat map of this quantity shows."""
        return _TITLES[self]


_TITLES = {
    Quantity.IO: "outputs",
    Quantity.IO_GRAD: "output-gradient norms (per sample)",
    Quantity.PARAMS: "parameters",
    Quantity.PARAMS_GRAD: "parameter gradients",
}

FORWARD_ORDER = (Quantity.IO, Quantity.PARAMS, Quantity.IO_GRAD, Quantity.PARAMS_GRAD)
"""The order in which a step produces them: searched in it for the first NaN/Inf."""

GRADIENTS = (Quantity.IO_GRAD, Quantity.PARAMS_GRAD)
"""The gradient quantities, output gradients first (a module's gradient scale)."""
