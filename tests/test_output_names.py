"""Graph input and output names survive every conversion: OpenVINO finds each IR output by its ONNX name (also
for outputs of multi-output layers: TopK, Split, LSTM), StableHLO carries them as jax.arg_info/jax.result_info,
and ir-to-onnx / hlo-to-onnx give them back."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from tests.conftest import ROOT

EXPORTS = os.path.join(ROOT, "fixtures", "exports")
F32 = {"INFERENCE_PRECISION_HINT": "f32"}

# every committed model with the shapes its dynamic inputs take
FIXTURES = {
    "cnn.onnx": {"image": (2, 3, 32, 32)},
    "transformer.onnx": {"x": (1, 8, 32)},
    "lstm.onnx": {"seq": (10, 2, 6)},
    "mlp_external.onnx": {"x": (2, 64)},
    "exports/tiny_bert.onnx": {"input_ids": (2, 12)},
    "exports/tiny_bert_ortfold.onnx": {"input_ids": (2, 12)},
    "exports/tiny_gpt2.onnx": {"input_ids": (2, 12)},
    "exports/positions.onnx": {"x": (2, 5, 8)},
    "exports/multi_output.onnx": {},
}


def _odd_names_model() -> onnx.ModelProto:
    """Multi-output layers whose outputs have names with a comma, a quote, a slash and a space."""
    graph = helper.make_graph(
        [
            helper.make_node("Split", ["in put"], ["first,part", 'se"cond'], axis=1, name="split"),
            helper.make_node("TopK", ["in put", "k"], ["vals", "idx/0"], axis=1, name="topk"),
        ],
        "g",
        [helper.make_tensor_value_info("in put", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("first,part", 'se"cond', "vals")]
        + [helper.make_tensor_value_info("idx/0", TensorProto.INT64, None)],
        [numpy_helper.from_array(np.array([2], np.int64), "k")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _compile(xml):
    import openvino as ov

    core = ov.Core()
    return core.compile_model(core.read_model(str(xml)), "CPU", F32)


def test_multi_output_layers_keep_their_onnx_names_in_openvino(tmp_path):
    """TopK, Split and LSTM outputs of a torch export, by name, with onnxruntime's values."""
    path = os.path.join(EXPORTS, "multi_output.onnx")
    data = np.load(os.path.join(EXPORTS, "multi_output.npz"))
    xml = tmp_path / "multi.xml"
    opconv.save(opconv.convert(path, to="openvino"), xml)
    compiled = _compile(xml)
    names = [o.name for o in onnx.load(path).graph.output]
    assert names == ["scores", "top_index", "left", "right", "sequence", "hidden", "cell"]
    assert [o.get_any_name() for o in compiled.outputs] == names
    assert [o.get_names() for o in compiled.outputs] == [{n} for n in names]
    assert compiled.inputs[0].get_any_name() == "x"
    results = compiled({"x": data["in.x"]})
    for name in names:
        np.testing.assert_allclose(
            results[compiled.output(name)], data[f"out.{name}"], rtol=1e-4, atol=2e-5, err_msg=name
        )


def test_odd_names_survive_ir_hlo_stablehlo_and_back(tmp_path):
    model = _odd_names_model()
    outputs, inputs = [o.name for o in model.graph.output], ["in put"]
    xml = tmp_path / "odd.xml"
    opconv.save(opconv.convert(model, to="openvino"), xml)
    compiled = _compile(xml)
    assert [o.get_any_name() for o in compiled.outputs] == outputs
    assert [i.get_any_name() for i in compiled.inputs] == inputs
    back = opconv.convert(opconv.load(str(xml)), to="onnx")
    assert [v.name for v in back.graph.outputs] == outputs and [v.name for v in back.graph.inputs] == inputs

    hlo_path = tmp_path / "odd.hlo"
    hlo = opconv.convert(model, to="hlo")
    opconv.save(hlo, hlo_path)
    back = opconv.convert(opconv.load(str(hlo_path)), to="onnx")
    assert [v.name for v in back.graph.outputs] == outputs and [v.name for v in back.graph.inputs] == inputs

    from iree.compiler import ir

    from opconv.dialects.hlo.stablehlo import export

    with ir.Context() as context:
        module = ir.Module.parse(export(hlo), context)
        assert module.operation.verify()
        [main] = module.body.operations
        assert [ir.StringAttr(a["jax.result_info"]).value for a in main.attributes["res_attrs"]] == outputs
        assert [ir.StringAttr(a["jax.arg_info"]).value for a in main.attributes["arg_attrs"]] == inputs


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_fixture_output_is_found_by_its_onnx_name(tmp_path, name):
    path = os.path.join(ROOT, "fixtures", name)
    source = onnx.load(path, load_external_data=False)
    names = [o.name for o in source.graph.output]
    xml = tmp_path / "model.xml"
    ir_model = opconv.convert(path, to="openvino", input_shapes=FIXTURES[name])
    opconv.save(ir_model, xml)
    compiled = _compile(xml)
    assert [o.get_any_name() for o in compiled.outputs] == names
    assert [i.get_any_name() for i in compiled.inputs] == [
        i.name for i in source.graph.input if i.name not in {t.name for t in source.graph.initializer}
    ]
    assert [v.name for v in opconv.convert(opconv.load(str(xml)), to="onnx").graph.outputs] == names
    hlo = opconv.convert(path, to="hlo", input_shapes=FIXTURES[name])
    assert [v.name for v in hlo.graph.outputs] == names
