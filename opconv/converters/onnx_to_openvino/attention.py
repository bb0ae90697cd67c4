"""ONNX Attention (opset 23/24) decomposed into opset1 MatMul / SoftMax / Select.

Follows the operator's definition step by step: 3-D inputs split into heads,
the past cache concatenated, K/V heads repeated for grouped-query attention,
Q and K each scaled by sqrt(scale), optional softcap, the bias built from the
mask and the causal frontier (``j <= i + past length``), a softmax whose rows
that the bias masks completely are set to 0, and the product with V.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._common import Refuse, Rule, attr, captures, const, dtype_of, i64, ov, static_shape

MAX_OPTIONAL = 3  # attn_mask, past_key, past_value


def _bin(b, op, a, c):
    return ov(b, op, a, c, auto_broadcast="numpy")


def _heads(b, x, shape, heads: int):
    """(B, S, H*D) -> (B, H, S, D)."""
    batch, seq, hidden = shape
    if heads <= 0 or hidden % heads:
        raise Refuse(f"a hidden size of {hidden} does not split into {heads} heads")
    split = ov(b, "Reshape", x, i64(b, [batch, seq, heads, hidden // heads], "heads"), special_zero=False)
    return ov(b, "Transpose", split, i64(b, [0, 2, 1, 3], "perm")), (batch, heads, seq, hidden // heads)


def _repeat_heads(b, x, shape, times: int):
    """(B, H, S, D) -> (B, H*times, S, D), each head repeated ``times`` times in place."""
    batch, heads, seq, size = shape
    grown = ov(b, "Reshape", x, i64(b, [batch, heads, 1, seq, size], "grow"), special_zero=False)
    wide = ov(b, "Broadcast", grown, i64(b, [batch, heads, times, seq, size], "wide"), mode="numpy")
    return ov(b, "Reshape", wide, i64(b, [batch, heads * times, seq, size], "merged"), special_zero=False)


def _mask_bias(b, mask, dtype, kv_len: int):
    """The additive bias of ``attn_mask`` (bool: 0 where attended, -inf elsewhere), padded to ``kv_len`` keys."""
    shape = static_shape(mask)
    if mask.dtype == "bool":
        mask = ov(b, "Select", mask, const(b, 0, dtype, "zero"), const(b, -np.inf, dtype, "minus_inf"),
                  auto_broadcast="numpy")
    elif mask.dtype != np.dtype(dtype).name:
        raise Refuse(f"attn_mask of {mask.dtype} with inputs of {np.dtype(dtype).name}")
    missing = kv_len - shape[-1]
    if missing < 0:
        raise Refuse("attn_mask is longer than the keys")
    if missing:
        rank = len(shape)
        mask = ov(b, "Pad", mask, i64(b, [0] * rank, "pads_begin"), i64(b, [0] * (rank - 1) + [missing], "pads_end"),
                  const(b, -np.inf, dtype, "minus_inf"), pad_mode="constant")
    return mask


def _attention(b, m):
    node = m.root
    inputs = list(node.inputs) + [None] * 7
    q, k, v, mask, past_key, past_value = inputs[:6]
    if inputs[6] is not None:
        raise Refuse("nonpad_kv_seqlen is not mapped")
    if attr(node, "left_window_size", -1) != -1 or attr(node, "right_window_size", -1) != -1:
        raise Refuse("sliding windows are not mapped")
    if (past_key is None) != (past_value is None):
        raise Refuse("past_key and past_value must come together")
    dtype = dtype_of(q)
    if np.dtype(dtype) != np.float32:
        raise Refuse(f"Attention on {q.dtype} (the opset1 decomposition is checked on float32)")
    if attr(node, "softmax_precision") not in (None, 1):
        raise Refuse("softmax_precision other than float")
    q_shape, k_shape, v_shape = static_shape(q), static_shape(k), static_shape(v)
    three_d = len(q_shape) == 3
    if three_d:
        q_heads, kv_heads = int(attr(node, "q_num_heads", 0)), int(attr(node, "kv_num_heads", 0))
        q, q_shape = _heads(b, q, q_shape, q_heads)
        k, k_shape = _heads(b, k, k_shape, kv_heads)
        v, v_shape = _heads(b, v, v_shape, kv_heads)
    elif len(q_shape) != 4:
        raise Refuse(f"Attention inputs of rank {len(q_shape)}")
    if past_key is not None:
        pk, pv = static_shape(past_key), static_shape(past_value)
        k = ov(b, "Concat", past_key, k, axis=2)
        v = ov(b, "Concat", past_value, v, axis=2)
        k_shape = k_shape[:2] + (k_shape[2] + pk[2],) + k_shape[3:]
        v_shape = v_shape[:2] + (v_shape[2] + pv[2],) + v_shape[3:]
    present_key, present_value = k, v
    batch, heads, q_len, head_size = q_shape
    kv_len = k_shape[2]
    if heads != k_shape[1]:
        if heads % k_shape[1] or k_shape[1] != v_shape[1]:
            raise Refuse(f"{heads} query heads do not group over {k_shape[1]} key heads")
        k = _repeat_heads(b, k, k_shape, heads // k_shape[1])
        v = _repeat_heads(b, v, v_shape, heads // v_shape[1])

    scale = attr(node, "scale")
    root = const(b, math.sqrt(1 / math.sqrt(head_size) if scale is None else float(scale)), dtype, "sqrt_scale")
    scores = ov(b, "MatMul", _bin(b, "Multiply", q, root),
                _bin(b, "Multiply", ov(b, "Transpose", k, i64(b, [0, 1, 3, 2], "perm")), root),
                transpose_a=False, transpose_b=False)
    softcap = float(attr(node, "softcap", 0.0))
    if softcap > 0:
        cap = const(b, softcap, dtype, "softcap")
        scores = _bin(b, "Multiply", ov(b, "Tanh", _bin(b, "Divide", scores, cap)), cap)

    bias = None
    if mask is not None:
        bias = _mask_bias(b, mask, dtype, kv_len)
    if attr(node, "is_causal", 0):
        offset = 0 if past_key is None else static_shape(past_key)[2]
        allowed = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + offset
        causal = b.const(np.where(allowed, 0, -np.inf).astype(dtype), "causal_bias")
        bias = causal if bias is None else _bin(b, "Add", bias, causal)
    biased = scores if bias is None else _bin(b, "Add", scores, bias)
    mode = int(attr(node, "qk_matmul_output_mode", 0))
    qk_out = {0: scores, 1: scores, 2: biased}.get(mode)

    weights = ov(b, "SoftMax", biased, axis=3)
    if bias is not None:
        # Rows the bias masks completely: SoftMax gives NaN there, the definition gives 0.
        axis = i64(b, [-1], "last_axis")
        hits = ov(b, "Convert", _bin(b, "Equal", bias, const(b, -np.inf, dtype, "minus_inf")),
                  destination_type=np.dtype(dtype).name)
        masked_row = _bin(b, "Equal", ov(b, "ReduceMin", hits, axis, keep_dims=True), const(b, 1, dtype, "one"))
        weights = ov(b, "Select", masked_row, const(b, 0, dtype, "zero"), weights, auto_broadcast="numpy")
    if mode == 3:
        qk_out = weights
    if qk_out is None:
        raise Refuse(f"qk_matmul_output_mode={mode}")
    y = ov(b, "MatMul", weights, v, transpose_a=False, transpose_b=False)
    if three_d:
        y = ov(b, "Reshape", ov(b, "Transpose", y, i64(b, [0, 2, 1, 3], "perm")), i64(b, [batch, q_len, -1], "merge"),
               special_zero=False)
    wanted = node.outputs + [None] * 4
    return [y] + [value if wanted[i + 1] is not None else None
                  for i, value in enumerate((present_key, present_value, qk_out))]


def _patterns():
    """One pattern per arrangement of the optional inputs (given or omitted); outputs up to 4."""
    rules = []
    for count in range(0, MAX_OPTIONAL + 1):
        for given in itertools.product((True, False), repeat=count):
            if count and not given[-1]:
                continue  # trailing omitted inputs are not inputs
            names = ["q", "k", "v"] + [f"opt{i}" for i, g in enumerate(given) if g]

            def fn(op, *captured, _given=given):
                values = list(captured[:3])
                rest = iter(captured[3:])
                values += [next(rest) if g else None for g in _given]
                return op.node("Attention", *values, _outputs=4)

            fn = captures(fn, names)
            fn.__name__ = "Attention"
            rules.append(Rule(f"Attention-decomposed-{''.join('1' if g else '0' for g in given)}", fn, _attention))
    return rules


RULES = _patterns()
