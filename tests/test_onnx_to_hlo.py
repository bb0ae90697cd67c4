"""ONNX -> HLO: every ONNX node case the dialect can express converts and computes, in opconv's HLO executor,
the outputs shipped with onnx; the light models and fixtures convert, verify and fuse; round trips back to ONNX
run in onnxruntime to the same outputs.

The node sweep runs once per session (module fixture).  A case's integer inputs (axes, pads, shapes, k ...) are
tried as constants when the case cannot convert with them as graph inputs: HLO shapes are static, so such
operands must be constants in a real model, and the case's data stays the data onnx ships.
"""

from __future__ import annotations

import collections
import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv import testdata
from opconv.cli import cli
from opconv.compare import compare_arrays
from opconv.converters.hlo_to_onnx import hlo_to_onnx
from opconv.converters.onnx_to_hlo import conversion_stats, onnx_to_hlo
from opconv.dialects.onnx.io import to_proto
from opconv.errors import ConversionError, OpconvError
from tests import known
from tests.runtimes import run_ort

SUITE = "onnx-to-hlo"
# Converted and verified node cases measured when the converter landed (onnx 1.23.2); the sweep may only grow.
MIN_VERIFIED = 1360


# ---------------------------------------------------------------------------
# The node-case sweep
# ---------------------------------------------------------------------------


def _with_constant_int_inputs(case) -> onnx.ModelProto | None:
    """The case's model with its small integer and shape-operand inputs as initializers (None if none)."""
    feeds = case.feeds(0)
    params = {
        n.input[i]
        for n in case.model.graph.node
        for i in range(1, len(n.input))
        if n.op_type in ("Resize", "Upsample", "Pad", "Range", "TopK", "OneHot", "CumSum", "CumProd")
    }
    params |= {n.input[i] for n in case.model.graph.node if n.op_type == "Range" for i in range(len(n.input))}
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    kept, frozen = [], False
    for vi in m.graph.input:
        v = feeds.get(vi.name)
        small = isinstance(v, np.ndarray) and v.size <= 64
        if small and (v.dtype.kind in "iu" or vi.name in params):
            m.graph.initializer.append(numpy_helper.from_array(v, vi.name))
            frozen = True
        else:
            kept.append(vi)
    del m.graph.input[:]
    m.graph.input.extend(kept)
    return m if frozen else None


def _convert_case(case):
    """(HLO model, how) or (None, reason)."""
    try:
        return onnx_to_hlo(opconv.load(case.model)), "as is"
    except ConversionError as e:
        first = e
    frozen = _with_constant_int_inputs(case)
    if frozen is not None:
        try:
            return onnx_to_hlo(opconv.load(frozen)), "constant shape operands"
        except ConversionError as e:
            first = e
    problem = first.problems[0] if first.problems else None
    reasons = getattr(problem, "reasons", None) or [str(first)]
    return None, _reason_key(reasons[-1])


def _reason_key(reason: str) -> str:
    """A refusal reason without the rule name and value names, for grouping."""
    text = reason.split(": ", 1)[1] if ": " in reason and reason.split(": ", 1)[0].count("-") else reason
    return text.split(" (")[0].split("'")[0][:70]


def _verify_case(case, model) -> tuple[str, str]:
    """('verified' | 'wrong' | 'not runnable', detail)."""
    names = {v.name for v in model.graph.inputs}
    feeds = {k: v for k, v in case.feeds(0).items() if k in names}
    try:
        with np.errstate(all="ignore"):
            out = opconv.run(model, feeds)
    except OpconvError as e:
        return "not runnable", str(e)[:160]
    actual = [out[v.name] for v in model.graph.outputs]
    for i, (expected, got) in enumerate(zip(case.datasets[0][1], actual)):
        cmp = compare_arrays(f"output {i}", expected, got)  # the per-dtype table, as the conformance run
        if not cmp.ok:
            return "wrong", cmp.message
    return "verified", ""


@pytest.fixture(scope="module")
def sweep():
    outcome: dict[str, tuple[str, str]] = {}
    refused: collections.Counter = collections.Counter()
    how: collections.Counter = collections.Counter()
    for case in testdata.node_cases():
        model, detail = _convert_case(case)
        if model is None:
            refused[detail] += 1
            continue
        how[detail] += 1
        outcome[case.name] = _verify_case(case, model)
    return outcome, refused, how


