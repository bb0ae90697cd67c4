"""Static shapes for real torch exports with dynamic axes: symbols bound from one input's shape or from --dim,
shape computations folded to a fixed point, and the same binding in run/verify.

The models in fixtures/exports/ are legacy (TorchScript) exports of torch 2.13 with dynamic axes, made by
scripts/make_export_fixtures.py; their .npz holds the inputs and onnxruntime's outputs on them, the oracle here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import opconv
from opconv.cli import cli
from opconv.errors import ConversionError, OpconvError
from tests.conftest import ROOT

EXPORTS = os.path.join(ROOT, "fixtures", "exports")
F32 = {"INFERENCE_PRECISION_HINT": "f32"}


def _case(name: str):
    """(path, inputs, onnxruntime's outputs) of an exported fixture."""
    data = np.load(os.path.join(EXPORTS, f"{name}.npz"))
    inputs = {k[3:]: data[k] for k in data.files if k.startswith("in.")}
    outputs = {k[4:]: data[k] for k in data.files if k.startswith("out.")}
    return os.path.join(EXPORTS, f"{name}.onnx"), inputs, outputs


def _close(got: dict, expected: dict, who: str) -> None:
    assert set(got) >= set(expected), (who, sorted(got))
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=2e-5, err_msg=f"{who}: output {name!r}")


def _openvino(xml, feeds: dict) -> dict:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU", F32)
    return {o.get_any_name(): np.asarray(v) for o, v in compiled(feeds).items()}


def _ir_results(tmp_path, model, feeds, **shapes) -> dict[str, dict]:
    xml = tmp_path / "model.xml"
    opconv.save(opconv.convert(model, to="openvino", **shapes), xml)
    return {"OpenVINO CPU": _openvino(xml, feeds), "opconv IR executor": opconv.run(opconv.load(str(xml)), feeds)}


# ---------------------------------------------------------------------------
# conversions of real exports, checked against onnxruntime
# ---------------------------------------------------------------------------


def test_tiny_bert_converts_to_ir_from_the_shape_of_input_ids_alone(tmp_path):
    """attention_mask is declared [batch,seq] like input_ids: the shape of input_ids binds both symbols."""
    path, feeds, expected = _case("tiny_bert")
    for who, got in _ir_results(tmp_path, opconv.load(path), feeds, input_shapes={"input_ids": (2, 12)}).items():
        _close(got, expected, who)


def test_tiny_bert_converts_to_hlo_from_dims_alone():
    path, feeds, expected = _case("tiny_bert")
    hlo = opconv.convert(path, to="hlo", dims={"batch": 2, "seq": 12})
    assert [tuple(v.shape) for v in hlo.graph.inputs] == [(2, 12), (2, 12)]
    _close(opconv.run(hlo, feeds), expected, "opconv HLO executor")


def test_tiny_gpt2_converts_to_ir_and_hlo_from_one_binding(tmp_path):
    """GPT-2 at opset 11: position ids from a Range over a Shape, causal masks sliced by computed lengths."""
    path, feeds, expected = _case("tiny_gpt2")
    model = opconv.load(path)
    for who, got in _ir_results(tmp_path, model, feeds, dims={"batch": 2, "seq": 12}).items():
        _close(got, expected, who)
    hlo = opconv.convert(model, to="hlo", input_shapes={"attention_mask": (2, 12)})
    _close(opconv.run(hlo, feeds), expected, "opconv HLO executor")


def test_onnxruntime_folded_and_raw_export_give_the_same_ir_result(tmp_path):
    path, feeds, expected = _case("tiny_bert")
    (tmp_path / "raw").mkdir()
    (tmp_path / "folded").mkdir()
    raw = _ir_results(tmp_path / "raw", opconv.load(path), feeds, input_shapes={"input_ids": (2, 12)})
    folded_path = os.path.join(EXPORTS, "tiny_bert_ortfold.onnx")
    folded = _ir_results(tmp_path / "folded", opconv.load(folded_path), feeds, dims={"batch": 2, "seq": 12})
    for who in raw:
        _close(folded[who], raw[who], f"{who}, folded vs raw")
        _close(raw[who], expected, who)


def test_shape_chains_through_range_fold_to_a_fixed_point(tmp_path):
    """positions.onnx: Range over a Shape, whose output's Shape feeds a Reshape, then a Range over a Shape of
    that: each link folds only after the previous one made shapes static (one fold pass refused it)."""
    path, feeds, expected = _case("positions")
    model = opconv.load(path)
    for who, got in _ir_results(tmp_path, model, feeds, input_shapes={"x": (2, 5, 8)}).items():
        _close(got, expected, who)
    hlo = opconv.convert(model, to="hlo", dims={"batch": 2, "seq": 5})
    _close(opconv.run(hlo, feeds), expected, "opconv HLO executor")

    iree_runtime = pytest.importorskip("tests.iree_runtime")
    from opconv.dialects.hlo.stablehlo import export

    module = iree_runtime.IreeModule(export(hlo, function_name="positions"))
    [scores] = module.call("positions", feeds["x"], feeds["mask"])
    np.testing.assert_allclose(scores, expected["scores"], rtol=1e-4, atol=2e-5)


