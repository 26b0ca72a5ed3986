"""Counting conventions: what one op costs, checked against the arithmetic.

Run: ``python examples/conventions.py``.

MACs are the multiply-accumulates of matmul-like ops and equal ``FlopCounterMode``'s
``flops / 2``. FLOPs are ``2 × MACs`` for those ops, plus 1 per output element for a bias
add (which ``FlopCounterMode`` leaves out), plus a documented per-element cost for
elementwise ops, activations, normalisations, softmax, reductions and pooling (see
``fxinspect/rules/__init__.py``). Bytes are the tensor bytes each aten op reads and
writes; views move nothing.

*Model FLOPs*, what MFU divides by the step's time and the device's peak
(``fxinspect.step_flops``, ``fxinspect.StepMeter`` and the callbacks of
``fxinspect.integrations``: see ``docs/integrations.md``), are ``2 × MACs`` of the
step's forward and backward as the model needs them; *hardware FLOPs* (HFU) add what
the step recomputes. Beside what others count (read in their sources; "n/d": not found
there):

| model FLOPs | fxinspect | PaLM, appendix B | torchtitan | MaxText | HF `Trainer` (`total_flos`) |
|---|---|---|---|---|---|
| weights | 2 per MAC of every matmul that ran, forward and backward (a frozen weight has no weight gradient, a data input no input gradient) | 6·N per token, N the parameters | 6·N per token, N every parameter but the embedding | per matmul, from the config | 6·N per token, N without the embedding |
| attention | the kernel's two products in full (also when causal), twice that in the backward | 12·L·H·Q·T per token, in full | 12·l·h·q·t per token, in full | the same, halved when causal | none |
| mixture of experts | the experts each token was routed to (the ops that ran) | n/d | its Hugging Face path counts every expert (192.9 G a token for Qwen3-30B-A3B, 37.58 G routed) | the gate and the top-k experts (after a fix: Mixtral once 287.78 TFLOPs, now 79.98) | every parameter |
| recomputation: checkpointed forward, flash backward's `Q K^T` | in hardware FLOPs only | in HFU only | not counted | n/d | not counted |
| elementwise ops, norms, softmax | not counted (`StepFlops.all_flops` has them) | not counted | not counted | not counted | not counted |

For a dense decoder the two agree exactly when N is the weights of the matmuls (the
untied output projection in, the norms' gains out): ``tests/test_mfu.py``. Each line
below prints fxinspect's count of one op beside the closed form:
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

import fxinspect


def _count(layer: torch.nn.Module, x: torch.Tensor) -> fxinspect.Report:
    with torch.no_grad():
        return fxinspect.analyze(layer.eval(), x, timing=False, memory=False)


def main(out_dir: Path = Path(".")) -> str:
    torch.manual_seed(0)
    n, c_in, c_out, hw, k = 2, 16, 32, 28, 3
    rows = []

    conv = _count(torch.nn.Conv2d(c_in, c_out, k, padding=1), torch.randn(n, c_in, hw, hw))
    macs = n * c_out * hw * hw * c_in * k * k
    rows.append(("Conv2d 16->32, 3x3, 2x16x28x28", conv.totals.macs, macs, "N*Cout*H*W*Cin*k*k"))
    rows.append(("  its FLOPs", conv.totals.flops, 2 * macs + n * c_out * hw * hw, "2*MACs + bias adds"))
    with FlopCounterMode(display=False) as fcm:
        torch.nn.functional.conv2d(torch.randn(n, c_in, hw, hw), torch.randn(c_out, c_in, k, k), padding=1)
    rows.append(("  FlopCounterMode / 2", fcm.get_total_flops() // 2, macs, "the same MACs"))

    linear = _count(torch.nn.Linear(512, 256), torch.randn(8, 512))
    rows.append(("Linear 512->256, batch 8", linear.totals.flops, 2 * 8 * 512 * 256 + 8 * 256, "2*B*in*out + B*out"))
    rows.append(("  bytes read", linear.totals.bytes_read, 4 * (8 * 512 + 512 * 256 + 256), "input + weight + bias"))

    norm = _count(torch.nn.LayerNorm(768), torch.randn(4, 128, 768))
    rows.append(
        (
            "LayerNorm 768, 4x128 rows",
            norm.totals.flops,
            4 * 128 * 768 * 7,
            "7 per element: 3 statistics, 2 normalise, weight, bias",
        )
    )
    soft = _count(torch.nn.Softmax(dim=-1), torch.randn(8, 1000))
    rows.append(("Softmax, 8x1000", soft.totals.flops, 8 * 1000 * 5, "5 per element (max, sub, exp, sum, div)"))
    relu = _count(torch.nn.ReLU(), torch.randn(8, 1000))
    rows.append(("ReLU, 8x1000", relu.totals.flops, 8 * 1000, "1 per element"))
    view = _count(torch.nn.Flatten(), torch.randn(8, 10, 10))
    rows.append(("Flatten (a view)", view.totals.bytes_read + view.totals.bytes_written, 0, "views move nothing"))

    width = max(len(r[0]) for r in rows)
    lines = [f"{'op':{width}}  {'fxinspect':>12}  {'closed form':>12}  arithmetic"]
    for name, counted, expected, how in rows:
        mark = "" if counted == expected else "   <- differs"
        lines.append(f"{name:{width}}  {counted:12,}  {expected:12,}  {how}{mark}")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