@pytest.mark.slow
def test_node_cases_convert_and_verify_in_the_hlo_executor(sweep):
    outcome, refused, how = sweep
    counts = collections.Counter(status for status, _ in outcome.values())
    print(
        f"\nONNX -> HLO node cases: {counts['verified']} converted+verified ({dict(how)}), "
        f"{counts['wrong']} converted-but-wrong, {counts['not runnable']} not runnable, "
        f"{sum(refused.values())} refused"
    )
    for reason, n in refused.most_common():
        print(f"  refused {n:4d}: {reason}")
    listed = known.KNOWN.get(SUITE, {})
    failing = {name: f"{status}: {detail}" for name, (status, detail) in outcome.items() if status != "verified"}
    unexpected = {name: why for name, why in failing.items() if name not in listed}
    assert not unexpected, f"converted but not verified: {unexpected}"
    now_pass = [name for name in listed if outcome.get(name, ("", ""))[0] == "verified"]
    assert not now_pass, f"listed in tests/known_failures.json ({SUITE}) but verified now: {now_pass}"
    assert counts["verified"] >= MIN_VERIFIED


# ---------------------------------------------------------------------------
# Light models, fixtures and round trips
# ---------------------------------------------------------------------------

LIGHT = testdata.light_cases()
# Round trips back to ONNX for four models that between them hold every light-model op (LRN included) but the
# element-wise Mul, which the fixtures round-trip; the three with 100+ MB fully connected layers (AlexNet, VGG-19,
# ZFNet) would spend most of the file's time budget serialising weights.
ROUND_TRIP = {"light_inception_v1", "light_resnet50", "light_shufflenet", "light_squeezenet"}


@pytest.mark.slow
@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_light_model_converts_verifies_fuses_and_round_trips(case):
    proto = case.load_model()
    hlo = onnx_to_hlo(opconv.load(case.path))
    stats = conversion_stats(hlo)
    assert sum(stats["fused_ops"].values()) > 0, stats
    assert {"ConvBias", "DotGeneralBias", "BatchNormInference"} & set(stats["fused_ops"]), stats
    if any(n.op_type == "BatchNormalization" for n in proto.graph.node):  # Conv + BN folds into ConvBias
        assert stats["patterns"].get("ConvBias", 0) > 0, stats
    feeds = testdata.random_feeds(proto)
    expected = case.datasets[0][1][0]
    out = next(iter(opconv.run(hlo, feeds).values()))
    cmp = compare_arrays("out", expected, out)
    assert cmp.ok, cmp.message
    if case.name not in ROUND_TRIP:
        return
    back = to_proto(hlo_to_onnx(hlo))
    onnx.checker.check_model(back, full_check=True)
    cmp = compare_arrays("out", expected, run_ort(back, feeds)[0])
    assert cmp.ok, "round trip in onnxruntime: " + cmp.message


FIXTURES = [
    ("cnn.onnx", {"image": (2, 3, 32, 32)}),
    ("mlp_external.onnx", {"x": (3, 64)}),
    ("transformer.onnx", {"x": (2, 8, 32)}),
    ("lstm.onnx", {"seq": (10, 2, 6)}),
]


@pytest.mark.parametrize("fixture,shapes", FIXTURES, ids=[f for f, _ in FIXTURES])
def test_fixture_converts_and_round_trips(fixtures_dir, fixture, shapes):
    source = opconv.load(os.path.join(fixtures_dir, fixture))
    hlo = opconv.convert(source, to="hlo", input_shapes=shapes)
    assert hlo.dialect == "hlo" and all(v.type.is_static for n in hlo.graph.nodes for v in n.outputs)
    report = opconv.verify(source, hlo, input_shapes=shapes)
    assert report.ok, report.summary()
    back = hlo_to_onnx(hlo)
    onnx.checker.check_model(to_proto(back), full_check=True)
    report = opconv.verify(source, back, input_shapes=shapes)
    assert report.ok, report.summary()


