"""Numerics of onnxruntime's quantized contrib operators: packed n-bit weights, block scales, requantization.

The element-wise (de)quantization itself is :func:`opconv.kernels.elementwise.quantize` / ``dequantize``
(division by the scale, round half to even, saturation); this module adds the storage formats onnxruntime's
quantizers write:

* n-bit integers (2, 4 or 8 bits) packed into bytes, the first value in the lowest bits;
* block-wise scales and zero points along one axis (one per ``block_size`` consecutive values);
* bitsandbytes' 4-bit codes (FP4 and NF4), two per byte with the first value in the high nibble, each code an
  index into a 16-entry table scaled by the block's absolute maximum.
"""

from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from . import elementwise, reduce
from ._common import normalize_axis, upcast

#: bitsandbytes' FP4 code table (1 sign, 2 exponent, 1 mantissa bits, scaled so the largest magnitude is 1).
FP4_TABLE = np.array(
    [
        0.0,
        0.0052083333,
        0.6666667,
        1.0,
        0.33333334,
        0.5,
        0.16666667,
        0.25,
        -0.0,
        -0.0052083333,
        -0.6666667,
        -1.0,
        -0.33333334,
        -0.5,
        -0.16666667,
        -0.25,
    ],
    np.float32,
)
#: bitsandbytes' NF4 code table: quantiles of a unit normal distribution, normalized to [-1, 1].
NF4_TABLE = np.array(
    [
        -1.0,
        -0.6961928009986877,
        -0.5250730514526367,
        -0.39491748809814453,
        -0.28444138169288635,
        -0.18477343022823334,
        -0.09105003625154495,
        0.0,
        0.07958029955625534,
        0.16093020141124725,
        0.24611230194568634,
        0.33791524171829224,
        0.44070982933044434,
        0.5626170039176941,
        0.7229568362236023,
        1.0,
    ],
    np.float32,
)


def unpack_bits(packed: np.ndarray, bits: int, count: int | None = None) -> np.ndarray:
    """The unsigned ``bits``-bit values packed along the last axis of uint8 ``packed``, lowest bits first.

    ``count`` (default: all) trims the padding of the last byte.
    """
    if bits not in (1, 2, 4, 8):
        raise ExecutionError(f"{bits}-bit values do not pack evenly into bytes (expected 2, 4 or 8 bits)")
    packed = np.asarray(packed, dtype=np.uint8)
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    values = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    values = values.reshape(packed.shape[:-1] + (packed.shape[-1] * per_byte,))
    return values if count is None else values[..., :count]


def repeat_blocks(param: np.ndarray, block_size: int, length: int, axis: int) -> np.ndarray:
    """A per-block parameter repeated ``block_size`` times along ``axis`` and cut to ``length``."""
    return np.repeat(param, block_size, axis=axis).take(np.arange(length), axis=axis)


def dequantize_blocks(
    q: np.ndarray, scales: np.ndarray, zero_points, block_size: int, axis: int, dtype=np.float32
) -> np.ndarray:
    """``(q - zero_point) * scale`` with one scale (and zero point) per ``block_size`` values along ``axis``.

    ``zero_points`` is an integer array (exact difference) or a float one of the scales' type; ``None`` means 0.
    """
    q = np.asarray(q)
    axis = normalize_axis(axis, q.ndim)
    length = q.shape[axis]
    scale = repeat_blocks(np.asarray(scales), block_size, length, axis)
    zero = None if zero_points is None else repeat_blocks(np.asarray(zero_points), block_size, length, axis)
    return elementwise.dequantize(q, scale, zero, dtype)


def requantize(acc: np.ndarray, multiplier, zero_point: np.ndarray) -> np.ndarray:
    """Integer accumulators scaled to an integer output: ``rint(acc * multiplier) + zero_point``, saturated.

    ``multiplier`` is the float32 product of the scales, as quantized runtimes compute it; the product with
    the accumulator is taken in float32 too.
    """
    zero_point = np.asarray(zero_point)
    scaled = np.asarray(acc).astype(np.float32) * np.asarray(multiplier, np.float32)
    y = np.rint(scaled).astype(np.int64) + zero_point.astype(np.int64)
    info = np.iinfo(zero_point.dtype)
    return np.clip(y, info.min, info.max).astype(zero_point.dtype)


def in_float(fn, *quantized, out_scale, out_zero_point, out_dtype=None):
    """Apply float ``fn`` to dequantized ``(x, scale, zero_point)`` triples and quantize the result.

    This is how onnxruntime defines its QLinear element-wise ops (it tabulates ``fn`` for 8-bit inputs).
    """
    real = [elementwise.dequantize(x, scale, zero, np.float32) for x, scale, zero in quantized]
    dtype = (
        out_dtype
        if out_dtype is not None
        else (np.asarray(out_zero_point).dtype if out_zero_point is not None else np.asarray(quantized[0][0]).dtype)
    )
    return elementwise.quantize(upcast(fn(*real)).astype(np.float32), np.float32(out_scale), out_zero_point, dtype)


