"""ai.onnx Attention (opset 23-24) decomposed into MatMul / Softmax / Where, once for every target.

The operator's definition step by step, on static shapes: 3-D inputs split into heads, the past cache
concatenated, K/V heads repeated for grouped-query attention, Q and K each scaled by sqrt(scale), the optional
softcap, the additive bias of the mask, of the padding keys of ``nonpad_kv_seqlen`` and of the causal /
sliding-window band (``lower <= i + offset - j <= upper``: a constant unless the offset comes from
``nonpad_kv_seqlen``), a softmax whose rows the bias masks completely become 0, and the product with V.
Half-precision inputs are computed in float32 (float64 stays); ``softmax_precision`` rounds the scores and
the probabilities to that type.  The version converter's downgrade below opset 23 is this function.
"""

from __future__ import annotations

import math

import numpy as np

from ... import budget
from ...types import from_onnx_code
from .registry import Emitter, Refusal, decomposes


def _static(e: Emitter, value, what: str) -> tuple[int, ...]:
    shape = e.static_shape(value)
    if shape is None:
        raise Refusal(f"the shape of {what} is not static (give the inputs' shapes)")
    return shape


def _heads(e: Emitter, x, shape, heads: int, what: str):
    """(B, S, H*D) -> (B, H, S, D), and that shape."""
    batch, seq, hidden = shape
    if heads <= 0 or hidden % heads:
        raise Refusal(f"a {what} width of {hidden} does not split into {heads} heads")
    split = e("Reshape", x, e.ints([batch, seq, heads, hidden // heads]))
    return e("Transpose", split, perm=[0, 2, 1, 3]), (batch, heads, seq, hidden // heads)


def _repeat_heads(e: Emitter, x, shape, times: int):
    """(B, H, S, D) -> (B, H*times, S, D), each head repeated ``times`` times in place."""
    batch, heads, seq, size = shape
    grown = e("Reshape", x, e.ints([batch, heads, 1, seq, size]))
    wide = e("Expand", grown, e.ints([batch, heads, times, seq, size]))
    return e("Reshape", wide, e.ints([batch, heads * times, seq, size]))


def _band_limits(e: Emitter) -> tuple[int | None, int | None]:
    """(lower, upper) bounds on ``i + offset - j`` from ``is_causal`` and the sliding window (None: unbounded)."""
    left, right = int(e.attr("left_window_size", -1)), int(e.attr("right_window_size", -1))
    lowers = ([0] if e.attr("is_causal", 0) else []) + ([-right] if right >= 0 else [])
    return (max(lowers) if lowers else None), (left if left >= 0 else None)


def _as_bias(e: Emitter, allowed, work: str):
    """0 where ``allowed`` (a constant bool array or a boolean value), -inf elsewhere."""
    if isinstance(allowed, np.ndarray):
        return e.const(np.where(allowed, 0, -np.inf).astype(work))
    return e("Where", allowed, e.scalar(0.0, work), e.scalar(-np.inf, work))


def _band(e: Emitter, lower, upper, q_len: int, kv_len: int, offset):
    """Where query ``i`` may attend key ``j``: ``lower <= i + offset - j <= upper``; ``offset`` an int (a constant
    (q, kv) array) or a (B, 1, 1, 1) int64 value of ``nonpad_kv_seqlen`` (a (B, 1, q, kv) boolean value)."""
    budget.check((q_len, kv_len), 8, "the attention mask's query x key distances", where=e.node.label)
    distance = np.arange(q_len)[:, None] - np.arange(kv_len)[None, :]
    if isinstance(offset, int):
        allowed = np.ones(distance.shape, bool)
        if lower is not None:
            allowed &= distance + offset >= lower
        if upper is not None:
            allowed &= distance + offset <= upper
        return allowed
    diff = e("Add", e.const(distance.astype(np.int64)), offset)
    allowed = None
    if lower is not None:
        allowed = e("GreaterOrEqual", diff, e.const(np.int64(lower)))
    if upper is not None:
        below = e("LessOrEqual", diff, e.const(np.int64(upper)))
        allowed = below if allowed is None else e("And", allowed, below)
    return allowed


def _mask_bias(e: Emitter, mask, work: str, kv_len: int):
    """The additive bias of ``attn_mask`` (bool: 0 where attended, -inf elsewhere), padded to ``kv_len`` keys."""
    shape = _static(e, mask, "attn_mask")
    bias = _as_bias(e, mask, work) if e.dtype(mask) == "bool" else e.cast(mask, work)
    missing = kv_len - shape[-1]
    if missing < 0:
        raise Refusal("the mask covers more keys than there are")
    if missing:
        rank = len(shape)
        bias = e("Pad", bias, e.ints([0] * (2 * rank - 1) + [missing]), e.scalar(-np.inf, work))
    return bias


def _rounded(e: Emitter, x, precision, work: str):
    """``x`` rounded to the ``softmax_precision`` type and back (None: as it is)."""
    if precision is None:
        return x
    return e.cast(e.cast(x, from_onnx_code(int(precision)).name), work)


@decomposes("Attention", domain="", since=23, composite=True)
def attention_23(e: Emitter):  # noqa: C901  (the definition step by step: one branch per optional input)
    q, k, v, mask, past_key, past_value, kv_lengths = (e.input(i) for i in range(7))
    if (past_key is None) != (past_value is None):
        raise Refusal("past_key and past_value must come together")
    if kv_lengths is not None and past_key is not None:
        raise Refusal("nonpad_kv_seqlen together with past_key / past_value")
    dtype = e.dtype(q)
    if dtype not in ("float32", "float16", "float64", "bfloat16"):
        raise Refusal(f"Attention on {dtype}")
    work = "float64" if dtype == "float64" else "float32"
    q_shape, k_shape, v_shape = _static(e, q, "Q"), _static(e, k, "K"), _static(e, v, "V")
    q, k, v = (x if e.dtype(x) == work else e.cast(x, work) for x in (q, k, v))
    three_d = len(q_shape) == 3
    if three_d:
        q_heads, kv_heads = int(e.attr("q_num_heads", 0) or 0), int(e.attr("kv_num_heads", 0) or 0)
        q, q_shape = _heads(e, q, q_shape, q_heads, "query")
        k, k_shape = _heads(e, k, k_shape, kv_heads, "key")
        v, v_shape = _heads(e, v, v_shape, kv_heads, "value")
    elif len(q_shape) != 4:
        raise Refusal(f"Attention inputs of rank {len(q_shape)}")
    past_len = 0
    if past_key is not None:
        past_len = _static(e, past_key, "past_key")[2]
        k = e("Concat", e.cast(past_key, work) if e.dtype(past_key) != work else past_key, k, axis=2)
        v = e("Concat", e.cast(past_value, work) if e.dtype(past_value) != work else past_value, v, axis=2)
        k_shape = k_shape[:2] + (k_shape[2] + past_len,) + k_shape[3:]
        v_shape = v_shape[:2] + (v_shape[2] + past_len,) + v_shape[3:]
    present_key, present_value = k, v
    batch, heads, q_len, head_size = q_shape
    kv_len = k_shape[2]
    if heads != k_shape[1]:
        if heads % k_shape[1] or k_shape[1] != v_shape[1]:
            raise Refusal(f"{heads} query heads do not group over {k_shape[1]} key heads")
        k = _repeat_heads(e, k, k_shape, heads // k_shape[1])
        v = _repeat_heads(e, v, v_shape, heads // v_shape[1])

    scale = e.node.attrs.get("scale")
    root = e.scalar(math.sqrt(1 / math.sqrt(head_size) if scale is None else float(scale.value)), work)
    scores = e("MatMul", e("Mul", q, root), e("Transpose", e("Mul", k, root), perm=[0, 1, 3, 2]))
    stages = {0: scores}
    softcap = float(e.attr("softcap", 0.0) or 0.0)
    if softcap > 0:
        cap = e.scalar(softcap, work)
        scores = e("Mul", e("Tanh", e("Div", scores, cap)), cap)
    stages[1] = scores

    terms = [] if mask is None else [_mask_bias(e, mask, work, kv_len)]
    offset = past_len
    if kv_lengths is not None:
        lengths = e("Reshape", e.cast(kv_lengths, "int64"), e.ints([batch, 1, 1, 1]))
        terms.append(_as_bias(e, e("Less", e.const(np.arange(kv_len, dtype=np.int64)), lengths), work))
        offset = e("Sub", lengths, e.const(np.int64(q_len)))
    lower, upper = _band_limits(e)
    if lower is not None or upper is not None:
        terms.append(_as_bias(e, _band(e, lower, upper, q_len, kv_len, offset), work))
    bias = None
    for term in terms:
        bias = term if bias is None else e("Add", bias, term)
    if bias is not None:
        scores = e("Add", scores, bias)
    stages[2] = scores

    precision = e.node.attrs.get("softmax_precision")
    precision = None if precision is None else int(precision.value)
    probs = e("Softmax", _rounded(e, scores, precision, work), axis=-1)
    if bias is not None:  # rows the bias masks completely: Softmax gives NaN there, the definition 0
        masked_row = e("Equal", e.reduce("ReduceMax", bias, [-1]), e.scalar(-np.inf, work))
        probs = e("Where", masked_row, e.scalar(0.0, work), probs)
    probs = _rounded(e, probs, precision, work)
    stages[3] = probs
    y = e("MatMul", probs, v)
    if three_d:
        y = e("Reshape", e("Transpose", y, perm=[0, 2, 1, 3]), e.ints([batch, q_len, -1]))
    mode = int(e.attr("qk_matmul_output_mode", 0) or 0)
    if e.output_used(3) and mode not in stages:
        raise Refusal(f"qk_matmul_output_mode={mode}")
    extra = [present_key, present_value, stages.get(mode)]
    outs = [y] + [x if e.output_used(i + 1) else None for i, x in enumerate(extra)]
    return [None if x is None else (x if work == dtype else e.cast(x, dtype)) for x in outs]
