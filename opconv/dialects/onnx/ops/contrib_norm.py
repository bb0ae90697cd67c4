"""ONNX Runtime's normalization operators: SkipLayerNormalization, SkipSimplifiedLayerNormalization,
EmbedLayerNormalization, BranchwiseRMSNorm, GatedRMSNorm, GatedAdd, EngramGate (com.microsoft), and its ai.onnx-domain
LayerNormalization-1 and SimplifiedLayerNormalization-1.

Numerics in :mod:`opconv.kernels.norm`.  ORT's conventions:

* The Skip* ops normalize ``input + skip (+ bias)`` over the last axis; ``skip`` may lack
  the batch dim or have a batch of 1.  Their optional outputs are the per-row mean and
  ``1 / sqrt(var + eps)`` (shape ``(..., 1)``, float32) and the sum that was normalized.
* SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization are RMS norms.
* EmbedLayerNormalization normalizes ``word[input_ids] + position[position_ids] +
  segment[segment_ids]``; position_ids default to ``0..S-1``.  Its ``mask_index``
  output is the per-batch sum of the 0/1 ``mask`` (zeros without a mask).
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise as E
from ....kernels import norm as N
from ....kernels._common import downcast, upcast
from ..executor import onnx_dtype, onnx_op

MS = "com.microsoft"
#: ORT's Skip* ops keep their statistics in float32 whatever the input type
_STAT_DTYPE = np.float32


def _skip_sum(x, skip, bias):
    x = np.asarray(x)
    skip = np.asarray(skip)
    if skip.shape[-1] != x.shape[-1] or skip.ndim > x.ndim:
        raise ExecutionError(f"skip of shape {list(skip.shape)} does not broadcast to input {list(x.shape)}")
    total = x + skip
    if bias is not None:
        total = total + np.asarray(bias)
    return total.astype(x.dtype, copy=False)


@onnx_op("SkipLayerNormalization", since=1, domain=MS)
def skip_layer_normalization(ctx, input, skip, gamma, beta=None, bias=None, *, epsilon):
    total = _skip_sum(input, skip, bias)
    y, mean, inv_std = N.layer_norm(total, gamma, beta, -1, epsilon, _STAT_DTYPE)
    return y, mean, inv_std, total


@onnx_op("SkipSimplifiedLayerNormalization", since=1, domain=MS)
def skip_simplified_layer_normalization(ctx, input, skip, gamma, bias=None, *, epsilon):
    total = _skip_sum(input, skip, bias)
    y, inv_std = N.rms_norm_with_stats(total, gamma, -1, epsilon, _STAT_DTYPE)
    # ORT declares a mean output but an RMS norm has none; it leaves it unwritten.
    return y, None, inv_std, total


@onnx_op("EmbedLayerNormalization", since=1, domain=MS)
def embed_layer_normalization(
    ctx,
    input_ids,
    segment_ids,
    word_embedding,
    position_embedding,
    segment_embedding=None,
    gamma=None,
    beta=None,
    mask=None,
    position_ids=None,
    *,
    epsilon,
    mask_index_type,
):
    ids = np.asarray(input_ids)
    if ids.ndim != 2:
        raise ExecutionError(f"input_ids must be 2-D (batch, sequence), got shape {list(ids.shape)}")
    batch, seq = ids.shape
    positions = np.arange(seq)[None, :] if position_ids is None else np.asarray(position_ids)
    total = np.asarray(word_embedding)[ids] + np.asarray(position_embedding)[np.broadcast_to(positions, ids.shape)]
    if segment_ids is not None and segment_embedding is not None:
        total = total + np.asarray(segment_embedding)[np.asarray(segment_ids)]
    total = total.astype(np.asarray(word_embedding).dtype, copy=False)
    y, _, _ = N.layer_norm(total, gamma, beta, -1, epsilon, _STAT_DTYPE)
    if mask is not None:
        mask_index = np.asarray(mask).sum(axis=1).astype(np.int32)
    else:
        mask_index = np.zeros(batch, np.int32)
    return y, mask_index, total


# ---------------------------------------------------------------- ORT's ai.onnx-domain ops


@onnx_op("LayerNormalization", since=1)
def layer_normalization_1(ctx, x, scale, b=None, *, axis, epsilon, stash_type):
    # ORT's own version before ONNX defined LayerNormalization-17 with the same meaning.
    return N.layer_norm(x, scale, b, axis, epsilon, onnx_dtype(stash_type))


@onnx_op("SimplifiedLayerNormalization", since=1)
def simplified_layer_normalization_1(ctx, x, scale, *, axis, epsilon, stash_type):
    return N.rms_norm_with_stats(x, scale, axis, epsilon, onnx_dtype(stash_type))


# ---------------------------------------------------------------- branch-wise and gated RMS norms


def _rms(x, epsilon):
    """``x / sqrt(mean(x ** 2) + eps)`` over the last axis, in float32 or wider."""
    xs = upcast(x).astype(np.result_type(np.float32, upcast(x).dtype))
    return xs / np.sqrt((xs * xs).mean(axis=-1, keepdims=True) + np.float32(epsilon))


@onnx_op("BranchwiseRMSNorm", since=1, domain=MS)
def branchwise_rms_norm(ctx, x, scale=None, *, epsilon, num_branches):
    # Each of the C branches (..., C, H) is normalized on its own; a flattened (..., C * H) input names C.
    x = np.asarray(x)
    grouped = x.reshape(x.shape[:-1] + (num_branches, -1)) if num_branches else x
    y = _rms(grouped, epsilon)
    if scale is not None:
        y = y * upcast(scale).reshape(grouped.shape[-2:] if np.size(scale) != grouped.shape[-1] else (-1,))
    return downcast(y.reshape(x.shape), x.dtype)


_GATES = {"silu": lambda z: z * E.sigmoid(z), "swish": lambda z: z * E.sigmoid(z), "sigmoid": E.sigmoid}


@onnx_op("GatedRMSNorm", since=1, domain=MS)
def gated_rms_norm(ctx, x, scale, gate, *, activation, epsilon):
    # Normalized over each contiguous group of len(scale) elements of the last axis; all in float32.
    x = np.asarray(x)
    if activation not in _GATES:
        raise ExecutionError(f"unknown GatedRMSNorm activation {activation!r}; expected one of {sorted(_GATES)}")
    group = np.size(scale)
    y = _rms(x.reshape(x.shape[:-1] + (-1, group)), epsilon) * upcast(scale).astype(np.float32)
    gate = upcast(gate).astype(np.float32).reshape(y.shape)
    return downcast(y * _GATES[activation](gate), x.dtype).reshape(x.shape)


@onnx_op("GatedAdd", since=1, domain=MS)
def gated_add(ctx, x, y, gate, gate_weight=None):
    if gate_weight is not None:
        raise ExecutionError(
            "GatedAdd with gate_weight (projected mode) is implemented by onnxruntime only for "
            "CUDA; opconv has no kernel for it"
        )
    x = np.asarray(x)
    # the product is rounded to the input type before the add, as separate Mul and Add nodes would
    scaled = downcast(upcast(y) * upcast(gate), x.dtype)
    return downcast(upcast(x) + upcast(scaled), x.dtype)


@onnx_op("EngramGate", since=1, domain=MS)
def engram_gate(ctx, key, query, value, key_norm_scale, query_norm_scale, conv_norm_scale=None, *, epsilon):
    """``gate * value`` per hyper-connection, ``gate = sigmoid(sign(d) sqrt(max(|d|, 1e-6)))`` with
    ``d = sum(RMSNorm(key) * RMSNorm(query)) / sqrt(hidden)``; optionally RMS-normalized again."""
    dtype = np.asarray(value).dtype
    hidden = np.shape(key)[-1]
    k = _rms(key, epsilon) * upcast(key_norm_scale).astype(np.float32)
    q = _rms(query, epsilon) * upcast(query_norm_scale).astype(np.float32)
    dot = (k * q).sum(axis=-1, keepdims=True) / np.float32(np.sqrt(hidden))
    gate = E.sigmoid(np.sign(dot) * np.sqrt(np.maximum(np.abs(dot), np.float32(1e-6))))
    gated = gate * upcast(value).astype(np.float32)[..., None, :]  # (B, S, hc, H)
    normed = None
    if ctx.output_used(1):
        if conv_norm_scale is None:
            raise ExecutionError("EngramGate's gated_value_normed output needs conv_norm_scale")
        normed = downcast(_rms(gated, epsilon) * upcast(conv_norm_scale).astype(np.float32), dtype)
    return downcast(gated, dtype), normed
