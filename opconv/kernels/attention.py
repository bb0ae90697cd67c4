"""Attention and the token mixers of recent sequence models.

* :func:`scaled_dot_product_attention` -- softmax attention with an additive
  bias, soft-capping, grouped K/V heads and score/probability hooks;
  :func:`attention_bias` builds that bias from a boolean or float mask,
  causal alignment, padded key lengths and a sliding window.
* :func:`rotary_embedding` -- rotary position embedding (RoPE).
* :func:`linear_attention` -- recurrent linear attention (linear, gated, delta,
  gated delta rules).
* :func:`causal_conv_with_state` -- causal depthwise 1-D convolution with a
  carried state (Mamba / Gated DeltaNet pre-processing).

Conventions
-----------
Heads-first layout: queries ``(B, Hq, Sq, D)``, keys ``(B, Hkv, Skv, D)``,
values ``(B, Hkv, Skv, Dv)``; with grouped-query attention ``Hq`` is a
multiple of ``Hkv`` and query head ``h`` reads K/V head ``h // (Hq // Hkv)``.
:func:`split_heads` / :func:`merge_heads` convert from and to the packed
``(B, S, H * D)`` layout.  Narrow floats are computed in float32 and results
are returned in the query's dtype.

Masking is additive: an allowed key contributes its float mask value (0 for
boolean masks), a disallowed one ``-inf``.  A query row whose every key is
disallowed gets zero probabilities (and a zero output row) instead of NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ExecutionError
from . import elementwise as E
from ._common import compute_dtype, downcast, upcast

# ---------------------------------------------------------------- layout helpers


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """``(B, S, H * D)`` -> ``(B, H, S, D)``."""
    batch, seq, hidden = x.shape
    if num_heads is None or num_heads < 1 or hidden % num_heads:
        raise ExecutionError(f"a hidden size of {hidden} cannot be split into {num_heads} heads")
    return x.reshape(batch, seq, num_heads, hidden // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """``(B, H, S, D)`` -> ``(B, S, H * D)``."""
    batch, heads, seq, depth = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * depth)


def repeat_kv_heads(x: np.ndarray, q_heads: int) -> np.ndarray:
    """K or V ``(B, Hkv, ...)`` with each head repeated for its group of query heads -> ``(B, Hq, ...)``."""
    kv_heads = x.shape[1]
    if kv_heads == q_heads:
        return x
    if kv_heads == 0 or q_heads % kv_heads:
        raise ExecutionError(f"{q_heads} query heads cannot share {kv_heads} key/value heads evenly")
    return np.repeat(x, q_heads // kv_heads, axis=1)


# ---------------------------------------------------------------- masks and softmax


def attention_bias(
    q_len: int,
    kv_len: int,
    *,
    mask=None,
    is_causal: bool = False,
    offset=0,
    nonpad_kv_seqlen=None,
    left_window: int = -1,
    right_window: int = -1,
    dtype=np.float32,
) -> np.ndarray | None:
    """The additive bias, broadcastable to ``(B, H, q_len, kv_len)``, or None when nothing is masked.

    ``mask`` is boolean (True = attend) or float (added), broadcastable to
    ``(B, H, q_len, n)`` with ``n <= kv_len``; missing trailing keys are
    disallowed.  Query ``i`` sits at absolute position ``p = offset + i``
    (``offset`` a scalar or one per batch entry): ``is_causal`` allows keys
    ``j <= p``, the window keys ``p - left_window <= j <= p + right_window``
    (a negative bound is unlimited), and ``nonpad_kv_seqlen[b]`` keys
    ``j < nonpad_kv_seqlen[b]``.
    """
    dtype = compute_dtype(dtype)
    bias = None
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape[-1] > kv_len:
            raise ExecutionError(f"the mask covers {mask.shape[-1]} keys but there are only {kv_len}")
        missing = kv_len - mask.shape[-1]
        if mask.dtype == np.bool_:
            if missing:
                mask = np.concatenate([mask, np.zeros(mask.shape[:-1] + (missing,), bool)], axis=-1)
            bias = np.where(mask, dtype.type(0), dtype.type(-np.inf))
        else:
            bias = upcast(mask).astype(dtype, copy=False)
            if missing:
                bias = np.concatenate([bias, np.full(bias.shape[:-1] + (missing,), -np.inf, dtype)], axis=-1)

    allowed = None
    key = np.arange(kv_len)
    position = np.reshape(offset, (-1, 1, 1, 1)) + np.arange(q_len)[:, None]  # (B or 1, 1, q_len, 1)
    if is_causal:
        allowed = key <= position
    if left_window >= 0:
        allowed = _and(allowed, key >= position - left_window)
    if right_window >= 0:
        allowed = _and(allowed, key <= position + right_window)
    if nonpad_kv_seqlen is not None:
        allowed = _and(allowed, key < np.reshape(nonpad_kv_seqlen, (-1, 1, 1, 1)))
    if allowed is not None:
        structural = np.where(allowed, dtype.type(0), dtype.type(-np.inf))
        bias = structural if bias is None else bias + structural
    return bias


def _and(a, b):
    return b if a is None else a & b


def masked_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row that is entirely ``-inf`` becomes all zeros (not NaN)."""
    top = x.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0, top)
    e = np.exp(x - top)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1, total)


