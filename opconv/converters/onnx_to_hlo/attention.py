"""ONNX Attention (opset 23+) decomposed: head split, KV cache concatenation, grouped heads, scaled scores
(DotGeneral), soft cap, mask and causal/window bias (Iota + Compare), softmax, and the weighted sum.

Half-precision inputs are computed in float32, as the ONNX reference does;
``softmax_precision`` rounds the scores and probabilities to that type.
``nonpad_kv_seqlen`` (run-time cache lengths) is not mapped.
"""

from __future__ import annotations

import numpy as np

from ...types import TensorType, from_onnx_code
from .. import lowering
from ._common import (Refuse, attr, binary, broadcast, broadcast_in_dim, compare, convert, dtype_of, full, hlo,
                      iota, op_rules, out_type, reshape, scalar, select, shape_of, static_type, transpose, unary)
from ._common import concat as _concat


def _heads_first(b, x, heads, name):
    xs = shape_of(x)
    if len(xs) == 4:
        return x
    if len(xs) != 3 or not heads:
        raise Refuse(f"{name} must be 4-D, or 3-D with its head count given")
    bsz, seq, hidden = xs
    return transpose(b, reshape(b, x, (bsz, seq, heads, hidden // heads)), [0, 2, 1, 3])


def _attention(b, m):
    node = m.root
    inputs = list(node.inputs) + [None] * 7
    q, k, v, mask, past_k, past_v, nonpad = inputs[:7]
    if nonpad is not None:
        raise Refuse("nonpad_kv_seqlen (run-time cache lengths) is not mapped")
    if (past_k is None) != (past_v is None):
        raise Refuse("past_key and past_value must be given together")
    out_dt = dtype_of(q)
    work = "float64" if out_dt == "float64" else "float32"
    packed = len(shape_of(q)) == 3
    q4 = convert(b, _heads_first(b, q, attr(node, "q_num_heads"), "Q"), work)
    k4 = convert(b, _heads_first(b, k, attr(node, "kv_num_heads"), "K"), work)
    v4 = convert(b, _heads_first(b, v, attr(node, "kv_num_heads"), "V"), work)
    offset = 0
    if past_k is not None:
        offset = shape_of(past_k)[2]
        k4 = _concat(b, [convert(b, past_k, work), k4], 2)
        v4 = _concat(b, [convert(b, past_v, work), v4], 2)
    present_k, present_v = k4, v4
    bsz, heads, q_len, depth = shape_of(q4)
    kv_heads, kv_len = shape_of(k4)[1], shape_of(k4)[2]
    if heads != kv_heads:  # grouped heads: each key/value head serves heads // kv_heads query heads
        rep = heads // kv_heads
        k4, v4 = (reshape(b, broadcast_in_dim(b, t, (bsz, kv_heads, rep) + shape_of(t)[2:], [0, 1, 3, 4]),
                          (bsz, heads) + shape_of(t)[2:]) for t in (k4, v4))
    scale = attr(node, "scale")
    scale = 1 / np.sqrt(depth) if scale is None else float(scale)
    root = scalar(b, np.sqrt(scale), work)
    qs, ks = binary(b, "Mul", q4, root), binary(b, "Mul", k4, root)
    scores = hlo(b, "DotGeneral", qs, ks, type=TensorType(work, (bsz, heads, q_len, kv_len)),
                 lhs_batching_dimensions=[0, 1], rhs_batching_dimensions=[0, 1], lhs_contracting_dimensions=[3],
                 rhs_contracting_dimensions=[3])
    stages = {0: scores}
    cap = float(attr(node, "softcap", 0.0))
    if cap > 0:
        scores = binary(b, "Mul", unary(b, "Tanh", binary(b, "Div", scores, scalar(b, cap, work))),
                        scalar(b, cap, work))
    stages[1] = scores
    full_shape = (bsz, heads, q_len, kv_len)
    neg_inf = full(b, -np.inf, work, full_shape)
    zero = full(b, 0, work, full_shape)
    if mask is not None:
        ms = shape_of(mask)
        missing = kv_len - ms[-1]
        if missing < 0:
            raise Refuse("the mask covers more keys than there are")
        if dtype_of(mask) == "bool":
            if missing:
                mask = hlo(b, "Pad", mask, scalar(b, False, "bool"), type=TensorType("bool", ms[:-1] + (kv_len,)),
                           mode="PAD_VALUE", edge_padding_low=[0] * len(ms),
                           edge_padding_high=[0] * (len(ms) - 1) + [missing], interior_padding=[0] * len(ms))
            scores = select(b, broadcast(b, mask, full_shape), scores, neg_inf)
        else:
            bias = convert(b, mask, work)
            if missing:
                bias = hlo(b, "Pad", bias, scalar(b, -np.inf, work), type=TensorType(work, ms[:-1] + (kv_len,)),
                           mode="PAD_VALUE", edge_padding_low=[0] * len(ms),
                           edge_padding_high=[0] * (len(ms) - 1) + [missing], interior_padding=[0] * len(ms))
            scores = binary(b, "Add", scores, broadcast(b, bias, full_shape))
    allowed = None
    key = iota(b, "int64", full_shape, 3)
    position = binary(b, "Add", iota(b, "int64", full_shape, 2), scalar(b, offset, "int64"))
    left, right = int(attr(node, "left_window_size", -1)), int(attr(node, "right_window_size", -1))
    conditions = []
    if attr(node, "is_causal", 0):
        conditions.append(compare(b, key, position, "LE"))
    if left >= 0:
        conditions.append(compare(b, key, binary(b, "Sub", position, scalar(b, left, "int64")), "GE"))
    if right >= 0:
        conditions.append(compare(b, key, binary(b, "Add", position, scalar(b, right, "int64")), "LE"))
    for cond in conditions:
        allowed = cond if allowed is None else binary(b, "And", allowed, cond)
    if allowed is not None:
        scores = binary(b, "Add", scores, select(b, allowed, zero, neg_inf))
    stages[2] = scores
    precision = attr(node, "softmax_precision")
    if precision is not None:
        scores = convert(b, convert(b, scores, from_onnx_code(int(precision)).name), work)
    probs = hlo(b, "Softmax", scores, type=static_type(scores), axis=3, accurate=True, logarithmic=False)
    probs = select(b, compare(b, probs, probs, "EQ"), probs, zero)  # a fully masked row: zeros, not NaN
    if precision is not None:
        probs = convert(b, convert(b, probs, from_onnx_code(int(precision)).name), work)
    stages[3] = probs
    y = hlo(b, "DotGeneral", probs, v4, type=TensorType(work, (bsz, heads, q_len, shape_of(v4)[3])),
            lhs_batching_dimensions=[0, 1], rhs_batching_dimensions=[0, 1], lhs_contracting_dimensions=[3],
            rhs_contracting_dimensions=[2])
    if packed:
        y = reshape(b, transpose(b, y, [0, 2, 1, 3]), (bsz, q_len, heads * shape_of(v4)[3]))
    outs = [convert(b, y, out_dt)]
    extra = [present_k, present_v, stages.get(int(attr(node, "qk_matmul_output_mode", 0)))]
    for i in range(1, m.n_outputs):
        v_out = node.outputs[i] if i < len(node.outputs) else None
        if v_out is None:
            outs.append(None)
            continue
        value = convert(b, extra[i - 1], out_type(m, i).dtype)
        if shape_of(value) != out_type(m, i).shape:
            raise Refuse(f"output {i} shape {shape_of(value)} differs from the ONNX type {out_type(m, i).shape}")
        outs.append(value)
    return outs


RULES = op_rules("Attention-decomposed", "Attention", _attention, 7, 3, _outputs=4)
lowering.add_rules("onnx", "hlo", RULES)
