"""Quantized products of com.microsoft: DynamicQuantizeMatMul, MatMulIntegerToFloat and MatMulNBits.

Both become ai.onnx MatMulInteger (int32 accumulation, exact) whose result is scaled back to float by
``a_scale * b_scale`` and biased, as onnxruntime's kernels compute them; DynamicQuantizeMatMul first
quantizes A with DynamicQuantizeLinear (uint8, opset 11).
"""

from __future__ import annotations

import numpy as np

from .registry import Emitter, Refusal, decomposes


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


def _unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` ``bits``-wide unsigned values of each row of bytes (low bits first), as int32."""
    rows = packed.reshape(packed.shape[0], -1).astype(np.uint8)
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    values = (rows[:, :, None] >> shifts) & np.uint8((1 << bits) - 1)
    return values.reshape(rows.shape[0], -1)[:, :count].astype(np.int32)


@decomposes("MatMulNBits")
def matmul_n_bits(e: Emitter):
    """``A @ W + bias`` with W dequantized at decomposition time from its constant blocks:
    ``W[k, n] = (q[n, k] - zero_point[n, k // block]) * scale[n, k // block]`` (zero point 2^(bits-1) by
    default), a float constant of (K, N)."""
    a, packed, scales, zero_points, g_idx, bias = (e.input(i) for i in range(6))
    if g_idx is not None:
        raise Refusal("a g_idx (act-order) input is not decomposed")
    bits, block = int(e.attr("bits", 4)), int(e.attr("block_size"))
    k, n = int(e.attr("K")), int(e.attr("N"))
    if bits not in (2, 4, 8):
        raise Refusal(f"bits={bits} is not decomposed")
    if any(v is not None and v.const is None for v in (packed, scales, zero_points)):
        raise Refusal("the quantized weight, its scales and zero points must be constants")
    blocks = -(-k // block)
    q = _unpack(packed.const.numpy(), bits, blocks * block)  # (N, blocks*block)
    scale = scales.const.numpy().reshape(n, blocks)
    if zero_points is None:
        zero = np.full((n, blocks), 1 << (bits - 1), np.int32)
    elif zero_points.const.numpy().dtype == np.uint8:
        zero = _unpack(zero_points.const.numpy().reshape(n, -1), bits, blocks)
    else:
        raise Refusal("float zero points are not decomposed")
    dequantized = (q - np.repeat(zero, block, axis=1)).astype(scale.dtype) * np.repeat(scale, block, axis=1)
    weight = e.const(np.ascontiguousarray(dequantized[:, :k].T))
    y = e("MatMul", a, weight)
    return [y if bias is None else e("Add", y, bias)]
