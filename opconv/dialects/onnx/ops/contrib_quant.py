"""onnxruntime's quantized element-wise, pooling and convolution ops (domain ``com.microsoft``).

QuantizeLinear / DequantizeLinear are ONNX's opset-13 ops under onnxruntime's domain (16-bit and 4-bit
types added).  The QLinear ops take each operand as (tensor, scale, zero point) and quantize their result with
the output's scale and zero point; onnxruntime defines them as the float op on dequantized operands (for
8-bit inputs it tabulates the op for all 256 values), which :func:`opconv.kernels.quant.in_float` computes.
QLinearConv and QLinearGlobalAveragePool accumulate exactly in integers and requantize once.
``channels_last`` (NHWC) layouts are transposed to NCHW and back.

Quantized matrix products (MatMulNBits, QGemm, ...) are in ``contrib_quant_matmul.py``.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise, norm, quant
from ....kernels import pool as P
from ..executor import onnx_op
from .conv import qlinear_conv_10
from .pool import pool_window
from .quantize import dequantize_along, quantize_along

MS = "com.microsoft"


@onnx_op("QuantizeLinear", since=1, domain=MS)
def ms_quantize_linear_1(ctx, x, y_scale, y_zero_point=None, *, axis):
    return quantize_along(x, y_scale, y_zero_point, axis=1 if axis is None else axis)


@onnx_op("DequantizeLinear", since=1, domain=MS)
def ms_dequantize_linear_1(ctx, x, x_scale, x_zero_point=None, *, axis):
    return dequantize_along(x, x_scale, x_zero_point, axis=1 if axis is None else axis)


# ---------------------------------------------------------------- element-wise


@onnx_op("QLinearAdd", since=1, domain=MS)
def qlinear_add_1(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale, c_zero_point=None):
    return quant.in_float(
        np.add, (a, a_scale, a_zero_point), (b, b_scale, b_zero_point), out_scale=c_scale, out_zero_point=c_zero_point
    )


@onnx_op("QLinearMul", since=1, domain=MS)
def qlinear_mul_1(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale, c_zero_point=None):
    return quant.in_float(
        np.multiply,
        (a, a_scale, a_zero_point),
        (b, b_scale, b_zero_point),
        out_scale=c_scale,
        out_zero_point=c_zero_point,
    )


@onnx_op("QLinearSigmoid", since=1, domain=MS)
def qlinear_sigmoid_1(ctx, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None):
    return quant.in_float(
        elementwise.sigmoid, (x, x_scale, x_zero_point), out_scale=y_scale, out_zero_point=y_zero_point
    )


@onnx_op("QLinearLeakyRelu", since=1, domain=MS)
def qlinear_leaky_relu_1(ctx, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None, *, alpha):
    def leaky_relu(v):
        return np.where(v >= 0, v, v * np.float32(alpha))

    return quant.in_float(leaky_relu, (x, x_scale, x_zero_point), out_scale=y_scale, out_zero_point=y_zero_point)


@onnx_op("QLinearWhere", since=1, domain=MS)
def qlinear_where_1(ctx, condition, x, x_scale, x_zero_point, y, y_scale, y_zero_point, z_scale, z_zero_point):
    def where(a, b):
        return np.where(np.asarray(condition, bool), a, b)

    return quant.in_float(
        where, (x, x_scale, x_zero_point), (y, y_scale, y_zero_point), out_scale=z_scale, out_zero_point=z_zero_point
    )


@onnx_op("QLinearConcat", since=1, domain=MS)
def qlinear_concat_1(ctx, y_scale, y_zero_point, *inputs, axis):
    if len(inputs) % 3:
        raise ExecutionError(
            f"QLinearConcat takes (tensor, scale, zero point) triples after Y_scale and "
            f"Y_zero_point, got {len(inputs)} more inputs"
        )
    triples = [tuple(inputs[i : i + 3]) for i in range(0, len(inputs), 3)]

    def concat(*parts):
        return np.concatenate(parts, axis=axis)

    return quant.in_float(concat, *triples, out_scale=y_scale, out_zero_point=y_zero_point)


@onnx_op("QLinearSoftmax", since=1, domain=MS)
def qlinear_softmax_1(ctx, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None, *, axis, opset):
    """``opset`` is the ONNX Softmax version whose semantics apply: before 13, over all dims from ``axis``."""
    if opset is None:
        raise ExecutionError("QLinearSoftmax needs its 'opset' attribute (the Softmax version it follows)")

    def softmax(v):
        if opset >= 13:
            return norm.softmax(v, axis)
        flat = v.reshape(int(np.prod(v.shape[: axis % v.ndim])), -1)
        return norm.softmax(flat, -1).reshape(v.shape)

    return quant.in_float(
        softmax,
        (x, x_scale, x_zero_point),
        out_scale=y_scale,
        out_zero_point=y_zero_point,
        out_dtype=np.asarray(x).dtype,
    )


# ---------------------------------------------------------------- pooling and convolution


def _channels_first(x, channels_last):
    return np.moveaxis(np.asarray(x), -1, 1) if channels_last else np.asarray(x)


def _restore_layout(y, channels_last):
    return np.moveaxis(y, 1, -1) if channels_last else y


@onnx_op("QLinearAveragePool", since=1, domain=MS)
def qlinear_average_pool_1(
    ctx,
    x,
    x_scale,
    x_zero_point=None,
    y_scale=None,
    y_zero_point=None,
    *,
    auto_pad,
    ceil_mode,
    channels_last,
    count_include_pad,
    kernel_shape,
    pads,
    strides,
):
    x = _channels_first(x, channels_last)
    kernel, begin, end = pool_window(x, kernel_shape, strides, None, pads, auto_pad)

    def average(v):
        return P.pool(v, "avg", kernel, strides, begin, end, None, bool(ceil_mode), bool(count_include_pad))

    y = quant.in_float(
        average, (x, x_scale, x_zero_point), out_scale=y_scale, out_zero_point=y_zero_point, out_dtype=x.dtype
    )
    return _restore_layout(y, channels_last)


@onnx_op("QLinearGlobalAveragePool", since=1, domain=MS)
def qlinear_global_average_pool_1(ctx, x, x_scale, x_zero_point, y_scale, y_zero_point, *, channels_last):
    """The exact integer sum of each channel, requantized by ``x_scale / (y_scale * count)``."""
    x = _channels_first(x, channels_last)
    spatial = tuple(range(2, x.ndim))
    count = int(np.prod(x.shape[2:]))
    centred_sum = (x.astype(np.int64) - np.int64(x_zero_point)).sum(axis=spatial, keepdims=True)
    multiplier = np.float32(x_scale) / (np.float32(y_scale) * np.float32(count))
    y = quant.requantize(centred_sum, multiplier, np.asarray(y_zero_point, dtype=x.dtype))
    return _restore_layout(y, channels_last)


@onnx_op("QLinearConv", since=1, domain=MS)
def ms_qlinear_conv_1(
    ctx,
    x,
    x_scale,
    x_zero_point,
    w,
    w_scale,
    w_zero_point,
    y_scale,
    y_zero_point,
    b=None,
    *,
    auto_pad,
    channels_last,
    dilations,
    group,
    kernel_shape,
    pads,
    strides,
):
    """ONNX's QLinearConv, also in NHWC (``channels_last``; the weight stays OIHW)."""
    y = qlinear_conv_10(
        ctx,
        _channels_first(x, channels_last),
        x_scale,
        x_zero_point,
        w,
        w_scale,
        w_zero_point,
        y_scale,
        y_zero_point,
        b,
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        kernel_shape=kernel_shape,
        pads=pads,
        strides=strides,
    )
    return _restore_layout(y, channels_last)
