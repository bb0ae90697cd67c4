"""ONNX Runtime's attention operators (com.microsoft): Attention, MultiHeadAttention, RotaryEmbedding,
GroupQueryAttention, DecoderMaskedMultiHeadAttention, SparseAttention, MRotaryEmbedding, LinearAttention,
LinearAttentionGate, CausalConvWithState.

The softmax attention itself is :func:`opconv.kernels.attention.scaled_dot_product_attention`
(heads-first, the product scaled by ``scale``, default ``1 / sqrt(head_size)``).  ORT's conventions:

* Masks (Attention's ``mask_index``, MultiHeadAttention's ``key_padding_mask``, int32) are
  additive: a masked key gets ``mask_filter_value`` (default -10000), not -inf, so a row
  whose keys are all masked still averages them.  1-D ``(B)``: keys at or after
  ``mask[b]`` are masked (right padding); ``(2B)``: also keys before ``mask[B + b]``;
  2-D ``(B, T)`` / 3-D ``(B, S, T)``: 0 masks a key.  ``unidirectional`` masks the keys
  after each query's position (past length + index) with the float32 lowest value.
  ``attention_bias`` ``(B or 1, N or 1, S, T)`` is added too.
* KV cache: Attention's ``past`` is ``(2, B, N, P, H)`` and ``present`` the same with
  ``P + S``; MultiHeadAttention's ``past_key``/``past_value`` are ``(B, N, P, H)``.
* Layouts: packed ``(B, S, N * H)``; MultiHeadAttention also takes K/V already split
  ``(B, N, L, H)`` (cross-attention; no bias is added then), packed K/V ``(B, L, N, 2, H)``
  and packed Q/K/V ``(B, S, N, 3, H)``.  RotaryEmbedding takes ``(B, S, N * H)`` or
  ``(B, N, S, H)``, ``position_ids`` ``(B, S)`` or one offset ``(1,)``.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import attention as A
from ....kernels import elementwise as E
from ....kernels._common import downcast, upcast
from ..executor import onnx_op
from .attention import causal_conv_with_state_27, linear_attention_27

MS = "com.microsoft"
_DEFAULT_MASK_FILTER = -10000.0
_CAUSAL_FILL = float(np.finfo(np.float32).min)


def ort_mask_bias(
    mask, batch: int, q_len: int, kv_len: int, past_len: int, filter_value: float | None, causal: bool
) -> np.ndarray | None:
    """ORT's additive mask ``(B, 1, S, T)`` from an int mask of any of its layouts, or None when nothing is masked."""
    filter_value = _DEFAULT_MASK_FILTER if filter_value is None else filter_value
    bias = None
    if mask is not None:
        mask = np.asarray(mask)
        key = np.arange(kv_len)
        if mask.ndim == 1 and mask.shape[0] in (batch, 2 * batch):
            masked = key >= mask[:batch, None]
            if mask.shape[0] == 2 * batch:
                masked |= key < np.minimum(mask[batch:, None], kv_len)
            masked = masked[:, None, :]
        elif mask.ndim == 2 and mask.shape == (batch, kv_len):
            masked = (mask <= 0)[:, None, :]
        elif mask.ndim == 3 and mask.shape == (batch, q_len, kv_len):
            masked = mask <= 0
        else:
            raise ExecutionError(
                f"a mask of shape {list(mask.shape)} is none of onnxruntime's CPU layouts "
                f"(({batch}), ({2 * batch}), ({batch}, {kv_len}), ({batch}, {q_len}, {kv_len}))"
            )
        bias = np.where(np.broadcast_to(masked, (batch, q_len, kv_len)), np.float32(filter_value), np.float32(0))
    if causal:
        future = np.arange(kv_len) > past_len + np.arange(q_len)[:, None]
        bias = np.zeros((batch, q_len, kv_len), np.float32) if bias is None else bias.copy()
        bias[:, future] = _CAUSAL_FILL
    return None if bias is None else bias[:, None]


def _attend(q4, k4, v4, mask_bias, attention_bias, scale, qk_wanted: bool = False):
    """Heads-first attention with ORT's additive biases; returns ``(Y (B, S, N * Hv), scores or None)``.

    The scores are those the softmax takes: scaled Q.K^T plus the mask and attention_bias.
    """
    bias = mask_bias
    if attention_bias is not None:
        extra = upcast(attention_bias).astype(np.float32)
        bias = extra if bias is None else bias + extra
    y, qk = A.scaled_dot_product_attention(
        q4, k4, v4, bias, scale=scale or None, scale_operands=False, qk_stage="bias" if qk_wanted else None
    )
    return A.merge_heads(y), qk


