"""An IR file written by OpenVINO itself, through opconv's reader, executor, writer and verify."""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset1 as ops
from click.testing import CliRunner

import opconv
from opconv.cli import cli
from opconv.compare import compare_arrays


def _small_cnn(path):
    rng = np.random.default_rng(0)
    x = ops.parameter([1, 3, 16, 16], np.float32, name="image")
    w = ops.constant(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.2)
    conv = ops.convolution(x, w, [1, 1], [1, 1], [1, 1], [1, 1])
    bias = ops.constant(rng.standard_normal((1, 8, 1, 1)).astype(np.float32))
    act = ops.relu(ops.add(conv, bias))
    pool = ops.max_pool(act, [2, 2], [0, 0], [0, 0], [2, 2])
    flat = ops.reshape(pool, ops.constant(np.array([1, -1], np.int64)), False)
    fc = ops.constant(rng.standard_normal((8 * 8 * 8, 10)).astype(np.float32) * 0.05)
    probs = ops.softmax(ops.matmul(flat, fc, False, False), 1)
    model = ov.Model([probs], [x], "small_cnn")
    ov.save_model(model, str(path), compress_to_fp16=False)
    return model


def test_openvino_saved_model_runs_in_opconv_like_in_openvino(tmp_path):
    ov_model = _small_cnn(tmp_path / "cnn.xml")
    image = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    compiled = ov.Core().compile_model(ov_model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    expected = next(iter(compiled({"image": image}).values()))
    ours = opconv.run(tmp_path / "cnn.xml", {"image": image})
    cmp = compare_arrays("probs", expected, next(iter(ours.values())))
    assert cmp.ok, cmp.message


def test_verify_ir_against_its_v10_copy(tmp_path):
    _small_cnn(tmp_path / "cnn.xml")
    opconv.save(opconv.load(tmp_path / "cnn.xml"), tmp_path / "copy.xml")
    result = CliRunner().invoke(cli, ["verify", str(tmp_path / "cnn.xml"), str(tmp_path / "copy.xml")])
    assert result.exit_code == 0, result.output
    assert "outputs equal" in result.output


def test_batch_norm_inference_input_order_matches_openvino(tmp_path):
    # opset1 BatchNormInference takes (gamma, beta, data, mean, variance): an IR written by opconv must
    # run in OpenVINO and agree with opconv's executor.
    from opconv.ir import Attr, Graph, Model, Node, Tensor, Value
    from opconv.types import TensorType

    rng = np.random.default_rng(2)
    g = Graph("bn")
    x = g.add_input("x", TensorType("float32", (1, 3, 4, 4)))
    params = [
        g.add_initializer(n, Tensor.from_array(rng.uniform(0.5, 1.5, 3).astype(np.float32)))
        for n in ("gamma", "beta", "mean", "variance")
    ]
    y = Value("y", TensorType("float32", (1, 3, 4, 4)))
    g.add_node(
        Node(
            "BatchNormInference",
            [params[0], params[1], x, params[2], params[3]],
            [y],
            domain="opset1",
            version=1,
            name="y",
            attrs=[Attr("epsilon", "float", 1e-3)],
        )
    )
    g.outputs.append(y)
    opconv.save(Model(g, "openvino", {"opset1": 1}), tmp_path / "bn.xml")
    data = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    compiled = ov.Core().compile_model(str(tmp_path / "bn.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    expected = next(iter(compiled({0: data}).values()))
    ours = next(iter(opconv.run(tmp_path / "bn.xml", {"x": data}).values()))
    assert compare_arrays("y", expected, ours).ok
