"""GGML's (llama.cpp's GGUF) row formats, dequantized to float32: what onnxruntime's GatherPacked reads.

A row of K values is K / block_size blocks of fixed byte size, little-endian, each block's float16 scale(s)
first (the K-quants put theirs last).  Formats, by GGML type id:

* 0 F32, 1 F16, 30 BF16: plain values.
* 2 Q4_0 (32 values, 18 bytes): scale d, 16 bytes of 4-bit codes; value j is the low nibble of byte j, value
  j + 16 its high nibble; x = d * (code - 8).
* 6 Q5_0 (32, 22): d, a 32-bit word of fifth (high) bits (bit j for value j), 16 bytes of low nibbles as in
  Q4_0; x = d * (code - 16).
* 8 Q8_0 (32, 34): d, 32 signed bytes; x = d * q.
* 20 IQ4_NL (32, 18): d, nibbles laid out as Q4_0, each an index into a fixed non-linear 16-value table.
* 14 Q6_K (256, 210): 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 signed 8-bit sub-block scales
  (16 values each), d; x = d * scale * (code - 32).  Each half of 128 values takes 64 low-nibble bytes (low
  nibbles for values 0-63, high nibbles for 64-127) and 32 high-part bytes (2 bits per 32-value quarter).
* 13 Q5_K (256, 176): d, dmin, 12 bytes packing eight 6-bit (scale, min) pairs, 32 bytes of fifth bits, 128
  bytes of low nibbles; sub-block s (32 values) is x = d * scale_s * code - dmin * min_s.
"""

from __future__ import annotations

import numpy as np

from ..errors import ExecutionError

#: the fixed code book of IQ4_NL
IQ4_NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)

#: GGML type id -> (name, values per block, bytes per block)
FORMATS = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    30: ("BF16", 1, 2),
    2: ("Q4_0", 32, 18),
    6: ("Q5_0", 32, 22),
    8: ("Q8_0", 32, 34),
    20: ("IQ4_NL", 32, 18),
    14: ("Q6_K", 256, 210),
    13: ("Q5_K", 256, 176),
}
#: formats onnxruntime reads that need GGML's large code-book grids, which opconv does not carry
GRID_FORMATS = {16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 22: "IQ3_S", 23: "IQ2_S"}


def row_bytes(packed_type: int, k: int) -> int:
    """Bytes of one row of ``k`` values in format ``packed_type``."""
    _, per_block, size = format_of(packed_type)
    if k <= 0 or k % per_block:
        raise ExecutionError(f"K={k} must be a positive multiple of {per_block} for packed_type {packed_type}")
    return k // per_block * size


def format_of(packed_type: int) -> tuple[str, int, int]:
    if packed_type in GRID_FORMATS:
        raise ExecutionError(
            f"packed_type {packed_type} ({GRID_FORMATS[packed_type]}) is not supported by "
            "opconv: it decodes through GGML's code-book grids, which opconv does not carry"
        )
    if packed_type not in FORMATS:
        raise ExecutionError(
            f"unknown packed_type {packed_type}; opconv reads GGML types "
            f"{', '.join(f'{t} ({f[0]})' for t, f in sorted(FORMATS.items()))}"
        )
    return FORMATS[packed_type]


def _f16(blocks: np.ndarray, at: int) -> np.ndarray:
    """The little-endian float16 at byte ``at`` of every block, as float32 ``(..., 1)``."""
    return np.ascontiguousarray(blocks[..., at : at + 2]).view("<f2").astype(np.float32)


def _nibbles(codes: np.ndarray) -> np.ndarray:
    """Bytes ``(..., n)`` -> their low nibbles then their high nibbles ``(..., 2n)``."""
    return np.concatenate([codes & 0x0F, codes >> 4], axis=-1)


def _q4_0(b):
    return _f16(b, 0) * (_nibbles(b[..., 2:18]).astype(np.float32) - 8)


def _iq4_nl(b):
    return _f16(b, 0) * IQ4_NL_VALUES[_nibbles(b[..., 2:18])]


