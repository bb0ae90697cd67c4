"""SoftMax, MVN, NormalizeL2, BatchNormInference, GRN, LRN."""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import norm
from ....kernels._common import downcast, upcast
from ..executor import ov_op
from ._common import axes_of


@ov_op("SoftMax")
def softmax(ctx, x, *, axis=1):
    return norm.softmax(x, axis)


@ov_op("MVN")
def mvn(ctx, x, *, across_channels=False, normalize_variance=False, eps, reduction_axes=None):
    if reduction_axes:
        axes = [a % x.ndim for a in reduction_axes]
    else:
        # Statistics per sample (and per channel unless across_channels): over the spatial dims.
        axes = list(range(1 if across_channels else 2, x.ndim))
    # The runtime adds eps to the variance, inside the square root.
    return norm.mean_variance_normalization(x, axes, normalize_variance, eps, eps_inside_sqrt=True)


_EPS_MODES = {"add": np.add, "max": np.maximum}


@ov_op("NormalizeL2")
def normalize_l2(ctx, x, axes, *, eps, eps_mode):
    combine = _EPS_MODES.get(str(eps_mode).lower())
    if combine is None:
        raise ExecutionError(f"unknown eps_mode {eps_mode!r}; expected 'add' or 'max'")
    xc = upcast(x)
    square_sum = (xc * xc).sum(axis=tuple(axes_of(axes, x.ndim)), keepdims=True)
    return downcast(xc / np.sqrt(combine(square_sum, eps)), x.dtype)


@ov_op("BatchNormInference")
def batch_norm_inference(ctx, gamma, beta, x, mean, variance, *, epsilon):
    # opset1's input order: the data comes third.
    return norm.batch_norm(x, gamma, beta, mean, variance, epsilon)


@ov_op("GRN")
def grn(ctx, x, *, bias):
    xc = upcast(x)
    return downcast(xc / np.sqrt((xc * xc).sum(axis=1, keepdims=True) + bias), x.dtype)


@ov_op("LRN")
def lrn(ctx, x, axes, *, alpha, beta, bias, size):
    # OpenVINO's window is symmetric ((size - 1) // 2 on each side), unlike ONNX's for an even size.
    return norm.lrn_symmetric(x, int(size), alpha, beta, bias, axes_of(axes, x.ndim))
