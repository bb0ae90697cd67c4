"""Recurrent layers: RNN, GRU and LSTM, every version.

What is ONNX-specific here and not in :mod:`opconv.kernels.rnn`:

* ``B`` packs the input and recurrent biases as ``[Wb, Rb]`` along its last
  axis; the kernels take them apart (``b_w``, ``b_r``);
* gates are stacked in ONNX's order (``iofc`` for LSTM, ``zrh`` for GRU) and
  peepholes ``P`` as ``iof``, the kernels' defaults;
* activations come as parallel lists of names, alphas and betas, per direction;
* versions 1 (and GRU 3) have an ``output_sequence`` flag that only says
  whether ``Y`` is wanted; it does not change any value, so ``Y`` is always
  computed.  Opset 14 added ``layout`` (batch-major tensors when 1); opset 22
  only widened the types.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import rnn as K
from ..executor import onnx_op

#: gates per cell kind, the size of W's and R's second axis in units of hidden_size
_GATES = {"rnn": 1, "gru": 3, "lstm": 4}
NUM_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _direction(direction: str) -> str:
    # GRU-1's schema spells its default "foward"; a node relying on that default means "forward".
    return "forward" if direction == "foward" else direction


def activation_list(kind: str, activations, alphas, betas, num_directions: int):
    """``(name, alpha, beta)`` specs for the kernel, or None for the kernel's defaults."""
    if activations is None:
        return None
    names = list(activations)
    per_direction = len(K.DEFAULT_ACTIVATIONS[kind])
    # RNN's schema default is ["Tanh", "Tanh"] (one per direction of a bidirectional layer); a
    # one-direction layer uses the first, as onnxruntime does.
    if kind == "rnn" and num_directions == 1 and len(names) == 2:
        names = names[:1]
    if len(names) != per_direction * num_directions:
        raise ExecutionError(
            f"{kind.upper()} with {num_directions} direction(s) needs "
            f"{per_direction * num_directions} activations, got {len(names)}: {names}"
        )
    return K.activation_specs(names, alphas or (), betas or ())


def recurrent(
    ctx,
    kind: str,
    x,
    w,
    r,
    b,
    sequence_lens,
    initial_h,
    initial_c=None,
    p=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    layout=0,
    input_forget=0,
    linear_before_reset=0,
    operand=None,
):
    """The part all versions of the three ops share: unpack ONNX's inputs and run the kernel (``operand``: see
    :func:`opconv.kernels.rnn.lstm`)."""
    direction = _direction(direction)
    if direction not in NUM_DIRECTIONS:
        raise ExecutionError(f"direction must be forward, reverse or bidirectional, got {direction!r}")
    num_directions = NUM_DIRECTIONS[direction]
    w, r = np.asarray(w), np.asarray(r)
    if w.ndim != 3 or w.shape[0] != num_directions:
        raise ExecutionError(
            f"W must have shape [{num_directions}, {_GATES[kind]}*hidden_size, input_size] for "
            f"direction {direction!r}, got {list(w.shape)}"
        )
    hidden = r.shape[-1]
    if hidden_size is not None and hidden_size != hidden:
        raise ExecutionError(f"hidden_size is {hidden_size} but R has shape {list(r.shape)}")
    if w.shape[1] != _GATES[kind] * hidden:
        raise ExecutionError(
            f"W has {w.shape[1]} rows, expected {_GATES[kind]} * hidden_size = {_GATES[kind] * hidden}"
        )
    b_w = b_r = None
    if b is not None:
        b_w, b_r = np.split(np.asarray(b), 2, axis=-1)
    specs = activation_list(kind, activations, activation_alpha, activation_beta, num_directions)
    common = dict(sequence_lens=sequence_lens, direction=direction, activations=specs, clip=clip, layout=layout)
    if kind == "rnn":
        return K.rnn(x, w, r, b_w, b_r, initial_h, **common)
    if kind == "gru":
        return K.gru(x, w, r, b_w, b_r, initial_h, linear_before_reset=bool(linear_before_reset), **common)
    return K.lstm(
        x, w, r, b_w, b_r, initial_h, initial_c, p, input_forget=bool(input_forget), operand=operand, **common
    )


# ---------------------------------------------------------------- RNN


@onnx_op("RNN", since=1)
def rnn_1(
    ctx,
    x,
    w,
    r,
    b=None,
    sequence_lens=None,
    initial_h=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    output_sequence,
):
    return recurrent(
        ctx,
        "rnn",
        x,
        w,
        r,
        b,
        sequence_lens,
        initial_h,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        activations=activations,
        clip=clip,
        direction=direction,
        hidden_size=hidden_size,
    )


@onnx_op("RNN", since=[7, 14, 22])
def rnn_7(
    ctx,
    x,
    w,
    r,
    b=None,
    sequence_lens=None,
    initial_h=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    layout=0,
):
    return recurrent(
        ctx,
        "rnn",
        x,
        w,
        r,
        b,
        sequence_lens,
        initial_h,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        activations=activations,
        clip=clip,
        direction=direction,
        hidden_size=hidden_size,
        layout=layout,
    )


# ---------------------------------------------------------------- GRU


@onnx_op("GRU", since=[1, 3])
def gru_1(
    ctx,
    x,
    w,
    r,
    b=None,
    sequence_lens=None,
    initial_h=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    output_sequence,
    linear_before_reset=0,
):
    # linear_before_reset arrived in version 3; version 1 always resets before the linear transform.
    return recurrent(
        ctx,
        "gru",
        x,
        w,
        r,
        b,
        sequence_lens,
        initial_h,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        activations=activations,
        clip=clip,
        direction=direction,
        hidden_size=hidden_size,
        linear_before_reset=linear_before_reset,
    )


@onnx_op("GRU", since=[7, 14, 22])
def gru_7(
    ctx,
    x,
    w,
    r,
    b=None,
    sequence_lens=None,
    initial_h=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    linear_before_reset,
    layout=0,
):
    return recurrent(
        ctx,
        "gru",
        x,
        w,
        r,
        b,
        sequence_lens,
        initial_h,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        activations=activations,
        clip=clip,
        direction=direction,
        hidden_size=hidden_size,
        layout=layout,
        linear_before_reset=linear_before_reset,
    )


# ---------------------------------------------------------------- LSTM


@onnx_op("LSTM", since=1)
def lstm_1(
    ctx,
    x,
    w,
    r,
    b=None,
    sequence_lens=None,
    initial_h=None,
    initial_c=None,
    p=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    input_forget,
    output_sequence,
):
    return recurrent(
        ctx,
        "lstm",
        x,
        w,
        r,
        b,
        sequence_lens,
        initial_h,
        initial_c,
        p,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        activations=activations,
        clip=clip,
        direction=direction,
        hidden_size=hidden_size,
        input_forget=input_forget,
    )


@onnx_op("LSTM", since=[7, 14, 22])
def lstm_7(
    ctx,
    x,
    w,
    r,
    b=None,
    sequence_lens=None,
    initial_h=None,
    initial_c=None,
    p=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    input_forget,
    layout=0,
):
    return recurrent(
        ctx,
        "lstm",
        x,
        w,
        r,
        b,
        sequence_lens,
        initial_h,
        initial_c,
        p,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        activations=activations,
        clip=clip,
        direction=direction,
        hidden_size=hidden_size,
        layout=layout,
        input_forget=input_forget,
    )
