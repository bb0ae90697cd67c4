"""The Python API hands back what it was given, and onnx.checker, onnxruntime and OpenVINO take the results
directly (no save in between); errors name what is valid."""

import inspect
import os
import typing

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import opconv

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
CNN = os.path.join(FIXTURES, "cnn.onnx")
IMAGE = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)


def _onnxruntime(proto: onnx.ModelProto, feeds: dict) -> list:
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture(scope="module")
def cnn() -> onnx.ModelProto:
    return onnx.load(CNN)


def test_convert_version_of_a_proto_is_a_proto_that_onnx_and_onnxruntime_take(cnn):
    down = opconv.convert_version(cnn, 11)
    assert isinstance(down, onnx.ModelProto)
    onnx.checker.check_model(down, full_check=True)
    assert [o.version for o in down.opset_import if o.domain == ""] == [11]
    np.testing.assert_allclose(
        _onnxruntime(down, {"image": IMAGE})[0], _onnxruntime(cnn, {"image": IMAGE})[0], rtol=1e-5, atol=1e-6
    )
    # the same through convert(to="onnx", opset=...), and a Model in gives a Model out
    assert isinstance(opconv.convert(cnn, to="onnx", opset=11), onnx.ModelProto)
    assert opconv.convert(cnn, to="onnx") is cnn
    assert isinstance(opconv.convert_version(opconv.load(cnn), 11), opconv.Model)
    assert isinstance(opconv.convert_version(CNN, 11), opconv.Model)


def test_to_onnx_and_to_openvino_feed_the_runtimes_without_a_file(cnn):
    import openvino as ov

    ir = opconv.convert(cnn, to="openvino", input_shapes={"image": (1, 3, 32, 32)})
    assert isinstance(ir, opconv.Model) and ir.dialect == "openvino"
    compiled = ov.Core().compile_model(opconv.to_openvino(ir), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    expected = _onnxruntime(cnn, {"image": IMAGE})[0]
    np.testing.assert_allclose(compiled(IMAGE)[compiled.output("probs")], expected, rtol=1e-4, atol=1e-6)
    # straight from ONNX (converted on the way), and as the Model's method
    direct = ov.Core().compile_model(
        opconv.to_openvino(cnn, input_shapes={"image": (1, 3, 32, 32)}), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    np.testing.assert_allclose(direct(IMAGE)[0], expected, rtol=1e-4, atol=1e-6)
    assert isinstance(opconv.convert(ir, to="onnx"), opconv.Model)  # a Model in gives a Model out
    back = ir.to_onnx()  # IR -> ONNX at opset 21 by default, which onnxruntime 1.20 reads
    assert isinstance(back, onnx.ModelProto) and back.opset_import[0].version == opconv.api.DEFAULT_ONNX_OPSET == 21
    onnx.checker.check_model(back, full_check=True)
    np.testing.assert_allclose(_onnxruntime(back, {"image": IMAGE})[0], expected, rtol=1e-4, atol=1e-6)
    assert opconv.to_onnx(opconv.load(cnn)).SerializeToString() == opconv.load(cnn).to_onnx().SerializeToString()


def test_load_takes_paths_bytes_protos_and_objects_with_model_proto(cnn):
    class ONNXProgramLike:  # what torch.onnx.export returns carries the model as .model_proto
        model_proto = cnn

    expected = opconv.run(CNN, {"image": IMAGE})["probs"]
    for source in (CNN, cnn.SerializeToString(), cnn, ONNXProgramLike(), opconv.load(CNN)):
        model = opconv.load(source)
        assert model.dialect == "onnx"
        np.testing.assert_array_equal(opconv.run(model, {"image": IMAGE})["probs"], expected)
    with pytest.raises(opconv.OpconvError, match="pass a path, an opconv.Model, an onnx.ModelProto"):
        opconv.load(12)
    with pytest.raises(opconv.ModelReadError, match="not a valid ONNX protobuf"):
        opconv.load(b"\x08garbage")


def test_run_and_verify_take_anything_numpy_reads_with_dtypes_checked():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    proto = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )

    class ArrayLike:  # a torch tensor on the CPU, a jax array ... all have __array__
        def __array__(self, dtype=None, copy=None):
            return np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)

    expected = _onnxruntime(proto, {"x": np.asarray(ArrayLike())})[0]
    np.testing.assert_array_equal(opconv.run(proto, {"x": ArrayLike()})["y"], expected)
    np.testing.assert_array_equal(opconv.prepare(proto).run({"x": ArrayLike()})["y"], expected)
    assert opconv.verify(proto, proto, {"x": ArrayLike()}).ok
    with pytest.raises(opconv.ExecutionError, match="expects float32, got float64"):
        opconv.run(proto, {"x": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]})  # no silent cast
    with pytest.raises(opconv.ExecutionError, match="must be an array of numbers"):
        opconv.run(proto, {"x": object()})


