"""Quantized products of com.microsoft: DynamicQuantizeMatMul, MatMulIntegerToFloat, MatMulNBits, MatMulBnb4,
MatMulFpQ4 and GatherBlockQuantized.

The first two become ai.onnx MatMulInteger (int32 accumulation, exact) whose result is scaled back to float by
``a_scale * b_scale`` and biased, as onnxruntime's kernels compute them; DynamicQuantizeMatMul first
quantizes A with DynamicQuantizeLinear (uint8, opset 11).  The others hold a constant weight in a packed format:
it is dequantized once, at decomposition time (with the kernels' own decoders, :mod:`opconv.kernels.quant`),
into a float constant that a MatMul or Gather reads.
"""

from __future__ import annotations

import numpy as np

from ...errors import ExecutionError
from ...kernels import quant
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


def _constants(*values):
    """The data of constant inputs (None for an absent one); a Refusal when one is computed at run time."""
    if any(v is not None and v.const is None for v in values):
        raise Refusal("the quantized weight and its parameters must be constants")
    return [None if v is None else v.const.numpy() for v in values]


def _decoded(decode, *args) -> np.ndarray:
    try:
        return decode(*args)
    except ExecutionError as error:  # a format the decoder does not know
        raise Refusal(error.message) from None


def _matmul_by(e: Emitter, a, weight: np.ndarray):
    """``a @ weight`` in float32 (as the kernels compute), in ``a``'s type."""
    dtype = e.dtype(a)
    if dtype == "float32":
        return e("MatMul", a, e.const(weight.astype(np.float32)))
    return e.cast(e("MatMul", e.cast(a, "float32"), e.const(weight.astype(np.float32))), dtype)


@decomposes("MatMulBnb4")
def matmul_bnb4(e: Emitter):
    packed, absmax = _constants(e.input(1), e.input(2))
    weight = _decoded(
        quant.bnb4_weight,
        packed,
        absmax,
        int(e.attr("K")),
        int(e.attr("N")),
        int(e.attr("block_size")),
        int(e.attr("quant_type")),
        int(e.attr("transB", 1)),
    )
    return [_matmul_by(e, e.input(0), weight)]


@decomposes("MatMulFpQ4")
def matmul_fpq4(e: Emitter):
    blob, shape = _constants(e.input(1), e.input(2))
    k, n = (int(d) for d in shape.reshape(-1))
    return [_matmul_by(e, e.input(0), _decoded(quant.fpq4_weight, blob, k, n, int(e.attr("blk_quant_type", 1))))]


@decomposes("GatherBlockQuantized")
def gather_block_quantized(e: Emitter):
    data, scales, zero_points = _constants(e.input(0), e.input(2), e.input(3))
    table = _decoded(
        quant.block_quantized_table,
        data,
        scales,
        zero_points,
        int(e.attr("bits", 4)),
        int(e.attr("block_size", 128)),
        int(e.attr("quantize_axis", 1)),
    )
    axis = int(e.attr("gather_axis", 0))
    return [e("Gather", e.const(table), e.input(1), axis=axis)]
