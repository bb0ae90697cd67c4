"""The ONNX version converter (opconv.convert_version, opconv upgrade/downgrade).

Expected values come from outside opconv: ONNX's node cases and shipped model tests (their stored
outputs), and numpy formulas of the operators' specifications written out here.  Every converted
model must also pass onnx.checker (full_check) and hold only ops that exist at the target opset.
"""

from __future__ import annotations

import math
import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.cli import cli
from opconv.compare import compare_arrays
from opconv.dialects.onnx.io import to_proto
from opconv.schemas import dialect_schemas

# -- helpers -----------------------------------------------------------------------------------


def make_model(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def tensor(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def ops_at(model: opconv.Model) -> list[tuple[str, int]]:
    return [(n.op, n.version) for n in model.graph.walk()]


def check_valid(model: opconv.Model, opset: int) -> onnx.ModelProto:
    proto = to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    assert [i.version for i in proto.opset_import if i.domain == ""] == [opset]
    schemas = dialect_schemas("onnx")
    for node in model.graph.walk():
        if node.domain not in ("", "ai.onnx"):
            continue
        assert schemas.find(node.op, opset) is not None, f"{node.op} does not exist at opset {opset}"
    return proto


def convert_and_run(model: onnx.ModelProto, opset: int, feeds: dict) -> tuple[opconv.Model, dict]:
    converted = opconv.load(opconv.convert_version(model, opset))  # a ModelProto comes back
    check_valid(converted, opset)
    with np.errstate(all="ignore"):
        return converted, opconv.run(converted, feeds)


RNG = np.random.default_rng(7)


# -- the matrix subset: ONNX's node cases against their stored outputs ----------------------


def _neighbour_targets(source: int) -> list[int]:
    return sorted({t for t in (source - 1, source + 1, 21) if 1 <= t <= 21 and t != source})


@pytest.mark.slow
def test_node_cases_to_neighbouring_opsets_and_21():
    """Each node case moved one opset down, one up, and to 21: when converted, it must be valid and right."""
    import importlib.util

    from opconv.testdata import node_cases

    spec = importlib.util.spec_from_file_location(
        "version_matrix", os.path.join(os.path.dirname(__file__), "..", "scripts", "version_matrix.py")
    )
    matrix = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(matrix)

    failures, verified = [], 0
    for index, case in enumerate(node_cases()):
        source = matrix.source_opset(case.load_model())
        if source is None:
            continue
        for target in _neighbour_targets(source):
            for name, _, _, _, outcome, message in matrix.run_pair((index, target, ("opconv",))):
                if outcome in ("wrong", "checker", "unrunnable"):
                    failures.append(f"{name} -> {target}: {outcome}: {message}")
                verified += outcome == "verified"
    assert not failures, "\n".join(failures[:30])
    assert verified > 2500  # measured 2,9xx; a collapse of the converter shows here


# -- onnx's shipped model tests -----------------------------------------------------------------


def test_shipped_models_upgrade_to_21_and_back():
    from opconv.testdata import model_cases

    problems = []
    for case in model_cases():
        model = case.load_model()
        source = [i.version for i in model.opset_import if i.domain == ""][0]
        up = opconv.load(opconv.convert_version(model, 21))
        down = opconv.convert_version(up, source)
        for converted, opset in ((up, 21), (down, source)):
            check_valid(converted, opset)
            names = [v.name for v in converted.graph.outputs]
            for i, (_, expected) in enumerate(case.datasets):
                with np.errstate(all="ignore"):
                    actual = opconv.run(converted, case.feeds(i))
                for name, e in zip(names, expected):
                    cmp = compare_arrays(name, e, actual[name])
                    if not cmp.ok:
                        problems.append(f"{case.name} at {opset}: {cmp.message}")
    assert not problems, "\n".join(problems)


def same_model(a: onnx.ModelProto, b: onnx.ModelProto) -> bool:
    """The same nodes, initializers, graph inputs/outputs and opsets (node order and value_info aside)."""

    def parts(m):
        g = m.graph
        return (
            sorted(n.SerializeToString() for n in g.node),
            sorted(t.SerializeToString() for t in g.initializer),
            [v.name for v in g.input],
            [v.name for v in g.output],
            sorted((o.domain, o.version) for o in m.opset_import),
            m.ir_version,
        )

    return parts(a) == parts(b)


def test_convert_proto_equals_the_graph_path_and_leaves_its_input_alone():
    from opconv.converters.onnx_versions import convert_proto, driver
    from opconv.testdata import light_cases

    proto = next(c for c in light_cases() if c.name == "light_squeezenet").load_model()
    before = proto.SerializeToString()
    converted = convert_proto(proto, 21)
    assert proto.SerializeToString() == before
    expected = to_proto(driver.convert_version(opconv.load(proto), 21))  # the whole model in the graph core
    assert same_model(converted, expected)
    onnx.checker.check_model(converted, full_check=True)


# -- hand-written adapters, against numpy formulas ----------------------------------------------


def test_reshape_shape_attribute_becomes_input_and_back():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    m = make_model(
        [helper.make_node("Reshape", ["x"], ["y"], shape=[4, -1])],
        [tensor("x", TensorProto.FLOAT, [2, 3, 4])],
        [tensor("y", TensorProto.FLOAT, [4, 6])],
        4,
    )
    up, out = convert_and_run(m, 13, {"x": x})
    node = up.graph.nodes[0]
    assert node.op == "Reshape" and len(node.inputs) == 2 and "shape" not in node.attrs
    np.testing.assert_array_equal(out["y"], x.reshape(4, -1))
    down, out = convert_and_run(to_proto(up), 4, {"x": x})
    assert down.graph.nodes[0].attr("shape") == [4, -1]
    np.testing.assert_array_equal(out["y"], x.reshape(4, -1))


def test_slice_pad_clip_topk_upgrade():
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    nodes = [
        helper.make_node("Slice", ["x"], ["s"], starts=[1, 0], ends=[3, 4], axes=[0, 1]),
        helper.make_node("Pad", ["s"], ["p"], paddings=[0, 1, 1, 0], value=2.5),
        helper.make_node("Clip", ["p"], ["c"], min=-0.5, max=1.0),
        helper.make_node("TopK", ["c"], ["v", "i"], k=2),
    ]
    m = make_model(
        nodes,
        [tensor("x", TensorProto.FLOAT, [3, 5])],
        [tensor("v", TensorProto.FLOAT, [3, 2]), tensor("i", TensorProto.INT64, [3, 2])],
        1,
    )
    m.opset_import[0].version = 1
    _, out = convert_and_run(m, 21, {"x": x})
    expected = np.clip(np.pad(x[1:3, 0:4], [(0, 1), (1, 0)], constant_values=2.5), -0.5, 1.0)
    order = np.argsort(-expected, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(out["i"], order)
    np.testing.assert_allclose(out["v"], np.take_along_axis(expected, order, 1))


def test_reduce_and_squeeze_axes_move_between_attribute_and_input():
    x = RNG.standard_normal((2, 1, 3)).astype(np.float32)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["r"], axes=[2], keepdims=1),
        helper.make_node("Squeeze", ["r"], ["y"], axes=[1]),
    ]
    m = make_model(nodes, [tensor("x", TensorProto.FLOAT, [2, 1, 3])], [tensor("y", TensorProto.FLOAT, [2, 1])], 11)
    up, out = convert_and_run(m, 18, {"x": x})
    assert all(len(n.inputs) == 2 and "axes" not in n.attrs for n in up.graph.nodes)
    np.testing.assert_allclose(out["y"], x.mean(axis=2, keepdims=True).squeeze(1), rtol=1e-6)
    down, out = convert_and_run(to_proto(up), 11, {"x": x})
    assert [n.attr("axes") for n in down.graph.nodes] == [[2], [1]]
    np.testing.assert_allclose(out["y"], x.mean(axis=2, keepdims=True).squeeze(1), rtol=1e-6)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_11_coerced_to_2d_keeps_its_meaning_at_13():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    m = make_model(
        [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
        [tensor("x", TensorProto.FLOAT, [2, 3, 4])],
        [tensor("y", TensorProto.FLOAT, [2, 3, 4])],
        11,
    )
    _, out = convert_and_run(m, 13, {"x": x})
    expected = _softmax(x.reshape(2, 12), 1).reshape(2, 3, 4)  # the 2-D coercion of Softmax-1/11
    np.testing.assert_allclose(out["y"], expected, rtol=1e-5)


def test_softmax_13_on_a_middle_axis_downgraded_with_transposes():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    m = make_model(
        [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
        [tensor("x", TensorProto.FLOAT, [2, 3, 4])],
        [tensor("y", TensorProto.FLOAT, [2, 3, 4])],
        13,
    )
    down, out = convert_and_run(m, 9, {"x": x})
    assert [op for op, _ in ops_at(down)] == ["Transpose", "Softmax", "Transpose"]
    np.testing.assert_allclose(out["y"], _softmax(x, 1), rtol=1e-5)


def test_gelu_and_layernorm_decomposed_for_older_opsets():
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    scale = RNG.standard_normal(5).astype(np.float32)
    bias = RNG.standard_normal(5).astype(np.float32)
    nodes = [
        helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["n"], epsilon=1e-3),
        helper.make_node("Gelu", ["n"], ["y"]),
    ]
    m = make_model(
        nodes,
        [tensor("x", TensorProto.FLOAT, [2, 5])],
        [tensor("y", TensorProto.FLOAT, [2, 5])],
        20,
        [numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(bias, "bias")],
    )
    down, out = convert_and_run(m, 13, {"x": x})
    assert not {"Gelu", "LayerNormalization"} & {op for op, _ in ops_at(down)}
    mean = x.mean(-1, keepdims=True)
    n = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-3) * scale + bias
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(out["y"], 0.5 * n * (1 + erf(n / math.sqrt(2))), rtol=1e-5, atol=1e-6)


def test_legacy_broadcast_attributes_both_ways():
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    m = make_model(
        [helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=1)],
        [tensor("a", TensorProto.FLOAT, [2, 3, 4]), tensor("b", TensorProto.FLOAT, [3])],
        [tensor("y", TensorProto.FLOAT, [2, 3, 4])],
        6,
    )
    up, out = convert_and_run(m, 13, {"a": a, "b": b})
    np.testing.assert_allclose(out["y"], a + b[:, None])
    c = RNG.standard_normal(4).astype(np.float32)
    m = make_model(
        [helper.make_node("Sub", ["c", "a"], ["y"])],
        [tensor("c", TensorProto.FLOAT, [4]), tensor("a", TensorProto.FLOAT, [2, 3, 4])],
        [tensor("y", TensorProto.FLOAT, [2, 3, 4])],
        13,
    )
    with pytest.raises(opconv.ConversionError, match="only B broadcasts"):
        opconv.convert_version(m, 6)
    m = make_model(
        [helper.make_node("Mul", ["c", "a"], ["y"])],
        [tensor("c", TensorProto.FLOAT, [4]), tensor("a", TensorProto.FLOAT, [2, 3, 4])],
        [tensor("y", TensorProto.FLOAT, [2, 3, 4])],
        13,
    )
    down, out = convert_and_run(m, 6, {"a": a, "c": c})
    assert down.graph.nodes[0].attr("broadcast") == 1
    np.testing.assert_allclose(out["y"], a * c)