def test_run_takes_torch_tensors():
    torch = pytest.importorskip("torch")  # the array-like case above runs without torch
    x = torch.tensor([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]])
    proto = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    np.testing.assert_array_equal(opconv.run(proto, {"x": x})["y"], torch.relu(x).numpy())


def test_invalid_target_and_options_name_what_is_valid(cnn):
    with pytest.raises(opconv.OpconvError, match=r"to= takes one of 'onnx', 'openvino', 'hlo' \(OpenVINO IR is "):
        opconv.convert(cnn, to="ir")
    with pytest.raises(TypeError, match=r"^convert\(\) got an unexpected keyword argument 'input_shape'"):
        opconv.convert(cnn, to="openvino", input_shape={"image": (1, 3, 32, 32)})
    with pytest.raises(opconv.OpconvError, match="opset= applies to conversions to ONNX"):
        opconv.convert(cnn, to="openvino", opset=13)
    ir = opconv.convert(cnn, to="openvino", input_shapes={"image": (1, 3, 32, 32)})
    with pytest.raises(opconv.OpconvError, match="opconv converts openvino to 'onnx', not to hlo"):
        opconv.convert(ir, to="hlo")
    with pytest.raises(opconv.ModelWriteError, match=r"this is OpenVINO IR, whose file is \.xml"):
        opconv.save(ir, "never.onnx")


def test_conversion_errors_list_refused_nodes_as_records():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    proto = helper.make_model(
        helper.make_graph([helper.make_node("Bernoulli", ["x"], ["y"], name="coin")], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(opconv.ConversionError) as info:
        opconv.convert(proto, to="openvino")
    [refused] = info.value.refused
    assert isinstance(refused, opconv.RefusedNode)
    assert (refused.node, refused.op, refused.domain) == ("coin", "Bernoulli", "") and refused.reason
    with pytest.raises(opconv.ConversionError) as info:
        opconv.convert_version(proto, 9)  # Bernoulli is new in opset 15
    assert [(r.node, r.op, r.domain) for r in info.value.refused] == [("coin", "Bernoulli", "")]


def test_public_names_are_typed_documented_and_nothing_else_shows():
    assert opconv.VerifyReport is opconv.verify(CNN, CNN, input_shapes={"image": (1, 3, 32, 32)}).__class__
    from opconv import VerifyReport  # noqa: F401 - importable by name

    assert callable(opconv.verify)  # the function, not the submodule of the same name
    assert not {"Any", "os", "sys", "ModuleType", "api", "errors", "ir"} & set(dir(opconv))
    assert set(opconv.__all__) <= set(dir(opconv))
    import numpy.typing as npt
    import openvino

    from opconv.executor import Session
    from opconv.validation import Problem

    type_checking_names = {
        "onnx": onnx,
        "openvino": openvino,
        "npt": npt,
        "Session": Session,
        "Problem": Problem,
        "VerifyReport": opconv.VerifyReport,
    }
    for name in (
        "load",
        "save",
        "check",
        "prepare",
        "run",
        "convert",
        "convert_version",
        "decompose",
        "verify",
        "to_onnx",
        "to_openvino",
    ):
        function = getattr(opconv, name)
        signature = inspect.signature(function)
        doc = inspect.getdoc(function)
        assert doc and signature.return_annotation is not inspect.Signature.empty, name
        for parameter in signature.parameters.values():
            if parameter.kind is parameter.VAR_KEYWORD:
                continue
            assert f"``{parameter.name}``" in doc, f"{name}: {parameter.name} is not documented"
        typing.get_type_hints(function, localns=type_checking_names)  # every annotation resolves
    assert os.path.exists(os.path.join(os.path.dirname(opconv.__file__), "py.typed"))
    with open(os.path.join(os.path.dirname(FIXTURES), "pyproject.toml"), encoding="utf-8") as f:
        assert '\n"opconv" = ["py.typed"]\n' in f.read()  # packaged: the wheel carries it too
