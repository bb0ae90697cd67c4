"""OpenVINO IR I/O: models built and saved by OpenVINO itself load into opconv, pass `check`, and
opconv's IR v10 output reads back in the real OpenVINO runtime with the same results."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

os.environ.setdefault("CI", "true")  # `import openvino` otherwise waits on telemetry

import openvino as ov  # noqa: E402
from openvino import opset1 as ops  # noqa: E402

import opconv  # noqa: E402
from opconv.cli import cli  # noqa: E402
from opconv.errors import ModelReadError, ModelWriteError  # noqa: E402
from opconv.ir import Graph, Model, Tensor  # noqa: E402
from opconv.types import TensorType  # noqa: E402
from opconv.validation import check_model  # noqa: E402

RNG = np.random.default_rng(0)


def _weights(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------
# models built with OpenVINO's own opset1 API
# ---------------------------------------------------------------------------


def _cnn():
    x = ops.parameter([1, 3, 8, 8], np.float32, name="image")
    c = ops.convolution(x, ops.constant(_weights(4, 3, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1])
    c = ops.add(c, ops.constant(_weights(1, 4, 1, 1)))
    r = ops.relu(c)
    p = ops.max_pool(r, [2, 2], [0, 0], [0, 0], [2, 2])
    flat = ops.reshape(p, ops.constant(np.array([1, -1], np.int64)), False)
    logits = ops.matmul(flat, ops.constant(_weights(64, 10)), False, False)
    return ov.Model([ops.softmax(logits, 1).output(0)], [x], "cnn")


def _multi_output():
    x = ops.parameter([2, 6], np.float32, name="x")
    parts = ops.split(ops.prelu(x, ops.constant(np.float32([0.1]))), ops.constant(np.int64(1)), 2)
    summed = ops.add(parts.output(0), parts.output(1))
    top = ops.topk(summed, ops.constant(np.int64(2)), 1, "max", "value")
    mask = ops.greater(summed, ops.constant(np.float32(0)))
    # An f16 graph output would not do: OpenVINO reads v10 graph outputs as f32 and drops such a Convert.
    halves = ops.convert(ops.multiply(summed, ops.constant(np.float32(4))), "i32")
    return ov.Model([top.output(0), top.output(1), mask.output(0), halves.output(0), parts.output(1)], [x], "multi")


def _two_inputs():
    a = ops.parameter([3, 4], np.float32, name="a")
    b = ops.parameter([4, 5], np.float32, name="b")
    m = ops.matmul(a, b, False, False)
    t = ops.transpose(ops.tanh(m), ops.constant(np.array([1, 0], np.int64)))
    s = ops.reduce_sum(t, ops.constant(np.array([1], np.int64)), True)
    return ov.Model([ops.sigmoid(s).output(0), ops.concat([t, t], 0).output(0)], [a, b], "two")


MODELS = {"cnn": _cnn, "multi_output": _multi_output, "two_inputs": _two_inputs}


def _save_ov(model, folder, name="model"):
    path = os.path.join(folder, f"{name}.xml")
    ov.save_model(model, path, compress_to_fp16=False)  # writes IR v11
    return path


def _infer(path, feeds):
    core = ov.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(feeds)
    return [np.asarray(results[compiled.output(i)]) for i in range(len(compiled.outputs))]


def _random_feeds(model: Model):
    return [RNG.standard_normal(v.shape).astype(np.float32) for v in model.graph.inputs]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_openvino_model_round_trips_through_opconv(tmp_path, name):
    original = _save_ov(MODELS[name](), tmp_path)
    model = opconv.load(original)
    assert model.dialect == "openvino" and model.meta["ir_version"] == 11
    assert model.opsets == {"opset1": 1}
    assert check_model(model) == []

    written = str(tmp_path / "opconv.xml")
    opconv.save(model, written)
    feeds = _random_feeds(model)
    expected = _infer(original, feeds)
    got = _infer(written, feeds)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        assert e.shape == g.shape
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=1e-6, atol=1e-6)


def test_written_ir_is_v10_with_opset1_layers_only(tmp_path):
    model = opconv.load(_save_ov(_cnn(), tmp_path))
    written = tmp_path / "v10.xml"
    opconv.save(model, written)
    text = written.read_text()
    assert '<net name="cnn" version="10">' in text
    read = ov.Core().read_model(str(written))
    versions = {op.get_type_info().version_id for op in read.get_ops()}
    assert versions == {"opset1"}
    # The weights file holds exactly the constants' bytes.
    consts = [v.const for v in model.graph.initializers.values()]
    assert os.path.getsize(tmp_path / "v10.bin") == sum(t.nbytes for t in consts)
    # And opconv reads its own output back with the same structure.
    again = opconv.load(written)
    assert again.meta["ir_version"] == 10
    assert again.op_counts() == model.op_counts()
    assert check_model(again) == []


def test_loaded_structure_follows_the_dialect_doc(tmp_path):
    model = opconv.load(_save_ov(_multi_output(), tmp_path))
    g = model.graph
    assert [v.name for v in g.inputs] == ["x"]
    assert g.inputs[0].type == TensorType("float32", (2, 6))
    ops_by_name = {n.op for n in g.nodes}
    assert {"PReLU", "Split", "TopK", "Convert"} <= ops_by_name  # schema spellings
    assert all(n.domain == "opset1" and n.version == 1 for n in g.nodes)
    topk = next(n for n in g.nodes if n.op == "TopK")
    assert topk.attrs["index_element_type"].value == "int32"
    assert topk.attrs["axis"].type == "int" and topk.attrs["axis"].value == 1
    convert = next(n for n in g.nodes if n.op == "Convert")
    assert convert.attrs["destination_type"].value == "int32"
    assert [v.meta["result_name"] for v in g.outputs] == g.meta["result_names"]
    # Consts are lazy views of the .bin (read when small, mapped when large), equal to what OpenVINO wrote.
    slope = next(v.const for v in g.initializers.values() if v.const.dtype == "float32")
    assert not slope.is_loaded
    assert not slope.numpy().flags.writeable
    np.testing.assert_array_equal(slope.numpy(), np.float32([0.1]))


# ---------------------------------------------------------------------------
# hostile and malformed inputs
# ---------------------------------------------------------------------------


def _tiny_ir(
    folder,
    *,
    layer_extra="",
    const_data='element_type="f32" shape="2" offset="0" size="8"',
    const_type="Const",
    mid_type="Add",
    mid_version="opset1",
    edges=None,
    prolog="",
    bin_bytes=8,
):
    edges = (
        edges
        if edges is not None
        else (
            '<edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>'
            '<edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>'
            '<edge from-layer="2" from-port="2" to-layer="3" to-port="0"/>'
        )
    )
    port = '<port id="{}" precision="FP32"><dim>2</dim></port>'
    xml = f"""<?xml version="1.0"?>{prolog}