def test_downgrade_casts_a_type_the_older_version_lacks():
    a = np.array([100, -100, 7], np.int8)
    b = np.array([100, -100, -8], np.int8)
    m = make_model(
        [helper.make_node("Add", ["a", "b"], ["y"])],
        [tensor("a", TensorProto.INT8, [3]), tensor("b", TensorProto.INT8, [3])],
        [tensor("y", TensorProto.INT8, [3])],
        14,
    )
    down, out = convert_and_run(m, 13, {"a": a, "b": b})
    assert [op for op, _ in ops_at(down)].count("Cast") == 3
    assert out["y"].dtype == np.int8
    np.testing.assert_array_equal(out["y"], (a.astype(np.int32) + b).astype(np.int8))  # int8 wraps


def test_subgraphs_are_converted():
    then = helper.make_graph(
        [helper.make_node("Squeeze", ["x", "axes"], ["t"])], "then", [], [tensor("t", TensorProto.FLOAT, [3])]
    )
    other = helper.make_graph(
        [helper.make_node("Squeeze", ["x", "axes"], ["e"])], "else", [], [tensor("e", TensorProto.FLOAT, [3])]
    )
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    m = make_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [tensor("c", TensorProto.BOOL, []), tensor("x", TensorProto.FLOAT, [1, 3])],
        [tensor("y", TensorProto.FLOAT, [3])],
        13,
        [axes],
    )
    x = RNG.standard_normal((1, 3)).astype(np.float32)
    down, out = convert_and_run(m, 11, {"c": np.array(True), "x": x})
    squeeze = next(n for n in down.graph.walk() if n.op == "Squeeze")
    assert squeeze.attr("axes") == [0] and len(squeeze.inputs) == 1
    np.testing.assert_array_equal(out["y"], x[0])