def test_transformer_fuses_layer_norm_gelu_and_biased_matmuls(fixtures_dir):
    hlo = onnx_to_hlo(opconv.load(os.path.join(fixtures_dir, "transformer.onnx")), input_shapes={"x": (1, 8, 32)})
    stats = conversion_stats(hlo)
    assert stats["fused_ops"]["LayerNorm"] == 2 and stats["fused_ops"]["Gelu"] == 1
    assert stats["patterns"]["DotGeneralBias"] == 3 and stats["patterns"]["Gelu"] == 1
    ops = collections.Counter(n.op for n in hlo.graph.nodes)
    assert "Erf" not in ops and ops["DotGeneralBias"] == 3


def test_lstm_is_unrolled_over_its_static_sequence(fixtures_dir):
    hlo = onnx_to_hlo(opconv.load(os.path.join(fixtures_dir, "lstm.onnx")), input_shapes={"seq": (10, 2, 6)})
    ops = collections.Counter(n.op for n in hlo.graph.nodes)
    assert ops["Tanh"] == 2 * 10 and ops["Sigmoid"] == 3 * 10 and "While" not in ops


# ---------------------------------------------------------------------------
# Fusion patterns on hand-built graphs, against onnxruntime
# ---------------------------------------------------------------------------


def _proto(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _check_against_ort(proto, feeds):
    hlo = onnx_to_hlo(opconv.load(proto))
    expected = run_ort(proto, feeds)
    out = opconv.run(hlo, feeds)
    for v, e in zip(hlo.graph.outputs, expected):
        cmp = compare_arrays(v.name, e, out[v.name])
        assert cmp.ok, cmp.message
    return hlo


def _layer_norm_nodes(eps_name="eps"):
    return [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", eps_name], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["s"]),
        helper.make_node("Add", ["s", "beta"], ["y"]),
    ]


def test_layer_norm_pattern_fuses_and_matches_onnxruntime():
    rng = np.random.default_rng(0)
    inits = [
        _const("two", 2.0),
        _const("eps", 1e-5),
        _const("gamma", rng.standard_normal(16)),
        _const("beta", rng.standard_normal(16)),
    ]
    proto = _proto(_layer_norm_nodes(), [_f32("x", [2, 3, 16])], [_f32("y", [2, 3, 16])], inits)
    hlo = _check_against_ort(proto, {"x": rng.standard_normal((2, 3, 16)).astype(np.float32)})
    assert [n.op for n in hlo.graph.nodes if n.op not in ("BroadcastInDim",)] == ["LayerNorm"]


def test_layer_norm_pattern_with_run_time_epsilon_is_not_fused():
    rng = np.random.default_rng(1)
    inits = [_const("two", 2.0), _const("gamma", rng.standard_normal(16)), _const("beta", rng.standard_normal(16))]
    proto = _proto(_layer_norm_nodes("e"), [_f32("x", [2, 16]), _f32("e", [])], [_f32("y", [2, 16])], inits)
    hlo = _check_against_ort(
        proto, {"x": rng.standard_normal((2, 16)).astype(np.float32), "e": np.asarray(1e-3, np.float32)}
    )
    assert "LayerNorm" not in {n.op for n in hlo.graph.nodes}


def test_gelu_tanh_form_and_matmul_add_fuse():
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["bias", "mm"], ["h"]),
        helper.make_node("Pow", ["h", "three"], ["cube"]),
        helper.make_node("Mul", ["c", "cube"], ["cc"]),
        helper.make_node("Add", ["h", "cc"], ["inner"]),
        helper.make_node("Mul", ["inner", "s"], ["scaled"]),
        helper.make_node("Tanh", ["scaled"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["t1"]),
        helper.make_node("Mul", ["h", "half"], ["hh"]),
        helper.make_node("Mul", ["hh", "t1"], ["y"]),
    ]
    inits = [
        _const("w", rng.standard_normal((8, 12))),
        _const("bias", rng.standard_normal(12)),
        _const("three", 3.0),
        _const("c", 0.044715),
        _const("s", np.sqrt(2 / np.pi)),
        _const("one", 1.0),
        _const("half", 0.5),
    ]
    proto = _proto(nodes, [_f32("x", [4, 8])], [_f32("y", [4, 12])], inits)
    hlo = _check_against_ort(proto, {"x": rng.standard_normal((4, 8)).astype(np.float32)})
    ops = collections.Counter(n.op for n in hlo.graph.nodes)
    assert ops["Gelu"] == 1 and ops["DotGeneralBias"] == 1 and not ops["Tanh"]
    gelu = next(n for n in hlo.graph.nodes if n.op == "Gelu")
    assert gelu.attr("approximate") in (1, True)


