"""Fused recurrent kernels, counted as the ops of their unfused (decomposed) path.

A layer of ``T * B`` steps (``T * B`` = rows of the input, packed or not) costs
``steps * (numel(w_ih) + numel(w_hh))`` MACs for its input and hidden projections, plus
per step and hidden unit the elementwise flops of the cell, and 1 flop per gate unit
and step for each bias (``b_ih``, ``b_hh``: the bias adds ``addmm`` counts in the
decomposed path; the fused cells ``_thnn_fused_*_cell`` count theirs the same way):

=====  ===========================================================================
cell   flops per hidden unit per step
=====  ===========================================================================
LSTM   13: 4 gate sums, 3 sigmoids, 1 tanh, ``c = f * c + i * g`` (3), ``tanh(c)``,
       ``h = o * tanh(c)``
GRU    10: 2 gate sums and 2 sigmoids (r, z), ``tanh(x_n + r * h_n)`` (3),
       ``h = n + z * (h - n)`` (3)
RNN    2: the sum of the two projections and the activation
=====  ===========================================================================

Backward ops cost twice their forward, MACs and flops.
"""

from __future__ import annotations

from ._util import arg, aten, aten_packets, first_tensor, is_float
from .registry import Cost, register_rule

CELL_FLOPS = {4: 13, 3: 10, 1: 2}  # gates -> flops per hidden unit and step
LSTM, GRU = 4, 3


def rnn_layer_cost(x, w_ih, w_hh, hidden: int, factor: int = 1, biases: int = 0) -> Cost:
    """Cost of one direction of one recurrent layer over the rows of ``x`` (``biases``:
    how many of ``b_ih``/``b_hh`` it adds, 1 flop per gate unit and step each)."""
    steps = x.numel() // x.shape[-1]
    macs = steps * (w_ih.numel() + w_hh.numel())
    cell = steps * hidden * CELL_FLOPS.get(w_ih.shape[0] // hidden, 0)
    bias = steps * w_ih.shape[0] * biases
    return Cost(flops=factor * (2 * macs + cell + bias), macs=factor * macs)


def _biases(*tensors) -> int:
    return sum(t is not None and t.numel() > 0 for t in tensors)


def _mkldnn_layer(args: tuple, kwargs: dict, hidden_at: int, factor: int) -> Cost:
    """A oneDNN layer ``(input, w_ih, w_hh, ...)`` whose ``hidden_size`` is argument
    ``hidden_at`` and ``has_biases`` two after it."""
    has_biases = bool(arg(args, kwargs, hidden_at + 2, "has_biases", True))
    return rnn_layer_cost(*args[:3], arg(args, kwargs, hidden_at, "hidden_size"), factor, biases=2 * has_biases)


@register_rule(aten.mkldnn_rnn_layer)
def mkldnn_rnn_layer(args, kwargs, out):
    """oneDNN's recurrent layer (CPU LSTM): (input, w_ih, w_hh, b_ih, b_hh, hx, cx, ...)."""
    return _mkldnn_layer(args, kwargs, hidden_at=10, factor=1)


@register_rule(aten.mkldnn_rnn_layer_backward)
def mkldnn_rnn_layer_backward(args, kwargs, out):
    """Its backward: gradients of input, hidden state and weights, twice the forward."""
    return _mkldnn_layer(args, kwargs, hidden_at=15, factor=2)


def _cell_rule(gates: int, state_at: int, factor: int):
    """Elementwise part of a fused cell whose state (cx or hx) is argument ``state_at``;
    the forward (``factor == 1``) adds its optional ``input_bias``/``hidden_bias``
    (arguments 3 and 4) to the gates, 1 flop per gate element each."""

    def rule(args: tuple, kwargs: dict, out) -> Cost:
        if not is_float(first_tensor(out)):
            return Cost()
        bias = 0
        if factor == 1:
            bias = args[0].numel() * _biases(arg(args, kwargs, 3, "input_bias"), arg(args, kwargs, 4, "hidden_bias"))
        return Cost(flops=factor * CELL_FLOPS[gates] * args[state_at].numel() + bias)

    rule.__name__ = rule.__qualname__ = f"{'lstm' if gates == LSTM else 'gru'}_cell{'_backward' if factor > 1 else ''}"
    return rule


# Arguments: (input_gates, hidden_gates, cx or hx, ...); backward (grad_hy, grad_cy, cx, ...)
# for the LSTM, (grad_hy, workspace, ...) for the GRU.
register_rule(*aten_packets(["_thnn_fused_lstm_cell"]))(_cell_rule(LSTM, 2, 1))
register_rule(*aten_packets(["_thnn_fused_gru_cell"]))(_cell_rule(GRU, 2, 1))
register_rule(*aten_packets(["_thnn_fused_lstm_cell_backward_impl"]))(_cell_rule(LSTM, 2, 2))
register_rule(*aten_packets(["_thnn_fused_gru_cell_backward"]))(_cell_rule(GRU, 0, 2))
