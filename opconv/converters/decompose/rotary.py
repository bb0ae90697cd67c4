"""com.microsoft RotaryEmbedding and MRotaryEmbedding: rotate the first ``rotary_embedding_dim`` features of each
head.

With ``c = cos_cache[position]``, ``s = sin_cache[position]`` and the rotated features split into halves
(``x1 = x[:d/2]``, ``x2 = x[d/2:]``, or the even and odd features when ``interleaved``), the result is
``x1 * c - x2 * s`` and ``x2 * c + x1 * s`` put back in the same places; the remaining features pass through.
Inputs (B, S, N*H) are handled as (B, S, N, H); inputs (B, N, S, H) in place.  MRotaryEmbedding's positions are
three streams ``(3, B, S)`` (temporal, height, width): each cache column takes its angle at the position of the
stream its section gives it (a GatherElements of the three gathered rows).
"""

from __future__ import annotations

import numpy as np

from ...kernels.attention import mrope_streams
from .registry import Emitter, Refusal, decomposes


@decomposes("RotaryEmbedding")
def rotary_embedding(e: Emitter):
    x, position_ids, cos_cache, sin_cache = (e.input(i) for i in range(4))
    if e.attr("is_packed_batching", 0):
        raise Refusal("is_packed_batching=1 is not decomposed")
    if float(e.attr("scale", 1.0)) != 1.0:
        raise Refusal("a scale other than 1 is not decomposed")
    rank, rotary_dim, work, head_axis = _heads(e, x, cos_cache)
    seq_axis = 1 if rank == 3 else 2
    if e.rank(position_ids) == 1:  # one start position for every sequence: start .. start+S-1
        e.require_opset(11, "positions computed from a start (Range)")
        start = e("Gather", e.cast(position_ids, "int64"), e.const(np.int64(0)), axis=0)
        length = e.dim(work, seq_axis)
        positions = e.unsqueeze(e("Range", start, e("Add", start, length), e.const(np.int64(1))), [0])
    else:
        positions = position_ids
    result = rotate(e, work, head_axis, positions, cos_cache, sin_cache, rotary_dim, bool(e.attr("interleaved", 0)))
    if rank == 3:
        result = e("Reshape", result, e.ints([0, 0, -1]))
    return [result]


def _heads(e: Emitter, x, cos_cache):
    """(rank of x, rotary dim, x as 4-D heads, the heads axis): (B, S, N*H) -> (B, S, N, H), (B, N, S, H) as is."""
    cache_shape = e.static_shape(cos_cache)
    rank = e.rank(x)
    if cache_shape is None or rank not in (3, 4):
        raise Refusal("the input's rank or the cos cache's shape is unknown")
    rotary_dim = int(e.attr("rotary_embedding_dim", 0) or 0) or 2 * cache_shape[1]
    if rank == 4:
        return rank, rotary_dim, x, 1
    num_heads = int(e.attr("num_heads", 0) or 0)
    if not num_heads:
        width = e.last_dim(x)
        if width is None or e.attr("rotary_embedding_dim", 0):
            raise Refusal("a 3-D input needs num_heads (or a known width and a head size equal to the rotary dim)")
        num_heads = width // rotary_dim
    return rank, rotary_dim, e("Reshape", x, e.ints([0, 0, num_heads, -1])), 2


@decomposes("MRotaryEmbedding")
def m_rotary_embedding(e: Emitter):
    x, position_ids, cos_cache, sin_cache = (e.input(i) for i in range(4))
    if e.attr("is_packed_batching", 0):
        raise Refusal("is_packed_batching=1 is not decomposed")
    sections = e.attr("mrope_section")
    if sections is None or len(sections) != 3:
        raise Refusal("mrope_section must give three section sizes")
    e.require_opset(11, "GatherElements of the position streams")
    rank, rotary_dim, work, head_axis = _heads(e, x, cos_cache)
    streams = mrope_streams(sections, int(e.attr("mrope_layout", 0) or 0))
    if streams.size != rotary_dim // 2:
        raise Refusal(f"mrope_section {list(sections)} covers {streams.size} cache columns, not {rotary_dim // 2}")
    # (3, B, S, d/2) rows at every stream's positions; each column keeps its own stream's row
    batch_and_seq = e.slice(e("Shape", position_ids), [1], [3], [0])
    pick = e(
        "Expand",
        e.const(streams.reshape(1, 1, 1, -1)),
        e("Concat", e.ints([1]), batch_and_seq, e.ints([streams.size]), axis=0),
    )
    angles_shape = e("Concat", batch_and_seq, e.ints([streams.size]), axis=0)

    def angles(cache):
        per_stream = e("Gather", cache, position_ids, axis=0)
        return e("Reshape", e("GatherElements", per_stream, pick, axis=0), angles_shape)

    result = rotate_by(
        e, work, head_axis, angles(cos_cache), angles(sin_cache), rotary_dim, bool(e.attr("interleaved", 0))
    )
    return [e("Reshape", result, e.ints([0, 0, -1])) if rank == 3 else result]


def rotate(
    e: Emitter,
    work,
    head_axis: int,
    positions,
    cos_cache,
    sin_cache,
    rotary_dim: int,
    interleaved: bool,
    head_size: int | None = None,
):
    """Rotate the first ``rotary_dim`` features of the 4-D ``work`` (heads on ``head_axis``, features last) by the
    angles of ``positions`` (B, S) in the caches."""
    return rotate_by(
        e,
        work,
        head_axis,
        e("Gather", cos_cache, positions, axis=0),
        e("Gather", sin_cache, positions, axis=0),
        rotary_dim,
        interleaved,
        head_size,
    )


def rotate_by(
    e: Emitter, work, head_axis: int, cos, sin, rotary_dim: int, interleaved: bool, head_size: int | None = None
):
    """Rotate as :func:`rotate` by the angles' cosines and sines ``(B, S, rotary_dim / 2)``; the features past
    ``rotary_dim`` pass through (none when ``head_size``, if known, is ``rotary_dim``: no empty slice)."""
    half = rotary_dim // 2
    cos = e.unsqueeze(cos, [head_axis])  # (B, S, 1, d/2) or (B, 1, S, d/2)
    sin = e.unsqueeze(sin, [head_axis])
    if interleaved:
        first = e.slice(work, [0], [rotary_dim], [3], [2])
        second = e.slice(work, [1], [rotary_dim], [3], [2])
    else:
        first = e.slice(work, [0], [half], [3])
        second = e.slice(work, [half], [rotary_dim], [3])
    out_first = e("Sub", e("Mul", first, cos), e("Mul", second, sin))
    out_second = e("Add", e("Mul", second, cos), e("Mul", first, sin))
    if interleaved:
        pairs = e("Concat", e.unsqueeze(out_first, [4]), e.unsqueeze(out_second, [4]), axis=4)
        rotated = e("Reshape", pairs, e.ints([0, 0, 0, -1]))
    else:
        rotated = e("Concat", out_first, out_second, axis=3)
    if head_size == rotary_dim:
        return rotated
    passed = e.slice(work, [rotary_dim], [np.iinfo(np.int64).max], [3])
    return e("Concat", rotated, passed, axis=3)
