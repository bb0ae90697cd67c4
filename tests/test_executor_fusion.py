"""The ONNX executor runs Conv -> inference BatchNormalization as one convolution (opconv/dialects/onnx/fusion.py).

Checked against onnxruntime on random weights: plain pairs, grouped and biased convolutions, pairs that must
not fuse (the Conv output used elsewhere or returned, training-mode statistics), and models whose
initializers are also inputs, where a run that feeds a BatchNormalization parameter must see its feed.
"""

from __future__ import annotations

import copy

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.dialects.onnx import fusion

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def _params(channels: int, in_channels: int, group: int, bias: bool) -> list:
    arrays = {
        "w": RNG.standard_normal((channels, in_channels // group, 3, 3)).astype(np.float32),
        "scale": RNG.uniform(0.5, 2, channels).astype(np.float32),
        "shift": RNG.standard_normal(channels).astype(np.float32),
        "mean": RNG.standard_normal(channels).astype(np.float32),
        "var": RNG.uniform(0.1, 3, channels).astype(np.float32),
    }
    if bias:
        arrays["b"] = RNG.standard_normal(channels).astype(np.float32)
    return [numpy_helper.from_array(a, k) for k, a in arrays.items()]


def _model(*, group=1, bias=False, extra_use=False, conv_is_output=False, ir_version=8, opset=15):
    conv_inputs = ["x", "w"] + (["b"] if bias else [])
    nodes = [helper.make_node("Conv", conv_inputs, ["c"], group=group, pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"], epsilon=1e-3),
             helper.make_node("Relu", ["y"], ["r"])]
    outputs = ["r"]
    if extra_use:
        nodes.append(helper.make_node("Sigmoid", ["c"], ["s"]))
        outputs.append("s")
    if conv_is_output:
        outputs.append("c")
    initializers = _params(8, 4, group, bias)
    inputs = [helper.make_tensor_value_info("x", F, [2, 4, 9, 9])]
    if ir_version < 4:  # every initializer is also an input, so a run may feed it
        inputs += [helper.make_tensor_value_info(t.name, F, list(t.dims)) for t in initializers]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(n, F, None) for n in outputs],
                              initializers)
    return helper.make_model(graph, ir_version=ir_version, opset_imports=[helper.make_opsetid("", opset)])


def _fused_pairs(proto) -> int:
    counts = []
    original = fusion.fuse_conv_batch_norm

    def spy(graph, plan):
        counts.append(original(graph, plan))
        return counts[-1]

    fusion.fuse_conv_batch_norm = spy
    try:
        opconv.prepare(opconv.load(proto))
    finally:
        fusion.fuse_conv_batch_norm = original
    return counts[0]


def _compare(proto, feeds):
    theirs = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    names = [o.name for o in proto.graph.output]
    ours = opconv.prepare(opconv.load(proto)).run(feeds)
    for name, expected in zip(names, theirs):
        np.testing.assert_allclose(ours[name], expected, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("group,bias,opset", [(1, False, 15), (2, True, 15), (4, False, 9), (1, True, 7)])
def test_conv_batch_norm_pairs_fuse_and_match_onnxruntime(group, bias, opset):
    proto = _model(group=group, bias=bias, opset=opset)
    assert _fused_pairs(proto) == 1
    _compare(proto, {"x": RNG.standard_normal((2, 4, 9, 9)).astype(np.float32)})


@pytest.mark.parametrize("kwargs", [{"extra_use": True}, {"conv_is_output": True}])
def test_a_conv_output_needed_elsewhere_is_not_fused(kwargs):
    proto = _model(**kwargs)
    assert _fused_pairs(proto) == 0
    _compare(proto, {"x": RNG.standard_normal((2, 4, 9, 9)).astype(np.float32)})


def test_training_mode_batch_norm_is_not_fused():
    proto = _model()
    bn = proto.graph.node[1]
    bn.attribute.append(helper.make_attribute("training_mode", 1))
    assert _fused_pairs(proto) == 0


def test_a_fed_batch_norm_parameter_reaches_the_fused_convolution():
    proto = _model(ir_version=3, opset=9)
    assert _fused_pairs(proto) == 1
    x = RNG.standard_normal((2, 4, 9, 9)).astype(np.float32)
    session = opconv.prepare(opconv.load(proto))
    fed_scale = RNG.uniform(-2, 2, 8).astype(np.float32)
    # onnxruntime's reference for the fed run: the same model with the fed value as its initializer.
    refed = copy.deepcopy(proto)
    next(t for t in refed.graph.initializer if t.name == "scale").CopyFrom(numpy_helper.from_array(fed_scale, "scale"))
    for feeds, model in (({"x": x}, proto), ({"x": x, "scale": fed_scale}, refed), ({"x": x}, proto)):
        expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        np.testing.assert_allclose(session.run(feeds)["r"], expected, rtol=1e-4, atol=1e-5)
