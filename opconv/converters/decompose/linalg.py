"""Fused products of com.microsoft: FusedMatMul, TransposeMatMul, FusedGemm, FusedConv.

Each becomes its standard product (MatMul with Transposes of the last two axes, Gemm, Conv) followed by the
activation onnxruntime fused into it, named by the node's ``activation`` attribute.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .registry import Emitter, Refusal, decomposes


def _transpose_last(e: Emitter, x):
    rank = e.rank(x)
    if rank is None:
        raise Refusal("a transposed operand of unknown rank")
    if rank < 2:
        return x
    return e("Transpose", x, perm=list(range(rank - 2)) + [rank - 1, rank - 2])


@decomposes("FusedMatMul")
@decomposes("TransposeMatMul")
def fused_matmul(e: Emitter):
    if e.attr("transBatchA", 0) or e.attr("transBatchB", 0):
        raise Refusal("transBatchA/transBatchB are not decomposed")
    a, b = e.input(0), e.input(1)
    if e.attr("transA", 0):
        a = _transpose_last(e, a)
    if e.attr("transB", 0):
        b = _transpose_last(e, b)
    product = e("MatMul", a, b)
    alpha = float(e.attr("alpha", 1.0))
    return [product if alpha == 1.0 else e("Mul", product, e.scalar(alpha, e.dtype(e.input(0))))]


# activation name -> (emitter, x, its float parameters) -> value
ACTIVATIONS: dict[str, Callable] = {
    "Relu": lambda e, x, p: e("Relu", x),
    "Tanh": lambda e, x, p: e("Tanh", x),
    "Sigmoid": lambda e, x, p: e("Sigmoid", x),
    "LeakyRelu": lambda e, x, p: e("LeakyRelu", x, alpha=float(p[0]) if p else 0.01),
    "HardSigmoid": lambda e, x, p: e("HardSigmoid", x, alpha=float(p[0]) if p else 0.2,
                                     beta=float(p[1]) if len(p) > 1 else 0.5),
    "Elu": lambda e, x, p: e("Elu", x, alpha=float(p[0]) if p else 1.0),
    "Clip": lambda e, x, p: _clip(e, x, p),
}


def _clip(e: Emitter, x, params):
    if len(params) < 2:
        raise Refusal("a Clip activation needs its min and max in activation_params")
    if e.opset >= 11:
        dtype = e.dtype(x)
        return e("Clip", x, e.scalar(params[0], dtype), e.scalar(params[1], dtype))
    return e("Clip", x, min=float(params[0]), max=float(params[1]))


def activate(e: Emitter, x, name: str, params):
    if not name:
        return x
    fn = ACTIVATIONS.get(name)
    if fn is None:
        raise Refusal(f"activation {name!r} is not decomposed")
    return fn(e, x, list(params or []))


@decomposes("FusedGemm")
def fused_gemm(e: Emitter):
    inputs = [e.input(i) for i in range(3)]
    gemm = e("Gemm", *[v for v in inputs if v is not None], alpha=float(e.attr("alpha", 1.0)),
             beta=float(e.attr("beta", 1.0)), transA=int(e.attr("transA", 0)), transB=int(e.attr("transB", 0)))
    name = e.attr("activation", "")
    params = [e.attr(f"activation_{k}") for k in ("alpha", "beta", "gamma")]
    params = [p for p in params if p is not None]
    return [activate(e, gemm, name, params)]


#: the attributes a fused or quantized Conv passes on to ai.onnx Conv / QLinearConv
CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


@decomposes("FusedConv")
def fused_conv(e: Emitter):
    inputs = [v for v in (e.input(0), e.input(1), e.input(2)) if v is not None]
    y = e("Conv", *inputs, **e.copy_attrs(CONV_ATTRS))
    if e.input(3) is not None:  # Z, added before the activation
        y = e("Add", y, e.input(3))
    return [activate(e, y, e.attr("activation", ""), np.asarray(e.attr("activation_params", []) or [], float).tolist())]