# ---------------------------------------------------------------- Attention


@onnx_op("Attention", since=1, domain=MS)
def attention(
    ctx,
    input,
    weights,
    bias=None,
    mask_index=None,
    past=None,
    attention_bias=None,
    past_sequence_length=None,
    *,
    do_rotary,
    mask_filter_value,
    num_heads,
    past_present_share_buffer,
    qkv_hidden_sizes,
    rotary_embedding_dim,
    scale,
    unidirectional,
):
    if do_rotary:
        raise ExecutionError(
            "Attention with do_rotary=1 is implemented by onnxruntime only for CUDA; opconv has no kernel for it"
        )
    if past_present_share_buffer and past is not None:
        raise ExecutionError(
            "Attention with a past shared with present (past_present_share_buffer=1) is "
            "implemented by onnxruntime only for CUDA; opconv has no kernel for it"
        )
    x = np.asarray(input)
    if x.ndim != 3:
        raise ExecutionError(f"Attention's input must be 3-D (batch, sequence, hidden), got {list(x.shape)}")
    sizes = list(qkv_hidden_sizes) if qkv_hidden_sizes else [np.shape(weights)[1] // 3] * 3
    if sum(sizes) != np.shape(weights)[1]:
        raise ExecutionError(f"qkv_hidden_sizes {sizes} do not add up to the weights' {np.shape(weights)[1]} columns")
    projected = upcast(x) @ upcast(weights)
    if bias is not None:
        projected = projected + upcast(bias)
    projected = downcast(projected, x.dtype)
    q, k, v = np.split(projected, np.cumsum(sizes)[:2], axis=-1)
    q4, k4, v4 = (A.split_heads(t, num_heads) for t in (q, k, v))
    past_len = 0
    if past is not None:
        past = np.asarray(past)
        past_len = past.shape[3]
        k4, v4 = np.concatenate([past[0], k4], axis=2), np.concatenate([past[1], v4], axis=2)
    batch, seq = x.shape[:2]
    mask_bias = ort_mask_bias(mask_index, batch, seq, k4.shape[2], past_len, mask_filter_value, bool(unidirectional))
    y, _ = _attend(q4, k4, v4, mask_bias, attention_bias, scale)
    # present stacks K and V, so it exists only when their head sizes agree
    return y, np.stack([k4, v4]) if k4.shape == v4.shape else None


# ---------------------------------------------------------------- MultiHeadAttention


def _mha_inputs(query, key, value, bias, num_heads):
    """Q, K, V heads-first from MultiHeadAttention's layouts (K/V that come split already get no bias)."""
    query = np.asarray(query)
    if query.ndim == 5:  # packed Q/K/V (B, S, N, 3, H)
        if key is not None or value is not None:
            raise ExecutionError("packed Q/K/V (5-D query) takes no key or value")
        q, k, v = (query[:, :, :, i].transpose(0, 2, 1, 3) for i in range(3))
        return _add_bias(q, k, v, bias)
    q = A.split_heads(query, num_heads)
    key = np.asarray(key)
    if key.ndim == 5:  # packed K/V (B, L, N, 2, H)
        k, v = (key[:, :, :, i].transpose(0, 2, 1, 3) for i in range(2))
        return _add_bias(q, k, v, bias)
    if key.ndim == 4:  # already (B, N, L, H): cross-attention with projected keys
        q, _, _ = _add_bias(q, None, None, bias)
        return q, key, np.asarray(value)
    k, v = A.split_heads(key, num_heads), A.split_heads(np.asarray(value), num_heads)
    return _add_bias(q, k, v, bias)


def _add_bias(q, k, v, bias):
    if bias is None:
        return q, k, v
    bias = np.asarray(bias)
    heads, depth = q.shape[1], q.shape[3]
    sizes = [heads * depth, heads * depth]
    parts = np.split(bias, np.cumsum(sizes))
    out = []
    for t, b in zip((q, k, v), parts):
        if t is None:
            out.append(None)
            continue
        out.append((t + b.reshape(1, heads, 1, -1)).astype(t.dtype, copy=False))
    return tuple(out)


@onnx_op("MultiHeadAttention", since=1, domain=MS)
def multi_head_attention(
    ctx,
    query,
    key=None,
    value=None,
    bias=None,
    key_padding_mask=None,
    attention_bias=None,
    past_key=None,
    past_value=None,
    past_sequence_length=None,
    cache_indirection=None,
    *,
    mask_filter_value,
    num_heads,
    scale,
    unidirectional,
):
    if cache_indirection is not None or past_sequence_length is not None:
        raise ExecutionError(
            "MultiHeadAttention with a shared KV buffer (past_sequence_length, cache_indirection) "
            "is implemented by onnxruntime only for CUDA; opconv has no kernel for it"
        )
    q4, k4, v4 = _mha_inputs(query, key, value, bias, num_heads)
    past_len = 0
    if (past_key is None) != (past_value is None):
        raise ExecutionError("past_key and past_value must be given together")
    if past_key is not None and np.ndim(key) != 4:
        past_len = np.shape(past_key)[2]
        k4 = np.concatenate([np.asarray(past_key), k4], axis=2)
        v4 = np.concatenate([np.asarray(past_value), v4], axis=2)
    batch, seq = q4.shape[0], q4.shape[2]
    mask_bias = ort_mask_bias(
        key_padding_mask, batch, seq, k4.shape[2], past_len, mask_filter_value, bool(unidirectional)
    )
    y, qk = _attend(q4, k4, v4, mask_bias, attention_bias, scale, qk_wanted=ctx.output_used(3))
    return y, k4, v4, qk


# ---------------------------------------------------------------- RotaryEmbedding


def rotary_positions(position_ids, batch: int, seq: int) -> np.ndarray:
    """``(B, S)`` positions: as given, or ``offset + 0..S-1`` from a single offset."""
    positions = np.asarray(position_ids, np.int64)
    if positions.size == 1:
        return np.broadcast_to(positions.reshape(1, 1) + np.arange(seq), (batch, seq))
    return np.broadcast_to(positions, (batch, seq))


def rotate(x4, positions, cos_cache, sin_cache, interleaved: bool, rotary_dim: int | None):
    """RoPE of heads-first ``x4`` ``(B, N, S, H)`` at ``positions`` ``(B, S)``, caches ``(max_pos, rotary_dim / 2)``."""
    cos = np.asarray(cos_cache)[positions][:, None]  # (B, 1, S, rotary_dim / 2)
    sin = np.asarray(sin_cache)[positions][:, None]
    return A.rotary_embedding(x4, cos, sin, interleaved=interleaved, rotary_dim=rotary_dim or 2 * cos.shape[-1])


@onnx_op("RotaryEmbedding", since=1, domain=MS)
def rotary_embedding(
    ctx,
    input,
    position_ids,
    cos_cache,
    sin_cache,
    *,
    interleaved,
    is_packed_batching,
    num_heads,
    rotary_embedding_dim,
    scale,
):
    if is_packed_batching:
        raise ExecutionError(
            "RotaryEmbedding with is_packed_batching=1 is implemented by onnxruntime only for "
            "CUDA; opconv has no kernel for it"
        )
    x = np.asarray(input)
    if x.ndim == 4:
        x4 = x
    elif x.ndim == 3:
        heads = num_heads or x.shape[2] // (2 * np.shape(cos_cache)[1])
        x4 = A.split_heads(x, heads)
    else:
        raise ExecutionError(f"RotaryEmbedding's input must be 3-D or 4-D, got shape {list(x.shape)}")
    positions = rotary_positions(position_ids, x4.shape[0], x4.shape[2])
    y = rotate(x4, positions, cos_cache, sin_cache, bool(interleaved), rotary_embedding_dim)
    return A.merge_heads(y) if x.ndim == 3 else y


# ---------------------------------------------------------------- GroupQueryAttention
#
# The KV cache is heads-first (B, Nkv, buffer, H).  Batch entry b holds seqlens_k[b] + 1 valid keys after this
# step; on the first prompt (S == total_sequence_length) the past is empty, otherwise the S new keys follow the
# past ones, which number seqlens_k[b] + 1 - S.  present is zero-filled to max(past buffer, total length) and
# holds the past keys then the new ones.  Queries attend causally from their own position (past length + index),
# to the local_window_size keys ending there when it is positive.  A sink logit (smooth_softmax: 0; head_sink: one per
# head) joins each softmax's denominator: it is computed here as one more key, of zeros, whose bias is the sink.


def _gqa_split(query, key, value, num_heads, kv_num_heads):
    query = np.asarray(query)
    if key is None:  # packed Q/K/V along the hidden dim
        head_size = query.shape[2] // (num_heads + 2 * kv_num_heads)
        query, key, value = np.split(query, [num_heads * head_size, (num_heads + kv_num_heads) * head_size], axis=2)
    return (
        A.split_heads(query, num_heads),
        A.split_heads(np.asarray(key), kv_num_heads),
        A.split_heads(np.asarray(value), kv_num_heads),
    )


def _gqa_cache(past, new, past_lengths, buffer_len):
    """present: past's first ``past_lengths[b]`` keys then the new ones, zero-filled to ``buffer_len``."""
    batch, heads, seq, depth = new.shape
    present = np.zeros((batch, heads, buffer_len, depth), new.dtype)
    for b, length in enumerate(past_lengths):
        if length:
            present[b, :, :length] = np.asarray(past)[b, :, :length]
        present[b, :, length : length + seq] = new[b]
    return present


@onnx_op("GroupQueryAttention", since=1, domain=MS)
def group_query_attention(
    ctx,
    query,
    key=None,
    value=None,
    past_key=None,
    past_value=None,
    seqlens_k=None,
    total_sequence_length=None,
    cos_cache=None,
    sin_cache=None,
    position_ids=None,
    attention_bias=None,
    head_sink=None,
    k_scale=None,
    v_scale=None,
    q_norm_weight=None,
    k_norm_weight=None,
    query_seqlens=None,
    *,
    causal,
    do_rotary,
    k_norm_epsilon,
    k_quant_type,
    kv_cache_bit_width,
    kv_num_heads,
    local_window_size,
    num_heads,
    q_norm_epsilon,
    qk_norm_epsilon,
    qk_output,
    rotary_interleaved,
    scale,
    sliding_window_cache,
    smooth_softmax,
    softcap,
    v_quant_type,
):
    for what, value_, default in (
        ("a quantized KV cache", k_quant_type, "NONE"),
        ("a quantized KV cache", v_quant_type, "NONE"),
        ("the qk_output output", qk_output, 0),
        ("a sliding-window cache", sliding_window_cache, 0),
    ):
        if value_ not in (None, default):
            raise ExecutionError(f"GroupQueryAttention with {what} is not supported by opconv's kernel")
    if q_norm_weight is not None or k_norm_weight is not None or query_seqlens is not None:
        raise ExecutionError(
            "GroupQueryAttention with q/k norm weights or query_seqlens is not supported by opconv's kernel"
        )
    if causal == 0:
        raise ExecutionError("GroupQueryAttention with causal=0 is not supported by opconv's kernel")
    q4, k4, v4 = _gqa_split(query, key, value, num_heads, kv_num_heads)
    batch, _, seq, _ = q4.shape
    total = int(np.asarray(total_sequence_length).reshape(-1)[0])
    valid = np.asarray(seqlens_k, np.int64).reshape(-1) + 1
    past_lengths = np.zeros(batch, np.int64) if seq == total else valid - seq
    if do_rotary:
        positions = (
            np.asarray(position_ids, np.int64) if position_ids is not None else past_lengths[:, None] + np.arange(seq)
        )
        positions = np.broadcast_to(positions, (batch, seq))
        q4 = rotate(q4, positions, cos_cache, sin_cache, bool(rotary_interleaved), None)
        k4 = rotate(k4, positions, cos_cache, sin_cache, bool(rotary_interleaved), None)
    buffer_len = max(total, np.shape(past_key)[2] if past_key is not None else 0)
    present_key = _gqa_cache(past_key, k4, past_lengths, buffer_len)
    present_value = _gqa_cache(past_value, v4, past_lengths, buffer_len)
    bias = A.attention_bias(
        seq,
        buffer_len,
        is_causal=True,
        offset=past_lengths,
        nonpad_kv_seqlen=valid,
        left_window=local_window_size - 1 if local_window_size and local_window_size > 0 else -1,
    )
    if attention_bias is not None:
        bias = bias + upcast(attention_bias).astype(bias.dtype)
    keys, values = present_key, present_value
    sink = None if head_sink is None else upcast(head_sink).astype(bias.dtype)
    if sink is None and smooth_softmax == 1:
        sink = np.zeros(num_heads, bias.dtype)
    if sink is not None:
        # one more key and value of zeros; its score is the sink logit
        keys = np.concatenate([keys, np.zeros_like(keys[:, :, :1])], axis=2)
        values = np.concatenate([values, np.zeros_like(values[:, :, :1])], axis=2)
        bias = np.broadcast_to(bias, (batch, num_heads, seq, buffer_len))
        bias = np.concatenate([bias, np.broadcast_to(sink[None, :, None, None], (batch, num_heads, seq, 1))], axis=3)
    y, _ = A.scaled_dot_product_attention(
        q4, keys, values, bias, scale=scale or None, softcap=softcap or 0.0, scale_operands=False
    )
    return A.merge_heads(y), present_key, present_value


# ---------------------------------------------------------------- LinearAttention, CausalConvWithState
#
# ONNX adopted both in opset 27; ORT's versions add attributes for windows of per-token states and CUDA layouts.
# With those at their defaults they mean what ONNX's do, whose kernels they share.


def _only_defaults(op: str, **values):
    for name, (value, default) in values.items():
        if value not in (None, default):
            raise ExecutionError(f"{op} with {name}={value} is not supported by opconv's kernel")


@onnx_op("LinearAttention", since=1, domain=MS)
def linear_attention_1(
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
    state_window,
    update_rule,
):
    _only_defaults("LinearAttention", state_window=(state_window, 0))
    return linear_attention_27(
        ctx,
        query,
        key,
        value,
        past_state,
        decay,
        beta,
        chunk_size=chunk_size,
        kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads,
        scale=scale,
        update_rule=update_rule,
    )


@onnx_op("CausalConvWithState", since=1, domain=MS)
def causal_conv_with_state_1(
    ctx,
    input,
    weight,
    bias=None,
    past_state=None,
    *,
    activation,
    channels_last,
    dilation,
    input_channel_offset,
    input_channels,
    ndim,
    state_channels_last,
    state_length,
    state_update_capacity,
    state_window,
):
    _only_defaults(
        "CausalConvWithState",
        dilation=(dilation, 1),
        ndim=(ndim, 1),
        state_window=(state_window, 0),
        state_update_capacity=(state_update_capacity, 0),
        state_length=(state_length, 0),
        input_channels=(input_channels, 0),
        input_channel_offset=(input_channel_offset, 0),
        state_channels_last=(state_channels_last, -1),
    )
    if channels_last:  # (B, L, C) activations and (B, state, C) states
        x = np.swapaxes(input, 1, 2)
        past = None if past_state is None else np.swapaxes(past_state, 1, 2)
        y, state = causal_conv_with_state_27(ctx, x, weight, bias, past, activation=activation)
        return np.swapaxes(y, 1, 2), np.swapaxes(state, 1, 2)
    return causal_conv_with_state_27(ctx, input, weight, bias, past_state, activation=activation)


# ---------------------------------------------------------------- DecoderMaskedMultiHeadAttention
#
# One decoding step (S = 1).  Self-attention writes the new key/value into the shared cache buffer at
# past_sequence_length and attends over the first past_sequence_length + 1 entries; cross-attention takes K/V
# already split into heads (B, N, L, H), without bias, and has no present outputs.


@onnx_op("DecoderMaskedMultiHeadAttention", since=1, domain=MS)
def decoder_masked_multi_head_attention(
    ctx,
    query,
    key=None,
    value=None,
    mask_index=None,
    attention_bias=None,
    past_key=None,
    past_value=None,
    past_sequence_length=None,
    beam_width=None,
    cache_indirection=None,
    bias=None,
    *,
    mask_filter_value,
    num_heads,
    output_qk,
    past_present_share_buffer,
    scale,
):
    if beam_width is not None and int(np.asarray(beam_width).reshape(-1)[0]) > 1:
        raise ExecutionError(
            "DecoderMaskedMultiHeadAttention inside a beam search (beam_width > 1, "
            "cache_indirection) is not supported by opconv's kernel"
        )
    query = np.asarray(query)
    if query.shape[1] != 1:
        raise ExecutionError(f"DecoderMaskedMultiHeadAttention decodes one token; the query has {query.shape[1]}")
    batch = query.shape[0]
    if past_key is None:  # cross-attention
        q4, _, _ = _add_bias(A.split_heads(query, num_heads), None, None, bias)
        k4, v4, present = np.asarray(key), np.asarray(value), (None, None)
        past_len = 0
    else:
        if not past_present_share_buffer:
            raise ExecutionError("DecoderMaskedMultiHeadAttention's self-attention needs past_present_share_buffer=1")
        if key is None:  # packed Q/K/V (B, 1, 3 * D)
            query, key, value = np.split(query, 3, axis=2)
        q4, k_new, v_new = _add_bias(*(A.split_heads(np.asarray(t), num_heads) for t in (query, key, value)), bias)
        past_len = int(np.asarray(past_sequence_length).reshape(-1)[0])
        present = tuple(np.array(past, copy=True) for past in (past_key, past_value))
        present[0][:, :, past_len] = k_new[:, :, 0]
        present[1][:, :, past_len] = v_new[:, :, 0]
        k4, v4 = present[0][:, :, : past_len + 1], present[1][:, :, : past_len + 1]
    mask_bias = ort_mask_bias(mask_index, batch, 1, k4.shape[2], past_len, mask_filter_value, False)
    y, qk = _attend(q4, k4, v4, mask_bias, attention_bias, scale, qk_wanted=bool(output_qk))
    return y, present[0], present[1], qk


# ---------------------------------------------------------------- MRotaryEmbedding


@onnx_op("MRotaryEmbedding", since=1, domain=MS)
def m_rotary_embedding(
    ctx,
    input,
    position_ids,
    cos_cache,
    sin_cache,
    *,
    interleaved,
    is_packed_batching,
    mrope_layout,
    mrope_section,
    num_heads,
    rotary_embedding_dim,
    scale,
):
    if is_packed_batching:
        raise ExecutionError("MRotaryEmbedding with is_packed_batching=1 is not supported by opconv's kernel")
    if mrope_section is None or len(mrope_section) != 3:
        raise ExecutionError("MRotaryEmbedding needs mrope_section: three section sizes")
    x = np.asarray(input)
    half = np.shape(cos_cache)[1]
    if x.ndim == 3 and not num_heads:
        raise ExecutionError("MRotaryEmbedding of a 3-D input needs num_heads")
    x4 = x if x.ndim == 4 else A.split_heads(x, num_heads)
    streams = A.mrope_streams(mrope_section, mrope_layout or 0)
    if streams.size != half:
        raise ExecutionError(f"mrope_section {list(mrope_section)} covers {streams.size} cache columns, not {half}")
    positions = np.moveaxis(np.asarray(position_ids, np.int64)[streams], 0, -1)  # (B, S, half)
    columns = np.arange(half)
    cos = np.asarray(cos_cache)[positions, columns][:, None]
    sin = np.asarray(sin_cache)[positions, columns][:, None]
    y = A.rotary_embedding(x4, cos, sin, interleaved=bool(interleaved), rotary_dim=rotary_embedding_dim or 2 * half)
    return A.merge_heads(y) if x.ndim == 3 else y


# ---------------------------------------------------------------- SparseAttention
#
# Phi-3-small's block-sparse causal attention over a shared KV buffer (B, Nkv, max_len, H).  Batch entry b has
# key_total_sequence_lengths[b] valid keys after this step, the S new ones last.  Query head h uses block layout
# h % num_layouts, given in CSR form (row pointers, column indices); a query at position p sees key j when j <= p
# and block (p // block, j // block) is set.


def _dense_block_layouts(row_pointers, column_indices) -> np.ndarray:
    rows, cols = np.asarray(row_pointers, np.int64), np.asarray(column_indices, np.int64)
    layouts, blocks = rows.shape[0], rows.shape[1] - 1
    dense = np.zeros((layouts, blocks, blocks), bool)
    for layout in range(layouts):
        for row in range(blocks):
            dense[layout, row, cols[layout, rows[layout, row] : rows[layout, row + 1]]] = True
    return dense


@onnx_op("SparseAttention", since=1, domain=MS)
def sparse_attention(
    ctx,
    query,
    key=None,
    value=None,
    past_key=None,
    past_value=None,
    block_row_indices=None,
    block_col_indices=None,
    total_sequence_length=None,
    key_total_sequence_lengths=None,
    cos_cache=None,
    sin_cache=None,
    *,
    do_rotary,
    kv_num_heads,
    num_heads,
    rotary_interleaved,
    scale,
    sparse_block_size,
):
    q4, k4, v4 = _gqa_split(query, key, value, num_heads, kv_num_heads)
    batch, _, seq, _ = q4.shape
    valid = np.asarray(key_total_sequence_lengths, np.int64).reshape(-1)
    past_lengths = valid - seq
    positions = past_lengths[:, None] + np.arange(seq)  # (B, S)
    if do_rotary:
        q4 = rotate(q4, positions, cos_cache, sin_cache, bool(rotary_interleaved), None)
        k4 = rotate(k4, positions, cos_cache, sin_cache, bool(rotary_interleaved), None)
    buffer_len = np.shape(past_key)[2]
    present_key = _gqa_cache(past_key, k4, past_lengths, buffer_len)
    present_value = _gqa_cache(past_value, v4, past_lengths, buffer_len)
    # keep the buffer beyond the valid keys as the past had it (the buffer is shared in onnxruntime)
    for b, end in enumerate(valid):
        present_key[b, :, end:] = np.asarray(past_key)[b, :, end:]
        present_value[b, :, end:] = np.asarray(past_value)[b, :, end:]
    layouts = _dense_block_layouts(block_row_indices, block_col_indices)
    head_layout = layouts[np.arange(num_heads) % layouts.shape[0]]  # (N, blocks, blocks)
    key_block = np.arange(buffer_len) // sparse_block_size
    allowed = head_layout[:, positions // sparse_block_size][..., key_block]  # (N, B, S, T)
    bias = A.attention_bias(seq, buffer_len, is_causal=True, offset=past_lengths, nonpad_kv_seqlen=valid)
    bias = np.where(np.moveaxis(allowed, 0, 1), bias, -np.inf)
    y, _ = A.scaled_dot_product_attention(
        q4, present_key, present_value, bias, scale=scale or None, scale_operands=False
    )
    return A.merge_heads(y), present_key, present_value


@onnx_op("LinearAttentionGate", since=1, domain=MS)
def linear_attention_gate(ctx, a, dt_bias, decay_scale, b=None):
    # decay = decay_scale * softplus(a + dt_bias), beta = sigmoid(b); intermediates in float32.
    dtype = np.asarray(a).dtype
    a32 = upcast(a).astype(np.float32)
    decay = upcast(decay_scale).astype(np.float32) * E.softplus(a32 + upcast(dt_bias).astype(np.float32))
    beta = None if b is None else downcast(E.sigmoid(upcast(b).astype(np.float32)), dtype)
    return downcast(decay, dtype), beta


# ---------------------------------------------------------------- GatedDeltaNet
#
# LinearAttention's recurrence on token-major tensors (tokens, heads, dim), requests delimited by cu_seqlens (or
# a uniform split into the initial_state's batch).  Each query/key head serves num_heads_v / num_heads_q value
# heads; the state is V-major (B, Hv, Dv, Dk) float32.  The gate and update rate may come raw or through
# -exp(a_log) * softplus(decay + dt_bias) ('softplus', 'qwen') or lower_bound * sigmoid(exp(a_log) *
# (decay + dt_bias)) ('sigmoid', 'kda'), and sigmoid(beta).


def _l2_normalize(x):
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + np.float32(1e-6))


def _delta_net_gate(decay, a_log, dt_bias, activation: str, lower_bound: float):
    decay = upcast(decay).astype(np.float32)
    if activation == "none":
        return decay
    shifted = (
        decay
        if dt_bias is None
        else decay
        + upcast(dt_bias)
        .astype(np.float32)
        .reshape((-1,) + (1,) * (decay.ndim - 2) if np.ndim(dt_bias) == 1 else decay.shape[-2:])
    )
    rate = np.exp(upcast(a_log).astype(np.float32)).reshape((-1,) + (1,) * (decay.ndim - 2))
    if activation in ("softplus", "qwen"):
        return -rate * E.softplus(shifted)
    if activation in ("sigmoid", "kda"):
        return np.float32(lower_bound) * E.sigmoid(rate * shifted)
    raise ExecutionError(f"unknown GatedDeltaNet gate_activation {activation!r}")


@onnx_op("GatedDeltaNet", since=1, domain=MS)
def gated_delta_net(
    ctx,
    query,
    key=None,
    value=None,
    cu_seqlens=None,
    decay=None,
    beta=None,
    initial_state=None,
    a_log=None,
    dt_bias=None,
    capture_count=None,
    state_update_active=None,
    *,
    beta_activation,
    chunk_size,
    gate_activation,
    gate_lower_bound,
    qk_l2_norm,
    scale,
    state_update_capacity,
    update_rule,
):
    _only_defaults("GatedDeltaNet", state_update_capacity=(state_update_capacity, 0))
    query = np.asarray(query)
    dtype = query.dtype
    # the token axes: (tokens,) or (batch, sequence)
    lead = query.shape[:-1] if key is None else query.shape[:-2]
    if key is None:  # packed Q/K/V (tokens, 2 * Hq * Dk + Hv * Dv); head counts from the state
        if initial_state is None:
            raise ExecutionError("GatedDeltaNet with packed QKV needs initial_state")
        _, hv, dv, dk = np.shape(initial_state)
        width = query.shape[-1]
        hq = (width - hv * dv) // (2 * dk)
        q, k, v = np.split(query, [hq * dk, 2 * hq * dk], axis=-1)
        query, key, value = (t.reshape(t.shape[:-1] + (-1, d)) for t, d in ((q, dk), (k, dk), (v, dv)))
    query, key, value = (upcast(np.asarray(t)).reshape((-1,) + np.shape(t)[-2:]) for t in (query, key, value))
    tokens, hq, dk = query.shape
    hv, dv = value.shape[1], value.shape[2]
    if hv % hq:
        raise ExecutionError(f"{hv} value heads cannot share {hq} query/key heads evenly")
    query, key = (np.repeat(t, hv // hq, axis=1) for t in (query, key))
    if qk_l2_norm:
        query, key = _l2_normalize(query), _l2_normalize(key)
    if cu_seqlens is not None:
        bounds = np.asarray(cu_seqlens, np.int64)
    else:
        if initial_state is None:
            raise ExecutionError("GatedDeltaNet without cu_seqlens needs initial_state (for the batch size)")
        batch = np.shape(initial_state)[0]
        bounds = np.arange(batch + 1) * (tokens // batch)
    gate = None
    if decay is not None:
        gate = _delta_net_gate(np.reshape(decay, (tokens, hv, -1)), a_log, dt_bias, gate_activation, gate_lower_bound)
    rate = None
    if beta is not None:
        rate = upcast(beta).astype(np.float32).reshape(tokens, hv)
        rate = E.sigmoid(rate) if beta_activation == "sigmoid" else rate
    out = np.empty((tokens, hv, dv), np.float32)
    states = []
    for b, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        past = None if initial_state is None else np.swapaxes(upcast(initial_state)[b : b + 1], -1, -2)
        y, state = A.linear_attention(
            query[None, start:end],
            key[None, start:end],
            value[None, start:end],
            past,
            None if gate is None else gate[None, start:end],
            None if rate is None else rate[None, start:end],
            rule=update_rule,
            scale=scale,
        )
        out[start:end] = y[0]
        states.append(np.swapaxes(state[0], -1, -2))
    out_shape = lead + (hv, dv)
    return downcast(out.reshape(out_shape), dtype), np.stack(states).astype(np.float32)


@onnx_op("VarlenCausalConvWithState", since=1, domain=MS)
def varlen_causal_conv_with_state(
    ctx,
    input,
    weight,
    cumulative_sequence_length,
    bias=None,
    initial_state=None,
    capture_count=None,
    kernel_delta=None,
    previous_mask=None,
    *,
    activation,
    delta_offset,
    dilation,
    group_size,
    state_update_capacity,
):
    # CausalConvWithState of each packed request (tokens, C) after its own state.
    _only_defaults(
        "VarlenCausalConvWithState", dilation=(dilation, 1), state_update_capacity=(state_update_capacity, 0)
    )
    if kernel_delta is not None:
        raise ExecutionError(
            "VarlenCausalConvWithState's dynamic kernel deltas are implemented by onnxruntime only "
            "for CUDA; opconv has no kernel for them"
        )
    x = np.asarray(input)
    bounds = np.asarray(cumulative_sequence_length, np.int64)
    out, states = np.empty_like(x), []
    for b, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        past = None if initial_state is None else np.asarray(initial_state)[b : b + 1]
        y, state = causal_conv_with_state_27(ctx, x[start:end].T[None], weight, bias, past, activation=activation)
        out[start:end] = y[0].T
        states.append(state[0])
    return out, np.stack(states)
