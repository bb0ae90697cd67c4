"""ONNX -> OpenVINO opset1: the converted IR loads in the real OpenVINO runtime and computes what
onnxruntime computes on the ONNX model (and so does opconv's own IR executor)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import opconv
from opconv.cli import cli
from opconv.compare import compare_arrays
from opconv.converters.onnx_to_openvino import onnx_to_openvino
from opconv.dialects.openvino.io import OPSET1_OPS_WRITTEN_AS_OPSET2
from opconv.errors import ConversionError
from tests.runtimes import openvino_frontend_outputs

FIXTURES = [("cnn.onnx", "image", (2, 3, 32, 32)), ("mlp_external.onnx", "x", (3, 64))]


def _onnxruntime(path_or_proto, feeds):
    source = path_or_proto if isinstance(path_or_proto, str) else path_or_proto.SerializeToString()
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def _openvino(xml, feeds):
    core = ov.Core()
    model = core.read_model(str(xml))
    versions = {(op.get_type_name(), op.get_type_info().version_id) for op in model.get_ops()}
    # OpenVINO files the opset1 ROIPooling and ReorgYolo under its opset2 module (the same operation version).
    assert {v for op, v in versions if op not in OPSET1_OPS_WRITTEN_AS_OPSET2} == {"opset1"}, versions
    assert {v for op, v in versions if op in OPSET1_OPS_WRITTEN_AS_OPSET2} <= {"opset1", "opset2"}, versions
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return {next(iter(o.get_names())): v for o, v in compiled(feeds).items()}


def _assert_close(expected: dict, actual: dict, who: str):
    assert set(expected) == set(actual), (who, sorted(actual))
    for name, value in expected.items():
        cmp = compare_arrays(name, value, actual[name])
        assert cmp.ok, f"{who}: {cmp.message}"


@pytest.mark.parametrize("fixture,input_name,shape", FIXTURES)
def test_fixture_converts_and_matches_onnxruntime(tmp_path, fixtures_dir, fixture, input_name, shape):
    path = os.path.join(fixtures_dir, fixture)
    source = opconv.load(path)
    converted = onnx_to_openvino(source, input_shapes={input_name: shape})
    xml = tmp_path / "model.xml"
    opconv.save(converted, xml)
    feeds = {input_name: np.random.default_rng(7).standard_normal(shape).astype(np.float32)}
    expected = _onnxruntime(path, feeds)
    _assert_close(expected, _openvino(xml, feeds), "OpenVINO CPU")
    _assert_close(expected, opconv.run(opconv.load(xml), feeds), "opconv IR executor")
    # The caller's model is untouched: still ONNX, still symbolic.
    assert source.dialect == "onnx" and source.graph.inputs[0].shape[0] == "batch"


def _proto(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _check_op_model(tmp_path, proto, feeds):
    converted = onnx_to_openvino(opconv.load(proto))
    xml = tmp_path / "op.xml"
    opconv.save(converted, xml)
    expected = _onnxruntime(proto, feeds)
    _assert_close(expected, _openvino(xml, feeds), "OpenVINO CPU")
    _assert_close(expected, opconv.run(opconv.load(xml), feeds), "opconv IR executor")


def test_grouped_conv_pools_and_activations(tmp_path):
    rng = np.random.default_rng(1)
    w = helper.make_tensor("w", TensorProto.FLOAT, [6, 2, 3, 3], rng.standard_normal(108).astype(np.float32))
    b = helper.make_tensor("b", TensorProto.FLOAT, [6], rng.standard_normal(6).astype(np.float32))
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], group=3, auto_pad="SAME_UPPER"),
        helper.make_node("LeakyRelu", ["c"], ["l"], alpha=0.2),
        helper.make_node("AveragePool", ["l"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("MaxPool", ["a"], ["m"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("Clip", ["m", "lo", "hi"], ["k"]),
        helper.make_node("Transpose", ["k"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Softmax", ["t"], ["y"], axis=-1),
    ]
    inits = [
        w,
        b,
        helper.make_tensor("lo", TensorProto.FLOAT, [], [-0.5]),
        helper.make_tensor("hi", TensorProto.FLOAT, [], [0.7]),
    ]
    proto = _proto(nodes, [_f32("x", [1, 6, 9, 9])], [_f32("y", None)], inits)
    _check_op_model(tmp_path, proto, {"x": rng.standard_normal((1, 6, 9, 9)).astype(np.float32)})


def test_shape_ops_and_layer_norm(tmp_path):
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
        helper.make_node("Squeeze", ["u", "ax"], ["s"]),
        helper.make_node("Reshape", ["s", "shape"], ["r"]),
        helper.make_node("Concat", ["r", "r", "r"], ["cat"], axis=-1),
        helper.make_node("Identity", ["cat"], ["i"]),
        helper.make_node("LayerNormalization", ["i", "scale", "bias"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("Gemm", ["ln", "gw", "gc"], ["y"], alpha=0.5, beta=2.0, transB=1),
    ]
    inits = [
        helper.make_tensor("ax", TensorProto.INT64, [1], [0]),
        helper.make_tensor("shape", TensorProto.INT64, [2], [0, -1]),
        helper.make_tensor("scale", TensorProto.FLOAT, [12], rng.standard_normal(12).astype(np.float32)),
        helper.make_tensor("bias", TensorProto.FLOAT, [12], rng.standard_normal(12).astype(np.float32)),
        helper.make_tensor("gw", TensorProto.FLOAT, [5, 12], rng.standard_normal(60).astype(np.float32)),
        helper.make_tensor("gc", TensorProto.FLOAT, [5], rng.standard_normal(5).astype(np.float32)),
    ]
    proto = _proto(nodes, [_f32("x", [3, 2, 2])], [_f32("y", None)], inits, opset=17)
    _check_op_model(tmp_path, proto, {"x": rng.standard_normal((3, 2, 2)).astype(np.float32)})


def _unsupported_proto():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Det", ["r"], ["h"], name="det_node"),
        helper.make_node("Bernoulli", ["h"], ["y"], name="bernoulli_node", seed=1.0),
    ]
    return _proto(nodes, [_f32("x", [2, 4, 4])], [_f32("y", [2])], opset=18)


def test_unsupported_ops_are_all_named_in_one_error():
    with pytest.raises(ConversionError) as info:
        onnx_to_openvino(opconv.load(_unsupported_proto()))
    message = str(info.value)
    assert "det_node" in message and "bernoulli_node" in message
    assert len(info.value.problems) == 2


def test_symbolic_input_without_shape_is_refused_naming_the_input(fixtures_dir):
    with pytest.raises(ConversionError, match="'image'.*--input-shape"):
        onnx_to_openvino(opconv.load(os.path.join(fixtures_dir, "cnn.onnx")))


def test_softmax_before_opset13_normalises_over_every_axis_from_its_axis_on(tmp_path):
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=1), helper.make_node("LogSoftmax", ["x"], ["z"], axis=1)]
    proto = _proto(nodes, [_f32("x", [2, 3, 4])], [_f32("y", [2, 3, 4]), _f32("z", [2, 3, 4])], opset=11)
    xml = tmp_path / "softmax.xml"
    opconv.save(onnx_to_openvino(opconv.load(proto)), xml)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}
    _assert_close(_onnxruntime(proto, feeds), _openvino(xml, feeds), "OpenVINO")


def test_cli_converts_verifies_and_exits_0(tmp_path, fixtures_dir):
    out = tmp_path / "cnn.xml"
    result = CliRunner().invoke(
        cli,
        [
            "onnx-to-ir",
            os.path.join(fixtures_dir, "cnn.onnx"),
            "-o",
            str(out),
            "--input-shape",
            "image=2,3,32,32",
            "--verify",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "outputs equal" in result.output
    assert out.exists() and (tmp_path / "cnn.bin").exists()
    ov.Core().read_model(str(out))


def test_cli_default_output_is_beside_the_model(tmp_path, fixtures_dir):
    src = tmp_path / "mlp.onnx"
    src.write_bytes(open(os.path.join(fixtures_dir, "mlp_external.onnx"), "rb").read())
    (tmp_path / "mlp_external.onnx.data").write_bytes(
        open(os.path.join(fixtures_dir, "mlp_external.onnx.data"), "rb").read()
    )
    result = CliRunner().invoke(cli, ["onnx-to-ir", str(src), "--input-shape", "x=1,64"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mlp.xml").exists() and (tmp_path / "mlp.bin").exists()


def test_cli_refuses_unsupported_model_with_exit_2_and_writes_nothing(tmp_path):
    src = tmp_path / "bad.onnx"
    onnx.save(_unsupported_proto(), str(src))
    result = CliRunner().invoke(cli, ["onnx-to-ir", str(src)])
    assert result.exit_code == 2, result.output
    assert "det_node" in result.output and "bernoulli_node" in result.output
    assert sorted(os.listdir(tmp_path)) == ["bad.onnx"]


def test_cli_help_has_an_example():
    result = CliRunner().invoke(cli, ["onnx-to-ir", "--help"])
    assert result.exit_code == 0
    assert "--input-shape" in result.output and "opconv onnx-to-ir" in result.output


def test_shape_subgraph_is_folded_and_reductions_compare_select(tmp_path, fixtures_dir):
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("ReduceMean", ["flat"], ["mean"], axes=[1], keepdims=1),
        helper.make_node("Greater", ["flat", "mean"], ["above"]),
        helper.make_node("Neg", ["flat"], ["neg"]),
        helper.make_node("Where", ["above", "flat", "neg"], ["sel"]),
        helper.make_node("ReduceSum", ["sel", "axes"], ["y"], keepdims=0),
    ]
    inits = [
        helper.make_tensor("zero", TensorProto.INT64, [], [0]),
        helper.make_tensor("zero1", TensorProto.INT64, [1], [0]),
        helper.make_tensor("minus1", TensorProto.INT64, [1], [-1]),
        helper.make_tensor("axes", TensorProto.INT64, [1], [-1]),
    ]
    proto = _proto(nodes, [_f32("x", ["batch", 3, 4])], [_f32("y", None)], inits, opset=13)
    converted = onnx_to_openvino(opconv.load(proto), input_shapes={"x": (2, 3, 4)})
    assert not {"ShapeOf", "Gather", "Concat"} & {n.op for n in converted.graph.nodes}
    xml = tmp_path / "folded.xml"
    opconv.save(converted, xml)
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    expected = _onnxruntime(proto, feeds)
    _assert_close(expected, _openvino(xml, feeds), "OpenVINO CPU")
    _assert_close(expected, opconv.run(opconv.load(xml), feeds), "opconv IR executor")


def test_caller_model_is_not_mutated(fixtures_dir):
    source = opconv.load(os.path.join(fixtures_dir, "cnn.onnx"))
    before = [(n.op, n.name, [v.name for v in n.inputs if v is not None]) for n in source.graph.nodes]
    onnx_to_openvino(source, input_shapes={"image": (1, 3, 32, 32)})
    assert [(n.op, n.name, [v.name for v in n.inputs if v is not None]) for n in source.graph.nodes] == before
    assert source.graph.inputs[0].shape == ("batch", 3, 32, 32)


@pytest.mark.slow
def test_every_light_model_converts_and_runs_in_openvino(tmp_path):
    """Each light model of the onnx package: opset1 IR that OpenVINO runs with the case's expected outputs and
    onnxruntime's on a random input (squeezenet's opset 9 Softmax over a 4-D tensor, zfnet's LRN bias)."""
    from opconv.testdata import light_cases, random_feeds

    problems = []
    for case in light_cases():
        xml = tmp_path / f"{case.name}.xml"
        opconv.save(opconv.convert(opconv.load(case.path, "onnx"), to="openvino"), xml)
        # No input is shipped: the constant weights make the expected output the same for any input.
        feeds = random_feeds(case.load_model(), seed=1)
        reference, got = _onnxruntime(case.path, feeds), _openvino(xml, feeds)
        names = [o.name for o in case.load_model().graph.output]
        runs = {"OpenVINO CPU": got, "opconv IR executor": opconv.run(opconv.load(xml), feeds)}
        for oracle, values in (("expected", case.datasets[0][1]), ("onnxruntime", [reference[n] for n in names])):
            for name, value in zip(names, values):
                for who, outputs in runs.items():
                    cmp = compare_arrays(name, value, outputs[name])
                    if cmp.ok:
                        continue
                    # The plugin may depart from ONNX on this CPU whoever wrote the IR: then OpenVINO's own
                    # frontend on the source gives what it gave for opconv's IR.
                    if who == "OpenVINO CPU" and _plugin_gives_the_same(case.path, feeds, names, got):
                        print(
                            f"{case.name}: OpenVINO's CPU plugin departs from {oracle} with its own frontend "
                            f"too ({cmp.message})"
                        )
                    else:
                        problems.append(f"{case.name}, {who} vs {oracle}: {cmp.message}")
        os.remove(xml)
        os.remove(xml.with_suffix(".bin"))
    assert not problems, "\n".join(problems)


