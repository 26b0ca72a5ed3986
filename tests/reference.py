"""Independent reference figures for the tests: FlopCounterMode, corrected.

On CPU, FlopCounterMode counts ``aten._scaled_dot_product_flash_attention_for_cpu``
(and its backward) and the fused ``aten._native_multi_head_attention`` (nn.MultiheadAttention's
eval fast path) as zero, and it counts the weight gradient of a grouped convolution
``groups`` times too high (every input channel instead of ``C_in / groups``). The
formulas below are given to it through ``custom_mapping``; they are written here from
the definitions, not imported from fxinspect.
"""

from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count

aten = torch.ops.aten


def _sdpa_cpu(query, key, value, *args, out_val=None, **kwargs):
    # q (b, h, s_q, d), k (b, h_k, s_k, d), v (b, h_k, s_k, d_v): QK^T then AV, per q head
    b, h, s_q, d = query
    s_k, d_v = key[-2], value[-1]
    return 2 * b * h * s_q * s_k * d + 2 * b * h * s_q * s_k * d_v


def _native_mha(query, key, value, embed_dim, num_head, *args, out_val=None, **kwargs):
    # batch-first (b, s, E): q/k/v projections E->E, QK^T and AV over all heads, out projection
    b, s_q, e = query
    s_k = key[1]
    projections = b * s_q * e * e + 2 * b * s_k * e * e + b * s_q * e * e
    attention = 2 * b * s_q * s_k * e
    return 2 * (projections + attention)


def _sdpa_cpu_backward(grad_out, query, key, value, *args, out_val=None, **kwargs):
    # torch's own formula for the fused kernels' backward: dV, dP, dQ, dK, one matmul each
    return sdpa_backward_flop_count(grad_out, query, key, value)


def _conv_backward(
    grad_out,
    x,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
    **kwargs,
):
    # the input gradient and the weight gradient each cost one forward convolution: every
    # element of the (forward) output meets weight[1:] = C_in / groups * kernel elements
    outputs = prod(x) if transposed else prod(grad_out)
    return 2 * outputs * prod(weight[1:]) * (int(output_mask[0]) + int(output_mask[1]))


CUSTOM = {
    aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_cpu_backward,
    aten._native_multi_head_attention: _native_mha,
    aten.convolution_backward: _conv_backward,
}


def reference_flops(model, args=(), kwargs=None) -> int:
    """FlopCounterMode's total over one forward, with the CPU attention ops counted."""
    with FlopCounterMode(display=False, custom_mapping=CUSTOM) as counter:
        model(*args, **(kwargs or {}))
    return counter.get_total_flops()


def reference_backward_flops(model, args=(), kwargs=None, depth: int = 1) -> tuple[int, dict[str, int]]:
    """Corrected FlopCounterMode over one backward of the sum of the output: its total
    and its figures per module of depth ``depth`` (its module names without the model's
    class prefix). The model's ``.grad`` is reset afterwards."""
    with FlopCounterMode(display=False, custom_mapping=CUSTOM) as forward:
        model(*args, **(kwargs or {}))
    with FlopCounterMode(display=False, custom_mapping=CUSTOM, depth=depth + 1) as both:
        model(*args, **(kwargs or {})).sum().backward()
    model.zero_grad(set_to_none=True)
    per_module = {}
    for name, counts in both.get_flop_counts().items():
        parts = name.split(".")
        if name != "Global" and len(parts) == depth + 1:
            with_forward = sum(counts.values())
            only_forward = sum(forward.get_flop_counts().get(name, {}).values())
            per_module[".".join(parts[1:])] = with_forward - only_forward
    return both.get_total_flops() - forward.get_total_flops(), per_module


def unique_param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def state_fingerprint(model: torch.nn.Module) -> dict:
    """Everything ``analyze`` must leave untouched, bit for bit."""
    return {
        "state": {k: (v.dtype, v.shape, v.detach().clone()) for k, v in model.state_dict(keep_vars=True).items()},
        "ids": {k: id(v) for k, v in model.state_dict(keep_vars=True).items()},
        "requires_grad": {k: p.requires_grad for k, p in model.named_parameters()},
        "grad": {k: None if p.grad is None else p.grad.clone() for k, p in model.named_parameters()},
        "training": {k: m.training for k, m in model.named_modules()},
        "hooks": {
            k: (dict(m._forward_hooks), dict(m._forward_pre_hooks), dict(m._backward_hooks))
            for k, m in model.named_modules()
        },
    }


