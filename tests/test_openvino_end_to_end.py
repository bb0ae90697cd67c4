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