def _q5_0(b):
    high = np.ascontiguousarray(b[..., 2:6]).view("<u4")  # (..., 1)
    fifth = ((high >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8) << 4
    return _f16(b, 0) * ((_nibbles(b[..., 6:22]) | fifth).astype(np.float32) - 16)


def _q8_0(b):
    return _f16(b, 0) * b[..., 2:34].view(np.int8).astype(np.float32)


def _q6_k(b):
    low, high = b[..., 0:128], b[..., 128:192]
    scales = b[..., 192:208].view(np.int8).astype(np.float32)
    halves = []
    for half in range(2):
        ql, qh = low[..., 64 * half : 64 * half + 64], high[..., 32 * half : 32 * half + 32]
        low_codes = _nibbles(ql)  # (..., 128): values 0-63 low nibbles, 64-127 high nibbles
        high_codes = np.concatenate([(qh >> shift) & 3 for shift in (0, 2, 4, 6)], axis=-1)  # per 32-quarter
        halves.append((low_codes | (high_codes << 4)).astype(np.float32) - 32)
    codes = np.concatenate(halves, axis=-1)  # (..., 256)
    per_value_scale = np.repeat(scales, 16, axis=-1)
    return _f16(b, 208) * per_value_scale * codes


def _k_scale_min(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eight 6-bit (scale, min) pairs from the K-quants' 12 packed bytes: pairs 0-3 in the low 6 bits of bytes
    0-3 / 4-7; pairs 4-7 take 4 bits from bytes 8-11 and their top 2 bits from the top of bytes 0-3 / 4-7."""
    q = packed.astype(np.uint8)
    scale_lo, min_lo = q[..., 0:4] & 63, q[..., 4:8] & 63
    scale_hi = (q[..., 8:12] & 0x0F) | ((q[..., 0:4] >> 6) << 4)
    min_hi = (q[..., 8:12] >> 4) | ((q[..., 4:8] >> 6) << 4)
    return (
        np.concatenate([scale_lo, scale_hi], axis=-1).astype(np.float32),
        np.concatenate([min_lo, min_hi], axis=-1).astype(np.float32),
    )


def _q5_k(b):
    scales, mins = _k_scale_min(b[..., 4:16])
    fifth_bits, low = b[..., 16:48], b[..., 48:176]
    codes = []
    for chunk in range(4):  # 64 values: sub-blocks 2*chunk (low nibbles) and 2*chunk + 1 (high nibbles)
        ql = low[..., 32 * chunk : 32 * chunk + 32]
        for part, nibble in enumerate((ql & 0x0F, ql >> 4)):
            bit = (fifth_bits >> (2 * chunk + part)) & 1
            codes.append((nibble | (bit << 4)).astype(np.float32))
    codes = np.stack(codes, axis=-2)  # (..., 8, 32)
    y = _f16(b, 0)[..., None] * scales[..., None] * codes - _f16(b, 2)[..., None] * mins[..., None]
    return y.reshape(*b.shape[:-1], 256)


_BLOCK_DECODERS = {2: _q4_0, 6: _q5_0, 8: _q8_0, 20: _iq4_nl, 14: _q6_k, 13: _q5_k}


def dequantize_rows(rows: np.ndarray, packed_type: int, k: int) -> np.ndarray:
    """``rows`` ``(..., row_bytes)`` of uint8 in format ``packed_type`` -> float32 ``(..., k)``."""
    name, per_block, size = format_of(packed_type)
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    if rows.shape[-1] != row_bytes(packed_type, k):
        raise ExecutionError(
            f"rows of {rows.shape[-1]} bytes, expected {row_bytes(packed_type, k)} for K={k} in {name}"
        )
    if packed_type in (0, 1, 30):
        plain = {0: "<f4", 1: "<f2", 30: "<u2"}[packed_type]
        values = rows.view(plain)
        if packed_type == 30:  # bfloat16: the high half of a float32
            return (values.astype(np.uint32) << 16).view(np.float32)
        return values.astype(np.float32)
    blocks = rows.reshape(*rows.shape[:-1], k // per_block, size)
    return _BLOCK_DECODERS[packed_type](blocks).reshape(*rows.shape[:-1], k)
