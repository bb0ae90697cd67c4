"""The door: a parseable model that breaks its schemas is refused with one error before any converter runs.

Every model here is broken in one way that onnx's own checker refuses too (the oracle that says the model
is broken is onnx's, not opconv's); each command and API entry point must end in a MalformedModelError
naming the file, the node and what its schema expects, in one line on the command line (exit 2).  Damage
the loader itself refuses (tensor data against dims, non-UTF-8 text) ends in a ModelReadError.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.cli import cli
from opconv.errors import MalformedModelError, ModelReadError

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


def _model(node, inits=(), opset=17) -> onnx.ModelProto:
    model = helper.make_model(
        helper.make_graph([node], "g", [X], [Y], list(inits)), opset_imports=[helper.make_opsetid("", opset)]
    )
    model.ir_version = 8
    return model


def _float_attr(name, value):
    attr = helper.make_attribute(name, value)
    assert attr.type == onnx.AttributeProto.FLOAT
    return attr


def _transpose_with_float_perm():
    node = helper.make_node("Transpose", ["x"], ["y"], name="transpose")
    node.attribute.append(_float_attr("perm", 1.0))
    return _model(node)


#: name -> (model, what the error must say)
BROKEN = {
    "input count": (
        _model(helper.make_node("Relu", ["x", "x"], ["y"], name="relu")),
        r"node 'relu' \(Relu\): Relu-14 takes 1 inputs, got 2",
    ),
    "attribute type": (
        _transpose_with_float_perm(),
        r"node 'transpose' \(Transpose\): attribute 'perm' must be of type ints, got float",
    ),
    "missing attribute": (
        _model(helper.make_node("Cast", ["x"], ["y"], name="cast")),
        r"node 'cast' \(Cast\): required attribute 'to' of Cast-13 is missing",
    ),
    "undefined name": (
        _model(helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")),
        r"node 'add' \(Add\): input 1 reads 'nowhere', which is never defined",
    ),
    "output count": (
        _model(helper.make_node("Relu", ["x"], ["y", "z"], name="relu")),
        r"node 'relu' \(Relu\): Relu-14 has 1 outputs, node declares 2",
    ),
}


@pytest.fixture(params=sorted(BROKEN))
def broken(request, tmp_path):
    model, message = BROKEN[request.param]
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model, full_check=True)  # broken by onnx's own account too
    path = str(tmp_path / "broken.onnx")
    onnx.save(model, path)
    return path, message


COMMANDS = [
    ["run", "{m}"],
    ["onnx-to-ir", "{m}", "-o", "{o}.xml"],
    ["onnx-to-hlo", "{m}", "-o", "{o}.hlo"],
    ["upgrade", "--opset", "21", "{m}", "-o", "{o}.onnx"],
    ["downgrade", "--opset", "13", "{m}", "-o", "{o}.onnx"],
    ["decompose", "{m}", "-o", "{o}.onnx"],
    ["verify", "{m}", "{m}"],
]


def test_every_command_refuses_it_in_one_line_before_converting(broken, tmp_path):
    path, message = broken
    for args in COMMANDS:
        args = [a.format(m=path, o=str(tmp_path / "out")) for a in args]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output, result.exception)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"opconv: error: {path}: "), (args, result.output)
        assert __import__("re").search(message, lines[0]), (args, lines[0])
        assert not [f for f in os.listdir(tmp_path) if f.startswith("out")], args  # nothing written


def test_every_api_entry_point_raises_one_malformed_model_error(broken):
    path, message = broken
    from opconv.verification import random_inputs

    calls = [
        lambda: opconv.run(path, {"x": np.zeros((2, 3), np.float32)}),
        lambda: opconv.prepare(path),
        lambda: opconv.convert(path, to="openvino"),
        lambda: opconv.convert(path, to="hlo"),
        lambda: opconv.convert_version(path, 21),
        lambda: opconv.convert_version(opconv.load(path), 13),
        lambda: opconv.decompose(path),
        lambda: opconv.verify(path, path),
        lambda: random_inputs(path),
    ]
    for call in calls:
        with pytest.raises(MalformedModelError, match=message) as info:
            call()
        assert info.value.where == path and info.value.problems
    assert opconv.check(path)  # `check` still lists the problems instead of refusing the model


def test_damage_below_the_schemas_is_refused_by_the_loader(tmp_path):
    short = numpy_helper.from_array(np.zeros(6, np.float32), "w")
    short.dims[:] = [4, 3]  # 6 values for 12
    bad_text = helper.make_node("Add", ["x", "w"], ["y"])
    cases = {"tensor data": (_model(bad_text, [short]), "holds 24 bytes, 48 expected")}
    # ONNX keeps the sub-byte and float8 types in int32_data, one byte or one bit pattern an entry; onnx's decoder
    # refuses these too (it raised ValueError at run time; fuzz regression onnx-21)
    packed = helper.make_tensor("w", TensorProto.UINT4, [2, 3], [1, 2, 3, 4, 5, 6])
    del packed.int32_data[2:]  # 2 of the 3 bytes that hold 6 nibbles
    patterns = helper.make_tensor("w", TensorProto.FLOAT8E4M3FN, [2, 3], [1.0] * 6)
    patterns.int32_data.append(0)  # 7 bit patterns for 6 values
    for label, tensor, message in (
        ("uint4", packed, "holds 2 int32_data, 3 expected"),
        ("float8", patterns, "holds 7 int32_data, 6 expected"),
    ):
        with pytest.raises(ValueError):
            numpy_helper.to_array(tensor)
        cases[label] = (
            _model(helper.make_node("Cast", ["w"], ["y"], to=TensorProto.FLOAT), [tensor], opset=21),
            message,
        )
    name = _model(helper.make_node("Relu", ["x"], ["y"]))
    name.graph.node[0].name = "relu"
    serialized = name.SerializeToString().replace(b"relu", b"r\xffl\xfe")
    for label, (model, message) in cases.items():
        path = str(tmp_path / f"{label}.onnx")
        onnx.save(model, path)
        with pytest.raises(ModelReadError, match=message):
            opconv.convert(path, to="openvino")
    path = str(tmp_path / "text.onnx")
    with open(path, "wb") as f:
        f.write(serialized)
    with pytest.raises(ModelReadError, match="not UTF-8"):
        opconv.convert(path, to="hlo")


def test_a_split_whose_num_outputs_is_not_its_output_count_is_refused(tmp_path):
    """onnx's checker accepts Split-18 with num_outputs=3 on two outputs, onnxruntime refuses to run it, and with
    more outputs than num_outputs onnx's C++ shape inference aborted the process (fuzz regression onnx-18)."""
    import onnxruntime

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 3])
    split = helper.make_node("Split", ["x"], ["y", "z"], name="split", axis=0, num_outputs=3)
    model = helper.make_model(helper.make_graph([split], "g", [x], [Y]), opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=r"Number of outputs \(2\) does not match num_outputs \(3\)"):
        session.run(None, {"x": np.zeros((6, 3), np.float32)})
    path = str(tmp_path / "split.onnx")
    onnx.save(model, path)
    for to in ("openvino", "hlo"):
        with pytest.raises(
            MalformedModelError,
            match=r"node 'split' \(Split\): attribute 'num_outputs' is 3, "
            "but the node declares 2 outputs",
        ):
            opconv.convert(path, to=to)


def test_a_value_declared_with_a_negative_dim_is_refused():
    """Fuzz regression onnx-22: an input declared [2, 3, -2**63] reached onnx's C++ shape inference, whose
    clamp assertion aborted the process; the door names the value instead."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, -3])
    model = _model(helper.make_node("Relu", ["x"], ["y"], name="relu"))
    model.graph.input[0].CopyFrom(x)
    for to in ("openvino", "hlo"):
        with pytest.raises(MalformedModelError, match=r"value 'x' is declared with a negative dim: \[2, -3\]"):
            opconv.convert(model, to=to)
    assert any("negative dim" in str(p) for p in opconv.check(model))
