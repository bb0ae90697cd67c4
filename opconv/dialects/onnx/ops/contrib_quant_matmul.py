"""onnxruntime's quantized matrix products and quantized-weight lookups (domain ``com.microsoft``).

* Integer operands (MatMulInteger16, MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm): the product of the
  zero-point-centred integers is exact (int64 here, int32 in onnxruntime, which cannot overflow for 8-bit
  operands), then scaled by ``a_scale * b_scale`` to float or requantized to 8 bits.  ``b_scale`` and
  ``b_zero_point`` may hold one value per column of B.
* Quantized weights (MatMulNBits, MatMulBnb4, GatherBlockQuantized): the weight is dequantized block by block
  (:mod:`opconv.kernels.quant`) and used in a float product or gather.  MatMulNBits stores the transposed
  weight, ``[N, blocks, bytes per block]``, each block ``block_size`` consecutive values of K.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise, linalg, quant
from ....kernels._common import downcast, normalize_axis, upcast
from ..executor import onnx_op

MS = "com.microsoft"


def _centred(x, zero_point) -> np.ndarray:
    x = np.asarray(x).astype(np.int64)
    return x if zero_point is None else x - np.asarray(zero_point).astype(np.int64)


def _integer_product(a, b, a_zero_point=None, b_zero_point=None) -> np.ndarray:
    """``(a - a_zero_point) @ (b - b_zero_point)`` exactly, as int64 (b's zero point per tensor or per column)."""
    return np.matmul(_centred(a, a_zero_point), _centred(b, b_zero_point))


def _scaled(acc, a_scale, b_scale, bias, dtype) -> np.ndarray:
    """An integer accumulator times ``a_scale * b_scale`` (float32 multiplier), plus ``bias``, as ``dtype``."""
    multiplier = np.asarray(a_scale, np.float32) * np.asarray(b_scale, np.float32)
    y = acc.astype(np.float32) * multiplier
    if bias is not None:
        y = y + upcast(np.asarray(bias)).astype(np.float32)
    return downcast(y, dtype)


@onnx_op("MatMulInteger16", since=1, domain=MS)
def matmul_integer16_1(ctx, a, b):
    return _integer_product(a, b).astype(np.int32)


@onnx_op("MatMulIntegerToFloat", since=1, domain=MS)
def matmul_integer_to_float_1(ctx, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
    return _scaled(_integer_product(a, b, a_zero_point, b_zero_point), a_scale, b_scale, bias,
                   np.asarray(a_scale).dtype)


@onnx_op("DynamicQuantizeMatMul", since=1, domain=MS)
def dynamic_quantize_matmul_1(ctx, a, b, b_scale, b_zero_point=None, bias=None):
    """A quantized to uint8 over its own range (ONNX DynamicQuantizeLinear), then MatMulIntegerToFloat."""
    qa, a_scale, a_zero_point = quant.dynamic_quantize(a)
    return _scaled(_integer_product(qa, b, a_zero_point, b_zero_point), a_scale, b_scale, bias,
                   np.asarray(a).dtype)


@onnx_op("QGemm", since=1, domain=MS)
def qgemm_1(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c=None, y_scale=None, y_zero_point=None, *,
            alpha, transA, transB):
    """``alpha * a_scale * b_scale * (A'B' + C)`` with C an int32 bias in the accumulator's scale; float output
    without ``y_scale``, else requantized to ``y_zero_point``'s type."""
    a, b = np.asarray(a), np.asarray(b)
    if transA:
        a = a.T
    if transB:
        b = b.T
    acc = _integer_product(a, b, a_zero_point, b_zero_point)
    if c is not None:
        acc = acc + np.asarray(c).astype(np.int64)
    multiplier = np.float32(alpha) * np.asarray(a_scale, np.float32) * np.asarray(b_scale, np.float32)
    if y_scale is None:
        return acc.astype(np.float32) * multiplier
    zero = np.asarray(0, np.asarray(a).dtype) if y_zero_point is None else y_zero_point
    return quant.requantize(acc, multiplier / np.float32(y_scale), zero)


# ---------------------------------------------------------------- n-bit weights


def _nbits_weight(b, scales, zero_points, g_idx, *, k: int, n: int, bits: int, block_size: int) -> np.ndarray:
    """MatMulNBits' weight dequantized to float32 ``[N, K]``."""
    blocks = -(-k // block_size)
    q = quant.unpack_bits(np.asarray(b).reshape(n, -1), bits)[:, :blocks * block_size][:, :k]
    scales = upcast(np.asarray(scales)).astype(np.float32).reshape(n, blocks)
    if zero_points is None:
        zeros = np.full((n, blocks), 1 << (bits - 1), np.int64)
    elif np.issubdtype(np.asarray(zero_points).dtype, np.integer):  # packed like B, each row padded to bytes
        zeros = quant.unpack_bits(np.asarray(zero_points).reshape(n, -1), bits, blocks).astype(np.int64)
    else:  # float zero points, one per block: (q - zero) * scale with a fractional zero
        zeros = upcast(np.asarray(zero_points)).astype(np.float32).reshape(n, blocks)
    if g_idx is not None:  # an explicit block for each index of K (act-order quantization)
        group = np.asarray(g_idx).astype(np.int64).reshape(k)
        return (q - zeros[:, group]) * scales[:, group]
    return quant.dequantize_blocks(q, scales, zeros, block_size, axis=1)


@onnx_op("MatMulNBits", since=1, domain=MS)
def matmul_nbits_1(ctx, a, b, scales, zero_points=None, g_idx=None, bias=None, *, K, N, accuracy_level, bits,
                   block_size, weight_prepacked):
    if weight_prepacked:
        raise ExecutionError("MatMulNBits with weight_prepacked=1 holds weights in an onnxruntime-internal "
                             "layout; only the portable layout is supported")
    if K is None or N is None or block_size is None:
        raise ExecutionError("MatMulNBits needs its K, N and block_size attributes")
    weight = _nbits_weight(b, scales, zero_points, g_idx, k=K, n=N, bits=bits, block_size=block_size)
    a = np.asarray(a)
    y = linalg.matmul(upcast(a).astype(np.float32), weight.T)
    if bias is not None:
        y = y + upcast(np.asarray(bias)).astype(np.float32)
    return downcast(y, a.dtype)


@onnx_op("MatMulBnb4", since=1, domain=MS)
def matmul_bnb4_1(ctx, a, b, absmax, *, K, N, block_size, quant_type, training_mode, transB):
    """bitsandbytes' 4-bit weight: two codes per byte (first in the high nibble), ``absmax`` per block of the
    flattened ``[N, K]`` weight (``[K, N]`` when ``transB`` is 0)."""
    table = {0: quant.FP4_TABLE, 1: quant.NF4_TABLE}.get(quant_type)
    if table is None:
        raise ExecutionError(f"MatMulBnb4 quant_type must be 0 (FP4) or 1 (NF4), got {quant_type}")
    packed = np.asarray(b, np.uint8).reshape(-1)
    codes = np.stack([packed >> 4, packed & 0x0F], axis=-1).reshape(-1)[:N * K]
    scale = quant.repeat_blocks(upcast(np.asarray(absmax)).astype(np.float32).reshape(-1), block_size, N * K, 0)
    flat = table[codes] * scale
    weight = flat.reshape(N, K).T if transB else flat.reshape(K, N)
    a = np.asarray(a)
    return downcast(linalg.matmul(upcast(a).astype(np.float32), weight), a.dtype)


@onnx_op("GatherBlockQuantized", since=1, domain=MS)
def gather_block_quantized_1(ctx, data, indices, scales, zero_points=None, *, bits, block_size, gather_axis,
                             quantize_axis):
    """Gather of block-quantized data, dequantized: uint8 data holds ``8 / bits`` values per byte along the
    last axis (lowest bits first, default zero point ``2**(bits-1)``); int4/uint4 data one value each."""
    data = np.asarray(data)
    scales = np.asarray(scales)
    default_zero = 1 << (bits - 1) if data.dtype == np.uint8 else 0
    if data.dtype == np.uint8 and bits != 8:
        data = quant.unpack_bits(data, bits)
    quantize_axis = normalize_axis(quantize_axis, data.ndim)
    if zero_points is None:
        zeros = np.full(scales.shape, default_zero, np.int64)
    elif np.asarray(zero_points).dtype == np.uint8 and bits != 8:
        zeros = quant.unpack_bits(np.asarray(zero_points), bits, scales.shape[-1])
    else:
        zeros = np.asarray(zero_points)
    values = quant.dequantize_blocks(data, scales, zeros, block_size, quantize_axis, scales.dtype)
    return np.take(values, np.asarray(indices).astype(np.int64), axis=normalize_axis(gather_axis, data.ndim))


#: MatMulFpQ4's block formats (MLAS's): blk_quant_type -> has a zero-point byte; blocks of 32 values each
_FPQ4_ZERO_POINT = {0: False, 1: True}
_FPQ4_BLOCK = 32


@onnx_op("MatMulFpQ4", since=1, domain=MS)
def matmul_fpq4_1(ctx, a, b, b_shape, *, blk_quant_type):
    """A weight ``[K, N]`` stored column by column in blocks of 32 values of K: a float32 scale, with type 1 a
    uint8 zero point (type 0: 8), then 16 bytes whose low nibbles are the block's first 16 values and high
    nibbles the next 16; a value is ``(nibble - zero_point) * scale``."""
    if blk_quant_type not in _FPQ4_ZERO_POINT:
        raise ExecutionError(f"MatMulFpQ4 blk_quant_type {blk_quant_type} is not supported (0: symmetric, "
                             f"1: with zero points, blocks of 32)")
    k, n = (int(d) for d in np.asarray(b_shape).reshape(-1))
    blocks = -(-k // _FPQ4_BLOCK)
    has_zero = _FPQ4_ZERO_POINT[blk_quant_type]
    blob = np.asarray(b, np.uint8).reshape(n, blocks, -1)
    scales = blob[..., :4].copy().view(np.float32)  # [n, blocks, 1]
    zeros = blob[..., 4:5].astype(np.int64) if has_zero else np.full((n, blocks, 1), 8, np.int64)
    packed = blob[..., 5 if has_zero else 4:]
    codes = np.concatenate([packed & 0x0F, packed >> 4], axis=-1).astype(np.int64)  # [n, blocks, 32]
    weight = ((codes - zeros) * scales).reshape(n, -1)[:, :k]
    a = np.asarray(a)
    return downcast(linalg.matmul(upcast(a).astype(np.float32), weight.T), a.dtype)