<net name="tiny" version="10"><layers>
<layer id="0" name="x" type="Parameter" version="opset1"><data element_type="f32" shape="2"/>
  <output>{port.format(0)}</output></layer>
<layer id="1" name="w" type="{const_type}" version="opset1"><data {const_data}/>
  <output>{port.format(0)}</output></layer>
<layer id="2" name="sum" type="{mid_type}" version="{mid_version}" {layer_extra}>
  <input>{port.format(0)}{port.format(1)}</input><output>{port.format(2)}</output></layer>
<layer id="3" name="out" type="Result" version="opset1"><input>{port.format(0)}</input></layer>
</layers><edges>{edges}</edges></net>"""
    path = os.path.join(folder, "tiny.xml")
    with open(path, "w") as f:
        f.write(xml)
    with open(os.path.join(folder, "tiny.bin"), "wb") as f:
        f.write(np.arange(bin_bytes // 4, dtype=np.float32).tobytes())
    return path


def test_hand_written_v10_loads_and_runs_in_openvino(tmp_path):
    path = _tiny_ir(tmp_path)
    model = opconv.load(path)
    assert check_model(model) == []
    x = np.float32([5, 7])
    np.testing.assert_array_equal(_infer(path, [x])[0], x + np.float32([0, 1]))


def _read_error(path) -> str:
    with pytest.raises(ModelReadError) as info:
        opconv.load(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_doctype_and_entities_are_refused(tmp_path):
    prolog = '<!DOCTYPE net [<!ENTITY boom "boom">]>'
    message = _read_error(_tiny_ir(tmp_path, prolog=prolog, layer_extra='note="&boom;"'))
    assert "DOCTYPE" in message


def test_external_entity_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    prolog = f'<!DOCTYPE net [<!ENTITY leak SYSTEM "file://{secret}">]>'
    assert "DOCTYPE" in _read_error(_tiny_ir(tmp_path, prolog=prolog, layer_extra='note="&leak;"'))


def test_const_offset_beyond_bin(tmp_path):
    path = _tiny_ir(tmp_path, const_data='element_type="f32" shape="2" offset="4" size="8"')
    message = _read_error(path)
    assert "layer 1 'w'" in message and "outside" in message


def test_const_size_mismatch(tmp_path):
    path = _tiny_ir(tmp_path, const_data='element_type="f32" shape="2" offset="0" size="4"', bin_bytes=16)
    message = _read_error(path)
    assert "layer 1 'w'" in message and "size 4" in message


def test_missing_bin(tmp_path):
    path = _tiny_ir(tmp_path)
    os.remove(tmp_path / "tiny.bin")
    assert "layer 1 'w'" in _read_error(path)


def test_unknown_op_type(tmp_path):
    message = _read_error(_tiny_ir(tmp_path, mid_type="FancyAdd"))
    assert "layer 2 'sum'" in message and "FancyAdd" in message


def test_dangling_edge_and_missing_edge(tmp_path):
    dangling = (
        '<edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>'
        '<edge from-layer="9" from-port="0" to-layer="2" to-port="1"/>'
        '<edge from-layer="2" from-port="2" to-layer="3" to-port="0"/>'
    )
    assert "layer 9" in _read_error(_tiny_ir(tmp_path, edges=dangling))
    missing = (
        '<edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>'
        '<edge from-layer="2" from-port="2" to-layer="3" to-port="0"/>'
    )
    message = _read_error(_tiny_ir(tmp_path, edges=missing))
    assert "layer 2 'sum'" in message and "input port 1" in message
    bad_port = (
        '<edge from-layer="0" from-port="7" to-layer="2" to-port="0"/>'
        '<edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>'
        '<edge from-layer="2" from-port="2" to-layer="3" to-port="0"/>'
    )
    assert "layer 0 'x' has no output port 7" in _read_error(_tiny_ir(tmp_path, edges=bad_port))


def test_malformed_xml_and_attributes(tmp_path):
    path = tmp_path / "broken.xml"
    path.write_text('<?xml version="1.0"?><net version="10"><layers><layer id="0"')
    assert "malformed XML" in _read_error(path)
    bad = _tiny_ir(tmp_path, const_data='element_type="f32" shape="2" offset="zero" size="8"')
    assert "layer 1 'w'" in _read_error(bad)
    wrong = _tiny_ir(tmp_path, const_data='element_type="u1" shape="2" offset="0" size="8"')
    assert "u1" in _read_error(wrong)


def test_non_opset1_layer_names_layer_and_version(tmp_path):
    x = ov.opset8.parameter([2, 3], np.float32, name="x")
    gelu = ov.opset8.gelu(x, "erf")
    gelu.set_friendly_name("act")
    path = _save_ov(ov.Model([gelu.output(0)], [x], "gelu"), tmp_path)
    message = _read_error(path)
    assert "'act'" in message and "Gelu version opset7 is not opset1" in message


def test_other_opset_of_an_opset1_name_is_refused(tmp_path):
    message = _read_error(_tiny_ir(tmp_path, mid_version="opset8"))
    assert "layer 2 'sum': Add version opset8 is not opset1" in message


def test_tensor_iterator_is_refused_clearly(tmp_path):
    assert "TensorIterator" in _read_error(_tiny_ir(tmp_path, mid_type="TensorIterator"))


# ---------------------------------------------------------------------------
# saving
# ---------------------------------------------------------------------------


def test_failed_save_leaves_nothing(tmp_path):
    model = opconv.load(_save_ov(_cnn(), tmp_path))
    model.graph.nodes[-1].attrs["axis"].type = "graph"  # cannot be written
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ModelWriteError):
        opconv.save(model, out / "bad.xml")
    assert os.listdir(out) == []


def test_save_refuses_untyped_values_and_other_ops(tmp_path):
    g = Graph("g")
    x = g.add_input("x", TensorType("float32", (2,)))
    w = g.add_initializer("w", Tensor.from_array(np.float32([1, 2])))
    y = g.op("Gelu", x, domain="opset7", version=1, name="act")
    g.outputs.append(g.op("Add", y, w, domain="opset1", version=1, name="sum"))
    with pytest.raises(ModelWriteError, match="'act'"):
        opconv.save(Model(g, "openvino", {"opset1": 1}), tmp_path / "m.xml")
    assert os.listdir(tmp_path) == []


def test_save_of_a_hand_built_graph_runs_in_openvino(tmp_path):
    g = Graph("built")
    x = g.add_input("x", TensorType("float32", (2, 3)))
    w = g.add_initializer("w", Tensor.from_array(_weights(3, 4)))
    y = g.op("MatMul", x, w, domain="opset1", version=1, name="mm", transpose_a=False, transpose_b=False)
    y.type = TensorType("float32", (2, 4))
    z = g.op("ReLU", y, domain="opset1", version=1, name="act")
    z.type = TensorType("float32", (2, 4))
    g.outputs.append(z)
    model = Model(g, "openvino", {"opset1": 1})
    path = tmp_path / "built.xml"
    opconv.save(model, path)
    feeds = [RNG.standard_normal((2, 3)).astype(np.float32)]
    expected = np.maximum(feeds[0] @ w.const.numpy(), 0)
    np.testing.assert_allclose(_infer(str(path), feeds)[0], expected, rtol=1e-6, atol=1e-6)


def test_attributes_left_at_their_default_are_written_out(tmp_path):
    # OpenVINO reads a DeformableConvolution without `group` as group 0 and fails; the specification's
    # default is 1. A node that sets only the required attributes must still run there.
    g = Graph("deformable")
    x = g.add_input("x", TensorType("float32", (1, 2, 5, 5)))
    offsets = g.add_input("offsets", TensorType("float32", (1, 18, 3, 3)))
    w = g.add_initializer("w", Tensor.from_array(_weights(3, 2, 3, 3)))
    y = g.op(
        "DeformableConvolution",
        x,
        offsets,
        w,
        domain="opset1",
        version=1,
        name="dc",
        strides=[1, 1],
        pads_begin=[0, 0],
        pads_end=[0, 0],
        dilations=[1, 1],
    )
    y.type = TensorType("float32", (1, 3, 3, 3))
    g.outputs.append(y)
    model = Model(g, "openvino", {"opset1": 1})
    path = tmp_path / "dc.xml"
    opconv.save(model, path)
    assert 'group="1"' in path.read_text() and 'deformable_group="1"' in path.read_text()
    feeds = [
        RNG.standard_normal((1, 2, 5, 5)).astype(np.float32),
        RNG.uniform(-1.5, 1.5, (1, 18, 3, 3)).astype(np.float32),
    ]
    expected = opconv.run(opconv.load(path), {"x": feeds[0], "offsets": feeds[1]})
    np.testing.assert_allclose(_infer(str(path), feeds)[0], next(iter(expected.values())), rtol=1e-5, atol=1e-5)


def test_attributes_given_as_numpy_values_are_typed_by_the_schema(tmp_path):
    # Converters pass numpy scalars and arrays; the schema types them (a float stays a float, an int list a
    # list of ints), so the IR spells them as OpenVINO reads them and both executors agree with the formula.
    from opconv.attributes import typed_attributes

    g = Graph("typed")
    x = g.add_input("x", TensorType("float32", (1, 2, 4, 4)))
    elu = g.op(
        "Elu",
        x,
        domain="opset1",
        version=1,
        name="elu",
        attrs=typed_attributes("openvino", "Elu", {"alpha": np.float64(0.5)}, domain="opset1"),
    )
    elu.type = TensorType("float32", (1, 2, 4, 4))
    pool_attrs = {
        "strides": np.array([2, 2]),
        "pads_begin": np.zeros(2, np.int64),
        "pads_end": (0, 0),
        "kernel": np.array([2, 2], np.int32),
        "exclude_pad": np.bool_(True),
        "rounding_type": "floor",
    }
    y = g.op(
        "AvgPool",
        elu,
        domain="opset1",
        version=1,
        name="pool",
        attrs=typed_attributes("openvino", "AvgPool", pool_attrs, domain="opset1"),
    )
    y.type = TensorType("float32", (1, 2, 2, 2))
    g.outputs.append(y)
    path = tmp_path / "typed.xml"
    opconv.save(Model(g, "openvino", {"opset1": 1}), path)
    text = path.read_text()
    assert 'alpha="0.5"' in text and 'strides="2,2"' in text and 'exclude-pad="true"' in text
    feed = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    activated = np.where(feed > 0, feed, 0.5 * (np.exp(feed) - 1))
    expected = activated.reshape(1, 2, 2, 2, 2, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(_infer(str(path), [feed])[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(opconv.run(opconv.load(path), {"x": feed})[y.name], expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


def test_cli_inspect_and_check(tmp_path):
    path = _save_ov(_cnn(), tmp_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["inspect", path])
    assert result.exit_code == 0, result.output
    assert "openvino" in result.output and "Convolution" in result.output
    result = runner.invoke(cli, ["check", path])
    assert result.exit_code == 0, result.output
    bad = _tiny_ir(tmp_path, mid_type="FancyAdd")
    result = runner.invoke(cli, ["check", bad])
    assert result.exit_code == 2
    assert "FancyAdd" in result.output