def _plugin_gives_the_same(source, feeds, names, got) -> bool:
    frontend = openvino_frontend_outputs(source, feeds)
    return all(compare_arrays(n, f, got[n]).ok for n, f in zip(names, frontend))


@pytest.mark.parametrize("scale", [1.0, 0.75])
def test_max_roi_pool_becomes_roi_pooling(tmp_path, scale):
    # The onnx node cases have no MaxRoiPool; ROIs here reach past the image and cover single pixels.
    rng = np.random.default_rng(11)
    rois = np.array([[0, 1, 1, 6, 5], [1, 0, 0, 9, 7], [0, 4, 2, 4, 2], [1, 2, 3, 8, 6]], np.float32)
    nodes = [helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[3, 2], spatial_scale=scale)]
    proto = _proto(nodes, [_f32("x", [2, 3, 8, 10]), _f32("rois", [4, 5])], [_f32("y", None)])
    _check_op_model(tmp_path, proto, {"x": rng.standard_normal((2, 3, 8, 10)).astype(np.float32), "rois": rois})


def test_concat_and_sum_of_more_inputs_than_the_former_per_count_rules(tmp_path):
    """70 Concat inputs and 20 Sum inputs (the former rules stopped at 64 and 16), against onnxruntime."""
    from tests.runtimes import convert_and_run_ir, run_ort

    names = [f"x{i}" for i in range(70)]
    graph = helper.make_graph(
        [helper.make_node("Concat", names, ["cat"], axis=0), helper.make_node("Sum", names[:20], ["total"])],
        "many",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3]) for n in names],
        [helper.make_tensor_value_info("cat", TensorProto.FLOAT, [70, 3])]
        + [helper.make_tensor_value_info("total", TensorProto.FLOAT, [1, 3])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(3)
    feeds = {n: rng.standard_normal((1, 3)).astype(np.float32) for n in names}
    expected = dict(zip(("cat", "total"), run_ort(proto, feeds)))
    _, runs = convert_and_run_ir(tmp_path, proto, feeds)
    for who, actual in runs.items():
        for name, value in expected.items():
            cmp = compare_arrays(name, value, actual[name])
            assert cmp.ok, f"{who}: {cmp.message}"
