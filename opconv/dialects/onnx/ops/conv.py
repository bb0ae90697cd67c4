"""Convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv.

ONNX conventions handled here, numerics in :mod:`opconv.kernels.conv`:
``pads`` lists all begins then all ends; ``kernel_shape`` defaults to the
weight's spatial shape; ``auto_pad`` (``SAME_UPPER``/``SAME_LOWER``/``VALID``)
overrides ``pads``.  Every version of these ops means the same (later
versions only widened types or clarified text), so each op has one function.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import conv as K
from ..executor import onnx_op


def conv_pads(x_shape, kernel, strides, dilations, pads, auto_pad: str) -> tuple[list[int], list[int]]:
    """Explicit pads of a Conv/pool node: from ``auto_pad`` when it is set, else from ``pads``."""
    n = len(kernel)
    if auto_pad in (None, "", "NOTSET"):
        return K.split_pads(pads, n)
    return K.auto_pad(x_shape[2:], kernel, strides, dilations, auto_pad)


def _kernel_shape(w, kernel_shape):
    w_kernel = tuple((w.shape if isinstance(w, K.ConvWeights) else np.shape(w))[2:])
    shape = tuple(int(k) for k in (kernel_shape if kernel_shape is not None else w_kernel))
    if shape != w_kernel:
        raise ExecutionError(f"kernel_shape {list(shape)} does not match the weight's {list(w_kernel)}")
    return shape


@onnx_op("Conv", since=[1, 11, 22])
def conv_1(ctx, x, w, b=None, *, auto_pad, dilations, group, kernel_shape, pads, strides):
    """``w`` may also be weights the session packed with their bias (``K.ConvWeights``, see fusion.py)."""
    kernel = _kernel_shape(w, kernel_shape)
    begin, end = conv_pads(x.shape, kernel, strides, dilations, pads, auto_pad)
    return K.conv(x, w, b, strides, begin, end, dilations, group)


@onnx_op("ConvTranspose", since=[1, 11, 22])
def conv_transpose_1(
    ctx, x, w, b=None, *, auto_pad, dilations, group, kernel_shape, output_padding, output_shape, pads, strides
):
    kernel = _kernel_shape(w, kernel_shape)
    n = len(kernel)
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # Pads are derived from the requested output size (input * stride for SAME_*); the odd
        # element goes to the end only for SAME_UPPER.
        size = None if output_shape is None else [int(s) for s in output_shape][-n:]
        begin, end = K.conv_transpose_pads(
            x.shape[2:], kernel, strides, dilations, output_padding, size, extra_at_end=auto_pad == "SAME_UPPER"
        )
    elif auto_pad == "VALID":
        begin, end = [0] * n, [0] * n
    else:
        begin, end = K.split_pads(pads, n)
    return K.conv_transpose(x, w, b, strides, begin, end, dilations, group, output_padding)


@onnx_op("ConvInteger", since=10)
def conv_integer_10(
    ctx, x, w, x_zero_point=None, w_zero_point=None, *, auto_pad, dilations, group, kernel_shape, pads, strides
):
    kernel = _kernel_shape(w, kernel_shape)
    begin, end = conv_pads(x.shape, kernel, strides, dilations, pads, auto_pad)
    return K.conv_integer(
        x,
        w,
        0 if x_zero_point is None else x_zero_point,
        0 if w_zero_point is None else w_zero_point,
        strides,
        begin,
        end,
        dilations,
        group,
    )


@onnx_op("QLinearConv", since=10)
def qlinear_conv_10(
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
    dilations,
    group,
    kernel_shape,
    pads,
    strides,
):
    kernel = _kernel_shape(w, kernel_shape)
    begin, end = conv_pads(x.shape, kernel, strides, dilations, pads, auto_pad)
    return K.qlinear_conv(
        x,
        x_scale,
        x_zero_point,
        w,
        w_scale,
        w_zero_point,
        y_scale,
        y_zero_point,
        b,
        strides,
        begin,
        end,
        dilations,
        group,
    )


@onnx_op("DeformConv", since=[19, 22])
def deform_conv_19(
    ctx, x, w, offset, b=None, mask=None, *, dilations, group, kernel_shape, offset_group, pads, strides
):
    kernel = _kernel_shape(w, kernel_shape)
    begin, end = K.split_pads(pads, len(kernel))
    return K.deform_conv(x, w, offset, b, mask, strides, begin, end, dilations, group, offset_group)
