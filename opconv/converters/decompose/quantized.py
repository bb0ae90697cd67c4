"""Quantized products of com.microsoft: DynamicQuantizeMatMul and MatMulIntegerToFloat.

Both become ai.onnx MatMulInteger (int32 accumulation, exact) whose result is scaled back to float by
``a_scale * b_scale`` and biased, as onnxruntime's kernels compute them; DynamicQuantizeMatMul first
quantizes A with DynamicQuantizeLinear (uint8, opset 11).
"""

from __future__ import annotations

from .registry import Emitter, decomposes


def _to_float(e: Emitter, accumulated, a_scale, b_scale, bias):
    dtype = e.dtype(b_scale)
    y = e("Mul", e.cast(accumulated, dtype), e("Mul", a_scale, b_scale))
    return y if bias is None else e("Add", y, bias)


@decomposes("DynamicQuantizeMatMul")
def dynamic_quantize_matmul(e: Emitter):
    e.require_opset(11, "DynamicQuantizeLinear")
    a, b, b_scale, b_zero, bias = (e.input(i) for i in range(5))
    qa, a_scale, a_zero = e("DynamicQuantizeLinear", a, outputs=3)
    accumulated = e("MatMulInteger", qa, b, a_zero, *([b_zero] if b_zero is not None else []))
    return [_to_float(e, accumulated, a_scale, b_scale, bias)]


@decomposes("MatMulIntegerToFloat")
def matmul_integer_to_float(e: Emitter):
    e.require_opset(10, "MatMulInteger")
    a, b, a_scale, b_scale, a_zero, b_zero, bias = (e.input(i) for i in range(7))
    accumulated = e("MatMulInteger", a, b, a_zero, b_zero)
    return [_to_float(e, accumulated, a_scale, b_scale, bias)]
