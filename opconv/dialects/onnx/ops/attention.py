"""Attention and friends: Attention, RotaryEmbedding, FlexAttention, LinearAttention, CausalConvWithState.

ONNX conventions handled here (the numerics are in :mod:`opconv.kernels.attention`):

* Attention and RotaryEmbedding take 4-D heads-first tensors or 3-D packed
  ones ``(B, S, H * D)`` whose head counts come from attributes;
  LinearAttention is always packed.
* Attention's KV cache: ``past_key``/``past_value`` are prepended to K/V and
  returned as ``present_key``/``present_value``.  The causal diagonal and the
  sliding window are offset by the number of keys before the query block:
  the past length, or (opset 24+, an external cache) ``nonpad_kv_seqlen -
  q_sequence_length`` per batch entry.
* ``qk_matmul_output_mode`` 0/1/2/3 picks the scores after the matmul, after
  the softcap, after the mask, or the probabilities.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import attention as A
from ..executor import onnx_dtype, onnx_op

#: qk_matmul_output_mode -> the kernel's stage
_QK_MODES = dict(enumerate(A.QK_STAGES))


def _heads_first(x, num_heads, name: str):
    """A 4-D input as is; a 3-D packed one split into ``num_heads`` heads."""
    x = np.asarray(x)
    if x.ndim == 4:
        return x
    if x.ndim == 3:
        if not num_heads:
            raise ExecutionError(f"{name} is 3-D, so the number of its heads must be given as an attribute")
        return A.split_heads(x, num_heads)
    raise ExecutionError(f"{name} must be 3-D or 4-D, got shape {list(x.shape)}")


# ---------------------------------------------------------------- Attention


def _attention(
    ctx,
    q,
    k,
    v,
    attn_mask,
    past_key,
    past_value,
    nonpad_kv_seqlen,
    *,
    is_causal,
    kv_num_heads,
    q_num_heads,
    qk_matmul_output_mode,
    scale,
    softcap,
    softmax_precision,
    left_window_size=-1,
    right_window_size=-1,
):
    packed = np.ndim(q) == 3
    q4 = _heads_first(q, q_num_heads, "Q")
    k4 = _heads_first(k, kv_num_heads, "K")
    v4 = _heads_first(v, kv_num_heads, "V")
    if (past_key is None) != (past_value is None):
        raise ExecutionError("past_key and past_value must be given together")
    offset = 0
    if past_key is not None:
        offset = np.shape(past_key)[2]
        k4 = np.concatenate([past_key, k4], axis=2)
        v4 = np.concatenate([past_value, v4], axis=2)
    elif nonpad_kv_seqlen is not None:
        # An external cache: the query block follows each entry's valid keys.
        offset = np.asarray(nonpad_kv_seqlen, np.int64) - q4.shape[2]
    if qk_matmul_output_mode not in _QK_MODES:
        raise ExecutionError(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {qk_matmul_output_mode}")
    bias = A.attention_bias(
        q4.shape[2],
        k4.shape[2],
        mask=attn_mask,
        is_causal=bool(is_causal),
        offset=offset,
        nonpad_kv_seqlen=nonpad_kv_seqlen,
        left_window=left_window_size,
        right_window=right_window_size,
        dtype=q4.dtype,
    )
    y, qk = A.scaled_dot_product_attention(
        q4,
        k4,
        v4,
        bias,
        scale=scale,
        softcap=softcap,
        softmax_dtype=None if softmax_precision is None else onnx_dtype(softmax_precision),
        qk_stage=_QK_MODES[qk_matmul_output_mode] if ctx.output_used(3) else None,
    )
    if packed:
        y = A.merge_heads(y)
    return y, k4, v4, qk


@onnx_op("Attention", since=23)
def attention_23(
    ctx,
    q,
    k,
    v,
    attn_mask=None,
    past_key=None,
    past_value=None,
    *,
    is_causal,
    kv_num_heads,
    q_num_heads,
    qk_matmul_output_mode,
    scale,
    softcap,
    softmax_precision,
):
    return _attention(
        ctx,
        q,
        k,
        v,
        attn_mask,
        past_key,
        past_value,
        None,
        is_causal=is_causal,
        kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads,
        qk_matmul_output_mode=qk_matmul_output_mode,
        scale=scale,
        softcap=softcap,
        softmax_precision=softmax_precision,
    )


@onnx_op("Attention", since=24)
def attention_24(
    ctx,
    q,
    k,
    v,
    attn_mask=None,
    past_key=None,
    past_value=None,
    nonpad_kv_seqlen=None,
    *,
    is_causal,
    kv_num_heads,
    q_num_heads,
    qk_matmul_output_mode,
    scale,
    softcap,
    softmax_precision,
):
    # Opset 24 added nonpad_kv_seqlen (padded external caches) and allowed a mask shorter than the keys.
    return _attention(
        ctx,
        q,
        k,
        v,
        attn_mask,
        past_key,
        past_value,
        nonpad_kv_seqlen,
        is_causal=is_causal,
        kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads,
        qk_matmul_output_mode=qk_matmul_output_mode,
        scale=scale,
        softcap=softcap,
        softmax_precision=softmax_precision,
    )


@onnx_op("Attention", since=25)
def attention_25(
    ctx,
    q,
    k,
    v,
    attn_mask=None,
    past_key=None,
    past_value=None,
    nonpad_kv_seqlen=None,
    *,
    is_causal,
    kv_num_heads,
    left_window_size,
    q_num_heads,
    qk_matmul_output_mode,
    right_window_size,
    scale,
    softcap,
    softmax_precision,
):
    # Opset 25 added the sliding window.
    return _attention(
        ctx,
        q,
        k,
        v,
        attn_mask,
        past_key,
        past_value,
        nonpad_kv_seqlen,
        is_causal=is_causal,
        kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads,
        qk_matmul_output_mode=qk_matmul_output_mode,
        scale=scale,
        softcap=softcap,
        softmax_precision=softmax_precision,
        left_window_size=left_window_size,
        right_window_size=right_window_size,
    )


# ---------------------------------------------------------------- FlexAttention


@onnx_op("FlexAttention", since=1, domain="ai.onnx.preview")
def flex_attention_1(ctx, q, k, v, *, prob_mod, scale, score_mod, softmax_precision):
    for name, x in (("Q", q), ("K", k), ("V", v)):
        if np.ndim(x) != 4:
            raise ExecutionError(f"{name} must be 4-D, got shape {list(np.shape(x))}")
    if softmax_precision is None:
        softmax_dtype = np.float64 if np.asarray(q).dtype == np.float64 else np.float32
    else:
        softmax_dtype = onnx_dtype(softmax_precision)

    def subgraph(graph):
        return None if graph is None else (lambda x: ctx.run_graph(graph, [x])[0])

    y, _ = A.scaled_dot_product_attention(
        q,
        k,
        v,
        scale=scale,
        softmax_dtype=softmax_dtype,
        scale_operands=False,
        score_mod=subgraph(score_mod),
        prob_mod=subgraph(prob_mod),
    )
    return y


# ---------------------------------------------------------------- RotaryEmbedding


@onnx_op("RotaryEmbedding", since=23)
def rotary_embedding_23(
    ctx, x, cos_cache, sin_cache, position_ids=None, *, interleaved, num_heads, rotary_embedding_dim
):
    x = np.asarray(x)
    x4 = _heads_first(x, num_heads, "X")  # (B, H, S, D)
    if position_ids is not None:
        # (max_position, rotary_dim / 2) caches indexed per (batch, position)
        cos_cache, sin_cache = np.asarray(cos_cache)[position_ids], np.asarray(sin_cache)[position_ids]
    # (B, S, rotary_dim / 2) -> broadcast over heads
    cos, sin = np.asarray(cos_cache)[:, None], np.asarray(sin_cache)[:, None]
    y = A.rotary_embedding(x4, cos, sin, interleaved=bool(interleaved), rotary_dim=rotary_embedding_dim)
    return A.merge_heads(y) if x.ndim == 3 else y


# ---------------------------------------------------------------- LinearAttention


@onnx_op("LinearAttention", since=27)
def linear_attention_27(
    ctx,
    query,
    key,
    value,
    past_state=None,
    decay=None,
    beta=None,
    *,
    chunk_size,
    kv_num_heads,
    q_num_heads,
    scale,
    update_rule,
):
    # chunk_size only tunes chunk-parallel implementations; the recurrence defines the result.
    if not q_num_heads or not kv_num_heads:
        raise ExecutionError("LinearAttention needs q_num_heads and kv_num_heads")
    batch, steps = np.shape(query)[:2]

    def per_head(x, heads):  # (B, T, heads * d) -> (B, T, heads, d)
        return np.reshape(x, (batch, steps, heads, -1))

    if decay is not None:
        # per key dimension (B, T, Hkv * Dk) or one per head (B, T, Hkv)
        decay = per_head(decay, kv_num_heads)
    if beta is not None:
        beta = np.reshape(beta, (batch, steps, -1))  # (B, T, Hkv) or (B, T, 1)
    out, state = A.linear_attention(
        per_head(query, q_num_heads),
        per_head(key, kv_num_heads),
        per_head(value, kv_num_heads),
        past_state,
        decay,
        beta,
        rule=update_rule,
        scale=scale,
    )
    return out.reshape(batch, steps, -1), state


# ---------------------------------------------------------------- CausalConvWithState


@onnx_op("CausalConvWithState", since=27)
def causal_conv_with_state_27(ctx, input, weight, bias=None, past_state=None, *, activation):
    return A.causal_conv_with_state(input, weight, bias, past_state, activation)
