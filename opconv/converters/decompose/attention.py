"""The attention family of com.microsoft: Attention, MultiHeadAttention (GroupQueryAttention is refused).

Both become one scaled dot-product attention built from MatMul/Softmax: the heads are split by Reshape
``[0, 0, N, -1]`` + Transpose, past keys/values are concatenated before the new ones, and every masked
position (padding from ``mask_index`` / ``key_padding_mask``, the causal triangle of ``unidirectional``) gets
``mask_filter_value`` (-10000 by default) added to its score, as onnxruntime's CPU kernels do; an
``attention_bias`` is added as well.
"""

from __future__ import annotations

import math

import numpy as np

from .registry import Emitter, Refusal, decomposes


def _heads(e: Emitter, x, num_heads: int):
    """(B, S, N*H) -> (B, N, S, H)."""
    return e("Transpose", e("Reshape", x, e.ints([0, 0, num_heads, -1])), perm=[0, 2, 1, 3])


def _merge_heads(e: Emitter, x):
    """(B, N, S, H) -> (B, S, N*H)."""
    return e("Reshape", e("Transpose", x, perm=[0, 2, 1, 3]), e.ints([0, 0, -1]))


def _positions(e: Emitter, x, axis: int):
    """0 .. x.shape[axis]-1 as int64."""
    e.require_opset(11, "a computed mask (Range)")
    return e("Range", e.const(np.int64(0)), e.dim(x, axis), e.const(np.int64(1)))


def _one_per_batch(e: Emitter, mask, queries) -> bool:
    """Whether a 1-D mask is (B,) rather than (2B,): its length is the batch's (both known, or the same symbol)."""
    length, batch = e.leading_dim(mask), e.leading_dim(queries)
    return length is not None and length == batch


def _padding_mask(e: Emitter, mask, keys, queries):
    """The positions a key-padding mask hides, broadcastable to (B, N, S, T); None without a mask."""
    rank = e.rank(mask)
    if rank == 2:  # (B, T) of 0/1
        hidden = e("Equal", e.cast(mask, "int64"), e.const(np.int64(0)))
        return e.unsqueeze(hidden, [1, 2])
    if rank == 3:  # (B, S, T)
        return e.unsqueeze(e("Equal", e.cast(mask, "int64"), e.const(np.int64(0))), [1])
    if rank == 1:
        if not _one_per_batch(e, mask, queries):
            raise Refusal("a 1-D mask_index not known to be of the batch's length (end positions; "
                          "end and start positions are not decomposed)")
        # (B,): keys at or after each batch's end position are hidden ((2B,) with start positions is refused)
        ends = e.unsqueeze(e.cast(mask, "int64"), [1])
        hidden = e("Not", e("Less", _positions(e, keys, 2), ends))
        return e.unsqueeze(hidden, [1, 2])
    raise Refusal(f"a mask of rank {rank} is not decomposed (2-D 0/1 masks, 3-D masks and 1-D end positions are)")


def _causal_mask(e: Emitter, queries, keys):
    """(S, T): key j is hidden from query i when j > i + (T - S) (queries are the last S of T positions)."""
    rows = _positions(e, queries, 2)
    offset = e("Sub", e.dim(keys, 2), e.dim(queries, 2))
    return e("Greater", _positions(e, keys, 2), e.unsqueeze(e("Add", rows, offset), [1]))


def attend(e: Emitter, q, k, v, *, num_heads: int, scale: float, mask_filter: float, causal: bool,
           padding=None, bias=None, past_k=None, past_v=None, head_size: int | None = None, batch_source=None):
    """Multi-head attention of 3-D q/k/v (B, S, N*H) (``batch_source``: a typed value whose first dim is B);
    returns (output (B, S, N*Hv), keys, values (B, N, T, H))."""
    dtype = e.dtype(q)
    qh, kh, vh = _heads(e, q, num_heads), _heads(e, k, num_heads), _heads(e, v, num_heads)
    if past_k is not None:
        kh = e("Concat", past_k, kh, axis=2)
        vh = e("Concat", past_v, vh, axis=2)
    if not scale:
        if head_size is None:
            raise Refusal("the head size (for the default scale) is unknown")
        scale = 1.0 / math.sqrt(head_size)
    scores = e("Mul", e("MatMul", qh, e("Transpose", kh, perm=[0, 1, 3, 2])), e.scalar(scale, dtype))
    hidden = _padding_mask(e, padding, kh, batch_source or q) if padding is not None else None
    if causal:
        triangle = _causal_mask(e, qh, kh)
        hidden = triangle if hidden is None else e("Or", hidden, triangle)
    if hidden is not None:
        scores = e("Add", scores, e("Where", hidden, e.scalar(mask_filter, dtype), e.scalar(0.0, dtype)))
    if bias is not None:
        scores = e("Add", scores, bias)
    probs = e("Softmax", scores, axis=-1 if e.opset >= 13 else 3)
    return _merge_heads(e, e("MatMul", probs, vh)), kh, vh


