"""onnxruntime's quantized layers (domain ``com.microsoft``): QAttention, QEmbedLayerNormalization,
DynamicQuantizeLSTM, QMoE.

Each is its float layer on dequantized weights, with onnxruntime's conventions:

* QAttention: the packed Q/K/V projection is an exact integer product scaled by ``input_scale *
  weight_scale``, plus the float bias; then multi-head attention where a masked key adds ``mask_filter_value``
  (-10000 by default, not -inf) to its score and, with ``unidirectional``, a future key is left out.
  ``mask_index`` is per batch key lengths ``[B]``, end and start positions ``[2B]``, or 0/1 masks ``[B, T]`` /
  ``[B, S, T]``; ``past`` / ``present`` stack K and V as ``[2, B, heads, T, head_size]``.
* QEmbedLayerNormalization: word + position (0..S-1) + segment embeddings, layer-normalized; the second output
  is the number of ones in each row of ``mask`` (int32).
* DynamicQuantizeLSTM: W ``[D, input, 4*hidden]`` and R ``[D, hidden, 4*hidden]`` (transposed from ONNX LSTM) with
  per-direction or per-column scales; onnxruntime quantizes the activations X (whole sequence) and each
  step's H to uint8 over their range before multiplying, which the kernel reproduces.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import attention as A
from ....kernels import elementwise, norm, quant
from ..executor import onnx_op
from .contrib_linalg import moe
from .contrib_quant_matmul import integer_product, scaled
from .rnn import recurrent

MS = "com.microsoft"
_DEFAULT_MASK_FILTER = -10000.0


def _key_mask(mask_index, batch: int, q_len: int, total: int) -> np.ndarray:
    """Allowed keys ``(B, 1, S, T)`` (bool) from onnxruntime's ``mask_index`` forms."""
    allowed = np.ones((batch, 1, q_len, total), bool)
    keys = np.arange(total)
    if mask_index is not None:
        m = np.asarray(mask_index)
        if m.ndim == 1 and m.size == batch:
            allowed &= (keys[None, :] < m[:, None])[:, None, None, :]
        elif m.ndim == 1 and m.size == 2 * batch:
            end, start = m[:batch], m[batch:]
            allowed &= ((keys[None, :] < end[:, None]) & (keys[None, :] >= start[:, None]))[:, None, None, :]
        elif m.ndim == 2:
            allowed &= (m > 0)[:, None, None, :]
        elif m.ndim == 3:
            allowed &= (m > 0)[:, None, :, :]
        else:
            raise ExecutionError(
                f"mask_index of shape {list(m.shape)} is not one of onnxruntime's forms ([B], [2B], [B, T], [B, S, T])"
            )
    return allowed


@onnx_op("QAttention", since=1, domain=MS)
def qattention_1(
    ctx,
    x,
    weight,
    bias,
    input_scale,
    weight_scale,
    mask_index=None,
    input_zero_point=None,
    weight_zero_point=None,
    past=None,
    *,
    do_rotary,
    mask_filter_value,
    num_heads,
    past_present_share_buffer,
    scale,
    unidirectional,
):
    if do_rotary:
        raise ExecutionError(
            "QAttention with do_rotary=1 is not supported (onnxruntime's CPU kernel has no rotary path either)"
        )
    x = np.asarray(x)
    batch, q_len, _ = x.shape
    qkv = scaled(
        integer_product(x, weight, input_zero_point, weight_zero_point), input_scale, weight_scale, bias, np.float32
    )
    q, k, v = (A.split_heads(part, num_heads) for part in np.split(qkv, 3, axis=-1))
    past_len = 0
    if past is not None:
        past = np.asarray(past, np.float32)
        past_len = past.shape[3]
        k, v = np.concatenate([past[0], k], axis=2), np.concatenate([past[1], v], axis=2)
    allowed = _key_mask(mask_index, batch, q_len, past_len + q_len)
    causal = np.arange(past_len + q_len)[None, :] <= past_len + np.arange(q_len)[:, None] if unidirectional else True
    fill = np.float32(_DEFAULT_MASK_FILTER if mask_filter_value is None else mask_filter_value)
    # a masked key adds the filter value (it keeps a weight when every key is masked); a future one is excluded
    bias_scores = np.where(causal, np.where(allowed, np.float32(0), fill), np.float32(-np.inf))
    y, _ = A.scaled_dot_product_attention(q, k, v, bias_scores, scale=scale or None, scale_operands=False)
    output = A.merge_heads(y).astype(np.float32)
    return (output, np.stack([k, v])) if ctx.num_outputs > 1 else output


