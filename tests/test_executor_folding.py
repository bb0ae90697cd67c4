"""Constant folding of the shared interpreter around initializers that a feed may override.

An initializer that is also a graph input (every initializer is one before ONNX IR version 4, as in
the light models) is folded with the rest of the constants, unless a run feeds it: that run computes
the steps reading it from the fed value.  Expected values are written out with numpy.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.dialects.onnx.executor import Session


def _model():
    # w2 = w * w is computed from initializers alone; w is also a graph input, so a feed can replace it.
    nodes = [
        helper.make_node("Mul", ["w", "w"], ["w2"]),
        helper.make_node("Add", ["x", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")],
    )
    return opconv.load(helper.make_model(graph, ir_version=3, opset_imports=[helper.make_opsetid("", 9)]))


def test_steps_reading_an_overridable_initializer_are_folded_yet_follow_a_feed():
    session = opconv.prepare(_model())
    x = np.array([10, 20, 30], np.float32)
    w = np.array([1, 2, 3], np.float32)
    fed = np.array([-1, 0.5, 4], np.float32)
    np.testing.assert_array_equal(session.run({"x": x})["y"], x + w * w)
    np.testing.assert_array_equal(session.run({"x": x, "w": fed})["y"], x + fed * fed)
    np.testing.assert_array_equal(session.run({"x": x})["y"], x + w * w)  # the folded value is intact


def test_values_depending_on_an_overridable_initializer_are_not_handed_out_as_constants():
    model = _model()
    session = Session(model)
    w2 = model.graph.nodes[0].outputs[0]
    assert id(w2) not in session.folded_values()
