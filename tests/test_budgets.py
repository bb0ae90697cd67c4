"""Budgets instead of bombs: tiny models that ask for terabytes, or hang onnx's shape inference, are refused
in a second with an error naming the budget (and how to raise it); folding leaves large values for run time.

Each bomb is a hand-built model of ~100 bytes (the shapes of issue 17's findings).  Where a value is
computed, it is compared with onnxruntime's.
"""

from __future__ import annotations

import os
import time

import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv import budget
from opconv.cli import cli
from opconv.errors import BudgetError, ModelReadError, OpconvError


def _model(nodes, inputs=(), inits=(), opset=17, out_type=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes, "bomb", list(inputs), [helper.make_tensor_value_info("y", out_type, None)], list(inits)
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _i64(name, value):
    return numpy_helper.from_array(np.array(value, np.int64), name)


BOMBS = {
    "range": _model(
        [helper.make_node("Range", ["s", "l", "d"], ["y"])],
        inits=[_i64("s", 0), _i64("l", 10**12), _i64("d", 1)],
        out_type=TensorProto.INT64,
    ),
    "constant-of-shape": _model([helper.make_node("ConstantOfShape", ["s"], ["y"])], inits=[_i64("s", [10**12])]),
    "resize": _model(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [numpy_helper.from_array(np.array([1, 1, 1e6, 1e6], np.float32), "scales")],
    ),
    "reduce-sum-of-fill": _model(
        [
            helper.make_node("ConstantOfShape", ["s"], ["big"]),
            helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0),
        ],
        inits=[_i64("s", [10**6, 10**6])],
    ),
    "expand": _model(
        [helper.make_node("Expand", ["one", "s"], ["big"]), helper.make_node("Add", ["x", "big"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.ones(1, np.float32), "one"), _i64("s", [10**5, 10**5])],
    ),
    "declared-input": _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [100000, 100000, 100])],
    ),
}


FEEDS = {"resize": {"x": np.ones((1, 1, 2, 2), np.float32)}, "expand": {"x": np.ones(1, np.float32)}}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_is_refused_by_run_and_verify_naming_the_budget(name):
    from opconv.verification import random_inputs

    model = BOMBS[name]
    assert len(model.SerializeToString()) < 200
    started = time.monotonic()
    refusal = f"over the tensor budget of 4 GiB; raise it with --max-tensor-bytes or {budget.MAX_BYTES_VARIABLE}"
    with pytest.raises(BudgetError, match=refusal):
        opconv.run(model, random_inputs(model) if name == "declared-input" else FEEDS.get(name, {}))
    with pytest.raises(OpconvError, match=refusal):
        opconv.verify(model, model)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("name", ["range", "constant-of-shape", "reduce-sum-of-fill", "declared-input"])
def test_a_bomb_is_refused_by_onnx_to_ir(name):
    with pytest.raises(BudgetError, match="over the tensor budget"):
        opconv.convert(BOMBS[name], to="openvino")


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_no_converter_allocates_a_bomb(name):
    """Either a refusal or a model whose large tensors stay symbolic (HLO broadcasts, an IR Interpolate)."""
    for target in ("openvino", "hlo"):
        try:
            converted = opconv.convert(BOMBS[name], to=target)
        except OpconvError:
            continue
        assert converted.weight_bytes() < 1 << 20


def test_the_budget_is_raised_by_the_environment_and_the_command_line(monkeypatch, tmp_path, fixtures_dir):
    model = os.path.join(fixtures_dir, "cnn.onnx")
    runner = CliRunner()
    result = runner.invoke(cli, ["--max-tensor-bytes", "1K", "run", model, "--shape", "image=1,3,32,32"])
    assert result.exit_code == 2
    assert "input 'image' (shape [1, 3, 32, 32]) would be 24 KiB, over the tensor budget of 1 KiB" in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = runner.invoke(cli, ["--max-tensor-bytes", "lots", "run", model])
    assert result.exit_code == 2 and "'lots' is not a size in bytes" in result.output
    monkeypatch.setenv(budget.MAX_BYTES_VARIABLE, "100K")
    assert runner.invoke(cli, ["run", model, "--shape", "image=1,3,32,32"]).exit_code == 0
    monkeypatch.setenv(budget.MAX_BYTES_VARIABLE, "20K")
    assert runner.invoke(cli, ["run", model, "--shape", "image=1,3,32,32"]).exit_code == 2
    monkeypatch.setenv(budget.MAX_BYTES_VARIABLE, "20K")
    result = runner.invoke(cli, ["--max-tensor-bytes", "1G", "run", model, "--shape", "image=1,3,32,32"])
    assert result.exit_code == 0, result.output


