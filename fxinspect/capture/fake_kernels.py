"""Fake kernels for export where torch's own refuses what the device's kernel runs.

``torch.export`` runs each op on fake tensors through its fake (meta) kernel. The meta
kernel of ``aten._grouped_mm`` checks what the CUDA kernel takes (bfloat16; float16 with
cuBLASLt), while the CPU kernel multiplies float32, bfloat16 and float16 alike:
transformers' mixture-of-experts layers call it on CPU in float32 (their default
``grouped_mm`` experts). The forward's eager branch then cannot be exported, and the
capture falls back to the branches kept for compilers (:mod:`.eager_branches`), which
run other code than the user's call: transformers' own grouped-matmul op for the experts,
and a copy of the cached keys and values repeated per query head in decode attention
(Qwen2-MoE's decode step: half as much memory again as the real step).

:func:`device_fake_kernels` gives fake tensors, for the time of an export, a kernel that
answers CPU inputs with the output the CPU kernel allocates (rows padded to 16 bytes, as
it pads them) and hands every other input to torch's own meta kernel; meta tensors (a
model on the meta device) keep torch's.

Example
-------
>>> import torch
>>> from torch._subclasses.fake_tensor import FakeTensorMode
>>> with device_fake_kernels(), FakeTensorMode():
...     a, b = torch.empty(6, 8), torch.empty(3, 5, 8).transpose(-2, -1)
...     out = torch._grouped_mm(a, b, torch.tensor([2, 4, 6], dtype=torch.int32))
>>> tuple(out.shape), out.stride(), out.dtype
((6, 5), (8, 1), torch.float32)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch._library import simple_registry
from torch._library.utils import Kernel

__all__ = ["device_fake_kernels"]

_CPU_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
"""What the CPU kernel of ``_grouped_mm`` multiplies."""


def _torch_meta():
    """torch's meta kernel of ``_grouped_mm`` (``None`` in a torch without one)."""
    from torch import _meta_registrations

    return getattr(_meta_registrations, "meta_grouped_mm", None)


def _cpu_grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor | None) -> torch.Tensor:
    """The output the CPU kernel allocates: its shape for each layout (2-D/3-D inputs),
    each row padded to a multiple of 16 bytes."""
    if mat_a.dim() == 2 and mat_b.dim() == 2:  # the contraction split into groups
        shape = [offs.size(0), mat_a.size(0), mat_b.size(1)]
    elif mat_a.dim() == 2:  # rows split into groups, one (K, N) matrix each (experts' forward)
        shape = [mat_a.size(0), mat_b.size(-1)]
    elif mat_b.dim() == 2:  # columns split into groups
        shape = [mat_a.size(1), mat_b.size(1)]
    else:  # a batched matmul
        shape = [mat_a.size(0), mat_a.size(1), mat_b.size(-1)]
    per_row = 16 // mat_a.dtype.itemsize
    row = (shape[-1] + per_row - 1) // per_row * per_row
    stride = [shape[1] * row, row, 1] if len(shape) == 3 else [row, 1]
    return mat_a.new_empty_strided(shape, stride)


@contextlib.contextmanager
def device_fake_kernels() -> Iterator[None]:
    """Within: export's fake ``aten._grouped_mm`` takes what the CPU kernel takes (see the module)."""
    meta = _torch_meta()
    if meta is None or not hasattr(torch.ops.aten, "_grouped_mm"):
        yield
        return

    def grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
        on_cpu = mat_a.device.type == "cpu" and mat_b.device.type == "cpu"
        if on_cpu and mat_a.dtype in _CPU_DTYPES and bias is None and out_dtype in (None, mat_a.dtype):
            return _cpu_grouped_mm(mat_a, mat_b, offs)
        return meta(mat_a, mat_b, offs, bias, out_dtype)

    op = torch.ops.aten._grouped_mm.default
    # the fake kernel a FakeTensorMode asks first (torch.library.register_fake would also
    # put it in the dispatcher's Meta slot, which fake tensors still reach once it is taken out)
    holder = simple_registry.singleton.find(op.name()).fake_impl
    kernel = Kernel(grouped_mm, __name__)
    _forget(op)  # (an answer of torch's kernel, kept from before, would be given instead)
    holder.kernels.append(kernel)
    try:
        yield
    finally:
        holder.kernels.remove(kernel)
        _forget(op)


def _forget(op: torch._ops.OpOverload) -> None:
    """Drop the fake tensors' answers for ``op`` from their dispatch cache, which every
    ``FakeTensorMode`` shares and keys by the op and its inputs' metadata: so this
    context's kernel answers only within it."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    cache = getattr(FakeTensorMode, "cache", None)
    if isinstance(cache, dict):
        for key in [k for k in cache if getattr(k, "key", (None,))[0] is op]:
            del cache[key]
