"""ONNX attention operators decomposed into opset1 MatMul / SoftMax / Select.

Attention (opset 23-25) follows the operator's definition step by step: 3-D
inputs split into heads, the past cache concatenated, K/V heads repeated for
grouped-query attention, Q and K each scaled by sqrt(scale), optional softcap,
the bias built from the mask, the padding keys of ``nonpad_kv_seqlen`` and the
causal / sliding-window band (``lower <= i + offset - j <= upper``, constant
unless the offset comes from ``nonpad_kv_seqlen``), a softmax whose rows that
the bias masks completely are set to 0, and the product with V.

LinearAttention (opset 27) unrolls its recurrence over the static time steps;
FlexAttention (ai.onnx.preview) inlines its score_mod / prob_mod subgraphs, each converted with the
package's rules.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._common import OPSET, Refuse, Rule, attr, captures, const, np_dtype, i64, ov, pattern, static_shape

MAX_OPTIONAL = 4  # attn_mask, past_key, past_value, nonpad_kv_seqlen


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


def _band_limits(node) -> tuple[int | None, int | None]:
    """(lower, upper) bounds on ``i + offset - j`` from ``is_causal`` and the sliding window (None: unbounded)."""
    left, right = int(attr(node, "left_window_size", -1)), int(attr(node, "right_window_size", -1))
    lowers = ([0] if attr(node, "is_causal", 0) else []) + ([-right] if right >= 0 else [])
    return (max(lowers) if lowers else None), (left if left >= 0 else None)


def _band(b, lower, upper, q_len: int, kv_len: int, offset):
    """Where query ``i`` may attend key ``j``: ``lower <= i + offset - j <= upper``.

    ``offset`` (the count of valid keys before the query block) is an int, which
    makes the band a constant bool array, or a (B, 1, 1, 1) float32 value from
    ``nonpad_kv_seqlen``, which makes it a per-batch (B, 1, q, kv) boolean value.
    """
    distance = np.arange(q_len)[:, None] - np.arange(kv_len)[None, :]
    if isinstance(offset, int):
        allowed = np.ones(distance.shape, bool)
        if lower is not None:
            allowed &= distance + offset >= lower
        if upper is not None:
            allowed &= distance + offset <= upper
        return allowed
    diff = _bin(b, "Add", const(b, distance, np.float32, "distance"), offset)
    allowed = None
    if lower is not None:
        allowed = _bin(b, "GreaterEqual", diff, const(b, lower, np.float32, "lower"))
    if upper is not None:
        below = _bin(b, "LessEqual", diff, const(b, upper, np.float32, "upper"))
        allowed = below if allowed is None else _bin(b, "LogicalAnd", allowed, below)
    return allowed


def _as_bias(b, allowed, dtype):
    """0 where ``allowed`` (a constant bool array or a boolean value), -inf elsewhere."""
    if isinstance(allowed, np.ndarray):
        return b.const(np.where(allowed, 0, -np.inf).astype(dtype), "position_bias")
    return ov(b, "Select", allowed, const(b, 0, dtype, "zero"), const(b, -np.inf, dtype, "minus_inf"),
              auto_broadcast="numpy")


def _attention(b, m):
    node = m.root
    inputs = list(node.inputs) + [None] * 7
    q, k, v, mask, past_key, past_value, kv_lengths = inputs[:7]
    if (past_key is None) != (past_value is None):
        raise Refuse("past_key and past_value must come together")
    if kv_lengths is not None and past_key is not None:
        raise Refuse("nonpad_kv_seqlen together with past_key / past_value")
    dtype = np_dtype(q)
    if q.dtype == "bfloat16":
        raise Refuse("Attention on bfloat16, which IR v10 has no element type for")
    if np.dtype(dtype) not in (np.float32, np.float16):
        raise Refuse(f"Attention on {q.dtype} (the opset1 decomposition is checked on float32 and float16)")
    precision = attr(node, "softmax_precision")
    # float16 inputs with softmax_precision=1 get a float32 SoftMax; a double softmax of float32 scores, rounded
    # back to float32 as the definition does, differs from a float32 one by a few ulps, so it runs in float32.
    if not (precision in (None, 1) or (precision, np.dtype(dtype)) in ((10, np.float16), (11, np.float32))):
        raise Refuse(f"softmax_precision={precision} on {q.dtype}")
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

    terms = [] if mask is None else [_mask_bias(b, mask, dtype, kv_len)]
    offset = 0 if past_key is None else static_shape(past_key)[2]
    if kv_lengths is not None:
        lengths = ov(b, "Reshape", ov(b, "Convert", kv_lengths, destination_type="float32"),
                     i64(b, [batch, 1, 1, 1], "per_batch"), special_zero=False)
        keys = const(b, np.arange(kv_len), np.float32, "key_positions")
        terms.append(_as_bias(b, _bin(b, "Less", keys, lengths), dtype))  # padding keys
    lower, upper = _band_limits(node)
    if lower is not None or upper is not None:
        if kv_lengths is not None:
            offset = _bin(b, "Subtract", lengths, const(b, q_len, np.float32, "q_len"))
        terms.append(_as_bias(b, _band(b, lower, upper, q_len, kv_len, offset), dtype))
    bias = None
    for term in terms:
        bias = term if bias is None else _bin(b, "Add", bias, term)
    biased = scores if bias is None else _bin(b, "Add", scores, bias)
    mode = int(attr(node, "qk_matmul_output_mode", 0))
    qk_out = {0: scores, 1: scores, 2: biased}.get(mode)

    if precision == 1 and np.dtype(dtype) != np.float32:
        weights = ov(b, "Convert", ov(b, "SoftMax", ov(b, "Convert", biased, destination_type="float32"), axis=3),
                     destination_type=np.dtype(dtype).name)
    else:
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


# ---------------------------------------------------------------------------
# LinearAttention (opset 27): the recurrence unrolled over the static time steps
# ---------------------------------------------------------------------------

UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")
MAX_STEPS = 1024  # unrolling a longer sequence would make an unreasonably large IR


def _steps(b, x, steps: int, axis: int):
    """``x`` cut into its ``steps`` slices of length 1 along ``axis``."""
    if steps == 1:
        return [x]
    return ov(b, "Split", x, b.const(np.asarray(axis, np.int64), "axis"), num_splits=steps, _outputs=steps)


def _to_float32(b, x):
    return x if x.dtype == "float32" else ov(b, "Convert", x, destination_type="float32")


def _linear_attention(b, m):
    """The definition's recurrence, in float32 like the definition: per step t, with (B, H, 1, D) slices,

    state *= exp(g_t) (gated); v_t = beta_t * (v_t - k_t @ state) (delta);
    state += k_t^T @ v_t; o_t = scale * q_t @ state (state heads repeated for grouped queries).
    """
    node = m.root
    q, k, v, past, decay, beta = (list(node.inputs) + [None] * 6)[:6]
    rule = attr(node, "update_rule", "gated_delta")
    if rule not in UPDATE_RULES:
        raise Refuse(f"update_rule {rule!r} (expected one of {', '.join(UPDATE_RULES)})")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        raise Refuse(f"update_rule {rule!r} with{'' if decay is not None else 'out'} decay and "
                     f"with{'' if beta is not None else 'out'} beta")
    dtype = np_dtype(q)
    if np.dtype(dtype) not in (np.float32, np.float16):
        raise Refuse(f"LinearAttention on {q.dtype}")
    q_heads, kv_heads = int(attr(node, "q_num_heads", 0)), int(attr(node, "kv_num_heads", 0))
    if kv_heads <= 0 or q_heads % kv_heads:
        raise Refuse(f"q_num_heads={q_heads} is not a positive multiple of kv_num_heads={kv_heads}")
    q_shape, k_shape, v_shape = static_shape(q), static_shape(k), static_shape(v)
    if not len(q_shape) == len(k_shape) == len(v_shape) == 3:
        raise Refuse("query, key and value must be rank 3 (B, T, H*D)")
    batch, steps = q_shape[:2]
    if steps > MAX_STEPS:
        raise Refuse(f"{steps} time steps is too many to unroll (limit {MAX_STEPS})")
    q, q_shape = _heads(b, _to_float32(b, q), q_shape, q_heads)
    k, (_, _, _, key_size) = _heads(b, _to_float32(b, k), k_shape, kv_heads)
    v, (_, _, _, value_size) = _heads(b, _to_float32(b, v), v_shape, kv_heads)
    state_shape = (batch, kv_heads, key_size, value_size)
    state_dtype = dtype if past is None else np_dtype(past)
    state = const(b, np.zeros(state_shape), np.float32, "zero_state") if past is None else _to_float32(b, past)

    scale = float(attr(node, "scale", 0.0)) or 1 / math.sqrt(q_shape[3])
    qs, ks, vs = (_steps(b, x, steps, 2) for x in (q, k, v))
    if gated:
        # (B, T, H) or (B, T, H*dk) -> (B, H, 1 or dk, T): each step a (B, H, 1 or dk, 1) factor over the state rows
        width = static_shape(decay)[2] // kv_heads
        if static_shape(decay)[2] not in (kv_heads, kv_heads * key_size):
            raise Refuse(f"decay of shape {static_shape(decay)} is not (B, T, H_kv) or (B, T, H_kv*d_k)")
        grouped = ov(b, "Reshape", _to_float32(b, decay), i64(b, [batch, steps, kv_heads, width], "decay_heads"),
                     special_zero=False)
        factors = _steps(b, ov(b, "Exp", ov(b, "Transpose", grouped, i64(b, [0, 2, 3, 1], "perm"))), steps, 3)
    if delta:
        # (B, T, H or 1) -> (B, H or 1, T, 1): each step a (B, H or 1, 1, 1) rate
        width = static_shape(beta)[2]
        if width not in (1, kv_heads):
            raise Refuse(f"beta of shape {static_shape(beta)} is not (B, T, H_kv) or (B, T, 1)")
        rates = ov(b, "Reshape", _to_float32(b, beta), i64(b, [batch, steps, width, 1], "beta_heads"),
                   special_zero=False)
        rates = _steps(b, ov(b, "Transpose", rates, i64(b, [0, 2, 1, 3], "perm")), steps, 2)
    scale_const = const(b, scale, np.float32, "scale")
    outputs = []
    for t in range(steps):
        value = vs[t]
        if gated:
            state = _bin(b, "Multiply", state, factors[t])
        if delta:
            retrieved = ov(b, "MatMul", ks[t], state, transpose_a=False, transpose_b=False)
            value = _bin(b, "Multiply", rates[t], _bin(b, "Subtract", value, retrieved))
        state = _bin(b, "Add", state, ov(b, "MatMul", ks[t], value, transpose_a=True, transpose_b=False))
        read = state if q_heads == kv_heads else _repeat_heads(b, state, state_shape, q_heads // kv_heads)
        outputs.append(_bin(b, "Multiply", ov(b, "MatMul", qs[t], read, transpose_a=False, transpose_b=False),
                            scale_const))
    y = outputs[0] if steps == 1 else ov(b, "Concat", *outputs, axis=2)
    y = ov(b, "Reshape", ov(b, "Transpose", y, i64(b, [0, 2, 1, 3], "perm")),
           i64(b, [batch, steps, q_heads * value_size], "merge"), special_zero=False)
    if np.dtype(dtype) != np.float32:
        y = ov(b, "Convert", y, destination_type=np.dtype(dtype).name)
    if np.dtype(state_dtype) != np.float32:
        state = ov(b, "Convert", state, destination_type=np.dtype(state_dtype).name)
    return [y, state]


# ---------------------------------------------------------------------------
# FlexAttention (ai.onnx.preview 1) without modifier subgraphs
# ---------------------------------------------------------------------------

def _back_to_onnx(body, version: int):
    """A copy of a partly converted ``body`` (the nodes that needed its static shape are still ONNX) with its
    opset1 nodes turned back into ai.onnx ``version`` nodes, so that the whole body converts again."""
    from ..openvino_to_onnx import RULES as TO_ONNX
    from ..rewrite import convert_graph

    graph = body.copy()
    convert_graph(graph, TO_ONNX, "", version, is_target=lambda n: n.domain != OPSET)
    return graph


def _inline_modifier(b, node, name: str, x, shape: tuple[int, ...]):
    """The ``name`` subgraph of ``node`` applied to ``x`` (of static ``shape``), its opset1 layers rebuilt here.

    The rewrite engine converts subgraphs before their node, with the body's input shape symbolic: a body of
    element-wise ops is opset1 already; one that reads the shape (Shape, Range ...) is still partly ONNX, and is
    turned back into ONNX and converted on its own with ``shape``, where constant folding resolves it.
    """
    from . import onnx_to_openvino  # the package's converter, for a body still in ONNX; imported late (a cycle)
    from ...errors import ConversionError, MalformedModelError
    from ...ir import Model, outer_references

    body = attr(node, name)
    if outer_references(body):
        raise Refuse(f"{name} reads values of the enclosing graph")
    if len(body.inputs) != 1 or len(body.outputs) != 1:
        raise Refuse(f"{name} must have one input and one output")
    onnx_nodes = [n for n in body.nodes if n.domain != OPSET]
    if onnx_nodes:
        opsets = {n.domain: n.version for n in onnx_nodes if n.version is not None}
        try:
            if len(onnx_nodes) < len(body.nodes):
                body = _back_to_onnx(body, opsets.get("", 1))
            body = onnx_to_openvino(Model(body, "onnx", opsets), {body.inputs[0].name: shape}).graph
        except (ConversionError, MalformedModelError) as error:  # the body breaks its schemas: the door says so
            raise Refuse(f"{name}: {error}") from None
    values = {id(body.inputs[0]): x}
    for value in body.initializers.values():
        values[id(value)] = b.const(value.const.numpy(), value.name)
    for layer in body.nodes:
        made = b.op(layer.op, *[None if v is None else values[id(v)] for v in layer.inputs],
                    _outputs=len(layer.outputs), **layer.attrs)
        for out, new in zip(layer.outputs, made if isinstance(made, list) else [made]):
            values[id(out)] = new
    return values[id(body.outputs[0])]


def _flex_attention(b, m):
    """softmax(score_mod(Q*sqrt(scale) @ (K*sqrt(scale))^T)), prob_mod applied, times V; the scores, modifiers,
    softmax and last product run in float32 for float16 inputs, as defined."""
    node = m.root
    q, k, v = m["q"], m["k"], m["v"]
    dtype = np.dtype(np_dtype(q))
    if dtype not in (np.float32, np.float16, np.float64):
        raise Refuse(f"FlexAttention on {q.dtype}")
    precision = attr(node, "softmax_precision")
    if precision is not None and not (precision, dtype) in ((1, np.float32), (1, np.float16), (11, np.float64)):
        raise Refuse(f"softmax_precision={precision} on {q.dtype}")
    q_shape, k_shape, v_shape = static_shape(q), static_shape(k), static_shape(v)
    if not len(q_shape) == len(k_shape) == len(v_shape) == 4:
        raise Refuse("Q, K and V must be rank 4")
    heads, kv_heads = q_shape[1], k_shape[1]
    if heads != kv_heads:
        if heads % kv_heads or v_shape[1] != kv_heads:
            raise Refuse(f"{heads} query heads do not group over {kv_heads} key heads")
        k = _repeat_heads(b, k, k_shape, heads // kv_heads)
        v = _repeat_heads(b, v, v_shape, heads // kv_heads)
    scale = attr(node, "scale")
    root = const(b, math.sqrt(1 / math.sqrt(q_shape[3]) if scale is None else float(scale)), dtype, "sqrt_scale")
    scores = ov(b, "MatMul", _bin(b, "Multiply", q, root), _bin(b, "Multiply", k, root),
                transpose_a=False, transpose_b=True)
    if dtype == np.float16:
        scores, v = _to_float32(b, scores), _to_float32(b, v)
    score_shape = (q_shape[0], heads, q_shape[2], k_shape[2])
    if attr(node, "score_mod") is not None:
        scores = _inline_modifier(b, node, "score_mod", scores, score_shape)
    weights = ov(b, "SoftMax", scores, axis=3)
    if attr(node, "prob_mod") is not None:
        weights = _inline_modifier(b, node, "prob_mod", weights, score_shape)
    y = ov(b, "MatMul", weights, v, transpose_a=False, transpose_b=False)
    return y if dtype != np.float16 else ov(b, "Convert", y, destination_type=dtype.name)


def _optional_patterns(op: str, required: list[str], optional: int, outputs: int, replacement) -> list[Rule]:
    """One rule per arrangement of ``op``'s ``optional`` trailing inputs (given or omitted; the last given one ends
    the list); the replacement reads ``m.root.inputs``."""
    rules = []
    for count in range(0, optional + 1):
        for given in itertools.product((True, False), repeat=count):
            if count and not given[-1]:
                continue  # trailing omitted inputs are not inputs
            names = required + [f"opt{i}" for i, g in enumerate(given) if g]

            def fn(p, *captured, _given=given):
                rest = iter(captured[len(required):])
                values = list(captured[:len(required)]) + [next(rest) if g else None for g in _given]
                return p.node(op, *values, _outputs=outputs)

            fn = captures(fn, names)
            fn.__name__ = op
            rules.append(Rule(f"{op}-decomposed-{''.join('1' if g else '0' for g in given)}", fn, replacement))
    return rules


RULES = (_optional_patterns("Attention", ["q", "k", "v"], MAX_OPTIONAL, 4, _attention)
         + _optional_patterns("LinearAttention", ["q", "k", "v"], 3, 2, _linear_attention)
         + [Rule("FlexAttention-decomposed", pattern("FlexAttention", ["q", "k", "v"], _domain="ai.onnx.preview"),
                 _flex_attention)])
