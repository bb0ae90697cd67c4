"""Operators ONNX Runtime still registers in the ai.onnx domain although ONNX removed (or never had) them:
Affine, Crop, DynamicSlice, ImageScaler, MeanVarianceNormalization-1, MemcpyFromHost/ToHost,
ParametricSoftplus, Scale, ScaledTanh, ThresholdedRelu-1.

Their schemas are ONNX Runtime's (opconv/schemas/onnx_contrib.json).  Crop takes ``border``
``(left, top, right, bottom)`` and optionally ``scale`` ``(height, width)``, the size kept from
the top-left corner; MeanVarianceNormalization-1, as onnxruntime runs it, normalizes each
channel over (N, H, W), or everything over (N, C, H, W) with ``across_channels``.  The Memcpy ops move tensors between
devices: identities here.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise as E
from ....kernels import norm as N
from ....kernels._common import downcast, upcast
from ..executor import onnx_op
from .shape import slice_10


@onnx_op("Affine", since=1)
def affine_1(ctx, x, *, alpha, beta):
    return E.affine(x, alpha, beta)


@onnx_op("ScaledTanh", since=1)
def scaled_tanh_1(ctx, input, *, alpha, beta):
    return E.scaled_tanh(input, 1.0 if alpha is None else alpha, 1.0 if beta is None else beta)


@onnx_op("ParametricSoftplus", since=1)
def parametric_softplus_1(ctx, x, *, alpha, beta):
    x = np.asarray(x)
    alpha, beta = 1.0 if alpha is None else alpha, 1.0 if beta is None else beta
    return downcast(alpha * E.softplus(beta * upcast(x)), x.dtype)


@onnx_op("Scale", since=1)
def scale_1(ctx, input, *, scale):
    x = np.asarray(input)
    return downcast(upcast(x) * scale, x.dtype)


@onnx_op("ThresholdedRelu", since=1)
def thresholded_relu_1(ctx, x, *, alpha):
    return E.thresholded_relu(x, alpha)


@onnx_op("ImageScaler", since=1)
def image_scaler_1(ctx, input, *, bias, scale):
    x = np.asarray(input)
    shift = np.zeros(x.shape[1]) if bias is None else np.asarray(bias, np.float64)
    return downcast(upcast(x) * scale + shift.reshape([-1] + [1] * (x.ndim - 2)), x.dtype)


@onnx_op("Crop", since=1)
def crop_1(ctx, input, *, border, scale):
    x = np.asarray(input)
    if x.ndim != 4 or border is None or len(border) != 4:
        raise ExecutionError("Crop needs a 4-D input and a border of 4 values (left, top, right, bottom)")
    left, top, right, bottom = (int(v) for v in border)
    height, width = x.shape[2:]
    if scale:
        bottom_edge, right_edge = top + int(scale[0]), left + int(scale[1])
    else:
        bottom_edge, right_edge = height - bottom, width - right
    if not (0 <= top < bottom_edge <= height and 0 <= left < right_edge <= width):
        raise ExecutionError(f"Crop border {list(border)} / scale {scale} does not fit an image of {height}x{width}")
    return x[:, :, top:bottom_edge, left:right_edge]


@onnx_op("DynamicSlice", since=1)
def dynamic_slice_1(ctx, data, starts, ends, axes=None):
    return slice_10(ctx, data, starts, ends, axes)


@onnx_op("MeanVarianceNormalization", since=1)
def mean_variance_normalization_1(ctx, input, *, across_channels, normalize_variance):
    # onnxruntime's kernel takes the statistics over the batch too (its own reading of version 1)
    axes = (0, 1, 2, 3) if across_channels else (0, 2, 3)
    return N.mean_variance_normalization(input, axes, bool(normalize_variance))


@onnx_op("MemcpyFromHost", since=1)
@onnx_op("MemcpyToHost", since=1)
def memcpy(ctx, x):
    return x
