"""Aten-level cost formulas: FLOPs, MACs and bytes of every op a model runs.

Counting conventions
--------------------

``macs``
    Multiply-accumulates of matmul-like ops only: ``mm``, ``addmm``, ``bmm``,
    ``baddbmm``, ``addbmm``, ``mv``, ``addmv``, ``dot``, ``addr``, ``_grouped_mm``,
    ``_int_mm``, ``_scaled_mm``, the packed-weight kernels of quantized linears
    (``_weight_int4pack_mm*``, ``_weight_int8pack_mm``: the dense product's MACs),
    convolutions (every backend variant, transposed too) and their backward,
    scaled-dot-product attention kernels and their backward, and the fused
    ``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer`` / recurrent kernels
    (their projections and attention matmuls). One MAC per multiply of the naive
    algorithm; a bias add is no MAC.
``flops``
    All floating-point arithmetic: ``2 * macs`` for matmul-like ops (``2 * macs`` equals
    ``torch.utils.flop_counter.FlopCounterMode``'s flops on every op it knows, but for
    two of its miscounts that we do not copy: the weight gradient of grouped
    convolutions, and the ``(b, s, h, d)`` layout of
    ``_efficient_attention_forward/backward``), plus 1 per output element for a bias add
    (``addmm``'s ``self``, a convolution's ``bias``: so ``addmm`` == ``mm`` + ``add``),
    plus a per-element cost for everything else, each family's table in its module's
    docstring:

    ================  =================================  ===============================
    family            counted per                        cost (exceptions in the module)
    ================  =================================  ===============================
    elementwise       output element                     1; addcmul/addcdiv/glu 2,
                                                         activation backward 2, lerp 3,
                                                         where/masked_fill 0
    normalisation     input element                      stats 3 (RMS 2) if computed,
                                                         normalise 2 (RMS 1), affine 1
                                                         each; backward 2x
    softmax           input element                      5; backward 4
    reductions        input element                      1; norm 2; var/std 4;
                                                         logsumexp 4
    losses            input element                      3 (mse) to 7 (bce)
    pooling           output element x window size       1 per window element
    resampling        output element                     ``2n - 1`` for ``n`` neighbours
                                                         (nearest 0, bilinear 7)
    FFT               element x log2(length)             5 complex, 2.5 real-sided
    data movement     --                                 0 flops (bytes only)
    ================  =================================  ===============================

    A result that is not floating point (comparisons, integer arithmetic, ``argmax``)
    costs 0 flops; the op is still counted. Dropout costs its one multiply per element
    on every device: arithmetic on a random mask alone (``bernoulli_`` then
    ``div_(1 - p)``, CPU's path) is part of drawing it, free (:mod:`.elementwise`).
    The same model gives the same flops on CPU, meta and CUDA and whatever its input's
    layout (``tests/test_conventions.py``), except where the paths compute different
    things (docs/reference.md lists them). Work inside a fused kernel that its
    unfused path would not count (softmax in flash attention) is not counted.
``bytes_read`` / ``bytes_written``
    A rule leaves them ``None`` for "all tensor arguments / all results", and sets
    them where an op touches less: gathers (``embedding``, ``index_select``,
    ``gather``, ``index``) read indices plus the returned elements, factories read
    nothing, ``copy_`` reads its source, writes through an index (``index_copy_``
    into a static KV cache, ``index_put_``, ``scatter_``) read their index and source
    and write only their positions (:mod:`.scatters`). Free ops move nothing.
    An argument written in place counts its bytes as written, once per call: an
    in-place op that returns it (``add_``, ``copy_``, ``out=``) counts it as its result; an argument the op's schema marks written
    (``Tensor(a!)``) and does not return (``_native_batch_norm_legit``'s running
    statistics) is added by the counting mode to the default ``bytes_written``. A rule
    that sets ``bytes_written`` counts such writes itself: native/cudnn/miopen batch
    norm write their running statistics in training without declaring them, and
    :mod:`.normalization` adds them (a ``BatchNorm2d(C)`` in training writes ``2 * C``
    floats more than in eval).
Every op is exactly one of
    *counted* (a rule, possibly 0 flops: a copy), *free* (views, metadata,
    assertions, ``empty*`` allocations: :data:`FREE`, compare with ``is``), or
    *uncounted* (``lookup`` returns ``None``: reported, never a silent zero).
Free reasons (:class:`FreeReason`, from :func:`free_reason`)
    ``view`` aliases its input, ``metadata`` reads only shapes/strides/device,
    ``check`` asserts for the tracer, ``allocation`` allocates or manages storage
    without writing (fills like ``zeros`` are counted), ``user`` was declared free by
    user code without a reason.

Rules are registered by decorator, one family per module: :mod:`.matmul`,
:mod:`.quantized` (matmuls on packed int4/int8 weights),
:mod:`.attention`, :mod:`.recurrent`, :mod:`.elementwise`, :mod:`.normalization`,
:mod:`.reduction`, :mod:`.losses`, :mod:`.pooling`, :mod:`.spectral` (FFTs),
:mod:`.movement`, :mod:`.scatters` (in-place writes through an index), :mod:`.free`,
:mod:`.vision` for torchvision's custom ops and :mod:`.hf` for transformers' (its MoE
experts' grouped matmul), which exist only once their library is imported: they are
registered when first met. ``_grouped_mm`` and transformers' grouped matmul read the
few integers of their group offsets (what each expert multiplies); for meta and fake
tensors they raise, so the op is listed uncounted.
Add your own with :func:`register_rule` or :func:`register_free` (``replace=True`` to
override ours).
"""

from .registry import (
    FREE,
    Cost,
    FreeReason,
    free_reason,
    lookup,
    register_free,
    register_rule,
    registered_ops,
)

# Imported for their registrations; the order only matters for helpers they share.
from . import (  # noqa: F401  isort: skip
    normalization,
    matmul,
    quantized,
    attention,
    recurrent,
    elementwise,
    reduction,
    losses,
    pooling,
    spectral,
    movement,
    scatters,
    free,
    vision,
    hf,
    distributed,
)

__all__ = [
    "Cost",
    "FREE",
    "FreeReason",
    "free_reason",
    "lookup",
    "register_free",
    "register_rule",
    "registered_ops",
]
