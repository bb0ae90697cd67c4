"""The IR and HLO executors share the ONNX session's plan rewrites: a ReLU runs in the Convolution / ConvBias /
Add computing its only input (opconv/plan_fusion.py), and convolutions with constant weights run packed with
their bias (IR: Convolution -> [Multiply] -> Add; HLO: ConvBias).  Checked on a converted CNN against
onnxruntime on the original ONNX model, and (ReLU) bit for bit against the same session without it."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import opconv
from opconv.dialects.hlo import executor as hlo_executor
from opconv.dialects.openvino import executor as openvino_executor

CNN = "fixtures/cnn.onnx"


@pytest.mark.parametrize("target,module", [("openvino", openvino_executor), ("hlo", hlo_executor)])
def test_converted_relus_fuse_and_match_onnxruntime(target, module):
    converted = opconv.convert(opconv.load(CNN), to=target, input_shapes={"image": (2, 3, 32, 32)})
    image = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    (expected,) = ort.InferenceSession(CNN, providers=["CPUExecutionProvider"]).run(None, {"image": image})
    fuse, counts = module.fuse_relu_named, []
    module.fuse_relu_named = lambda *args: counts.append(fuse(*args)) or counts[-1]
    try:
        fused = opconv.prepare(converted)
    finally:
        module.fuse_relu_named = fuse
    assert counts == [2]  # both of the model's ReLUs
    module.fuse_relu_named = lambda *args: 0
    try:
        plain = opconv.prepare(converted)
    finally:
        module.fuse_relu_named = fuse
    feeds = {converted.graph.inputs[0].name: image}
    for _ in range(2):
        (ours,) = fused.run(feeds).values()
        np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5)
        assert np.array_equal(ours, next(iter(plain.run(feeds).values())))


@pytest.mark.parametrize(
    "target,module_name,pack",
    [
        ("openvino", "opconv.dialects.openvino.fusion", "pack_conv_scale_shift"),
        ("hlo", "opconv.dialects.hlo.fusion", "pack_conv_bias"),
    ],
)
def test_converted_convolutions_run_packed_and_match_onnxruntime(target, module_name, pack):
    """IR Convolution -> Multiply -> Add (the folded BatchNormalization) and Convolution -> Add (the bias), HLO
    ConvBias: each runs as one packed convolution, within float rounding of onnxruntime."""
    import importlib

    module = importlib.import_module(module_name)
    converted = opconv.convert(opconv.load(CNN), to=target, input_shapes={"image": (2, 3, 32, 32)})
    image = np.random.default_rng(6).standard_normal((2, 3, 32, 32)).astype(np.float32)
    (expected,) = ort.InferenceSession(CNN, providers=["CPUExecutionProvider"]).run(None, {"image": image})
    original, counts = getattr(module, pack), []
    setattr(module, pack, lambda graph, plan: counts.append(original(graph, plan)) or counts[-1])
    try:
        session = opconv.prepare(converted)
    finally:
        setattr(module, pack, original)
    assert counts == [2]  # both convolutions of the model
    (ours,) = session.run({converted.graph.inputs[0].name: image}).values()
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", ["openvino", "hlo"])
def test_uniform_weights_and_exponents_match_onnxruntime(target):
    """A uniform fill (ConstantOfShape) as a product's weights is stored as one value broadcast; the session
    gives the product an array of its own (BLAS cannot read a broadcast view), and HLO's exponent broadcast
    from a scalar reaches Pow as that scalar.  Same outputs as onnxruntime on the original model."""
    from onnx import TensorProto, helper, numpy_helper

    from opconv import plan_fusion

    weights = np.random.default_rng(7).standard_normal((64, 32)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node(
                "ConstantOfShape", ["shape"], ["fill"], value=numpy_helper.from_array(np.array([0.25], np.float32))
            ),
            helper.make_node("MatMul", ["x", "fill"], ["uniform"]),
            helper.make_node("Pow", ["uniform", "two"], ["square"]),
            helper.make_node("MatMul", ["x", "weights"], ["dense"]),
            helper.make_node("Add", ["square", "dense"], ["y"]),
        ],
        "uniform",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 32])],
        [
            numpy_helper.from_array(np.array([64, 32], np.int64), "shape"),
            numpy_helper.from_array(np.array(2.0, np.float32), "two"),
            numpy_helper.from_array(weights, "weights"),
        ],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.random.default_rng(8).standard_normal((3, 64)).astype(np.float32)
    (expected,) = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    converted = opconv.convert(opconv.load(proto), to=target)
    made: dict[str, list[int]] = {"materialize_broadcast_constants": [], "broadcast_uniform_exponents": []}
    module = hlo_executor if target == "hlo" else openvino_executor
    originals = {name: getattr(plan_fusion, name) for name in made if hasattr(module, name)}
    for name, fn in originals.items():
        setattr(module, name, lambda *args, fn=fn, name=name: made[name].append(fn(*args)) or made[name][-1])
    try:
        session = opconv.prepare(converted)
    finally:
        for name, fn in originals.items():
            setattr(module, name, fn)
    assert made["materialize_broadcast_constants"] == [1]
    assert made["broadcast_uniform_exponents"] == ([1] if target == "hlo" else [])
    for _ in range(2):
        (ours,) = session.run({converted.graph.inputs[0].name: x}).values()
        np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-4)
