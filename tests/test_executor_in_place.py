"""Kernels writing into a dying input's buffer (``ExecContext.owns``) must never change a value still in use.

Each graph below shares one buffer between several values (a feed, an initializer, a view made by
Reshape or Transpose, Identity's alias, a value with two consumers, a graph output that is also consumed,
an outer-scope value read by a Loop body).  The executor's outputs, and the caller's feeds, are checked
against onnxruntime, which the project did not write, and against copies taken before the run.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv import executor

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, None) for n in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _onnxruntime(proto, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


_SHAPE = numpy_helper.from_array(np.array([6, 4], np.int64), "shape")
_BIAS = numpy_helper.from_array(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6), "bias")

GRAPHS = {
    # a feed consumed by in-place-capable kernels
    "feed": ([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["x", "x"], ["s"])], ["r", "s"], []),
    # one value, two consumers: the first must not overwrite it
    "two_consumers": (
        [
            helper.make_node("Mul", ["x", "x"], ["m"]),
            helper.make_node("Relu", ["m"], ["r"]),
            helper.make_node("Sub", ["m", "x"], ["s"]),
        ],
        ["r", "s"],
        [],
    ),
    # a view (Reshape) of a dying value stays alive as an output
    "reshape_view": (
        [
            helper.make_node("Mul", ["x", "x"], ["m"]),
            helper.make_node("Reshape", ["m", "shape"], ["v"]),
            helper.make_node("Relu", ["m"], ["r"]),
        ],
        ["v", "r"],
        [_SHAPE],
    ),
    "transpose_view": (
        [
            helper.make_node("Neg", ["x"], ["m"]),
            helper.make_node("Transpose", ["m"], ["t"], perm=[1, 0]),
            helper.make_node("Add", ["m", "bias"], ["a"]),
            helper.make_node("Relu", ["t"], ["r"]),
        ],
        ["a", "r"],
        [_BIAS],
    ),
    # Identity may hand back the very same array
    "identity_alias": (
        [
            helper.make_node("Neg", ["x"], ["m"]),
            helper.make_node("Identity", ["m"], ["i"]),
            helper.make_node("Relu", ["m"], ["r"]),
        ],
        ["i", "r"],
        [],
    ),
    # a graph output that is consumed afterwards is never a donor
    "output_consumed": (
        [
            helper.make_node("Neg", ["x"], ["m"]),
            helper.make_node("Relu", ["m"], ["r"]),
            helper.make_node("Max", ["m", "r"], ["mx"]),
        ],
        ["m", "r", "mx"],
        [],
    ),
    # initializers are constants, whatever consumes them
    "initializer": (
        [
            helper.make_node("Relu", ["bias"], ["r"]),
            helper.make_node("Add", ["bias", "x"], ["a"]),
            helper.make_node("Sum", ["a", "bias"], ["s"]),
        ],
        ["r", "s"],
        [_BIAS],
    ),
    # a chain where every step may reuse its input's buffer
    "chain": (
        [
            helper.make_node("Mul", ["x", "x"], ["m"]),
            helper.make_node("Relu", ["m"], ["r"]),
            helper.make_node("Add", ["r", "bias"], ["a"]),
            helper.make_node("Sum", ["a", "x"], ["s"]),
            helper.make_node("Max", ["s", "x"], ["mx"]),
        ],
        ["mx"],
        [_BIAS],
    ),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_shared_buffers_survive_in_place_kernels(name):
    nodes, outputs, initializers = GRAPHS[name]
    proto = _model(nodes, [("x", [4, 6])], outputs, initializers)
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    feeds = {"x": x.copy()}
    session = opconv.prepare(opconv.load(proto))
    for _ in range(2):  # the second run sees folded values kept from the first
        ours = session.run(feeds)
        np.testing.assert_array_equal(feeds["x"], x)
        theirs = _onnxruntime(proto, {"x": x})
        for out in outputs:
            np.testing.assert_allclose(ours[out], theirs[out], rtol=1e-6, atol=1e-6, err_msg=out)


def test_outer_scope_value_read_by_a_loop_body_is_not_overwritten():
    body = helper.make_graph(
        [helper.make_node("Add", ["carried", "m"], ["next"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("carried", F, [4, 6]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("next", F, [4, 6]),
        ],
    )
    trip = numpy_helper.from_array(np.array(3, np.int64), "trip")
    nodes = [
        helper.make_node("Neg", ["x"], ["m"]),
        helper.make_node("Loop", ["trip", "", "x"], ["looped"], body=body),
        helper.make_node("Relu", ["m"], ["r"]),
    ]
    proto = _model(nodes, [("x", [4, 6])], ["looped", "r"], [trip])
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    ours = opconv.run(opconv.load(proto), {"x": x})
    theirs = _onnxruntime(proto, {"x": x})
    for out in ("looped", "r"):
        np.testing.assert_allclose(ours[out], theirs[out], rtol=1e-6, atol=1e-6, err_msg=out)


def test_a_dying_intermediate_is_handed_to_its_last_consumer():
    # What the mechanism is for: Relu after Mul may reuse Mul's buffer, and does.
    seen = []
    original = executor.ExecContext.owns

    def spy(self, i):
        seen.append((self.node.op, original(self, i)))
        return seen[-1][1]

    proto = _model(
        [helper.make_node("Mul", ["x", "x"], ["m"]), helper.make_node("Relu", ["m"], ["r"])], [("x", [4, 6])], ["r"]
    )
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    executor.ExecContext.owns = spy
    try:
        out = opconv.run(opconv.load(proto), {"x": x})["r"]
    finally:
        executor.ExecContext.owns = original
    np.testing.assert_array_equal(out, np.maximum(x * x, 0))
    assert ("Relu", True) in seen