def test_refusal_names_every_node_and_writes_nothing(tmp_path):
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="dynamic_reshape"),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gelu", ["r"], ["g"], name="gelu"),
        helper.make_node("BitwiseNot", ["i"], ["y"], name="bitwise"),
    ]
    m = make_model(
        [nodes[1], nodes[0], nodes[2], nodes[3]],
        [tensor("x", TensorProto.FLOAT, [2, 3]), tensor("i", TensorProto.INT32, [2])],
        [tensor("g", TensorProto.FLOAT, [2, 3]), tensor("y", TensorProto.INT32, [2])],
        20,
    )
    with pytest.raises(opconv.ConversionError) as info:
        opconv.convert_version(m, 4)
    text = str(info.value)
    assert "Reshape-5 -> 4: input 'shape' ('shape') is computed at run time" in text
    assert "needs opset >= 5) (node: dynamic_reshape)" in text
    assert "BitwiseNot-18 -> 4: " in text and "(node: bitwise)" in text
    assert [(p.node, p.op, p.domain) for p in info.value.problems] == [
        ("dynamic_reshape", "Reshape", ""),
        ("gelu/Erf", "Erf", ""),
        ("bitwise", "BitwiseNot", ""),
    ]
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    result = CliRunner().invoke(cli, ["downgrade", "--opset", "4", str(path), "-o", str(tmp_path / "out.onnx")])
    assert result.exit_code == 2 and "dynamic_reshape" in result.output
    assert not (tmp_path / "out.onnx").exists()