def test_conv_add_fuses_to_conv_bias_and_silu():
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Add", ["c", "b"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["sg"]),
        helper.make_node("Mul", ["a", "sg"], ["y"]),
    ]
    inits = [_const("w", rng.standard_normal((4, 3, 3, 3))), _const("b", rng.standard_normal((1, 4, 1, 1)))]
    proto = _proto(nodes, [_f32("x", [1, 3, 9, 9])], [_f32("y", None)], inits, opset=13)
    hlo = _check_against_ort(proto, {"x": rng.standard_normal((1, 3, 9, 9)).astype(np.float32)})
    assert [n.op for n in hlo.graph.nodes if n.op != "Reshape"] == ["ConvBias", "Silu"]
    assert conversion_stats(hlo)["patterns"] == {"ConvBias": 1, "Silu": 1}


def test_mul_becomes_an_all_batch_dot_general():
    """The dialect has no multiply: x * y is a DotGeneral batching every dim and contracting none."""
    rng = np.random.default_rng(4)
    proto = _proto(
        [helper.make_node("Mul", ["x", "y"], ["z"])], [_f32("x", [2, 3]), _f32("y", [3])], [_f32("z", [2, 3])], opset=13
    )
    hlo = _check_against_ort(
        proto, {"x": rng.standard_normal((2, 3)).astype(np.float32), "y": rng.standard_normal(3).astype(np.float32)}
    )
    dot = next(n for n in hlo.graph.nodes if n.op == "DotGeneral")
    assert dot.attr("lhs_batching_dimensions") == [0, 1] and dot.attr("lhs_contracting_dimensions") == []
    assert any(n.op == "BroadcastInDim" for n in hlo.graph.nodes)


# ---------------------------------------------------------------------------
# Errors and the command line
# ---------------------------------------------------------------------------


def _unsupported_proto():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Det", ["r"], ["d"], name="det_node"),
        helper.make_node("NonZero", ["x"], ["nz"], name="nonzero_node"),
    ]
    return _proto(
        nodes,
        [_f32("x", [3, 3])],
        [_f32("d", []), helper.make_tensor_value_info("nz", TensorProto.INT64, None)],
        opset=13,
    )


def test_unsupported_nodes_are_all_named_in_one_error():
    with pytest.raises(ConversionError) as info:
        onnx_to_hlo(opconv.load(_unsupported_proto()))
    message = str(info.value)
    assert "det_node" in message and "nonzero_node" in message and "HLO" in message
    assert len(info.value.problems) == 2


def test_symbolic_input_without_shape_is_refused_naming_the_input(fixtures_dir):
    with pytest.raises(ConversionError, match="'image'.*--input-shape"):
        onnx_to_hlo(opconv.load(os.path.join(fixtures_dir, "cnn.onnx")))


