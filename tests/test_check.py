"""`opconv check` finds each kind of schema violation and names the node; hostile files exit 2."""

from __future__ import annotations

import os

import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import opconv
from opconv.cli import cli
from opconv.validation import check_model


def _model(nodes, inputs=("x",), outputs=("y",), opset=13, initializers=()):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _codes(model):
    return [(p.code, p.node) for p in check_model(opconv.load(model))]


def test_valid_model_has_no_problems():
    assert _codes(_model([helper.make_node("Relu", ["x"], ["y"], name="r")])) == []


@pytest.mark.parametrize(
    "node, code",
    [
        (helper.make_node("Frobnicate", ["x"], ["y"], name="bad"), "unknown-op"),
        (helper.make_node("Transpose", ["x"], ["y"], name="bad", perm=1.5), "attribute-type"),
        (helper.make_node("Relu", ["x", "x"], ["y"], name="bad"), "input-count"),
        (helper.make_node("Relu", ["x"], ["y"], name="bad", alpha=0.1), "unknown-attribute"),
        (helper.make_node("Gelu", ["x"], ["y"], name="bad"), "op-version"),  # Gelu arrives at opset 20
        (helper.make_node("Relu", ["nowhere"], ["y"], name="bad"), "undefined-name"),
    ],
)
def test_each_problem_names_the_node(node, code):
    problems = check_model(opconv.load(_model([node])))
    assert code in [p.code for p in problems], problems
    assert all("bad" in p.node for p in problems if p.code == code)


def test_missing_required_attribute():
    # Cast-13 requires `to`.
    problems = check_model(opconv.load(_model([helper.make_node("Cast", ["x"], ["y"], name="cast_it")])))
    assert [(p.code, p.node) for p in problems] == [("missing-attribute", "node 'cast_it' (Cast)")]
    assert "'to'" in problems[0].message


def test_input_type_outside_constraint():
    model = _model([helper.make_node("Not", ["x"], ["y"], name="neg")])  # Not takes bool, x is float
    assert ("input-type", "node 'neg' (Not)") in _codes(model)


def test_duplicate_name():
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Relu", ["x"], ["y"], name="b")])
    assert "duplicate-name" in [c for c, _ in _codes(model)]


def test_all_problems_are_listed_not_just_the_first(tmp_path):
    model = _model(
        [
            helper.make_node("Frobnicate", ["x"], ["t"], name="one"),
            helper.make_node("Cast", ["t"], ["y"], name="two"),
        ]
    )
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 1
    assert "node 'one' (Frobnicate)" in result.output and "node 'two' (Cast)" in result.output


def test_check_cli_valid_fixture(fixtures_dir):
    result = CliRunner().invoke(cli, ["check", os.path.join(fixtures_dir, "cnn.onnx")])
    assert result.exit_code == 0, result.output


def test_truncated_protobuf_is_one_line_exit_2(tmp_path, fixtures_dir):
    data = open(os.path.join(fixtures_dir, "cnn.onnx"), "rb").read()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "truncated.onnx" in lines[0] and "Traceback" not in result.output


def test_external_path_escaping_the_folder_exit_2(tmp_path):
    model = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")])
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="../../x")
    model.graph.initializer.append(w)
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "x").write_bytes(b"\0" * 24)  # exists, but outside the model's folder
    path = folder / "m.onnx"
    path.write_bytes(model.SerializeToString())
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 2
    assert "escapes the model's folder" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_unreadable_file_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "missing.onnx")])
    assert result.exit_code == 2 and "no such file" in result.output


def test_api_check_can_be_called_repeatedly(fixtures_dir):
    # opconv.check is a function; a submodule of the same name once replaced it after the first call.
    path = os.path.join(fixtures_dir, "cnn.onnx")
    assert opconv.check(path) == [] and opconv.check(path) == []
