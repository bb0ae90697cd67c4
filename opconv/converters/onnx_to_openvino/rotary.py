"""ONNX RotaryEmbedding (opset 23) decomposed into opset1 Gather / StridedSlice / Multiply / Concat.

The definition's steps, on static shapes: a 3-D input (B, S, H*D) is viewed as
(B, S, H, D), a 4-D one stays (B, H, S, D) with the caches given a head axis
of 1 where it broadcasts; the cos / sin rows are gathered by ``position_ids``
(or used as given, (B, S, d/2)); the first ``rotary_embedding_dim`` channels
of each head are cut into halves (or even / odd channels when interleaved)
x1, x2 and rotated as ``cos*x1 - sin*x2`` and ``sin*x1 + cos*x2``, the same
products in the same order as the definition, so the result is exact; the
channels past ``rotary_embedding_dim`` pass through.
"""

from __future__ import annotations

import numpy as np

from ._common import Refuse, Rule, attr, np_dtype, i64, ov, pattern, static_shape


def _bin(b, op, a, c):
    return ov(b, op, a, c, auto_broadcast="numpy")


def _channels(b, x, rank: int, start: int, stop: int, step: int = 1):
    """``x[..., start:stop:step]`` (the last axis)."""
    begin, end, stride = [0] * rank, [0] * rank, [1] * rank
    begin[-1], end[-1], stride[-1] = start, stop, step
    whole = [1] * (rank - 1) + [0]
    return ov(b, "StridedSlice", x, i64(b, begin, "begin"), i64(b, end, "end"), i64(b, stride, "stride"),
              begin_mask=whole, end_mask=whole, new_axis_mask=[], shrink_axis_mask=[], ellipsis_mask=[])


def _reshape(b, x, shape, name: str):
    return ov(b, "Reshape", x, i64(b, shape, name), special_zero=False)


def _cache_rows(b, m, name: str, batch: int, seq: int, half: int, broadcast_shape):
    """The (B, S, d/2) cos or sin rows, gathered by position_ids when given, reshaped to ``broadcast_shape``."""
    cache = m[name]
    shape = static_shape(cache)
    ids = m.values.get("ids")
    if ids is not None:
        if len(shape) != 2 or static_shape(ids) != (batch, seq):
            raise Refuse(f"{name} of shape {shape} with position_ids of shape {static_shape(ids)}: expected "
                         f"(max_position, {half}) and ({batch}, {seq})")
        if shape[1] != half:
            raise Refuse(f"{name} has {shape[1]} columns, rotary_embedding_dim/2 is {half}")
        cache = ov(b, "Gather", cache, ids, i64(b, [0], "axis"))
    elif shape != (batch, seq, half):
        raise Refuse(f"{name} of shape {shape} without position_ids: expected ({batch}, {seq}, {half})")
    return _reshape(b, cache, broadcast_shape, f"{name}_rows")


def _rotary_embedding(b, m):
    node = m.root
    x = m["x"]
    if x.dtype == "bfloat16":
        raise Refuse("RotaryEmbedding on bfloat16, which IR v10 has no element type for")
    if np.dtype(np_dtype(x)).kind != "f":
        raise Refuse(f"RotaryEmbedding on {x.dtype}")
    shape = static_shape(x)
    if len(shape) == 4:
        batch, heads, seq, head_size = shape
        work = x
        cache_shape = [batch, 1, seq, -1]  # broadcast over the heads
    elif len(shape) == 3:
        batch, seq, hidden = shape
        heads = int(attr(node, "num_heads", 0))
        if heads <= 0 or hidden % heads:
            raise Refuse(f"num_heads={heads} does not split a hidden size of {hidden}")
        head_size = hidden // heads
        work = _reshape(b, x, [batch, seq, heads, head_size], "heads")
        cache_shape = [batch, seq, 1, -1]
    else:
        raise Refuse(f"RotaryEmbedding input of rank {len(shape)}")
    rotary = int(attr(node, "rotary_embedding_dim", 0)) or head_size
    if rotary > head_size or rotary % 2:
        raise Refuse(f"rotary_embedding_dim={rotary} for heads of {head_size} channels")
    half = rotary // 2
    cos = _cache_rows(b, m, "cos", batch, seq, half, cache_shape)
    sin = _cache_rows(b, m, "sin", batch, seq, half, cache_shape)

    rank = 4
    rotate = work if rotary == head_size else _channels(b, work, rank, 0, rotary)
    interleaved = bool(attr(node, "interleaved", 0))
    if interleaved:
        x1, x2 = _channels(b, rotate, rank, 0, rotary, 2), _channels(b, rotate, rank, 1, rotary, 2)
    else:
        x1, x2 = _channels(b, rotate, rank, 0, half), _channels(b, rotate, rank, half, rotary)
    real = _bin(b, "Subtract", _bin(b, "Multiply", cos, x1), _bin(b, "Multiply", sin, x2))
    imag = _bin(b, "Add", _bin(b, "Multiply", sin, x1), _bin(b, "Multiply", cos, x2))
    work_shape = list(shape) if len(shape) == 4 else [batch, seq, heads, head_size]
    if interleaved:
        # (.., d/2) real and imag -> (.., d/2, 2) pairs -> (.., d): real at even, imag at odd channels
        paired = work_shape[:3] + [half, 1]
        pairs = ov(b, "Concat", _reshape(b, real, paired, "real_pairs"), _reshape(b, imag, paired, "imag_pairs"),
                   axis=4)
        rotated = _reshape(b, pairs, work_shape[:3] + [rotary], "interleaved")
    else:
        rotated = ov(b, "Concat", real, imag, axis=3)
    if rotary < head_size:
        rotated = ov(b, "Concat", rotated, _channels(b, work, rank, rotary, head_size), axis=3)
    return rotated if len(shape) == 4 else _reshape(b, rotated, list(shape), "merged")


RULES = [
    Rule("RotaryEmbedding-decomposed", pattern("RotaryEmbedding", ["x", "cos", "sin", "ids"]), _rotary_embedding),
    Rule("RotaryEmbedding-cached-decomposed", pattern("RotaryEmbedding", ["x", "cos", "sin"]), _rotary_embedding),
]