def test_cli_converts_verifies_reports_fusions(tmp_path, fixtures_dir):
    out = tmp_path / "t.hlo"
    result = CliRunner().invoke(
        cli,
        [
            "onnx-to-hlo",
            os.path.join(fixtures_dir, "transformer.onnx"),
            "-o",
            str(out),
            "--input-shape",
            "x=2,8,32",
            "--verify",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "fusions:" in result.output and "Gelu 1" in result.output and "outputs equal" in result.output
    reloaded = opconv.load(str(out))
    assert reloaded.dialect == "hlo"
    feeds = {"x": np.random.default_rng(5).standard_normal((2, 8, 32)).astype(np.float32)}
    expected = run_ort(onnx.load(os.path.join(fixtures_dir, "transformer.onnx")), feeds)[0]
    cmp = compare_arrays("y", expected, next(iter(opconv.run(reloaded, feeds).values())))
    assert cmp.ok, cmp.message


def test_cli_hlo_to_onnx_round_trip(tmp_path, fixtures_dir):
    hlo_path, onnx_path = tmp_path / "cnn.hlo", tmp_path / "back.onnx"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "onnx-to-hlo",
            os.path.join(fixtures_dir, "cnn.onnx"),
            "-o",
            str(hlo_path),
            "--input-shape",
            "image=1,3,32,32",
        ],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["hlo-to-onnx", str(hlo_path), "-o", str(onnx_path), "--opset", "17", "--verify"])
    assert result.exit_code == 0, result.output
    back = onnx.load(str(onnx_path))
    onnx.checker.check_model(back, full_check=True)
    assert back.opset_import[0].version == 17
    feeds = {"image": np.random.default_rng(6).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    expected = run_ort(onnx.load(os.path.join(fixtures_dir, "cnn.onnx")), feeds)[0]
    cmp = compare_arrays("y", expected, run_ort(back, feeds)[0])
    assert cmp.ok, cmp.message


def test_cli_refuses_unsupported_model_with_exit_2_and_writes_nothing(tmp_path):
    src = tmp_path / "bad.onnx"
    onnx.save(_unsupported_proto(), str(src))
    result = CliRunner().invoke(cli, ["onnx-to-hlo", str(src)])
    assert result.exit_code == 2, result.output
    assert "det_node" in result.output and "nonzero_node" in result.output
    assert sorted(os.listdir(tmp_path)) == ["bad.onnx"]


def test_cli_help_has_examples():
    for command in ("onnx-to-hlo", "hlo-to-onnx"):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0 and f"opconv {command}" in result.output


def test_loop_becomes_while_and_matches_onnxruntime():
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["v_in", "two"], ["doubled"]),
            helper.make_node("Add", ["doubled", "fi"], ["v_out"]),
            helper.make_node("ReduceSum", ["v_out"], ["total"], keepdims=0),
            helper.make_node("Less", ["total", "limit"], ["c_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            _f32("v_in", [3]),
        ],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), _f32("v_out", [3])],
        [_const("two", 2.0), _const("limit", 200.0)],
    )
    nodes = [helper.make_node("Loop", ["m", "c", "x"], ["y"], body=body)]
    inits = [numpy_helper.from_array(np.asarray(8, np.int64), "m"), numpy_helper.from_array(np.asarray(True), "c")]
    proto = _proto(nodes, [_f32("x", [3])], [_f32("y", [3])], inits, opset=13)
    hlo = _check_against_ort(proto, {"x": np.asarray([1.0, 2.0, 3.0], np.float32)})
    assert [n.op for n in hlo.graph.nodes if n.op == "While"] == ["While"]
    back = to_proto(hlo_to_onnx(hlo))
    onnx.checker.check_model(back, full_check=True)
    feeds = {"x": np.asarray([1.0, 2.0, 3.0], np.float32)}
    cmp = compare_arrays("y", run_ort(proto, feeds)[0], run_ort(back, feeds)[0])
    assert cmp.ok, "While -> Loop round trip: " + cmp.message


def test_max_roi_pool_converts_and_matches_onnxruntime():
    # The onnx node cases have no MaxRoiPool; ROIs here reach past the image and cover single pixels.
    rng = np.random.default_rng(11)
    rois = np.array([[0, 1, 1, 6, 5], [1, 0, 0, 9, 9], [0, 4, 2, 4, 2], [1, -2, 3, 12, 7]], np.float32)
    nodes = [helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[3, 2], spatial_scale=0.75)]
    proto = _proto(nodes, [_f32("x", [2, 3, 8, 10])], [_f32("y", None)], [_const("rois", rois)], opset=13)
    hlo = _check_against_ort(proto, {"x": rng.standard_normal((2, 3, 8, 10)).astype(np.float32)})
    assert [n.op for n in hlo.graph.nodes] == ["MaxRoiPool"]


def test_concat_and_sum_of_more_inputs_than_the_former_per_count_rules():
    """70 Concat inputs and 20 Sum inputs (the former rules stopped at 64 and 8), against onnxruntime."""
    names = [f"x{i}" for i in range(70)]
    proto = _proto(
        [helper.make_node("Concat", names, ["cat"], axis=0), helper.make_node("Sum", names[:20], ["total"])],
        [_f32(n, [1, 3]) for n in names],
        [_f32("cat", [70, 3]), _f32("total", [1, 3])],
    )
    rng = np.random.default_rng(3)
    _check_against_ort(proto, {n: rng.standard_normal((1, 3)).astype(np.float32) for n in names})