def test_cli_upgrade_and_downgrade_with_verify(tmp_path):
    x = numpy_helper.from_array(RNG.standard_normal((4, 6)).astype(np.float32), "w")
    m = make_model(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("ReduceSum", ["m"], ["y"], axes=[1], keepdims=0),
        ],
        [tensor("x", TensorProto.FLOAT, [3, 4])],
        [tensor("y", TensorProto.FLOAT, [3])],
        11,
        [x],
    )
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    runner = CliRunner()
    up = runner.invoke(cli, ["upgrade", "--opset", "21", str(path), "--verify"])
    assert up.exit_code == 0, up.output
    out = tmp_path / "m.opset21.onnx"
    assert onnx.load(out).opset_import[0].version == 21
    down = runner.invoke(cli, ["downgrade", "--opset", "9", str(out), "-o", str(tmp_path / "m9.onnx"), "--verify"])
    assert down.exit_code == 0, down.output
    assert "outputs equal" in down.output
    wrong_way = runner.invoke(cli, ["upgrade", "--opset", "9", str(out)])
    assert wrong_way.exit_code == 2 and "downgrade" in wrong_way.output


def test_model_local_functions_move_with_the_model():
    body = [helper.make_node("ReduceSum", ["x"], ["y"], axes=[0], keepdims=0)]
    f = helper.make_function("local", "F", ["x"], ["y"], body, [helper.make_opsetid("", 11)])
    graph = helper.make_graph(
        [helper.make_node("F", ["x"], ["y"], domain="local")],
        "g",
        [tensor("x", TensorProto.FLOAT, [2, 3])],
        [tensor("y", TensorProto.FLOAT, [3])],
    )
    m = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid("local", 1)], functions=[f]
    )
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    converted, out = convert_and_run(m, 18, {"x": x})
    assert converted.functions[0].opsets[""] == 18
    np.testing.assert_allclose(out["y"], x.sum(axis=0), rtol=1e-6)


