"""The IR and HLO executors fuse a ReLU into the Convolution / ConvBias / Add computing its only input
(opconv/plan_fusion.py), as the ONNX executor does: checked on a converted CNN against onnxruntime on the
original ONNX model, and bit for bit against the same session without the fusion."""

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
