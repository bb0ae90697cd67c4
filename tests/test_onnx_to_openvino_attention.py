"""ONNX attention-family ops -> opset1 decompositions (CausalConvWithState, Attention with padded keys and sliding
windows, LinearAttention, FlexAttention): the IR computes what onnxruntime computes (onnx's reference evaluator where
onnxruntime lacks the op or its newest version), in OpenVINO's CPU plugin and in opconv's IR executor, on random
data."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opconv
from opconv.compare import compare_arrays, tolerance
from opconv.errors import ConversionError

from .runtimes import convert_and_run_ir


def _model(op, inputs, outputs, opset, initializers=(), domain="", **attrs):
    """A one-node model.  ``inputs``: [(name, array)] in the op's order, ("", None) for an omitted input;
    ``outputs``: {name: (dtype, shape)}; ``initializers``: names among ``inputs`` stored as constants."""

    def info(name, dtype, shape):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape))

    node = helper.make_node(op, [n for n, _ in inputs], list(outputs), domain=domain, **attrs)
    graph = helper.make_graph(
        [node],
        op.lower(),
        [info(n, v.dtype, v.shape) for n, v in inputs if n and n not in initializers],
        [info(n, *spec) for n, spec in outputs.items()],
        [numpy_helper.from_array(v, n) for n, v in inputs if n in initializers],
    )
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    proto = helper.make_model(graph, opset_imports=imports)
    proto.ir_version = 10
    return proto, {n: v for n, v in inputs if n and n not in initializers}


def _expected(proto, feeds, oracle):
    if oracle == "onnxruntime":
        session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    names = [o.name for o in proto.graph.output]
    return dict(zip(names, ReferenceEvaluator(proto).run(None, feeds)))


def _check(tmp_path, proto, feeds, oracle, gone):
    expected = _expected(proto, feeds, oracle)
    converted, runs = convert_and_run_ir(tmp_path, proto, feeds)
    assert gone not in {n.op for n in converted.graph.nodes}
    for who, actual in runs.items():
        for name, value in expected.items():
            rtol, atol = tolerance(str(value.dtype))
            assert name in actual, f"{who}: no output {name!r} among {sorted(actual)}"
            # OpenVINO reports IR v10 outputs in its legacy types (f16 -> f32): the values are what is compared.
            cmp = compare_arrays(name, value, np.asarray(actual[name]).astype(value.dtype), rtol=rtol, atol=atol)
            assert cmp.ok, f"{who}: {cmp.message}"


# ---------------------------------------------------------------------------
# CausalConvWithState (onnxruntime has no kernel: onnx's reference evaluator is the oracle)
# ---------------------------------------------------------------------------

B, C, L, K = 2, 3, 6, 4


@pytest.mark.parametrize(
    "bias,past,activation,constant_weight",
    [
        (False, False, "none", True),
        (True, True, "silu", True),
        (True, False, "swish", False),
        (False, True, "none", False),
    ],
)
def test_causal_conv_with_state(tmp_path, bias, past, activation, constant_weight):
    rng = np.random.default_rng(7)
    inputs = [
        ("x", rng.standard_normal((B, C, L)).astype(np.float32)),
        ("w", rng.standard_normal((C, 1, K)).astype(np.float32)),
        ("bias", rng.standard_normal(C).astype(np.float32)) if bias else ("", None),
        ("past", rng.standard_normal((B, C, K - 1)).astype(np.float32)) if past else ("", None),
    ]
    while not inputs[-1][0]:
        inputs.pop()
    proto, feeds = _model(
        "CausalConvWithState",
        inputs,
        {"y": (np.float32, (B, C, L)), "state": (np.float32, (B, C, K - 1))},
        27,
        {"w", "bias"} if constant_weight else {"bias"},
        activation=activation,
    )
    _check(tmp_path, proto, feeds, "reference", "CausalConvWithState")


def test_causal_conv_kernel_size_one_is_refused():
    proto, _ = _model(
        "CausalConvWithState",
        [("x", np.zeros((B, C, L), np.float32)), ("w", np.ones((C, 1, 1), np.float32))],
        {"y": (np.float32, (B, C, L)), "state": (np.float32, (B, C, 0))},
        27,
        {"w"},
    )
    with pytest.raises(ConversionError, match="empty"):
        opconv.convert(opconv.load(proto), to="openvino")


# ---------------------------------------------------------------------------
# Attention: per-batch key lengths (nonpad_kv_seqlen), sliding windows, float16
# ---------------------------------------------------------------------------


def _attention_inputs(rng, dtype, batch=2, heads=4, kv_heads=2, q_len=3, kv_len=7, size=8, three_d=False):
    def draw(*shape):
        return rng.standard_normal(shape).astype(dtype)

    if three_d:
        return (
            draw(batch, q_len, heads * size),
            draw(batch, kv_len, kv_heads * size),
            draw(batch, kv_len, kv_heads * size),
        )
    return draw(batch, heads, q_len, size), draw(batch, kv_heads, kv_len, size), draw(batch, kv_heads, kv_len, size)


ATTENTION_CASES = {
    # name: (opset, oracle, dtype, 3-D, with a float mask, with nonpad_kv_seqlen, attributes)
    "nonpad-causal": (24, "onnxruntime", np.float32, False, False, True, dict(is_causal=1)),
    "nonpad-mask-3d": (24, "onnxruntime", np.float32, True, True, True, dict(q_num_heads=4, kv_num_heads=2)),
    "float16-causal-softmax-float": (
        24,
        "onnxruntime",
        np.float16,
        False,
        False,
        False,
        dict(is_causal=1, softmax_precision=1),
    ),
    "local-window-causal": (25, "reference", np.float32, False, True, False, dict(is_causal=1, left_window_size=2)),
    "bidirectional-window-nonpad": (
        25,
        "reference",
        np.float32,
        False,
        False,
        True,
        dict(left_window_size=1, right_window_size=2),
    ),
    "local-window-nonpad-causal-3d": (
        25,
        "reference",
        np.float32,
        True,
        False,
        True,
        dict(is_causal=1, left_window_size=3, q_num_heads=4, kv_num_heads=2),
    ),
}


@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
def test_attention(tmp_path, case):
    opset, oracle, dtype, three_d, masked, nonpad, attrs = ATTENTION_CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    q, k, v = _attention_inputs(rng, dtype, three_d=three_d)
    inputs = [
        ("q", q),
        ("k", k),
        ("v", v),
        ("mask", rng.standard_normal((3, 7)).astype(dtype)) if masked else ("", None),
    ]
    if nonpad:
        inputs += [("", None), ("", None), ("lengths", np.asarray([7, 4], np.int64))]
    while not inputs[-1][0]:
        inputs.pop()
    y_shape = (2, 3, 32) if three_d else (2, 4, 3, 8)
    proto, feeds = _model("Attention", inputs, {"y": (dtype, y_shape)}, opset, **attrs)
    _check(tmp_path, proto, feeds, oracle, "Attention")


# ---------------------------------------------------------------------------
# LinearAttention (unrolled) and FlexAttention
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule,past,q_heads", [("gated_delta", True, 4), ("gated", False, 2), ("delta", True, 2), ("linear", False, 4)]
)
def test_linear_attention(tmp_path, rule, past, q_heads):
    rng = np.random.default_rng(sum(map(ord, rule)) + q_heads)
    batch, steps, kv_heads, dk, dv = 2, 5, 2, 4, 3
    keys = rng.standard_normal((batch, steps, kv_heads, dk)).astype(np.float32)
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)  # the delta rules expect L2-normalized keys
    inputs = [
        ("q", rng.standard_normal((batch, steps, q_heads * dk)).astype(np.float32)),
        ("k", keys.reshape(batch, steps, kv_heads * dk)),
        ("v", rng.standard_normal((batch, steps, kv_heads * dv)).astype(np.float32)),
        ("past", rng.standard_normal((batch, kv_heads, dk, dv)).astype(np.float32)) if past else ("", None),
        ("decay", -rng.uniform(0, 1, (batch, steps, kv_heads * (dk if past else 1))).astype(np.float32))
        if "gated" in rule
        else ("", None),
        ("beta", rng.uniform(0, 1, (batch, steps, kv_heads)).astype(np.float32)) if "delta" in rule else ("", None),
    ]
    while not inputs[-1][0]:
        inputs.pop()
    proto, feeds = _model(
        "LinearAttention",
        inputs,
        {"y": (np.float32, (batch, steps, q_heads * dv)), "state": (np.float32, (batch, kv_heads, dk, dv))},
        27,
        update_rule=rule,
        q_num_heads=q_heads,
        kv_num_heads=kv_heads,
    )
    _check(tmp_path, proto, feeds, "reference", "LinearAttention")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_flex_attention(tmp_path, dtype):
    q, k, v = _attention_inputs(np.random.default_rng(5), dtype)
    proto, feeds = _model(
        "FlexAttention",
        [("q", q), ("k", k), ("v", v)],
        {"y": (dtype, (2, 4, 3, 8))},
        26,
        domain="ai.onnx.preview",
        scale=0.3,
    )
    _check(tmp_path, proto, feeds, "reference", "FlexAttention")


def test_flex_attention_inlines_score_and_prob_modifiers(tmp_path):
    """score_mod: a soft cap of 2; prob_mod: probabilities squared (the modifiers' result shape is unchanged)."""

    def body(name, nodes, inits=()):
        scores = helper.make_tensor_value_info("in", TensorProto.FLOAT, ["B", "H", "L", "S"])
        out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", "H", "L", "S"])
        return helper.make_graph(nodes, name, [scores], [out], list(inits))

    cap = numpy_helper.from_array(np.asarray(2.0, np.float32), "cap")
    score_mod = body(
        "soft_cap",
        [
            helper.make_node("Div", ["in", "cap"], ["scaled"]),
            helper.make_node("Tanh", ["scaled"], ["capped"]),
            helper.make_node("Mul", ["capped", "cap"], ["out"]),
        ],
        [cap],
    )
    prob_mod = body("square", [helper.make_node("Mul", ["in", "in"], ["out"])])
    q, k, v = _attention_inputs(np.random.default_rng(11), np.float32, kv_heads=4)
    proto, feeds = _model(
        "FlexAttention",
        [("q", q), ("k", k), ("v", v)],
        {"y": (np.float32, (2, 4, 3, 8))},
        26,
        domain="ai.onnx.preview",
        score_mod=score_mod,
        prob_mod=prob_mod,
    )
    _check(tmp_path, proto, feeds, "reference", "FlexAttention")


def test_flex_attention_inlines_a_modifier_that_reads_the_score_shape(tmp_path):
    """score_mod adds (query index - key index), the indices from Range over the scores' Shape."""

    def scalar(name, value):
        return numpy_helper.from_array(np.asarray(value, np.int64), name)

    nodes = [
        helper.make_node("Shape", ["in"], ["shape"]),
        helper.make_node("Gather", ["shape", "two"], ["queries"], axis=0),
        helper.make_node("Gather", ["shape", "three"], ["keys"], axis=0),
        helper.make_node("Range", ["zero", "queries", "one"], ["q_range"]),
        helper.make_node("Range", ["zero", "keys", "one"], ["k_range"]),
        helper.make_node("Unsqueeze", ["q_range", "one_axis"], ["q_column"]),
        helper.make_node("Sub", ["q_column", "k_range"], ["relative"]),
        helper.make_node("Cast", ["relative"], ["relative_float"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["in", "relative_float"], ["out"]),
    ]
    inits = [
        scalar("zero", 0),
        scalar("one", 1),
        scalar("two", 2),
        scalar("three", 3),
        numpy_helper.from_array(np.asarray([1], np.int64), "one_axis"),
    ]
    score_mod = helper.make_graph(
        nodes,
        "relative",
        [helper.make_tensor_value_info("in", TensorProto.FLOAT, ["B", "H", "L", "S"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", "H", "L", "S"])],
        inits,
    )
    q, k, v = _attention_inputs(np.random.default_rng(13), np.float32)
    proto, feeds = _model(
        "FlexAttention",
        [("q", q), ("k", k), ("v", v)],
        {"y": (np.float32, (2, 4, 3, 8))},
        26,
        domain="ai.onnx.preview",
        score_mod=score_mod,
    )
    _check(tmp_path, proto, feeds, "reference", "FlexAttention")