def _head_size(total: int | None, num_heads: int) -> int | None:
    return None if total is None else total // num_heads


@decomposes("Attention")
def attention(e: Emitter):
    if e.attr("do_rotary", 0):
        raise Refusal("do_rotary=1 is not decomposed")
    if e.input(6) is not None:
        raise Refusal("past_sequence_length (a shared past/present buffer) is not decomposed")
    num_heads = int(e.attr("num_heads"))
    x, weights, bias = e.input(0), e.input(1), e.input(2)
    shape = e.static_shape(weights)
    sizes = list(e.attr("qkv_hidden_sizes", []) or [])
    if not sizes:
        if shape is None:
            raise Refusal("the weights' shape (to split Q, K and V) is unknown")
        sizes = [shape[1] // 3] * 3
    qkv = e("MatMul", x, weights)
    if bias is not None:
        qkv = e("Add", qkv, bias)
    q, k, v = e.split(qkv, sizes, axis=2)
    past = e.input(4)
    past_k = past_v = None
    if past is not None:
        past_k = e("Gather", past, e.const(np.int64(0)), axis=0)
        past_v = e("Gather", past, e.const(np.int64(1)), axis=0)
    out, kh, vh = attend(e, q, k, v, num_heads=num_heads, scale=float(e.attr("scale", 0.0) or 0.0),
                         mask_filter=float(e.attr("mask_filter_value", -10000.0)),
                         causal=bool(e.attr("unidirectional", 0)), padding=e.input(3), bias=e.input(5),
                         past_k=past_k, past_v=past_v, head_size=_head_size(sizes[0], num_heads), batch_source=x)
    present = None
    if e.output_used(1):
        present = e("Concat", e.unsqueeze(kh, [0]), e.unsqueeze(vh, [0]), axis=0)
    return [out, present]


@decomposes("MultiHeadAttention")
def multi_head_attention(e: Emitter):
    q, k, v, bias = (e.input(i) for i in range(4))
    if k is None or v is None or e.rank(q) != 3 or e.rank(k) != 3 or e.rank(v) != 3:
        raise Refusal("packed QKV/KV or pre-split key/value heads are not decomposed "
                      "(query, key and value must be 3-D and of known rank)")
    if any(e.input(i) is not None for i in range(8, 11)):
        raise Refusal("past_sequence_length / cache_indirection inputs are not decomposed")
    num_heads = int(e.attr("num_heads"))
    width = e.static_shape(q)
    if bias is not None:
        bias_shape = e.static_shape(bias)
        if bias_shape is None:
            raise Refusal("the bias's length (to split it into Q, K and V) is unknown")
        qk = (bias_shape[0] - (width[-1] if width else 0)) if width else None
        if qk is None:
            raise Refusal("the query's width (to split the bias) is unknown")
        bq, bk, bv = e.split(bias, [width[-1], width[-1], bias_shape[0] - 2 * width[-1]], axis=0)
        q, k, v = e("Add", q, bq), e("Add", k, bk), e("Add", v, bv)
    out, kh, vh = attend(e, q, k, v, num_heads=num_heads, scale=float(e.attr("scale", 0.0) or 0.0),
                         mask_filter=float(e.attr("mask_filter_value", -10000.0)),
                         causal=bool(e.attr("unidirectional", 0)), padding=e.input(4), bias=e.input(5),
                         past_k=e.input(6), past_v=e.input(7),
                         head_size=_head_size(width[-1] if width else None, num_heads), batch_source=e.input(0))
    return [out, kh if e.output_used(1) else None, vh if e.output_used(2) else None]


@decomposes("GroupQueryAttention")
def group_query_attention(e: Emitter):
    raise Refusal("GroupQueryAttention is not decomposed yet (its KV cache, rotary and local-window forms)")