@onnx_op("QEmbedLayerNormalization", since=1, domain=MS)
def qembed_layer_normalization_1(
    ctx,
    input_ids,
    segment_ids,
    word_embedding,
    position_embedding,
    segment_embedding,
    gamma,
    beta,
    mask,
    word_embedding_scale,
    position_embedding_scale,
    segment_embedding_scale,
    gamma_scale,
    beta_scale,
    word_embedding_zero_point,
    position_embedding_zero_point,
    segment_embedding_zero_point,
    gamma_zero_point,
    beta_zero_point,
    *,
    epsilon,
):
    def real(q, s, z):
        return elementwise.dequantize(q, s, z, np.float32)

    ids = np.asarray(input_ids).astype(np.int64)
    seq = ids.shape[1]
    embedded = (
        real(word_embedding, word_embedding_scale, word_embedding_zero_point)[ids]
        + real(position_embedding, position_embedding_scale, position_embedding_zero_point)[:seq][None]
    )
    if segment_embedding is not None and segment_ids is not None:
        segments = real(segment_embedding, segment_embedding_scale, segment_embedding_zero_point)
        embedded = embedded + segments[np.asarray(segment_ids).astype(np.int64)]
    out = norm.layer_norm(
        embedded, real(gamma, gamma_scale, gamma_zero_point), real(beta, beta_scale, beta_zero_point), -1, epsilon
    )[0]
    mask_index = (
        np.zeros(ids.shape[0], np.int32) if mask is None else (np.asarray(mask) != 0).sum(axis=1).astype(np.int32)
    )
    return out.astype(np.float32), mask_index


def _lstm_weight(q, scale, zero_point) -> np.ndarray:
    """A DynamicQuantizeLSTM weight ``[D, rows, 4H]`` dequantized (scale and zero point per direction or per
    column) and transposed to ONNX LSTM's ``[D, 4H, rows]``."""
    q = np.asarray(q)
    scale, zero_point = np.asarray(scale, np.float32), np.asarray(zero_point)
    shape = (q.shape[0], 1, -1) if scale.ndim == 2 else (q.shape[0], 1, 1)
    real = elementwise.dequantize(q, scale.reshape(shape), zero_point.reshape(shape), np.float32)
    return real.transpose(0, 2, 1)


@onnx_op("DynamicQuantizeLSTM", since=1, domain=MS)
def dynamic_quantize_lstm_1(
    ctx,
    x,
    w,
    r,
    b=None,
    sequence_lens=None,
    initial_h=None,
    initial_c=None,
    p=None,
    w_scale=None,
    w_zero_point=None,
    r_scale=None,
    r_zero_point=None,
    *,
    activation_alpha,
    activation_beta,
    activations,
    clip,
    direction,
    hidden_size,
    input_forget,
):
    return recurrent(
        ctx,
        "lstm",
        x,
        _lstm_weight(w, w_scale, w_zero_point),
        _lstm_weight(r, r_scale, r_zero_point),
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
        operand=quant.fake_quantize_dynamic,
    )


@onnx_op("QMoE", since=1, domain=MS)
def qmoe_1(
    ctx,
    x,
    router_probs,
    fc1_weights,
    fc1_scales=None,
    fc1_bias=None,
    fc2_weights=None,
    fc2_scales=None,
    fc2_bias=None,
    fc3_weights=None,
    fc3_scales=None,
    fc3_bias=None,
    fc1_zero_points=None,
    fc2_zero_points=None,
    fc3_zero_points=None,
    router_weights=None,
    *float_formats,
    accuracy_level,
    activation_alpha,
    activation_beta,
    activation_type,
    block_size,
    expert_weight_bits,
    fc1_expert_weight_bits,
    fc2_expert_weight_bits,
    fc3_expert_weight_bits,
    k,
    normalize_routing_weights,
    quant_type,
    swiglu_fusion,
    swiglu_limit,
    swiglu_limit_after_activation,
    use_sparse_mixer,
    weights_prepacked,
):
    """Integer-quantized MoE: the experts' weights dequantized, then onnxruntime's MoE (``contrib_linalg.moe``).
    The float formats (quant_type fp4/nvfp4/fp8/wfp4afp8 and their global and activation scales),
    separate router weights and prepacked layouts are refused."""
    if quant_type != "int" or any(v is not None for v in float_formats) or router_weights is not None:
        raise ExecutionError(
            f"QMoE with quant_type {quant_type!r}, router_weights or global/activation scales is "
            f"not supported (integer weights only)"
        )
    if weights_prepacked == 1:
        raise ExecutionError("QMoE with weights_prepacked=1 holds weights in an execution provider's layout")
    layers = []
    for packed, scales, zeros, bits in (
        (fc1_weights, fc1_scales, fc1_zero_points, fc1_expert_weight_bits),
        (fc2_weights, fc2_scales, fc2_zero_points, fc2_expert_weight_bits),
        (fc3_weights, fc3_scales, fc3_zero_points, fc3_expert_weight_bits),
    ):
        if packed is not None and scales is None:
            raise ExecutionError("integer QMoE weights need their scales")
        layers.append(quant.moe_expert_weights(packed, scales, zeros, bits or expert_weight_bits, block_size))
    return moe(
        ctx,
        x,
        router_probs,
        layers[0],
        fc1_bias,
        layers[1],
        fc2_bias,
        layers[2],
        fc3_bias,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        activation_type=activation_type,
        k=k,
        normalize_routing_weights=normalize_routing_weights,
        swiglu_fusion=swiglu_fusion,
        swiglu_limit=swiglu_limit,
        swiglu_limit_after_activation=swiglu_limit_after_activation,
        use_sparse_mixer=use_sparse_mixer,
    )