def assert_same_state(before: dict, after: dict) -> None:
    assert before["ids"] == after["ids"]
    for k, (dtype, shape, value) in before["state"].items():
        d2, s2, v2 = after["state"][k]
        assert (dtype, shape) == (d2, s2), k
        assert torch.equal(
            value.view(-1).view(torch.uint8) if value.is_floating_point() else value,
            v2.view(-1).view(torch.uint8) if v2.is_floating_point() else v2,
        ), f"{k} changed"
    assert before["requires_grad"] == after["requires_grad"]
    for k, g in before["grad"].items():
        g2 = after["grad"][k]
        assert (g is None) == (g2 is None), k
        if g is not None:
            assert torch.equal(g, g2), k
    assert before["training"] == after["training"]
    assert before["hooks"] == after["hooks"]


def documented_size(name: str) -> int:
    """The crop size torchvision documents for a classification model's weights."""
    from torchvision.models import get_model_weights

    weights = next(iter(get_model_weights(name)))
    size = getattr(weights.transforms(), "crop_size", [224])
    return size[0] if isinstance(size, (list, tuple)) else int(size)


def published_gmacs(name: str) -> float:
    from torchvision.models import get_model_weights

    return next(iter(get_model_weights(name))).meta["_ops"]


def prod(xs) -> int:
    return math.prod(xs)


def _step_on_a_copy(model, inputs, loss_fn, optimizer):
    """The step :func:`measured_step_peak` and :func:`allocated_step_peak` follow, on a
    copy of the model, after a first step made the optimizer's state, and the bytes
    resident before it (parameters, buffers, inputs, state: each storage once)."""
    import copy

    model = copy.deepcopy(model)
    args, kwargs = (inputs, {}) if not isinstance(inputs, dict) else ((), inputs)
    args = args if isinstance(args, tuple) else (args,)
    opt = optimizer(model.parameters()) if optimizer is not None else None

    def step():
        out = model(*args, **kwargs)
        loss = loss_fn(out)
        loss.backward()
        if opt is not None:
            opt.step()
        return out, loss

    step()  # makes the optimizer's state
    model.zero_grad(set_to_none=True)
    state = [v for s in (opt.state.values() if opt else ()) for v in s.values() if torch.is_tensor(v)]
    resident = [
        t for t in (*model.parameters(), *model.buffers(), *args, *kwargs.values(), *state) if torch.is_tensor(t)
    ]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in resident}
    return step, resident, sum(storages.values())


def measured_step_peak(model, inputs, loss_fn, optimizer=None) -> int:
    """The most bytes a real training step holds, resident memory included, found by
    following every storage it allocates (``StorageTracker``), not by fxinspect's model.

    The step is the one ``analyze(..., backward=True, optimizer=...)`` models: the
    optimizer's state exists (a first step made it), every ``.grad`` starts as ``None``,
    and the loop keeps the output and the loss while ``step()`` runs. Parameters, buffers,
    inputs and optimizer state are resident, each storage once. The model is a copy: its
    weights and state are the caller's as they were.
    """
    from fxinspect.run.memory.scratch import Scratch
    from fxinspect.run.memory.storages import StorageTracker

    step, resident, resident_bytes = _step_on_a_copy(model, inputs, loss_fn, optimizer)
    tracker = StorageTracker(resident, Scratch())
    with tracker:
        held = step()
    del held
    tracker.settle()  # each op's kernel scratch at the op, probed (fxinspect.run.memory.scratch)
    return resident_bytes + tracker.peak


def allocated_step_peak(model, inputs, loss_fn, optimizer=None) -> int:
    """The most bytes a real training step holds as the allocator counts them (CPU:
    ``torch.profiler``'s allocation events; kernel scratch included), resident memory
    included: the step :func:`measured_step_peak` follows, on a copy of the model."""
    from fxinspect.run.memory.allocator import AllocatorWatch

    step, _, resident_bytes = _step_on_a_copy(model, inputs, loss_fn, optimizer)
    watch = AllocatorWatch(torch.device("cpu"))
    with watch:
        held = step()
        del held
    return resident_bytes + watch.peak


def count_binned(monkeypatch, measure=lambda t: t.numel()) -> list:
    """What ``watch`` bins, as it bins it (``measure`` of each tensor, in order): the
    list fills as the watched model runs."""
    import importlib

    hooks = importlib.import_module("fxinspect.training.watch_hooks")
    binned: list = []
    original = hooks.WatchHooks._bin

    def counting(self, t, *rest, **kw):
        binned.append(measure(t))
        return original(self, t, *rest, **kw)

    monkeypatch.setattr(hooks.WatchHooks, "_bin", counting)
    return binned
