"""Normalizations: BatchNormInference/Training/Grad, LayerNorm, GroupNorm, InstanceNorm, Softmax.

The batch-norm family takes its channel dim from ``feature_index`` (XLA);
GroupNorm and InstanceNorm have channels on dim 1 (ONNX layouts).  Batch
statistics are population variances.  LayerNorm's optional outputs are the
mean and ``1 / sqrt(var + eps)``, keeping the normalized dims as size 1.
Numerics: :mod:`opconv.kernels.norm`.
"""

from __future__ import annotations

import numpy as np

from ....kernels import norm as K
from ....kernels._common import downcast, normalize_axis, upcast
from ..executor import hlo_op


@hlo_op("BatchNormInference")
def batch_norm_inference(ctx, x, scale, bias, mean, variance, *, epsilon, feature_index):
    return K.batch_norm(x, scale, bias, mean, variance, epsilon, feature_index)


@hlo_op("BatchNormTraining")
def batch_norm_training(ctx, x, scale, bias, *, epsilon, feature_index):
    axis = normalize_axis(feature_index, np.ndim(x))
    others = tuple(d for d in range(np.ndim(x)) if d != axis)
    xc = upcast(x)
    mean, variance = xc.mean(axis=others), xc.var(axis=others)
    y = K.batch_norm(x, scale, bias, mean, variance, epsilon, axis)
    return y, downcast(mean, x.dtype), downcast(variance, x.dtype)


@hlo_op("BatchNormGrad")
def batch_norm_grad(ctx, x, scale, mean, variance, grad_output, *, epsilon, feature_index):
    return K.batch_norm_grad(x, scale, mean, variance, grad_output, epsilon, feature_index)


@hlo_op("LayerNorm")
def layer_norm(ctx, x, scale, bias, *, axis, epsilon):
    return K.layer_norm(x, scale, bias, axis, epsilon, stash_dtype=x.dtype)


@hlo_op("GroupNorm")
def group_norm(ctx, x, scale, bias, *, num_groups, epsilon):
    return K.group_norm(x, scale, bias, num_groups, epsilon)


@hlo_op("InstanceNorm")
def instance_norm(ctx, x, scale, bias, *, epsilon):
    return K.instance_norm(x, scale, bias, epsilon)


@hlo_op("Softmax")
def softmax(ctx, x, *, axis, accurate, logarithmic, epsilon):
    # The specification's formula: exp(x - max if accurate) / max(sum, epsilon), optionally its log.
    xc = upcast(x)
    axis = normalize_axis(axis, xc.ndim)
    shifted = xc - xc.max(axis=axis, keepdims=True) if accurate else xc
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(shifted)
        denominator = np.maximum(e.sum(axis=axis, keepdims=True), np.asarray(epsilon, xc.dtype))
        y = shifted - np.log(denominator) if logarithmic else e / denominator
    return downcast(y, x.dtype)