def test_upsample_becomes_resize_with_the_same_samples():
    x = RNG.standard_normal((1, 1, 2, 3)).astype(np.float32)
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    m = make_model(
        [helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")],
        [tensor("x", TensorProto.FLOAT, [1, 1, 2, 3])],
        [tensor("y", TensorProto.FLOAT, [1, 1, 4, 6])],
        9,
        [scales],
    )
    up, out = convert_and_run(m, 21, {"x": x})
    assert [op for op, _ in ops_at(up)] == ["Resize"]
    np.testing.assert_array_equal(out["y"], x.repeat(2, axis=2).repeat(2, axis=3))  # nearest, integer scales
    down, out = convert_and_run(to_proto(up), 9, {"x": x})
    assert [op for op, _ in ops_at(down)] == ["Upsample"]
    np.testing.assert_array_equal(out["y"], x.repeat(2, axis=2).repeat(2, axis=3))


def test_min_ir_version_follows_onnx_release_table():
    from onnx.helper import VERSION_TABLE

    from opconv.converters.onnx_versions import driver

    for opset in range(1, driver.newest_opset() + 1):
        expected = min((row[1] for row in VERSION_TABLE if row[2] >= opset), default=None)
        assert driver.min_ir_version(opset) == expected, opset


def test_a_trilu_mask_past_the_fold_budget_is_built_at_run_time(monkeypatch, tmp_path):
    """Fuzz regression onnx-20: downgrading a Trilu over an input declared [3, 1, 2**62] allocated its mask as a
    constant (a memory kill); a mask past the fold budget is now computed at run time, with the same values as
    onnxruntime's Trilu-14."""
    import numpy as np
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    import opconv

    monkeypatch.setenv("OPCONV_MAX_FOLD_BYTES", "1K")  # the 40 x 50 mask is 2,000 bytes
    k = numpy_helper.from_array(np.array(3, np.int64), "k")
    graph = helper.make_graph(
        [helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 40, 50])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 40, 50])],
        [k],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    down = opconv.convert_version(opconv.load(model), 13)
    assert "Range" in {n.op for n in down.graph.nodes}
    opconv.save(down, tmp_path / "down.onnx")
    x = np.random.default_rng(0).standard_normal((2, 40, 50)).astype(np.float32)
    providers = ["CPUExecutionProvider"]
    expected = onnxruntime.InferenceSession(model.SerializeToString(), providers=providers).run(None, {"x": x})[0]
    actual = onnxruntime.InferenceSession(str(tmp_path / "down.onnx"), providers=providers).run(None, {"x": x})[0]
    np.testing.assert_array_equal(actual, expected)
