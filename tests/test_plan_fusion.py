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
