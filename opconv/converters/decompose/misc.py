"""Small operators of onnxruntime with a standard counterpart or a one-line formula: com.microsoft Range, Trilu,
GatherND, ExpandDims, MatMulInteger16, and its ai.onnx-domain Affine, ScaledTanh, ParametricSoftplus, Scale,
ImageScaler, DynamicSlice, ThresholdedRelu-1 (ONNX's experimental operators, which onnxruntime keeps)."""

from __future__ import annotations

import numpy as np

from .registry import Emitter, Refusal, decomposes, standard


@decomposes("Range")
def range_ms(e: Emitter):
    e.require_opset(11, "Range")
    start, limit, delta = e.input(0), e.input(1), e.input(2)
    if delta is None:
        delta = e.scalar(1, e.dtype(start))
    return [e("Range", start, limit, delta)]


@decomposes("Trilu")
def trilu_ms(e: Emitter):
    e.require_opset(14, "Trilu")
    return [e("Trilu", *[v for v in (e.input(0), e.input(1)) if v is not None], upper=int(e.attr("upper", 1)))]


@decomposes("GatherND")
def gather_nd_ms(e: Emitter):
    e.require_opset(11, "GatherND")
    return [e("GatherND", e.input(0), e.cast(e.input(1), "int64"))]


@decomposes("ExpandDims")
def expand_dims(e: Emitter):
    axis = e.input(1)
    if axis.const is None:
        raise Refusal("the axis must be a constant")
    return [e.unsqueeze(e.input(0), [int(axis.const.numpy().reshape(-1)[0])])]


@decomposes("MatMulInteger16")
def matmul_integer_16(e: Emitter):
    # int16 x int16 products summed in int32, as onnxruntime's kernel does
    return [e("MatMul", e.cast(e.input(0), "int32"), e.cast(e.input(1), "int32"))]


def _scaled(e: Emitter, x, factor: float):
    return x if factor == 1.0 else e("Mul", x, e.scalar(factor, e.dtype(x)))


@decomposes("Affine", domain="")
def affine(e: Emitter):
    x = e.input(0)
    return [e("Add", _scaled(e, x, float(e.attr("alpha", 1.0))), e.scalar(float(e.attr("beta", 0.0)), e.dtype(x)))]


@decomposes("ScaledTanh", domain="")
def scaled_tanh(e: Emitter):
    x = e.input(0)
    return [_scaled(e, e("Tanh", _scaled(e, x, float(e.attr("beta", 1.0)))), float(e.attr("alpha", 1.0)))]


@decomposes("ParametricSoftplus", domain="")
def parametric_softplus(e: Emitter):
    x = e.input(0)
    return [_scaled(e, e("Softplus", _scaled(e, x, float(e.attr("beta", 1.0)))), float(e.attr("alpha", 1.0)))]


@decomposes("Scale", domain="")
def scale(e: Emitter):
    return [_scaled(e, e.input(0), float(e.attr("scale", 1.0)))]


@decomposes("ImageScaler", domain="")
def image_scaler(e: Emitter):
    x = e.input(0)
    bias = np.asarray(e.attr("bias", []) or [], np.dtype(e.dtype(x)))
    y = _scaled(e, x, float(e.attr("scale", 1.0)))
    return [y if bias.size == 0 else e("Add", y, e.const(bias.reshape(-1, 1, 1)))]


@decomposes("ThresholdedRelu", domain="")
def thresholded_relu_1(e: Emitter):
    x = e.input(0)
    kept = e.cast(e("Greater", x, e.scalar(float(e.attr("alpha", 1.0)), e.dtype(x))), e.dtype(x))
    return [e("Mul", x, kept)]


standard("ThresholdedRelu", since=10)  # ONNX's, with the same meaning


@decomposes("DynamicSlice", domain="")
def dynamic_slice(e: Emitter):
    bounds = [e.input(i) for i in range(1, 4)]
    if e.opset >= 10:
        return [e("Slice", e.input(0), *[v for v in bounds if v is not None])]
    if any(v is not None and v.const is None for v in bounds):
        raise Refusal("bounds computed at run time need ai.onnx opset 10 (Slice with inputs)")
    starts, ends, axes = (None if v is None else v.const.numpy().astype(np.int64).tolist() for v in bounds)
    return [e("Slice", e.input(0), starts=starts, ends=ends, axes=axes)]
