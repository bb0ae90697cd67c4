"""ONNX linear and flex attention decomposed into opset1 MatMul / SoftMax layers.

(ai.onnx Attention itself is decomposed into standard ops before conversion, for every target:
:mod:`opconv.converters.decompose.onnx_attention`.)

LinearAttention (opset 27) unrolls its recurrence over the static time steps;
FlexAttention (ai.onnx.preview) inlines its score_mod / prob_mod subgraphs, each converted with the
package's rules.
"""

from __future__ import annotations

import math

import numpy as np

from ..lowering import lower
from ._common import OPSET, Refuse, attr, const, i64, np_dtype, ov, static_shape


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


@lower("onnx", "openvino", "LinearAttention", inputs=range(3, 7))
def _linear_attention(b, m):  # noqa: C901  (the recurrence of the definition; one branch per update rule)
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
        raise Refuse(
            f"update_rule {rule!r} with{'' if decay is not None else 'out'} decay and "
            f"with{'' if beta is not None else 'out'} beta"
        )
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
        grouped = ov(
            b,
            "Reshape",
            _to_float32(b, decay),
            i64(b, [batch, steps, kv_heads, width], "decay_heads"),
            special_zero=False,
        )
        factors = _steps(b, ov(b, "Exp", ov(b, "Transpose", grouped, i64(b, [0, 2, 3, 1], "perm"))), steps, 3)
    if delta:
        # (B, T, H or 1) -> (B, H or 1, T, 1): each step a (B, H or 1, 1, 1) rate
        width = static_shape(beta)[2]
        if width not in (1, kv_heads):
            raise Refuse(f"beta of shape {static_shape(beta)} is not (B, T, H_kv) or (B, T, 1)")
        rates = ov(
            b, "Reshape", _to_float32(b, beta), i64(b, [batch, steps, width, 1], "beta_heads"), special_zero=False
        )
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
        outputs.append(
            _bin(b, "Multiply", ov(b, "MatMul", qs[t], read, transpose_a=False, transpose_b=False), scale_const)
        )
    y = outputs[0] if steps == 1 else ov(b, "Concat", *outputs, axis=2)
    y = ov(
        b,
        "Reshape",
        ov(b, "Transpose", y, i64(b, [0, 2, 1, 3], "perm")),
        i64(b, [batch, steps, q_heads * value_size], "merge"),
        special_zero=False,
    )
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
    from ...errors import ConversionError, MalformedModelError
    from ...ir import Model, outer_references
    from . import onnx_to_openvino  # the package's converter, for a body still in ONNX; imported late (a cycle)

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
        made = b.op(
            layer.op,
            *[None if v is None else values[id(v)] for v in layer.inputs],
            _outputs=len(layer.outputs),
            **layer.attrs,
        )
        for out, new in zip(layer.outputs, made if isinstance(made, list) else [made]):
            values[id(out)] = new
    return values[id(body.outputs[0])]


@lower("onnx", "openvino", "FlexAttention", domain="ai.onnx.preview", inputs=3, names=("q", "k", "v"))
def _flex_attention(b, m):
    """softmax(score_mod(Q*sqrt(scale) @ (K*sqrt(scale))^T)), prob_mod applied, times V; the scores, modifiers,
    softmax and last product run in float32 for float16 inputs, as defined."""
    node = m.root
    q, k, v = m["q"], m["k"], m["v"]
    dtype = np.dtype(np_dtype(q))
    if dtype not in (np.float32, np.float16, np.float64):
        raise Refuse(f"FlexAttention on {q.dtype}")
    precision = attr(node, "softmax_precision")
    if precision is not None and (precision, dtype) not in ((1, np.float32), (1, np.float16), (11, np.float64)):
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
    scores = ov(
        b, "MatMul", _bin(b, "Multiply", q, root), _bin(b, "Multiply", k, root), transpose_a=False, transpose_b=True
    )
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
