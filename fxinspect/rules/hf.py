"""Hugging Face transformers' custom ops: the experts' grouped matmul of MoE layers.

transformers (``integrations/moe.py``) runs the experts of Mixtral, Qwen2-MoE, OLMoE,
... through ``aten._grouped_mm`` where it can, and otherwise (under ``torch.export`` /
``torch.compile`` with non-bf16 weights) through its own op
``transformers::grouped_mm_fallback``, one ``mm`` per expert in a loop. That op exists
only once ``transformers.integrations.moe`` is imported, and fxinspect never imports
transformers: :func:`register_transformers_rules` registers the rules at import of
:mod:`fxinspect.rules` if the op is already defined, and otherwise the first time the
counting run meets a ``transformers::`` op (through the registry's namespace loader).

================================  ====================================================
op                                 MACs
================================  ====================================================
grouped_mm_fallback                ``sum over experts of tokens_e * in * out``:
(input (S, in), weight (E, in,     ``tokens_e`` from the cumulative counts ``offs``
out), offs (E,))                   (rows past ``offs[-1]`` are not multiplied), as
                                   ``aten._grouped_mm`` 2-D x 3-D
grouped_mm_fallback_backward       twice that: ``grad_input`` and ``grad_weight``
================================  ====================================================

Both read the values of ``offs``; for meta and fake tensors they raise, so the op is
listed uncounted (see :func:`fxinspect.rules.matmul.group_sizes`).
"""

from __future__ import annotations

from ._util import arg
from .matmul import grouped_mm_macs
from .registry import Cost, register_defined, register_namespace_loader


def grouped_mm_fallback(args, kwargs, out):
    """``(input, weight, offs)``: every expert's rows times its ``(in, out)`` weight."""
    return Cost.matmul(grouped_mm_macs(args[0], args[1], arg(args, kwargs, 2, "offs")))


def grouped_mm_fallback_backward(args, kwargs, out):
    """``(input, weight, offs, grad_output)``: grad_input and grad_weight, one forward each."""
    return Cost.matmul(2 * grouped_mm_macs(args[0], args[1], arg(args, kwargs, 2, "offs")))


RULES = {
    "grouped_mm_fallback": grouped_mm_fallback,
    "grouped_mm_fallback_backward": grouped_mm_fallback_backward,
}


def register_transformers_rules() -> bool:
    """Register the rules above for those of their ops that are defined; safe to call again.

    Returns whether any of them is defined (they are once ``transformers.integrations.moe``
    has been imported, which transformers does when it builds an MoE model)."""
    return register_defined("transformers", RULES)


register_transformers_rules()
register_namespace_loader("transformers", register_transformers_rules)
