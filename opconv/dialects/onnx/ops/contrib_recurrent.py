"""ONNX Runtime's recurrent contrib operator (com.microsoft): AttnLSTM.

AttnLSTM is ONNX's LSTM (gates ``iofc``, peepholes ``iof``, ``B`` = ``[Wb, Rb]``) whose cell input at step t is
``[X_t, A_{t-1}]`` -- W is ``[D, 4H, input_size + attention_size]`` -- and whose new H queries a memory ``M``
``[B, max_memory_step, memory_depth]`` with Bahdanau attention (``QW``, ``MW``, ``V``, only the first
``memory_seq_lens`` steps of each row); ``A_t`` is the context, or ``[H, context] @ AW`` when AW is given.
The numerics are :func:`opconv.kernels.rnn.attention_lstm`.  onnxruntime runs float32 only (its double kernel
says "not implemented"); opconv also runs float64.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import rnn as K
from ..executor import onnx_op
from .rnn import NUM_DIRECTIONS, activation_list

MS = "com.microsoft"


@onnx_op("AttnLSTM", since=1, domain=MS)
def attn_lstm(
    ctx,
    x,
    w,
    r,
    b=None,
    sequence_lens=None,
    initial_h=None,
    initial_c=None,
    p=None,
    qw=None,
    mw=None,
    v=None,
    m=None,
    memory_seq_lens=None,
    aw=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    input_forget,
):
    missing = [name for name, value in (("QW", qw), ("MW", mw), ("V", v), ("M", m)) if value is None]
    if missing:
        raise ExecutionError(f"AttnLSTM needs its attention inputs; {', '.join(missing)} missing")
    if direction not in NUM_DIRECTIONS:
        raise ExecutionError(f"direction must be forward, reverse or bidirectional, got {direction!r}")
    num_directions = NUM_DIRECTIONS[direction]
    w, r = np.asarray(w), np.asarray(r)
    hidden = r.shape[-1]
    if hidden_size is not None and hidden_size != hidden:
        raise ExecutionError(f"hidden_size is {hidden_size} but R has shape {list(r.shape)}")
    attention_size = np.shape(aw)[-1] if aw is not None else np.shape(mw)[1]
    expected = [num_directions, 4 * hidden, np.shape(x)[-1] + attention_size]
    if list(w.shape) != expected:
        raise ExecutionError(f"W must have shape {expected} (input_size + attention size columns), got {list(w.shape)}")
    b_w, b_r = (None, None) if b is None else np.split(np.asarray(b), 2, axis=-1)
    specs = activation_list("lstm", activations, activation_alpha, activation_beta, num_directions)
    return K.attention_lstm(
        x,
        w,
        r,
        b_w,
        b_r,
        initial_h,
        initial_c,
        p,
        sequence_lens,
        direction,
        specs,
        clip,
        bool(input_forget),
        m,
        memory_seq_lens,
        qw,
        mw,
        v,
        aw,
    )