def test_declared_symbolic_output_types_are_replaced_by_inferred_ones():
    path, _, _ = _case("tiny_bert")
    assert [d.dim_param for d in onnx.load(path).graph.output[0].type.tensor_type.shape.dim[:2]] == ["batch", "seq"]
    ir = opconv.convert(path, to="openvino", input_shapes={"input_ids": (3, 7)})
    assert [tuple(v.shape) for v in ir.graph.outputs] == [(3, 7, 32), (3, 32)]


# ---------------------------------------------------------------------------
# what stays open, and bad dims: one clean error
# ---------------------------------------------------------------------------


def test_every_unresolved_input_is_named_with_the_dims_already_known():
    path, _, _ = _case("tiny_bert")
    with pytest.raises(ConversionError) as info:
        opconv.convert(path, to="openvino", dims={"seq": 128})
    message = str(info.value)
    assert "'input_ids' [batch,128]" in message and "'attention_mask' [batch,128]" in message
    assert "--input-shape input_ids=<batch>,128" in message and "--dim batch=N" in message


def test_conflicting_bindings_and_bad_dims_are_refused():
    path, _, _ = _case("tiny_bert")
    with pytest.raises(ConversionError, match="seq is already 12"):
        opconv.convert(path, to="hlo", input_shapes={"input_ids": (2, 12), "attention_mask": (2, 13)})
    for bad in (-1, "?", 2.5, None):
        with pytest.raises(OpconvError, match="not a static dim"):
            opconv.convert(path, to="openvino", input_shapes={"input_ids": (bad, 12)})
    with pytest.raises(OpconvError, match="not a static dim"):
        opconv.convert(path, to="hlo", dims={"batch": -1})
    with pytest.raises(ConversionError, match="'sequence', which no input declares; .*: batch, seq"):
        opconv.convert(path, to="openvino", dims={"batch": 1, "sequence": 8})


@pytest.mark.parametrize("command", ["onnx-to-ir", "onnx-to-hlo", "run"])
@pytest.mark.parametrize("option", ["x=-1,16", "x=?,16", "x=1.5,16", "x=a,16"])
def test_cli_bad_dim_is_one_line_and_exit_2(tmp_path, command, option):
    path, _, _ = _case("positions")
    out = ["-o", str(tmp_path / "m.xml")] if command == "onnx-to-ir" else []
    result = CliRunner().invoke(cli, [command, path, *out, "--input-shape", option])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("opconv: error: --input-shape") and len(result.output.splitlines()) == 1


def test_cli_bad_dim_as_a_subprocess_is_exit_2_without_traceback(tmp_path):
    path, _, _ = _case("positions")
    result = subprocess.run(
        [sys.executable, "-m", "opconv", "onnx-to-ir", path, "-o", str(tmp_path / "m.xml"), "--input-shape", "x=-1,16"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and os.listdir(tmp_path) == []


def test_cli_dim_options_convert_and_verify(tmp_path):
    path, _, _ = _case("tiny_bert")
    xml = tmp_path / "bert.xml"
    result = CliRunner().invoke(
        cli, ["onnx-to-ir", path, "-o", str(xml), "--dim", "batch=2", "--dim", "seq=12", "--verify"]
    )
    assert result.exit_code == 0, result.output
    assert "2 outputs equal" in result.output
    # verify of the dynamic source against the static IR takes the IR's shapes, and says which
    result = CliRunner().invoke(cli, ["verify", path, str(xml)])
    assert result.exit_code == 0, result.output
    assert "input shapes: input_ids=2,12 attention_mask=2,12" in result.stderr


# ---------------------------------------------------------------------------
# run / verify: the same binding; open dims are 1, and said
# ---------------------------------------------------------------------------


def test_run_binds_symbols_and_defaults_open_dims_to_1():
    path, _, _ = _case("tiny_bert")
    runner = CliRunner()
    result = runner.invoke(cli, ["run", path, "--input-shape", "input_ids=3,5"])
    assert result.exit_code == 0, result.stderr
    assert "input shapes: input_ids=3,5 attention_mask=3,5" in result.stderr
    assert "float32[3,5,32]" in result.output
    result = runner.invoke(cli, ["run", path, "--dim", "seq=4", "--seed", "9"])
    assert "input shapes: input_ids=1,4 attention_mask=1,4" in result.stderr
    assert "[batch,4] -> [1,4]" in result.stderr
    result = runner.invoke(cli, ["run", path, "--shape", "input_ids=2,6"])  # the old option name
    assert result.exit_code == 0 and "input_ids=2,6 attention_mask=2,6" in result.stderr


def test_verify_in_python_takes_dims_and_reports_the_defaults():
    path, _, _ = _case("tiny_bert")
    report = opconv.verify(path, path, dims={"seq": 3})
    assert report.ok and report.inputs["attention_mask"]["shape"] == [1, 3]
    assert any("[batch,3] -> [1,3]" in note for note in report.notes)
    report = opconv.verify(path, path, input_shapes={"attention_mask": (2, 4)})
    assert report.inputs["input_ids"]["shape"] == [2, 4] and not report.notes
