"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, MatMulInteger.

The element-wise math is :func:`opconv.kernels.elementwise.quantize` / ``dequantize``; this module
adds ONNX's conventions for the parameters:

* a scale (and zero point) is per tensor (a scalar or one value), per axis (1-D, one value per
  index of ``axis``, opset 13+), or blocked (opset 21+, ``block_size > 0``: the same rank as ``x``,
  each value covering ``block_size`` consecutive indices of ``axis``).  :func:`_along` expands them
  to broadcast against ``x``;
* QuantizeLinear's output type is ``output_dtype`` (opset 21+) if set, else the zero point's type,
  else uint8; from opset 23 the division runs in ``precision`` if set, else the scale's type;
  ``saturate`` (opset 19+) applies to float8 targets;
* DequantizeLinear's output type is ``output_dtype`` (opset 23+) if set, else the scale's type.

Versions not named here only added types (float8 at 19, int4 at 21, float4 at 23, float8e8m0 scales
at 24, int2 at 25, float6 at 28) and share a function.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise, linalg, quant
from ....kernels._common import normalize_axis
from ..executor import onnx_dtype, onnx_op


def _along(param, x: np.ndarray, axis: int = 1, block_size: int = 0):
    """A scale or zero point shaped to broadcast against ``x`` (see the module docstring)."""
    if param is None:
        return None
    param = np.asarray(param)
    if block_size > 0:
        axis = normalize_axis(axis, x.ndim)
        if param.ndim != x.ndim:
            raise ExecutionError(
                f"blocked quantization needs a parameter of rank {x.ndim}, got shape {list(param.shape)}"
            )
        blocks = -(-x.shape[axis] // block_size)
        if param.shape[axis] != blocks:
            raise ExecutionError(
                f"{x.shape[axis]} values in blocks of {block_size} need {blocks} parameters "
                f"along axis {axis}, got {param.shape[axis]}"
            )
        return np.repeat(param, block_size, axis=axis).take(np.arange(x.shape[axis]), axis=axis)
    if param.size == 1 and param.ndim <= 1:
        return param.reshape(())
    if param.ndim != 1:
        raise ExecutionError(f"a per-axis parameter must be 1-D, got shape {list(param.shape)}")
    axis = normalize_axis(axis, x.ndim)
    if param.size != x.shape[axis]:
        raise ExecutionError(f"per-axis parameter has {param.size} values, axis {axis} of x has {x.shape[axis]}")
    return param.reshape([-1 if d == axis else 1 for d in range(x.ndim)])


def _output_type(zero_point, output_dtype: int = 0) -> np.dtype:
    """QuantizeLinear's output type: ``output_dtype`` if set, else the zero point's type, else uint8."""
    if output_dtype:
        target = onnx_dtype(output_dtype)
        if zero_point is not None and np.asarray(zero_point).dtype != target:
            raise ExecutionError(
                f"output_dtype {target} differs from the zero point's type {np.asarray(zero_point).dtype}"
            )
        return target
    return np.asarray(zero_point).dtype if zero_point is not None else np.dtype(np.uint8)


def quantize_along(x, scale, zero_point, *, axis=1, block_size=0, output_dtype=0, saturate=1, precision=0):
    x = np.asarray(x)
    return elementwise.quantize(
        x,
        _along(scale, x, axis, block_size),
        _along(zero_point, x, axis, block_size),
        _output_type(zero_point, output_dtype),
        bool(saturate),
        onnx_dtype(precision) if precision else None,
    )


# ---------------------------------------------------------------- QuantizeLinear


@onnx_op("QuantizeLinear", since=10)
def quantize_linear_10(ctx, x, y_scale, y_zero_point=None):
    if np.asarray(y_scale).size != 1:
        raise ExecutionError("QuantizeLinear-10 takes one scale (per-tensor quantization)")
    return quantize_along(x, y_scale, y_zero_point)


@onnx_op("QuantizeLinear", since=13)
def quantize_linear_13(ctx, x, y_scale, y_zero_point=None, *, axis):
    return quantize_along(x, y_scale, y_zero_point, axis=axis)


@onnx_op("QuantizeLinear", since=19)
def quantize_linear_19(ctx, x, y_scale, y_zero_point=None, *, axis, saturate):
    return quantize_along(x, y_scale, y_zero_point, axis=axis, saturate=saturate)


@onnx_op("QuantizeLinear", since=21)
def quantize_linear_21(ctx, x, y_scale, y_zero_point=None, *, axis, block_size, output_dtype, saturate):
    return quantize_along(
        x, y_scale, y_zero_point, axis=axis, block_size=block_size, output_dtype=output_dtype, saturate=saturate
    )


@onnx_op("QuantizeLinear", since=[23, 24, 25, 28])
def quantize_linear_23(ctx, x, y_scale, y_zero_point=None, *, axis, block_size, output_dtype, precision, saturate):
    return quantize_along(
        x,
        y_scale,
        y_zero_point,
        axis=axis,
        block_size=block_size,
        output_dtype=output_dtype,
        saturate=saturate,
        precision=precision,
    )


# ---------------------------------------------------------------- DequantizeLinear


def dequantize_along(x, scale, zero_point, *, axis=1, block_size=0, output_dtype=0):
    x = np.asarray(x)
    return elementwise.dequantize(
        x,
        _along(scale, x, axis, block_size),
        _along(zero_point, x, axis, block_size),
        onnx_dtype(output_dtype) if output_dtype else None,
    )


@onnx_op("DequantizeLinear", since=10)
def dequantize_linear_10(ctx, x, x_scale, x_zero_point=None):
    if np.asarray(x_scale).size != 1:
        raise ExecutionError("DequantizeLinear-10 takes one scale (per-tensor quantization)")
    return dequantize_along(x, x_scale, x_zero_point)


@onnx_op("DequantizeLinear", since=[13, 19])
def dequantize_linear_13(ctx, x, x_scale, x_zero_point=None, *, axis):
    return dequantize_along(x, x_scale, x_zero_point, axis=axis)


@onnx_op("DequantizeLinear", since=21)
def dequantize_linear_21(ctx, x, x_scale, x_zero_point=None, *, axis, block_size):
    return dequantize_along(x, x_scale, x_zero_point, axis=axis, block_size=block_size)


@onnx_op("DequantizeLinear", since=[23, 24, 25, 28])
def dequantize_linear_23(ctx, x, x_scale, x_zero_point=None, *, axis, block_size, output_dtype):
    return dequantize_along(x, x_scale, x_zero_point, axis=axis, block_size=block_size, output_dtype=output_dtype)


# ---------------------------------------------------------------- DynamicQuantizeLinear


@onnx_op("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear_11(ctx, x):
    return quant.dynamic_quantize(x)


# ---------------------------------------------------------------- integer matrix products


def _per_row(param):
    """A scale or zero point of A: one value, or one per row (the second-to-last dim)."""
    param = np.asarray(param)
    return param.reshape(-1, 1) if param.ndim == 1 and param.size > 1 else param


@onnx_op("MatMulInteger", since=10)
def matmul_integer_10(ctx, a, b, a_zero_point=None, b_zero_point=None):
    return linalg.matmul_integer(
        a, b, 0 if a_zero_point is None else a_zero_point, 0 if b_zero_point is None else b_zero_point
    )


@onnx_op("QLinearMatMul", since=[10, 21])
def qlinear_matmul_10(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    """Dequantize A (per tensor or per row) and B (per tensor or per column), multiply, requantize.

    QLinearMatMul-21 added float8 operands and float16/bfloat16 scales: the same formula.
    """
    real_a = elementwise.dequantize(a, _per_row(a_scale), _per_row(a_zero_point), np.float32)
    real_b = elementwise.dequantize(b, b_scale, b_zero_point, np.float32)
    return elementwise.quantize(linalg.matmul(real_a, real_b), y_scale, y_zero_point, np.asarray(y_zero_point).dtype)
