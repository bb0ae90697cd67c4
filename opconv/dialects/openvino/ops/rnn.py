"""RNNCell, LSTMCell and LSTMSequence (OpenVINO gate order ``fico``, clip 0 meaning no clipping)."""

from __future__ import annotations

from ....kernels import rnn
from ..executor import ov_op


def _activations(names, alphas, betas):
    return rnn.activation_specs(list(names), list(alphas or ()), list(betas or ()))


def _clip(clip):
    return clip if clip else None  # 0 (the default) disables clipping


@ov_op("LSTMCell")
def lstm_cell(
    ctx,
    x,
    h,
    c,
    w,
    r,
    b=None,
    p=None,
    *,
    hidden_size,
    activations=("sigmoid", "tanh", "tanh"),
    activations_alpha=None,
    activations_beta=None,
    clip=0.0,
    input_forget=False,
    weights_format="fico",
):
    # OpenVINO stacks the gates of W, R and B as forget, input, cell, output.
    return rnn.lstm_cell(
        x,
        h,
        c,
        w,
        r,
        b,
        None,
        p,
        _activations(activations, activations_alpha, activations_beta),
        _clip(clip),
        input_forget,
        gate_order=weights_format or "fico",
        peephole_order="iof",
    )


@ov_op("RNNCell")
def rnn_cell(
    ctx, x, h, w, r, b, *, hidden_size, activations=("tanh",), activations_alpha=None, activations_beta=None, clip=0.0
):
    return rnn.rnn_cell(
        x, h, w, r, b, None, _activations(activations, activations_alpha, activations_beta), _clip(clip)
    )


@ov_op("LSTMSequence")
def lstm_sequence(
    ctx,
    x,
    h,
    c,
    sequence_lengths,
    w,
    r,
    b,
    *,
    hidden_size,
    direction,
    activations=("sigmoid", "tanh", "tanh"),
    activations_alpha=None,
    activations_beta=None,
    clip=0.0,
):
    # Batch-major like ONNX's layout=1, except that Y puts the direction before time: (B, D, T, H).
    y, ho, co = rnn.lstm(
        x,
        w,
        r,
        b,
        None,
        h,
        c,
        None,
        sequence_lengths,
        direction=direction,
        activations=_activations(activations, activations_alpha, activations_beta),
        clip=_clip(clip),
        gate_order="fico",
        layout=1,
    )
    return y.transpose(0, 2, 1, 3), ho, co
