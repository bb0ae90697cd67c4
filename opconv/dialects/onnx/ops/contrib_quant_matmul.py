"""onnxruntime's quantized matrix products and quantized-weight lookups (domain ``com.microsoft``).

* Integer operands (MatMulInteger16, MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm): the product of the
  zero-point-centred integers is exact (int64 here, int32 in onnxruntime, which cannot overflow for 8-bit
  operands), then scaled by ``a_scale * b_scale`` to float or requantized to 8 bits.  ``b_scale`` and
  ``b_zero_point`` may hold one value per column of B.
* Quantized weights (MatMulNBits, MatMulBnb4, GatherBlockQuantized): the weight is dequantized block by block
  (:mod:`opconv.kernels.quant`) and used in a float product or gather.  MatMulNBits stores the transposed
  weight, ``[N, blocks, bytes per block]``, each block ``block_size`` consecutive values of K.
* GatherPacked gathers rows stored in GGML's (llama.cpp's) block formats, :mod:`opconv.kernels.ggml`.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise, ggml, linalg, quant
from ....kernels._common import downcast, normalize_axis, upcast
from ..executor import onnx_dtype, onnx_op

MS = "com.microsoft"


def _centred(x, zero_point) -> np.ndarray:
    x = np.asarray(x).astype(np.int64)
    return x if zero_point is None else x - np.asarray(zero_point).astype(np.int64)


def integer_product(a, b, a_zero_point=None, b_zero_point=None) -> np.ndarray:
    """``(a - a_zero_point) @ (b - b_zero_point)`` exactly, as int64 (b's zero point per tensor or per column)."""
    return np.matmul(_centred(a, a_zero_point), _centred(b, b_zero_point))


def scaled(acc, a_scale, b_scale, bias, dtype) -> np.ndarray:
    """An integer accumulator times ``a_scale * b_scale`` (float32 multiplier), plus ``bias``, as ``dtype``."""
    multiplier = np.asarray(a_scale, np.float32) * np.asarray(b_scale, np.float32)
    y = acc.astype(np.float32) * multiplier
    if bias is not None:
        y = y + upcast(np.asarray(bias)).astype(np.float32)
    return downcast(y, dtype)


@onnx_op("MatMulInteger16", since=1, domain=MS)
def matmul_integer16_1(ctx, a, b):
    return integer_product(a, b).astype(np.int32)


@onnx_op("MatMulIntegerToFloat", since=1, domain=MS)
def matmul_integer_to_float_1(ctx, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
    return scaled(integer_product(a, b, a_zero_point, b_zero_point), a_scale, b_scale, bias, np.asarray(a_scale).dtype)


@onnx_op("DynamicQuantizeMatMul", since=1, domain=MS)
def dynamic_quantize_matmul_1(ctx, a, b, b_scale, b_zero_point=None, bias=None):
    """A quantized to uint8 over its own range (ONNX DynamicQuantizeLinear), then MatMulIntegerToFloat."""
    qa, a_scale, a_zero_point = quant.dynamic_quantize(a)
    return scaled(integer_product(qa, b, a_zero_point, b_zero_point), a_scale, b_scale, bias, np.asarray(a).dtype)


@onnx_op("QGemm", since=1, domain=MS)
def qgemm_1(
    ctx,
    a,
    a_scale,
    a_zero_point,
    b,
    b_scale,
    b_zero_point,
    c=None,
    y_scale=None,
    y_zero_point=None,
    *,
    alpha,
    transA,
    transB,
):
    """``alpha * a_scale * b_scale * (A'B' + C)`` with C an int32 bias in the accumulator's scale; float output
    without ``y_scale``, else requantized to ``y_zero_point``'s type."""
    a, b = np.asarray(a), np.asarray(b)
    if transA:
        a = a.T
    if transB:
        b = b.T
    acc = integer_product(a, b, a_zero_point, b_zero_point)
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
    q = quant.unpack_bits(np.asarray(b).reshape(n, -1), bits)[:, : blocks * block_size][:, :k]
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
def matmul_nbits_1(
    ctx,
    a,
    b,
    scales,
    zero_points=None,
    g_idx=None,
    bias=None,
    *,
    K,
    N,
    accuracy_level,
    bits,
    block_size,
    weight_prepacked,
):
    if weight_prepacked:
        raise ExecutionError(
            "MatMulNBits with weight_prepacked=1 holds weights in an onnxruntime-internal "
            "layout; only the portable layout is supported"
        )
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
    weight = quant.bnb4_weight(b, absmax, K, N, block_size, quant_type, transB)
    a = np.asarray(a)
    return downcast(linalg.matmul(upcast(a).astype(np.float32), weight), a.dtype)


@onnx_op("GatherBlockQuantized", since=1, domain=MS)
def gather_block_quantized_1(
    ctx, data, indices, scales, zero_points=None, *, bits, block_size, gather_axis, quantize_axis
):
    values = quant.block_quantized_table(data, scales, zero_points, bits, block_size, quantize_axis)
    return np.take(values, np.asarray(indices).astype(np.int64), axis=normalize_axis(gather_axis, values.ndim))


@onnx_op("GatherPacked", since=1, domain=MS)
def gather_packed_1(ctx, data, indices, *, K, output_dtype, packed_type):
    """Rows of a GGML-format table (:mod:`opconv.kernels.ggml`); an index outside [0, vocab) takes row 0."""
    data = np.asarray(data)
    if data.ndim != 2:
        raise ExecutionError(f"data must be 2-D [vocab_size, row_bytes], got shape {list(data.shape)}")
    indices = np.asarray(indices).astype(np.int64)
    indices = np.where((indices < 0) | (indices >= data.shape[0]), 0, indices)
    values = ggml.dequantize_rows(data[indices], packed_type, K)
    return elementwise.cast(values, onnx_dtype(output_dtype))


@onnx_op("MatMulFpQ4", since=1, domain=MS)
def matmul_fpq4_1(ctx, a, b, b_shape, *, blk_quant_type):
    k, n = (int(d) for d in np.asarray(b_shape).reshape(-1))
    weight = quant.fpq4_weight(b, k, n, blk_quant_type)
    a = np.asarray(a)
    return downcast(linalg.matmul(upcast(a).astype(np.float32), weight), a.dtype)