def test_folding_leaves_a_value_over_its_budget_for_run_time(monkeypatch):
    """A sum over a filled 1000x1000 tensor is not computed while preparing, but is when run, as ORT does."""
    model = _model(
        [
            helper.make_node(
                "ConstantOfShape", ["s"], ["big"], value=numpy_helper.from_array(np.array([0.25], np.float32))
            ),
            helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0),
        ],
        inits=[_i64("s", [1000, 1000])],
    )
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {})[0]
    from opconv.dialects.onnx.executor import Session

    def folded_sum(limit: str) -> bool:
        monkeypatch.setenv(budget.FOLD_BYTES_VARIABLE, limit)
        loaded = opconv.load(model)
        return id(loaded.graph.outputs[0]) in Session(loaded).folded_values()

    assert not folded_sum("1M")  # 4 MB of input: left for run time
    np.testing.assert_allclose(opconv.run(model, {})["y"], expected, rtol=1e-6)
    assert folded_sum("64M")


def _einsum_that_hangs_shape_inference():
    """Equation ".>" over two inputs: onnx 1.23's Einsum inference never returns."""
    inputs = [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, []),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [1]),
    ]
    graph = helper.make_graph(
        [helper.make_node("Einsum", ["a", "b"], ["y"], equation=".>")],
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])


@pytest.mark.slow
def test_shape_inference_that_hangs_is_given_up_after_its_time_limit(monkeypatch):
    from opconv.dialects.onnx.proto import infer_shapes

    monkeypatch.setenv("OPCONV_SHAPE_INFERENCE_SECONDS", "1")
    model = _einsum_that_hangs_shape_inference()
    started = time.monotonic()
    with pytest.raises(ModelReadError, match="did not finish in 1 s .*Einsum.*OPCONV_SHAPE_INFERENCE_SECONDS"):
        infer_shapes(model, data_prop=True)
    for target in ("openvino", "hlo"):
        with pytest.raises(OpconvError):
            opconv.convert(model, to=target)
    assert time.monotonic() - started < 15


def test_shape_inference_in_the_child_gives_onnx_s_answer_and_errors():
    """An Einsum model is inferred in a child: the shapes are onnx's own, and its errors come back as such."""
    import onnx

    from opconv.dialects.onnx.proto import infer_shapes

    inputs = [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 5]),
    ]
    graph = helper.make_graph(
        [helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")],
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    expected = onnx.shape_inference.infer_shapes(model)
    assert infer_shapes(model).graph.output[0] == expected.graph.output[0]
    model.graph.node[0].attribute[0].s = b"ij->i"  # two inputs, one operand
    with pytest.raises(Exception) as info:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    with pytest.raises(type(info.value)):
        infer_shapes(model, strict_mode=True)


def test_guarded_shape_inference_works_with_descriptors_above_1023():
    # A long-running host (a test session with many runtimes loaded) holds over 1,024 descriptors; the guard's
    # pipe then lies above select()'s limit, and inference used to fail silently (ranks left unknown).
    import resource

    import onnx

    from opconv.dialects.onnx.proto import infer_shapes

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) is below what this test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200) if hard == resource.RLIM_INFINITY else hard, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        model = onnx.load(os.path.join(os.path.dirname(__file__), "..", "fixtures", "corpus", "gpt2_legacy_op14.onnx"))
        inferred = infer_shapes(model, data_prop=True)  # Range under data propagation: inferred in a child
        assert len(inferred.graph.value_info) > 100
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("caller", ["static shapes", "version converter"])
def test_best_effort_shape_inference_gives_up_on_onnx_s_failures_only(monkeypatch, caller):
    """Inference is a help to conversions: onnx failing on a model is no error, a bug of opconv's surfaces."""
    from opconv.converters import static_inputs
    from opconv.converters.onnx_versions import driver
    from opconv.dialects.onnx import proto

    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        ),
        opset_imports=[helper.make_opsetid("", 13)],
    )
    onnx_failure = proto.inference_failures()[0]("[ShapeInferenceError] inference failed")

    def convert():
        if caller == "static shapes":
            return opconv.convert(model, to="openvino")
        return driver.infer_types(None, model)

    for failure in (onnx_failure, RuntimeError("std::runtime_error from C++"), TypeError("a bug of opconv's")):

        def failing(*args, **kwargs):
            raise failure  # noqa: B023 (installed and called within this iteration)

        monkeypatch.setattr(static_inputs, "infer_shapes", failing)
        monkeypatch.setattr(proto, "infer_shapes", failing)
        if isinstance(failure, TypeError):
            with pytest.raises(TypeError, match="a bug of opconv's"):
                convert()
        else:
            result = convert()
            assert result == {} if caller == "version converter" else result.dialect == "openvino"
