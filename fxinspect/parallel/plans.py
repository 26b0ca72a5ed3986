"""A model's own tensor-parallel plan, as torch's ``parallelize_module`` takes it.

:meth:`Parallel.tp(n) <fxinspect.parallel.spec.Parallel.tp>` without a plan uses
:func:`model_tp_plan`: a Hugging Face model's own plan (the ``_tp_plan`` transformers
merges from the config's ``base_model_tp_plan`` and the class's, ``tp_plan="auto"``'s),
its styles translated to torch's (``"colwise"``: :class:`ColwiseParallel`,
``"rowwise"``: :class:`RowwiseParallel`, an output gathered: ``output_layouts=Replicate()``,
``"embedding_rowwise"``: the vocabulary split, ids replicated). A model without one gets
the Megatron plan by module names (``q_proj``, ``k_proj``, ``v_proj``, ``gate_proj``,
``up_proj``, ``fc1`` column-wise; ``o_proj``, ``out_proj``, ``down_proj``, ``fc2``
row-wise; ``nn.Linear`` only). Styles with no torch equivalent (packed or expert
weights, latent attention's projection) are refused by name, as is a head count the
ranks do not divide: column-wise key and value projections then split a head.

Example
-------
>>> import torch
>>> class Attention(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.q_proj, self.o_proj = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
>>> sorted((k, type(v).__name__) for k, v in model_tp_plan(Attention(), 2).items())
[('o_proj', 'RowwiseParallel'), ('q_proj', 'ColwiseParallel')]
"""

from __future__ import annotations

from fnmatch import fnmatch
from typing import Any

import torch

from ..errors import InputError

__all__ = ["model_tp_plan"]

COLUMNS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "fc1")
ROWS = ("o_proj", "out_proj", "down_proj", "fc2")
# transformers' styles that only keep a tensor whole on every rank: nothing to shard
_WHOLE = ("replicate", "replicated_with_grad_allreduce")


def _style(name: str) -> Any:
    """torch's style for a transformers style name, or ``None`` when it has none."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {
        "colwise": lambda: ColwiseParallel(),
        "rowwise": lambda: RowwiseParallel(),
        "colwise_rep": lambda: ColwiseParallel(output_layouts=Replicate()),
        "colwise_gather_output": lambda: ColwiseParallel(output_layouts=Replicate()),
        "rowwise_rep": lambda: RowwiseParallel(input_layouts=Replicate()),
        "rowwise_split_input": lambda: RowwiseParallel(input_layouts=Replicate()),
        "embedding_rowwise": lambda: RowwiseParallel(input_layouts=Replicate()),
    }.get(name, lambda: None)()


def _hf_plan(model: torch.nn.Module) -> dict[str, str]:
    """The transformers plan of ``model``: its merged ``_tp_plan``, else the config's
    ``base_model_tp_plan`` under the base model's prefix and the class's own."""
    plan = dict(getattr(model, "_tp_plan", None) or {})
    if plan:
        return plan
    config = getattr(model, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    base = getattr(text, "base_model_tp_plan", None) or {}
    prefix = getattr(model, "base_model_prefix", "")
    if prefix and hasattr(model, prefix):
        base = {f"{prefix}.{k}": v for k, v in base.items()}
    return {**base, **(getattr(type(model), "_tp_plan", None) or {})}


def _by_names(model: torch.nn.Module) -> dict[str, str]:
    """The Megatron plan from module names: every ``nn.Linear`` named as a column or row."""
    plan = {}
    for path, module in model.named_modules():
        last = path.rsplit(".", 1)[-1]
        if isinstance(module, torch.nn.Linear) and last in COLUMNS + ROWS:
            plan[path] = "colwise" if last in COLUMNS else "rowwise"
    return plan


def _check_heads(model: torch.nn.Module, plan: dict[str, str], world_size: int) -> None:
    """Refuse a plan whose column-wise key/value projections would split a head."""
    config = getattr(model, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = getattr(text, "num_attention_heads", None)
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    split = [k for k, v in plan.items() if v == "colwise" and k.rsplit(".", 1)[-1] in ("q_proj", "k_proj", "v_proj")]
    for name, count in (("num_attention_heads", heads), ("num_key_value_heads", kv_heads)):
        if split and isinstance(count, int) and count % world_size:
            raise InputError(
                f"tensor parallel over {world_size} ranks: the model's {name}={count} does not divide among them, "
                f"so the column-wise {split[0]} would split a head; give a world size that divides {count}, or "
                "Parallel.tp(n, plan) with a plan of your own (serving engines replicate the key/value heads then: "
                "each rank caches whole heads, more than 1/n of the cache)"
            )


def model_tp_plan(model: torch.nn.Module, world_size: int) -> dict[str, Any]:
    """``model``'s tensor-parallel plan for ``parallelize_module`` over ``world_size``
    ranks (see the module): keys are module paths with ``*`` for any layer."""
    plan = _hf_plan(model) or _by_names(model)
    if not plan:
        raise InputError(
            f"{type(model).__name__} has no tensor-parallel plan of its own (no transformers _tp_plan) and no "
            f"nn.Linear named {', '.join(COLUMNS + ROWS)}; give Parallel.tp(n, plan) a parallelize_module plan"
        )
    paths = [p for p, _ in model.named_modules()]
    plan = {k: v for k, v in plan.items() if v not in _WHOLE and any(fnmatch(p, k) for p in paths)}
    refused = {k: v for k, v in plan.items() if _style(v) is None}
    if refused:
        said = ", ".join(f"{v!r} ({k})" for k, v in list(refused.items())[:4])
        raise InputError(
            f"{type(model).__name__}'s tensor-parallel plan uses styles torch's parallelize_module has no "
            f"equivalent for: {said}; give Parallel.tp(n, plan) a parallelize_module plan of your own"
        )
    _check_heads(model, plan, world_size)
    return {k: _style(v) for k, v in plan.items()}