def _softcap(x, cap: float):
    return cap * np.tanh(x / cap) if cap > 0 else x


# ---------------------------------------------------------------- softmax attention

#: the stages :func:`scaled_dot_product_attention` can report besides its output
QK_STAGES = ("matmul", "softcap", "bias", "softmax")


def scaled_dot_product_attention(
    q,
    k,
    v,
    bias=None,
    *,
    scale: float | None = None,
    softcap: float = 0.0,
    softmax_dtype=None,
    scale_operands: bool = True,
    score_mod: Callable | None = None,
    prob_mod: Callable | None = None,
    qk_stage: str | None = None,
):
    """``softmax(softcap(Q K^T * scale) + bias) V`` -> ``(Y, scores at qk_stage or None)``.

    ``scale`` defaults to ``1 / sqrt(D)``.  With ``scale_operands`` Q and K
    are each multiplied by ``sqrt(scale)`` before the product (ONNX
    Attention's overflow guard), otherwise the product is scaled.
    ``softmax_dtype`` rounds the scores to that type for the softmax (the
    probabilities are rounded to it as well); ``score_mod`` / ``prob_mod``
    transform the biased scores and the probabilities (given and returned in
    ``softmax_dtype``).  ``qk_stage`` names the intermediate to return (see
    :data:`QK_STAGES`), in the query's dtype.
    """
    out_dtype = np.asarray(q).dtype
    q, k, v = upcast(q), upcast(k), upcast(v)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ExecutionError(f"incompatible attention shapes: Q {list(q.shape)}, K {list(k.shape)}, V {list(v.shape)}")
    heads = q.shape[1]
    k, v = repeat_kv_heads(k, heads), repeat_kv_heads(v, heads)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    dtype = np.result_type(q.dtype, k.dtype)
    if scale_operands:
        root = dtype.type(np.sqrt(scale))
        scores = (q * root) @ np.swapaxes(k * root, -1, -2)
    else:
        scores = (q @ np.swapaxes(k, -1, -2)) * dtype.type(scale)
    stages = {"matmul": scores}
    scores = stages["softcap"] = _softcap(scores, softcap)
    if bias is not None:
        scores = scores + bias.astype(scores.dtype, copy=False)
    stages["bias"] = scores

    softmax_dtype = scores.dtype if softmax_dtype is None else np.dtype(softmax_dtype)
    scores = scores.astype(softmax_dtype)
    if score_mod is not None:
        scores = np.asarray(score_mod(scores))
    probs = masked_softmax(upcast(scores)).astype(softmax_dtype)
    if prob_mod is not None:
        probs = np.asarray(prob_mod(probs))
    stages["softmax"] = probs
    y = upcast(probs).astype(v.dtype, copy=False) @ v
    if qk_stage is not None and qk_stage not in stages:
        raise ExecutionError(f"unknown attention stage {qk_stage!r}; expected one of {QK_STAGES}")
    qk = None if qk_stage is None else downcast(stages[qk_stage], out_dtype)
    return downcast(y, out_dtype), qk


