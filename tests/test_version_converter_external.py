"""The version converter streams external weights: it converts references to them, never their bytes.

A model whose weights live in ``model.onnx.data`` is upgraded and downgraded through the command line and
the Python API with the weights' memory mapping made to fail: any step that read them whole would raise.
The result keeps them external (copied file to file into ``OUT.onnx.data``) and onnxruntime computes the
same outputs from it as from the source.  Peak memory on a 1 GiB model is measured by
``benchmarks/bench_version_memory.py``, not here.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.cli import main
from opconv.converters.onnx_versions import proto_path
from opconv.dialects.onnx import io

from .test_version_converter import tensor

WIDTH = 64
LAYERS = 3
WEIGHT_BYTES = LAYERS * WIDTH * WIDTH * 4  # the external ones (biases and bounds stay inline: < 1 KiB)


def external_model(folder, *, with_if: bool = False) -> str:
    """MatMul + Add + Relu + Clip layers at opset 17, weights in ``model.onnx.data``; ``with_if``: the last
    layer inside an If's branches (a subgraph sends the conversion the whole-model way)."""
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(np.array(-0.5, np.float32), "lo"),
        numpy_helper.from_array(np.array(0.5, np.float32), "hi"),
    ]
    nodes, x = [], "x"
    for i in range(LAYERS):
        inits += [
            numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / 8, f"w{i}"),
            numpy_helper.from_array(rng.standard_normal(WIDTH).astype(np.float32), f"b{i}"),
        ]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [f"r{i}"]),
            helper.make_node("Clip", [f"r{i}", "lo", "hi"], [f"y{i}" if i + 1 < LAYERS else "body"]),
        ]
        x = f"y{i}"
    inputs = [tensor("x", TensorProto.FLOAT, [2, WIDTH])]
    if with_if:
        last = nodes[-4:]
        branch = lambda name, ops: helper.make_graph(ops, name, [], [tensor("body", TensorProto.FLOAT, [2, WIDTH])])
        other = [helper.make_node("Relu", [f"y{LAYERS - 2}"], ["body"])]  # the last layer's input
        nodes = nodes[:-4] + [
            helper.make_node("If", ["c"], ["y"], then_branch=branch("then", last), else_branch=branch("else", other))
        ]
        inputs.append(tensor("c", TensorProto.BOOL, []))
    else:
        nodes.append(helper.make_node("Identity", ["body"], ["y"]))
    graph = helper.make_graph(nodes, "g", inputs, [tensor("y", TensorProto.FLOAT, [2, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(folder, "model.onnx")
    onnx.save(model, path, save_as_external_data=True, location="model.onnx.data", size_threshold=1024)
    return path


def ort_run(path: str, feeds: dict) -> np.ndarray:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.fixture
def weights_never_read_whole(monkeypatch):
    """Mapping an external tensor fails, and every protobuf the converter works on must be small."""

    def refuse(where, dtype, shape):
        raise AssertionError(f"external weights mapped whole: {where}")

    monkeypatch.setattr(io, "_map_external", refuse)
    seen = []
    convert = proto_path.convert

    def spy(proto, target, base_dir=None):
        seen.append(proto.ByteSize())
        return convert(proto, target, base_dir)

    monkeypatch.setattr(proto_path, "convert", spy)
    return seen


@pytest.mark.parametrize("with_if", [False, True], ids=["protobuf path", "whole-model path"])
@pytest.mark.parametrize("direction,opset", [("upgrade", 21), ("downgrade", 10)])
def test_cli_converts_external_weights_without_reading_them(
    tmp_path, weights_never_read_whole, direction, opset, with_if
):
    source = external_model(tmp_path, with_if=with_if)
    out = str(tmp_path / "out" / "converted.onnx")
    os.mkdir(os.path.dirname(out))
    fallbacks = sum(proto_path.FALLBACKS.values())
    with pytest.raises(SystemExit) as done:
        main([direction, "--opset", str(opset), source, "-o", out])
    assert done.value.code == 0
    assert weights_never_read_whole and max(weights_never_read_whole) < WEIGHT_BYTES / 4
    assert (sum(proto_path.FALLBACKS.values()) > fallbacks) == with_if

    converted = onnx.load(out, load_external_data=False)
    assert os.path.getsize(out) < WEIGHT_BYTES / 4
    assert os.path.getsize(out + ".data") >= WEIGHT_BYTES
    external = {t.name for t in converted.graph.initializer if t.data_location == TensorProto.EXTERNAL}
    assert external == {f"w{i}" for i in range(LAYERS)}
    assert converted.opset_import[0].version == opset
    onnx.checker.check_model(out, full_check=True)

    feeds = {"x": np.random.default_rng(0).standard_normal((2, WIDTH)).astype(np.float32)}
    if with_if:
        feeds["c"] = np.array(True)
    np.testing.assert_allclose(ort_run(out, feeds), ort_run(source, feeds), rtol=1e-6, atol=1e-6)


def test_python_api_keeps_external_weights_as_references(tmp_path, weights_never_read_whole):
    source = external_model(tmp_path)
    for given in (source, opconv.load(source)):
        converted = opconv.convert_version(given, 10)
        weights = converted.graph.initializers["w0"].const
        assert isinstance(weights.origin, io.ExternalData) and weights.origin.path == str(tmp_path / "model.onnx.data")
    assert max(weights_never_read_whole) < WEIGHT_BYTES / 4
