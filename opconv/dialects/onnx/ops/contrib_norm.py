"""ONNX Runtime's normalization operators: SkipLayerNormalization, SkipSimplifiedLayerNormalization,
EmbedLayerNormalization (com.microsoft), and its ai.onnx-domain LayerNormalization-1 and
SimplifiedLayerNormalization-1.

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
from ....kernels import norm as N
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
def embed_layer_normalization(ctx, input_ids, segment_ids, word_embedding, position_embedding,
                              segment_embedding=None, gamma=None, beta=None, mask=None, position_ids=None, *,
                              epsilon, mask_index_type):
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
