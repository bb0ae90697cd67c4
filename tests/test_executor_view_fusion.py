"""The ONNX executor's view fusion (fusion.fuse_view_steps): a Reshape, Transpose, Squeeze, Unsqueeze or
Flatten with constant parameters, or a Cast, alone reading a step's output, is applied by that step to its
result.

Each fused graph is checked against onnxruntime and, bit for bit, against the same session without the
fusion, on small graphs and on real exports of the corpus; views that must stay steps (a producer's output read
twice or returned, a shape computed at run time, a graph input) are checked too.
"""

from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from .test_executor_transformer_fusion import runs_with_and_without

RNG = np.random.default_rng(12)
CORPUS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "corpus")


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(nodes, inputs, outputs, initializers, opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds, absorbed_expected, at_least=False):
    absorbed, fused, plain = runs_with_and_without(model, feeds, "fuse_view_steps", 0)
    assert absorbed >= absorbed_expected if at_least else absorbed == absorbed_expected
    proto = model if not isinstance(model, str) else None
    session = ort.InferenceSession(
        proto.SerializeToString() if proto is not None else model, providers=["CPUExecutionProvider"]
    )
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    for run in fused:
        assert run.keys() == plain.keys()
        for name, value in run.items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-5)
            assert value.shape == plain[name].shape and np.array_equal(value, plain[name])


def test_a_chain_of_views_casts_and_split_outputs_are_absorbed_by_their_producers():
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["x"]),
        helper.make_node("Reshape", ["x", "to_heads"], ["r"]),  # (2, 12) -> (2, 3, 4), a -1 filled
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0, 2]),
        helper.make_node("Reshape", ["t", "to_rows"], ["rows"]),  # a copy of the transposed view: 0 copies a dim
        helper.make_node("Unsqueeze", ["rows", "axis0"], ["u"]),
        helper.make_node("Split", ["u"], ["s0", "s1"], axis=2),
        helper.make_node("Flatten", ["s0"], ["f0"], axis=1),
        helper.make_node("Squeeze", ["s1", "axis0"], ["q1"]),
        helper.make_node("Cast", ["q1"], ["d1"], to=TensorProto.DOUBLE),  # a conversion, then a no-op
        helper.make_node("Cast", ["d1"], ["c1"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["c1"], ["e1"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["f0", "f0"], ["y0"]),
        helper.make_node("Tanh", ["e1"], ["y1"]),
    ]
    initializers = [_ints("to_heads", [2, 3, -1]), _ints("to_rows", [0, -1]), _ints("axis0", [0])]
    model = _model(nodes, [("a", [2, 12])], ["y0", "y1"], initializers)
    _check(model, {"a": RNG.standard_normal((2, 12)).astype(np.float32)}, 9)


@pytest.mark.parametrize("variant", ["read twice", "returned", "shape computed", "graph input"])
def test_views_that_must_stay_steps(variant):
    source = "a" if variant == "graph input" else "x"
    shape = "shape" if variant == "shape computed" else "to_rows"
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["x"]),
        helper.make_node("Shape", ["a"], ["shape"]),
        helper.make_node("Reshape", [source, shape], ["r"]),
        helper.make_node("Tanh", ["r"], ["y"]),
    ]
    outputs = ["y"]
    if variant == "read twice":
        nodes.append(helper.make_node("Neg", ["x"], ["n"]))
        outputs.append("n")
    if variant == "returned":
        outputs.append("x")
    model = _model(nodes, [("a", [4, 6])], outputs, [_ints("to_rows", [6, 4])])
    _check(model, {"a": RNG.standard_normal((4, 6)).astype(np.float32)}, 0)


@pytest.mark.parametrize(
    "name,absorbed", [("gpt2_legacy_op14", 30), ("llama_legacy_op17", 20), ("bert_legacy_op14", 20)]
)
def test_real_exports_match_onnxruntime_and_the_unfused_bits(name, absorbed):
    stored = np.load(os.path.join(CORPUS, f"{name}.npz"))
    feeds = {k.split(":", 1)[1]: v for k, v in stored.items() if k.startswith("input:")}
    _check(os.path.join(CORPUS, f"{name}.onnx"), feeds, absorbed, at_least=True)  # every layer's Reshapes
