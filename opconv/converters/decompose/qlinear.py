"""com.microsoft's QLinear operators and its own QuantizeLinear / DequantizeLinear.

A QLinear op is ``QuantizeLinear(op(DequantizeLinear(x, scale, zero point) ...), y_scale, y_zero_point)`` with
the standard op in the middle; onnxruntime's kernels compute the same float values and round half to even,
so the result is the same integers (checked against onnxruntime in tests/test_decompose.py).
"""

from __future__ import annotations

from collections.abc import Callable

from .linalg import CONV_ATTRS
from .registry import Emitter, Refusal, decomposes


def _dq(e: Emitter, x, scale, zero_point):
    return e("DequantizeLinear", x, scale, *([zero_point] if zero_point is not None else []))


def _q(e: Emitter, y, scale, zero_point):
    return e("QuantizeLinear", y, scale, *([zero_point] if zero_point is not None else []))


def _no_channels_last(e: Emitter):
    if e.attr("channels_last", 0):
        raise Refusal("channels_last=1 is not decomposed")


@decomposes("QuantizeLinear")
@decomposes("DequantizeLinear")
def quantize_linear(e: Emitter):
    x, scale, zero_point = e.input(0), e.input(1), e.input(2)
    if e.node.op == "DequantizeLinear":
        quantized = e.dtype(x)
    else:
        quantized = "uint8" if zero_point is None else e.dtype(zero_point)
    if quantized not in ("uint8", "int8"):
        e.require_opset(21, f"{quantized} quantization")
    axis = e.attr("axis")
    if axis is not None and e.rank(scale) not in (0, None) and e.opset < 13:
        raise Refusal("per-axis quantization needs ai.onnx opset 13")
    return [
        e(
            e.node.op,
            *[v for v in (x, scale, zero_point) if v is not None],
            axis=None if axis is None or e.opset < 13 else int(axis),
        )
    ]


# QLinear op -> the float op between its dequantized inputs and quantized output
_BINARY: dict[str, str] = {"QLinearAdd": "Add", "QLinearMul": "Mul"}


@decomposes("QLinearAdd")
@decomposes("QLinearMul")
def qlinear_binary(e: Emitter):
    a = _dq(e, e.input(0), e.input(1), e.input(2))
    b = _dq(e, e.input(3), e.input(4), e.input(5))
    return [_q(e, e(_BINARY[e.node.op], a, b), e.input(6), e.input(7))]


_UNARY: dict[str, Callable] = {
    "QLinearSigmoid": lambda e, x: e("Sigmoid", x),
    "QLinearLeakyRelu": lambda e, x: e("LeakyRelu", x, alpha=float(e.attr("alpha", 0.01))),
    "QLinearGlobalAveragePool": lambda e, x: (_no_channels_last(e), e("GlobalAveragePool", x))[1],
    "QLinearAveragePool": lambda e, x: (_no_channels_last(e), e("AveragePool", x, **_pool_attrs(e)))[1],
    "QLinearSoftmax": lambda e, x: _softmax(e, x),
}

_POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")


def _pool_attrs(e: Emitter) -> dict:
    attrs = e.copy_attrs(_POOL_ATTRS)
    if attrs.get("ceil_mode") and e.opset < 10:
        raise Refusal("ceil_mode needs ai.onnx opset 10")
    return attrs


def _softmax(e: Emitter, x):
    axis = int(e.attr("axis", -1))
    rank = e.rank(e.input(0))
    if axis not in (-1, (rank or 0) - 1) and e.opset < 13:
        raise Refusal("a softmax over an axis other than the last needs ai.onnx opset 13")
    return e("Softmax", x, axis=axis)


@decomposes("QLinearAveragePool")
@decomposes("QLinearSoftmax")
@decomposes("QLinearSigmoid")
@decomposes("QLinearLeakyRelu")
@decomposes("QLinearGlobalAveragePool")
def qlinear_unary(e: Emitter):
    x = _dq(e, e.input(0), e.input(1), e.input(2))
    return [_q(e, _UNARY[e.node.op](e, x), e.input(3), e.input(4))]


@decomposes("QLinearConcat")
def qlinear_concat(e: Emitter):
    triples = [e.input(i) for i in range(2, len(e.node.inputs))]
    if len(triples) % 3:
        raise Refusal("inputs must come in (tensor, scale, zero point) triples")
    parts = [_dq(e, *triples[i : i + 3]) for i in range(0, len(triples), 3)]
    return [_q(e, e("Concat", *parts, axis=int(e.attr("axis"))), e.input(0), e.input(1))]


@decomposes("QGemm")
def qgemm(e: Emitter):
    """alpha * A @ B + C over the dequantized operands (C is int32 at scale a_scale * b_scale), quantized to
    y_scale / y_zero_point, or float when the node has no y_scale."""
    a = _dq(e, e.input(0), e.input(1), e.input(2))
    b_zero = e.input(5)
    b_axis = {} if e.rank(e.input(4)) in (0, None) else {"axis": 0 if e.attr("transB", 0) else 1}
    if b_axis:
        e.require_opset(13, "per-column B scales")
    b = e("DequantizeLinear", e.input(3), e.input(4), *([b_zero] if b_zero is not None else []), **b_axis)
    inputs = [a, b]
    if e.input(6) is not None:
        inputs.append(e("Mul", e.cast(e.input(6), "float32"), e("Mul", e.input(1), e.input(4))))
    y = e(
        "Gemm",
        *inputs,
        alpha=float(e.attr("alpha", 1.0)),
        beta=1.0,
        transA=int(e.attr("transA", 0)),
        transB=int(e.attr("transB", 0)),
    )
    return [y if e.input(7) is None else _q(e, y, e.input(7), e.input(8))]


@decomposes("QLinearConv")
def qlinear_conv(e: Emitter):
    """ai.onnx QLinearConv (opset 10), which has the same inputs in NCHW."""
    _no_channels_last(e)
    e.require_opset(10, "QLinearConv")
    return [
        e(
            "QLinearConv",
            *[e.input(i) for i in range(8)],
            *([e.input(8)] if e.input(8) is not None else []),
            **e.copy_attrs(CONV_ATTRS),
        )
    ]


@decomposes("QLinearWhere")
def qlinear_where(e: Emitter):
    e.require_opset(9, "Where")
    x = _dq(e, e.input(1), e.input(2), e.input(3))
    y = _dq(e, e.input(4), e.input(5), e.input(6))
    return [_q(e, e("Where", e.input(0), x, y), e.input(7), e.input(8))]
