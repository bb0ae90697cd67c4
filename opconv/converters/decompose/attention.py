"""The attention family of com.microsoft: Attention, QAttention, MultiHeadAttention, GroupQueryAttention,
DecoderMaskedMultiHeadAttention.

All become one scaled dot-product attention built from MatMul/Softmax: the heads are split by Reshape
``[0, 0, N, -1]`` + Transpose, past keys/values are concatenated before the new ones, and every masked
position (padding from ``mask_index`` / ``key_padding_mask``, the causal triangle of ``unidirectional``) gets
``mask_filter_value`` (-10000 by default) added to its score, as onnxruntime's CPU kernels do; an
``attention_bias`` is added as well (GroupQueryAttention's cache and masks: see its decomposition).
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
            raise Refusal(
                "a 1-D mask_index not known to be of the batch's length (end positions; "
                "end and start positions are not decomposed)"
            )
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


def attend(
    e: Emitter,
    q,
    k,
    v,
    *,
    num_heads: int,
    scale: float,
    mask_filter: float,
    causal: bool,
    padding=None,
    bias=None,
    past_k=None,
    past_v=None,
    head_size: int | None = None,
    batch_source=None,
):
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


def _qkv_sizes(e: Emitter, weights) -> list[int]:
    sizes = list(e.attr("qkv_hidden_sizes", []) or [])
    if sizes:
        return sizes
    shape = e.static_shape(weights)
    if shape is None:
        raise Refusal("the weights' shape (to split Q, K and V) is unknown")
    return [shape[1] // 3] * 3


def _attention_from_qkv(e: Emitter, qkv, x, sizes: list[int], *, mask, past, attention_bias=None):
    """The rest of Attention / QAttention once the packed projection ``qkv`` (B, S, Hq+Hk+Hv) is computed."""
    num_heads = int(e.attr("num_heads"))
    q, k, v = e.split(qkv, sizes, axis=2)
    past_k = past_v = None
    if past is not None:
        past_k = e("Gather", past, e.const(np.int64(0)), axis=0)
        past_v = e("Gather", past, e.const(np.int64(1)), axis=0)
    out, kh, vh = attend(
        e,
        q,
        k,
        v,
        num_heads=num_heads,
        scale=float(e.attr("scale", 0.0) or 0.0),
        mask_filter=float(e.attr("mask_filter_value", -10000.0)),
        causal=bool(e.attr("unidirectional", 0)),
        padding=mask,
        bias=attention_bias,
        past_k=past_k,
        past_v=past_v,
        head_size=_head_size(sizes[0], num_heads),
        batch_source=x,
    )
    present = None
    if e.output_used(1):
        present = e("Concat", e.unsqueeze(kh, [0]), e.unsqueeze(vh, [0]), axis=0)
    return [out, present]


def _no_rotary_or_shared_buffer(e: Emitter) -> None:
    if e.attr("do_rotary", 0):
        raise Refusal("do_rotary=1 is not decomposed")
    if e.attr("past_present_share_buffer", 0) and e.input(8 if e.node.op == "QAttention" else 4) is not None:
        raise Refusal("a past shared with the present buffer is not decomposed")


@decomposes("Attention")
def attention(e: Emitter):
    _no_rotary_or_shared_buffer(e)
    if e.input(6) is not None:
        raise Refusal("past_sequence_length (a shared past/present buffer) is not decomposed")
    x, weights, bias = e.input(0), e.input(1), e.input(2)
    qkv = e("MatMul", x, weights)
    if bias is not None:
        qkv = e("Add", qkv, bias)
    return _attention_from_qkv(
        e, qkv, x, _qkv_sizes(e, weights), mask=e.input(3), past=e.input(4), attention_bias=e.input(5)
    )


@decomposes("QAttention")
def q_attention(e: Emitter):
    """Attention whose projection is an integer product: MatMulInteger, then ``* input_scale * weight_scale + bias``."""
    _no_rotary_or_shared_buffer(e)
    e.require_opset(10, "MatMulInteger")
    x, weights, bias, x_scale, w_scale = (e.input(i) for i in range(5))
    x_zero, w_zero = e.input(6), e.input(7)
    accumulated = e("MatMulInteger", x, weights, x_zero, *([w_zero] if w_zero is not None else []))
    qkv = e("Add", e("Mul", e.cast(accumulated, e.dtype(bias)), e("Mul", x_scale, w_scale)), bias)
    return _attention_from_qkv(e, qkv, x, _qkv_sizes(e, weights), mask=e.input(5), past=e.input(8))


def _flatten_heads(e: Emitter, part):
    """One of the packed tensors, (B, S, N, 1, H) -> (B, S, N*H)."""
    return e("Reshape", part, e.ints([0, 0, -1]))


def _packed_width(e: Emitter, packed) -> int | None:
    """N*H of a packed (B, S, N, k, H) tensor, when its dims are known."""
    shape = packed.shape if packed is not None else None
    if not shape or len(shape) != 5 or not all(isinstance(d, int) for d in (shape[2], shape[4])):
        return None
    return shape[2] * shape[4]


@decomposes("MultiHeadAttention")
def multi_head_attention(e: Emitter):
    q, k, v, bias = (e.input(i) for i in range(4))
    packed_width = _packed_width(e, e.input(1) if e.input(2) is None and e.input(1) is not None else q)
    if k is None and v is None and e.rank(q) == 5:  # packed QKV (B, S, N, 3, H)
        q, k, v = (_flatten_heads(e, part) for part in e.split(q, [1, 1, 1], axis=3))
    elif k is not None and v is None and e.rank(q) == 3 and e.rank(k) == 5:  # packed KV (B, L, N, 2, H)
        k, v = (_flatten_heads(e, part) for part in e.split(k, [1, 1], axis=3))
    elif k is None or v is None or e.rank(q) != 3 or e.rank(k) != 3 or e.rank(v) != 3:
        raise Refusal(
            "pre-split key/value heads (4-D key and value) are not decomposed "
            "(query, key and value must be 3-D, or packed, and of known rank)"
        )
    if any(e.input(i) is not None for i in range(8, 11)):
        raise Refusal("past_sequence_length / cache_indirection inputs are not decomposed")
    num_heads = int(e.attr("num_heads"))
    width, key_width = e.last_dim(q) or packed_width, e.last_dim(k) or packed_width
    if bias is not None:
        total = e.last_dim(bias)
        if None in (total, width, key_width):
            raise Refusal("the widths of the query, key and bias (to split the bias) are unknown")
        bq, bk, bv = e.split(bias, [width, key_width, total - width - key_width], axis=0)
        q, k, v = e("Add", q, bq), e("Add", k, bk), e("Add", v, bv)
    out, kh, vh = attend(
        e,
        q,
        k,
        v,
        num_heads=num_heads,
        scale=float(e.attr("scale", 0.0) or 0.0),
        mask_filter=float(e.attr("mask_filter_value", -10000.0)),
        causal=bool(e.attr("unidirectional", 0)),
        padding=e.input(4),
        bias=e.input(5),
        past_k=e.input(6),
        past_v=e.input(7),
        head_size=_head_size(width, num_heads),
        batch_source=e.input(0),
    )
    return [out, kh if e.output_used(1) else None, vh if e.output_used(2) else None]


_GQA_UNSUPPORTED = (
    ("smooth_softmax", 1, "smooth_softmax=1"),
    ("qk_output", 1, "the qk_output output"),
    ("sliding_window_cache", 1, "a sliding-window cache"),
    ("causal", 0, "causal=0"),
)


@decomposes("GroupQueryAttention")
def group_query_attention(e: Emitter):
    """onnxruntime's grouped-query attention over a KV cache written at each sequence's past length.

    The past length of sequence b is ``seqlens_k[b] + 1 - S`` (0 when S is the total length); its new keys and
    values are scattered there into the past buffer (grown to the total length), key j is hidden from query i
    when ``j > past[b] + i`` (causal), ``j >= seqlens_k[b] + 1`` (padding) or, with a local window of w, when
    ``j <= past[b] + i - w``; each KV head serves num_heads / kv_num_heads query heads.
    """
    for name, bad, what in _GQA_UNSUPPORTED:
        if e.attr(name) == bad:
            raise Refusal(f"{what} is not decomposed")
    if any(e.input(i) is not None for i in range(11, 17)):
        raise Refusal("head_sink, quantized caches, q/k norms and query_seqlens are not decomposed")
    if e.attr("k_quant_type", "NONE") != "NONE" or e.attr("v_quant_type", "NONE") != "NONE":
        raise Refusal("a quantized KV cache is not decomposed")
    e.require_opset(13, "GroupQueryAttention's cache update (ScatterElements, Split by input)")
    num_heads, kv_heads = int(e.attr("num_heads")), int(e.attr("kv_num_heads"))
    q, k, v = e.input(0), e.input(1), e.input(2)
    last = e.last_dim(q)
    if last is None:
        raise Refusal("the query's width (to find the head size) is unknown")
    head = last // (num_heads + 2 * kv_heads) if k is None else last // num_heads
    if k is None:  # packed QKV
        q, k, v = e.split(q, [num_heads * head, kv_heads * head, kv_heads * head], axis=2)
    dtype = e.dtype(e.input(0))
    qh, kh, vh = _heads(e, q, num_heads), _heads(e, k, kv_heads), _heads(e, v, kv_heads)
    one = e.const(np.int64(1))
    seq = e.dim(qh, 2)
    valid = e("Add", e.cast(e.input(5), "int64"), one)  # (B,) each sequence's total length
    total = e("Reshape", e.cast(e.input(6), "int64"), e.ints([]))
    past_lengths = e("Where", e("Equal", seq, total), e.const(np.zeros(1, np.int64)), e("Sub", valid, seq))  # (B,)
    if e.attr("do_rotary", 0):
        positions = e.input(9)
        if positions is None:
            positions = e("Add", e.unsqueeze(past_lengths, [1]), e.unsqueeze(_positions(e, qh, 2), [0]))
        cos_cache, sin_cache = e.input(7), e.input(8)
        cache_shape = e.static_shape(cos_cache)
        if cache_shape is None:
            raise Refusal("the rotary cache's shape is unknown")
        from .rotary import rotate

        interleaved = bool(e.attr("rotary_interleaved", 0))
        qh = rotate(e, qh, 1, positions, cos_cache, sin_cache, 2 * cache_shape[1], interleaved)
        kh = rotate(e, kh, 1, positions, cos_cache, sin_cache, 2 * cache_shape[1], interleaved)
    keys, values = (
        _gqa_cache(e, e.input(3), kh, past_lengths, total),
        _gqa_cache(e, e.input(4), vh, past_lengths, total),
    )
    group = num_heads // kv_heads
    scale = float(e.attr("scale", 0.0) or 0.0) or 1.0 / math.sqrt(head)
    scores = e(
        "Mul", e("MatMul", qh, e("Transpose", _repeat_heads(e, keys, group), perm=[0, 1, 3, 2])), e.scalar(scale, dtype)
    )
    softcap = float(e.attr("softcap", 0.0) or 0.0)
    if softcap:
        scores = e("Mul", e("Tanh", e("Div", scores, e.scalar(softcap, dtype))), e.scalar(softcap, dtype))
    columns = _positions(e, keys, 2)  # (L,)
    query_positions = e("Add", e.unsqueeze(past_lengths, [1, 2]), e.unsqueeze(_positions(e, qh, 2), [0, 2]))  # (B,S,1)
    hidden = e("Or", e("Greater", columns, query_positions), e("Not", e("Less", columns, e.unsqueeze(valid, [1, 2]))))
    window = int(e.attr("local_window_size", -1))
    if window > 0:
        hidden = e("Or", hidden, e("Not", e("Greater", columns, e("Sub", query_positions, e.const(np.int64(window))))))
    lowest = float(np.finfo(np.dtype(dtype)).min)
    scores = e("Add", scores, e("Where", e.unsqueeze(hidden, [1]), e.scalar(lowest, dtype), e.scalar(0.0, dtype)))
    if e.input(10) is not None:
        scores = e("Add", scores, e.input(10))
    probs = e("Softmax", scores, axis=-1)
    out = _merge_heads(e, e("MatMul", probs, _repeat_heads(e, values, group)))
    return [out, keys, values]


def _gqa_cache(e: Emitter, past, new, past_lengths, total):
    """The present cache: the first ``past_lengths[b]`` rows of ``past`` (grown to the total length, zeros after)
    with ``new`` (B, Nkv, S, H) written after them; ``new`` itself without a past."""
    if past is None:
        return new
    length = e.dim(past, 2)
    grow = e("Max", e("Sub", total, length), e.const(np.int64(0)))
    zero = e.const(np.zeros(1, np.int64))
    pads = e("Concat", zero, zero, zero, zero, zero, zero, e.unsqueeze(grow, [0]), zero, axis=0)
    buffer = e("Pad", past, pads)
    # onnxruntime copies only each sequence's own past; the rest of the buffer is zeros
    kept = e("Less", e.unsqueeze(_positions(e, buffer, 2), [1]), e.unsqueeze(past_lengths, [1, 2, 3]))  # (B,1,L,1)
    buffer = e("Where", kept, buffer, e.scalar(0.0, e.dtype(new)))
    rows = e("Add", e.unsqueeze(past_lengths, [1, 2, 3]), e.unsqueeze(_positions(e, new, 2), [0, 1, 3]))
    indices = e("Expand", rows, e("Shape", new))
    return e("ScatterElements", buffer, indices, new, axis=2)


def _repeat_heads(e: Emitter, x, group: int):
    """(B, Nkv, L, H) -> (B, Nkv * group, L, H), each KV head repeated for its group of query heads."""
    if group == 1:
        return x
    widened = e("Expand", e.unsqueeze(x, [2]), e.ints([1, 1, group, 1, 1]))
    shape = e("Shape", x)
    target = e("Concat", e.slice(shape, [0], [1], [0]), e.ints([-1]), e.slice(shape, [2], [4], [0]), axis=0)
    return e("Reshape", widened, target)


@decomposes("DecoderMaskedMultiHeadAttention")
def decoder_masked_multi_head_attention(e: Emitter):
    """One decoding step.  Self-attention (a past buffer ``(B, N, max_len, H)`` shared with the present): the new
    key and value are written at ``past_sequence_length`` (Where over the buffer's positions) and the query
    attends over the buffer with the positions after it excluded (-inf before the Softmax, as if cut off).
    Cross-attention: key and value come split into heads, only the query takes its bias.  A 2-D 0/1 mask adds
    ``mask_filter_value`` to the keys it hides."""
    (
        query,
        key,
        value,
        mask,
        attention_bias,
        past_key,
        past_value,
        past_length,
        beam_width,
        cache_indirection,
        bias,
    ) = (e.input(i) for i in range(11))
    beams = None if beam_width is None or beam_width.const is None else int(beam_width.const.numpy().reshape(-1)[0])
    if (beam_width is not None and beams != 1) or cache_indirection is not None:
        raise Refusal("beam search (beam_width > 1, cache_indirection) is not decomposed")
    if attention_bias is not None or e.output_used(3):
        raise Refusal("attention_bias and the qk output are not decomposed")
    if mask is not None and e.rank(mask) != 2:
        raise Refusal("only 2-D 0/1 masks are decomposed")
    e.require_opset(11, "a computed mask (Range)")
    num_heads, width, dtype = int(e.attr("num_heads")), e.last_dim(query), e.dtype(query)
    if width is None:
        raise Refusal("the query's width is unknown")
    cross = past_key is None
    if not cross and not e.attr("past_present_share_buffer", 0):
        raise Refusal("self-attention without past_present_share_buffer=1")
    if not cross and key is None:  # packed Q/K/V (B, 1, 3 * D)
        width //= 3
        query, key, value = e.split(query, [width] * 3, axis=2)
    parts = [query] if cross else [query, key, value]
    if bias is not None:
        parts = [e("Add", part, e.slice(bias, [i * width], [(i + 1) * width], [0])) for i, part in enumerate(parts)]
    heads = [_heads(e, part, num_heads) for part in parts]
    scale = float(e.attr("scale", 0.0) or 0.0) or 1.0 / math.sqrt(width // num_heads)
    if cross:
        keys, values, present, excluded = key, value, [], None
    else:
        slots = e.unsqueeze(_positions(e, past_key, 2), [0, 1, 3])  # (1, 1, max_len, 1)
        step = e("Reshape", e.cast(past_length, "int64"), e.ints([]))
        written = e("Equal", slots, step)
        keys, values = e("Where", written, heads[1], past_key), e("Where", written, heads[2], past_value)
        present = [keys, values]
        excluded = e("Transpose", e("Greater", slots, step), perm=[0, 1, 3, 2])  # (1, 1, 1, max_len)
    scores = e("Mul", e("MatMul", heads[0], e("Transpose", keys, perm=[0, 1, 3, 2])), e.scalar(scale, dtype))
    if mask is not None:
        mask = e.cast(mask, "int64")
        if not cross:  # the mask covers past_sequence_length + 1 keys: the rest of the buffer is excluded anyway
            extra = e("Sub", e.dim(past_key, 2), e.dim(mask, 1))
            mask = e("Pad", mask, e("Concat", e.ints([0, 0, 0]), e.unsqueeze(extra, [0]), axis=0), e.const(np.int64(1)))
        hidden = e.unsqueeze(e("Not", e("Greater", mask, e.const(np.int64(0)))), [1, 2])
        filter_value = e.attr("mask_filter_value")
        scores = e(
            "Add",
            scores,
            e(
                "Where",
                hidden,
                e.scalar(-10000.0 if filter_value is None else filter_value, dtype),
                e.scalar(0.0, dtype),
            ),
        )
    if excluded is not None:
        scores = e("Where", excluded, e.scalar(-np.inf, dtype), scores)
    probs = e("Softmax", scores, axis=-1 if e.opset >= 13 else 3)
    return [_merge_heads(e, e("MatMul", probs, values)), *present]