# ---------------------------------------------------------------- rotary embedding


def mrope_streams(sections, layout: int) -> np.ndarray:
    """Multimodal rotary embedding (MRotaryEmbedding): which position stream (0: temporal, 1: height, 2: width)
    gives the angle of each of the ``sum(sections)`` cache columns: consecutive sections (layout 0), or
    interleaved, height and width on every third column from 1 and 2 as far as their sections reach (layout 1)."""
    sections = [int(s) for s in sections]
    if layout == 0:
        return np.repeat(np.arange(3), sections)
    streams = np.zeros(sum(sections), np.int64)
    for stream in (1, 2):
        streams[stream : 3 * sections[stream] : 3] = stream
    return streams


def rotary_embedding(x, cos, sin, *, interleaved: bool = False, rotary_dim: int | None = None) -> np.ndarray:
    """Rotate the first ``rotary_dim`` features of ``x`` ``(..., S, D)`` by the angles in ``cos``/``sin``.

    ``cos`` and ``sin`` broadcast to ``(..., S, rotary_dim / 2)``.  Features
    pair up as ``(x[i], x[i + rotary_dim/2])`` (halves) or ``(x[2i], x[2i+1])``
    (``interleaved``); each pair ``(a, b)`` becomes ``(a cos - b sin, a sin + b cos)``.
    The remaining features pass through.
    """
    dtype = np.asarray(x).dtype
    x, cos, sin = upcast(x), upcast(cos), upcast(sin)
    rotary_dim = x.shape[-1] if not rotary_dim else rotary_dim
    if rotary_dim % 2 or rotary_dim > x.shape[-1]:
        raise ExecutionError(f"rotary dimension {rotary_dim} must be even and at most the head size {x.shape[-1]}")
    if cos.shape[-1] != rotary_dim // 2 or sin.shape[-1] != rotary_dim // 2:
        raise ExecutionError(
            f"cos/sin caches have {cos.shape[-1]}/{sin.shape[-1]} values per position, "
            f"expected rotary_dim / 2 = {rotary_dim // 2}"
        )
    rotate, keep = x[..., :rotary_dim], x[..., rotary_dim:]
    if interleaved:
        a, b = rotate[..., 0::2], rotate[..., 1::2]
    else:
        a, b = np.split(rotate, 2, axis=-1)
    real, imag = a * cos - b * sin, a * sin + b * cos
    if interleaved:
        rotated = np.stack([real, imag], axis=-1).reshape(rotate.shape)
    else:
        rotated = np.concatenate([real, imag], axis=-1)
    return downcast(np.concatenate([rotated, keep], axis=-1), dtype)


# ---------------------------------------------------------------- linear attention

LINEAR_ATTENTION_RULES = ("linear", "gated", "delta", "gated_delta")