def dynamic_quantize(x) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 quantization over the range of ``x`` widened to include 0: ``(y, scale, zero point)``
    (ONNX DynamicQuantizeLinear, and how onnxruntime quantizes activations on the fly)."""
    x = np.asarray(x, dtype=np.float32)
    low = min(float(reduce.reduce(x, "min", keepdims=False)), 0.0)
    high = max(float(reduce.reduce(x, "max", keepdims=False)), 0.0)
    scale = np.asarray((np.float32(high) - np.float32(low)) / np.float32(255), dtype=np.float32)
    if scale == 0:  # all zeros: ONNX's formula would divide by 0; onnxruntime reports scale 1 and zero point 0
        return np.zeros(x.shape, np.uint8), np.asarray(1, np.float32), np.asarray(0, np.uint8)
    zero_point = elementwise.quantize(np.float32(-low), scale, None, np.uint8)
    return elementwise.quantize(x, scale, zero_point, np.uint8), scale, zero_point


def fake_quantize_dynamic(x) -> np.ndarray:
    """``x`` as float32 after a round trip through :func:`dynamic_quantize` (the rounding a dynamically
    quantized product sees in its activation operand)."""
    q, scale, zero_point = dynamic_quantize(x)
    return elementwise.dequantize(q, scale, zero_point, np.float32)


# ---------------------------------------------------------------- whole weights of onnxruntime's formats
# (dequantized by the kernels at run time and by ``opconv decompose`` once, into a float constant)


def bnb4_weight(packed, absmax, k: int, n: int, block_size: int, quant_type: int, trans_b: int) -> np.ndarray:
    """MatMulBnb4's weight as float32 ``[K, N]``: bitsandbytes' 4-bit codes, two per byte (first in the high
    nibble), ``absmax`` per block of the flattened ``[N, K]`` weight (``[K, N]`` when ``trans_b`` is 0)."""
    table = {0: FP4_TABLE, 1: NF4_TABLE}.get(quant_type)
    if table is None:
        raise ExecutionError(f"MatMulBnb4 quant_type must be 0 (FP4) or 1 (NF4), got {quant_type}")
    packed = np.asarray(packed, np.uint8).reshape(-1)
    codes = np.stack([packed >> 4, packed & 0x0F], axis=-1).reshape(-1)[: n * k]
    scale = repeat_blocks(upcast(np.asarray(absmax)).astype(np.float32).reshape(-1), block_size, n * k, 0)
    flat = table[codes] * scale
    return flat.reshape(n, k).T if trans_b else flat.reshape(k, n)


def block_quantized_table(data, scales, zero_points, bits: int, block_size: int, quantize_axis: int) -> np.ndarray:
    """GatherBlockQuantized's table dequantized (in the scales' type): uint8 data holds ``8 / bits`` values per
    byte along the last axis (lowest bits first, default zero point ``2**(bits-1)``); int4/uint4 data one value
    each."""
    data, scales = np.asarray(data), np.asarray(scales)
    default_zero = 1 << (bits - 1) if data.dtype == np.uint8 else 0
    if data.dtype == np.uint8 and bits != 8:
        data = unpack_bits(data, bits)
    if zero_points is None:
        zeros = np.full(scales.shape, default_zero, np.int64)
    elif np.asarray(zero_points).dtype == np.uint8 and bits != 8:
        zeros = unpack_bits(np.asarray(zero_points), bits, scales.shape[-1])
    else:
        zeros = np.asarray(zero_points)
    return dequantize_blocks(data, scales, zeros, block_size, normalize_axis(quantize_axis, data.ndim), scales.dtype)


#: MatMulFpQ4's block formats (MLAS's): blk_quant_type -> has a zero-point byte; blocks of 32 values each
_FPQ4_ZERO_POINT = {0: False, 1: True}
_FPQ4_BLOCK = 32


def fpq4_weight(blob, k: int, n: int, blk_quant_type: int) -> np.ndarray:
    """MatMulFpQ4's weight as float32 ``[K, N]``, stored column by column in blocks of 32 values of K: a float32
    scale, with type 1 a uint8 zero point (type 0: 8), then 16 bytes whose low nibbles are the block's first 16
    values and high nibbles the next 16; a value is ``(nibble - zero_point) * scale``."""
    if blk_quant_type not in _FPQ4_ZERO_POINT:
        raise ExecutionError(
            f"MatMulFpQ4 blk_quant_type {blk_quant_type} is not supported (0: symmetric, "
            f"1: with zero points, blocks of 32)"
        )
    blocks = -(-k // _FPQ4_BLOCK)
    has_zero = _FPQ4_ZERO_POINT[blk_quant_type]
    blob = np.asarray(blob, np.uint8).reshape(n, blocks, -1)
    scales = blob[..., :4].copy().view(np.float32)  # [n, blocks, 1]
    zeros = blob[..., 4:5].astype(np.int64) if has_zero else np.full((n, blocks, 1), 8, np.int64)
    packed = blob[..., 5 if has_zero else 4 :]
    codes = np.concatenate([packed & 0x0F, packed >> 4], axis=-1).astype(np.int64)  # [n, blocks, 32]
    return ((codes - zeros) * scales).reshape(n, -1)[:, :k].T


def moe_expert_weights(packed, scales, zero_points, bits: int, block_size) -> np.ndarray | None:
    """QMoE's expert weights ``[experts, out, in * bits / 8]`` dequantized to float32 ``[experts, out, in]``:
    values packed along the last axis (lowest bits first), a scale per output row (``[experts, out]``) or per
    block of ``block_size`` inputs (``[experts, out, blocks]``), zero points packed the same way (default
    ``2**(bits - 1)``)."""
    if packed is None:
        return None
    q = unpack_bits(np.asarray(packed), bits).astype(np.int64)
    scales = np.asarray(scales, np.float32)
    per_row = scales.ndim == 2
    groups = 1 if per_row else scales.shape[-1]
    if zero_points is None:
        zeros = np.full(scales.shape, 1 << (bits - 1), np.int64)
    else:
        zeros = unpack_bits(np.asarray(zero_points), bits)[..., : scales.shape[-1]].astype(np.int64)
    if per_row:
        return ((q - zeros[..., None]) * scales[..., None]).astype(np.float32)
    return dequantize_blocks(q, scales, zeros, int(block_size or q.shape[-1] // groups), axis=-1)
