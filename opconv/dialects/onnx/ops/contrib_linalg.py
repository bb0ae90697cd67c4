"""ONNX Runtime's fused products (com.microsoft): FusedMatMul, TransposeMatMul, FusedGemm, FusedConv.

* FusedMatMul is ``alpha * op(A) @ op(B)``: ``transA``/``transB`` swap the last two dims;
  ``transBatchA``/``transBatchB`` say the operand is stored ``(M, batch..., K)`` -- its first
  dim moves behind the batch dims (before ``trans*`` applies).  TransposeMatMul is the same
  op without the batch transposition.
* FusedGemm is Gemm then the named activation (``activation_alpha/beta/gamma`` its
  parameters); FusedConv is ``activation(Conv(X, W, B) + Z)`` with ``activation_params``.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import linalg as L
from ..executor import onnx_op
from .contrib_activation import fused_activation
from .conv import conv_1

MS = "com.microsoft"


def _operand(x, transpose: bool, transpose_batch: bool, name: str):
    x = np.asarray(x)
    if x.ndim < 2:
        if transpose or transpose_batch:
            raise ExecutionError(f"{name} of shape {list(x.shape)} cannot be transposed")
        return x
    if transpose_batch and x.ndim > 2:
        x = np.moveaxis(x, 0, -2)
    return np.swapaxes(x, -1, -2) if transpose else x


def _scaled_matmul(a, b, alpha):
    y = L.matmul(a, b)
    return y if alpha == 1 else (y * np.asarray(alpha, y.dtype)).astype(y.dtype, copy=False)


@onnx_op("FusedMatMul", since=1, domain=MS)
def fused_matmul(ctx, a, b, *, alpha, transA, transB, transBatchA, transBatchB):
    return _scaled_matmul(_operand(a, transA, transBatchA, "A"), _operand(b, transB, transBatchB, "B"), alpha)


@onnx_op("TransposeMatMul", since=1, domain=MS)
def transpose_matmul(ctx, a, b, *, alpha, transA, transB):
    return _scaled_matmul(_operand(a, transA, False, "A"), _operand(b, transB, False, "B"), alpha)


@onnx_op("FusedGemm", since=1, domain=MS)
def fused_gemm(ctx, a, b, c=None, *, activation, activation_alpha, activation_beta, activation_gamma, alpha, beta,
               transA, transB):
    params = [p for p in (activation_alpha, activation_beta, activation_gamma) if p is not None]
    y = L.gemm(a, b, c, alpha, beta, bool(transA), bool(transB))
    return fused_activation(activation, params)(y)


@onnx_op("FusedConv", since=1, domain=MS)
def fused_conv(ctx, x, w, b=None, z=None, *, activation, activation_params, auto_pad, dilations, group,
               kernel_shape, pads, strides):
    y = conv_1(ctx, x, w, b, auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
               pads=pads, strides=strides)
    if z is not None:
        y = (y + np.asarray(z)).astype(y.dtype, copy=False)
    return fused_activation(activation, activation_params or ())(y)