def linear_attention(
    q, k, v, state=None, decay=None, beta=None, *, rule: str = "gated_delta", scale: float | None = None
):
    """Recurrent linear attention, one token at a time -> ``(output (B, T, Hq, Dv), state (B, Hkv, Dk, Dv))``.

    ``q`` ``(B, T, Hq, Dk)``, ``k`` ``(B, T, Hkv, Dk)``, ``v`` ``(B, T, Hkv, Dv)``;
    ``decay`` (log-space) broadcasts to ``(B, T, Hkv, Dk)`` and ``beta`` to
    ``(B, T, Hkv)``.  With ``G = exp(decay_t)`` scaling the state's rows:

    * linear:      ``S = S + k v^T``
    * gated:       ``S = G S + k v^T``
    * delta:       ``S = S + beta k (v - S^T k)^T``
    * gated_delta: ``S = G S + beta k (v - (G S)^T k)^T``

    and ``o_t = scale * S^T q_t`` (each query head reads its group's state).
    ``scale`` defaults to ``1 / sqrt(Dk)``.
    """
    if rule not in LINEAR_ATTENTION_RULES:
        raise ExecutionError(f"unknown linear attention update rule {rule!r}; expected one of {LINEAR_ATTENTION_RULES}")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated and decay is None:
        raise ExecutionError(f"update rule {rule!r} needs the decay input")
    if delta and beta is None:
        raise ExecutionError(f"update rule {rule!r} needs the beta input")
    dtype = np.asarray(q).dtype
    q, k, v = upcast(q), upcast(k), upcast(v)
    batch, steps, q_heads, dk = q.shape
    kv_heads, dv = k.shape[2], v.shape[3]
    scale = 1 / np.sqrt(dk) if not scale else scale
    s = np.zeros((batch, kv_heads, dk, dv), q.dtype) if state is None else upcast(state).astype(q.dtype)
    gate = None if not gated else np.broadcast_to(np.exp(upcast(decay)), (batch, steps, kv_heads, dk))
    rate = None if not delta else np.broadcast_to(upcast(beta), (batch, steps, kv_heads))
    out = np.empty((batch, steps, q_heads, dv), q.dtype)
    for t in range(steps):  # the recurrence is sequential in time
        if gated and gate is not None:
            s = gate[:, t, :, :, None] * s
        update = v[:, t]
        if delta and rate is not None:
            update = rate[:, t, :, None] * (update - np.einsum("bhkv,bhk->bhv", s, k[:, t]))
        s = s + k[:, t, :, :, None] * update[:, :, None, :]
        out[:, t] = scale * np.einsum("bhkv,bhk->bhv", repeat_kv_heads(s, q_heads), q[:, t])
    return downcast(out, dtype), downcast(s, dtype)


# ---------------------------------------------------------------- causal convolution with state

_CONV_ACTIVATIONS = {"none": lambda x: x, "silu": lambda x: x * E.sigmoid(x), "swish": lambda x: x * E.sigmoid(x)}


def causal_conv_with_state(x, weight, bias=None, past_state=None, activation: str = "none"):
    """Causal depthwise 1-D convolution carrying state -> ``(output (B, C, L), state (B, C, k - 1))``.

    ``x`` ``(B, C, L)``, ``weight`` ``(C, 1, k)``; the sequence is
    ``past_state`` (zeros by default) followed by ``x``, and output ``t`` is
    ``sum_i weight[c, 0, i] * seq[t + i] + bias[c]``, optionally through
    SiLU.  The new state is the last ``k - 1`` values of that sequence.
    """
    dtype = np.asarray(x).dtype
    x, weight = upcast(x), upcast(weight)
    batch, channels, _ = x.shape
    if weight.ndim != 3 or weight.shape[:2] != (channels, 1):
        raise ExecutionError(f"weight must have shape [{channels}, 1, k], got {list(weight.shape)}")
    kernel = weight.shape[2]
    try:
        act = _CONV_ACTIVATIONS[activation.lower()]
    except KeyError:
        raise ExecutionError(
            f"unknown activation {activation!r}; expected one of {sorted(_CONV_ACTIVATIONS)}"
        ) from None
    past = np.zeros((batch, channels, kernel - 1), x.dtype) if past_state is None else upcast(past_state)
    if past.shape != (batch, channels, kernel - 1):
        raise ExecutionError(f"past_state must have shape {[batch, channels, kernel - 1]}, got {list(past.shape)}")
    seq = np.concatenate([past.astype(x.dtype, copy=False), x], axis=2)
    windows = np.lib.stride_tricks.sliding_window_view(seq, kernel, axis=2)  # (B, C, L, k)
    y = np.einsum("bclk,ck->bcl", windows, weight[:, 0])
    if bias is not None:
        y = y + upcast(bias)[:, None]
    return downcast(act(y), dtype), downcast(seq[:, :, seq.shape[2] - (kernel - 1) :], dtype)
