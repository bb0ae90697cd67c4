"""``opconv verify --bisect``: a weight perturbed after a conversion is traced to the node that reads it.

Each case converts a fixture model, perturbs one weight in the written files (the IR's ``.bin``, the HLO
``.hlo.weights`` sidecar, a downgraded ONNX model's initializer) and expects bisect to name the ONNX node whose
initializer that was and, on B, the layer that reads it; which layer reads it the test finds in the files
itself (the IR's edges, the HLO text), not through opconv.  The figures of a divergence are checked against
onnxruntime and OpenVINO running the intermediates directly.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from lxml import etree, html
from onnx import helper, numpy_helper

import opconv
from opconv.bisect import first_divergence, map_values
from opconv.cli import cli
from opconv.compare import tolerance
from opconv.verification import random_inputs
from tests.runtimes import run_ort

SHAPES = {"image": (1, 3, 32, 32)}
WEIGHT = "conv2.w"  # read by ONNX node conv2 of fixtures/cnn.onnx


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def cnn(fixtures_dir):
    return f"{fixtures_dir}/cnn.onnx"


def _reader_of(onnx_path: str, initializer: str) -> str:
    [node] = [n.name for n in onnx.load(onnx_path).graph.node if initializer in n.input]
    return node


def _bump_float32(blob: bytearray, offset: int, by: float = 1.0) -> None:
    value = np.frombuffer(bytes(blob[offset : offset + 4]), np.float32)[0]
    blob[offset : offset + 4] = np.float32(value + by).tobytes()


def _bump_initializer(path, name: str, by: float):
    """Add ``by`` to the first element of initializer ``name`` of the ONNX file ``path``; returns the proto."""
    proto = onnx.load(str(path))
    [init] = [t for t in proto.graph.initializer if t.name == name]
    w = numpy_helper.to_array(init).copy()
    w.flat[0] += by
    init.CopyFrom(numpy_helper.from_array(w, name))
    onnx.save(proto, str(path))
    return proto


def _bump_weight(model, name: str, by: float):
    """Add ``by`` to the first element of constant ``name`` of an in-memory model; returns its value."""
    value = model.graph.initializers[name]
    w = np.array(value.const.numpy())
    w.flat[0] += by
    value.const = opconv.Tensor.from_array(w, name=name)
    return value


def _ir_const_and_reader(xml_path, name: str):
    """The Const layer called ``name`` in an IR file and the name of the one layer its edge leads to."""
    xml = etree.parse(str(xml_path))
    [const] = xml.xpath(f"//layer[@type='Const'][@name='{name}']")
    [reader_id] = [e.get("to-layer") for e in xml.iter("edge") if e.get("from-layer") == const.get("id")]
    [reader] = xml.xpath(f"//layer[@id='{reader_id}']/@name")
    return const, reader


def _perturbed_ir(cnn: str, tmp_path) -> tuple[str, str]:
    """The cnn as IR with WEIGHT[0] + 1 in the .bin, and the name of the layer that reads WEIGHT."""
    good = tmp_path / "good.xml"
    assert run("onnx-to-ir", cnn, "--input-shape", "image=1,3,32,32", "-o", good).exit_code == 0
    const, reader = _ir_const_and_reader(good, WEIGHT)
    blob = bytearray((tmp_path / "good.bin").read_bytes())
    _bump_float32(blob, int(const.find("data").get("offset")))
    shutil.copy(good, tmp_path / "bad.xml")
    (tmp_path / "bad.bin").write_bytes(bytes(blob))
    return str(tmp_path / "bad.xml"), reader


def _divergence_of(*args) -> dict:
    result = run("verify", *args, "--bisect", "--json", "-")
    assert result.exit_code == 1, result.output
    report = json.loads(result.output[result.output.index("{") : result.output.rindex("}") + 1])
    assert not report["ok"] and report["bisect"]["runs"] >= 1
    return report["first_divergence"]


def test_a_weight_perturbed_in_the_ir_bin_is_traced_to_its_layer(cnn, tmp_path):
    bad, reader = _perturbed_ir(cnn, tmp_path)
    first = _divergence_of(cnn, bad)
    assert first["node"] == _reader_of(cnn, WEIGHT) == "conv2" and first["op"] == "Conv"
    assert reader in first["b_nodes"] and reader.startswith("conv2/")
    assert first["mismatches"] > 0 and first["max_abs_error"] > 0.1

    result = run("verify", cnn, bad, "--bisect")  # said on the terminal, the bisect's runs in the progress
    assert result.exit_code == 1 and "bisect: values 1-10 of 10 paired, on both sides:" in result.stderr
    assert "first divergence: node 'conv2' (Conv" in result.output and reader in result.output.splitlines()[-2]

    report = opconv.verify(cnn, bad, bisect=True)  # the Python API says the same, and JUnit's system-out
    assert report.bisect.divergence.node == "conv2"
    junit = etree.fromstring(report.to_junit().encode())
    assert "first divergence: node 'conv2'" in junit.findtext("testsuite/system-out")
    assert json.loads(json.dumps(report.to_json()))["first_divergence"] == first


def test_real_runtimes_bisect_the_perturbed_ir_with_their_own_figures(cnn, tmp_path):
    """A in onnxruntime, B in OpenVINO: the divergence's error is what the two runtimes compute for it."""
    ov = pytest.importorskip("openvino")
    bad, reader = _perturbed_ir(cnn, tmp_path)
    feeds = random_inputs(cnn, input_shapes=SHAPES)
    result = first_divergence(cnn, bad, feeds, feeds, backend_a="onnxruntime", backend_b="openvino")
    first = result.divergence
    assert first is not None and first.node == "conv2" and reader in first.b_nodes

    proto = onnx.load(cnn)
    proto.graph.output.add().name = first.output  # the intermediate, straight from onnxruntime
    expected = run_ort(proto, feeds)[-1]
    model = ov.Core().read_model(bad)
    model.add_outputs([op.output(0) for op in model.get_ops() if op.get_friendly_name() == first.b_node])
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    actual = compiled(feeds)[compiled.outputs[-1]]
    rtol, atol = tolerance("float32")
    bad_elements = np.abs(actual - expected) > atol + rtol * np.abs(expected)
    assert first.comparison.mismatches == int(bad_elements.sum()) > 0
    assert first.comparison.max_abs_error == pytest.approx(float(np.abs(actual - expected).max()), rel=1e-5)


def test_a_constant_perturbed_in_the_hlo_weights_is_traced_to_its_instruction(cnn, tmp_path):
    good = tmp_path / "good.hlo"
    assert run("onnx-to-hlo", cnn, "--input-shape", "image=1,3,32,32", "-o", good).exit_code == 0
    text = good.read_text()
    offset = int(re.search(rf"const %{re.escape(WEIGHT)} = \S+ weights\(offset=(\d+),", text).group(1))
    [reader] = re.findall(rf'node "([^"]+)": [^\n]*\(%[^\n]*%{re.escape(WEIGHT)}\b', text)
    weights = good.with_name(good.name + ".weights")
    blob = bytearray(weights.read_bytes())
    _bump_float32(blob, offset)
    bad = tmp_path / "bad.hlo"
    bad.write_text(text.replace(f'weights="{weights.name}"', 'weights="bad.hlo.weights"'))
    (tmp_path / "bad.hlo.weights").write_bytes(bytes(blob))

    first = _divergence_of(cnn, bad)
    assert first["node"] == _reader_of(cnn, WEIGHT) and first["b_node"] == reader == "conv2/ConvBias"


def test_an_initializer_perturbed_after_a_downgrade_is_traced_by_value_name(cnn, tmp_path):
    down = tmp_path / "down.onnx"
    assert run("downgrade", "--opset", "11", cnn, "-o", down).exit_code == 0
    proto = _bump_initializer(down, WEIGHT, 5.0)

    first = _divergence_of(cnn, down)
    assert first["node"] == first["b_node"] == "conv2" and first["paired_by"] == "name"
    assert first["output"] == first["b_value"] == "c2"

    # The figures are onnxruntime's: both models with c2 as an output.
    feeds = random_inputs(cnn, input_shapes=SHAPES)
    result = first_divergence(cnn, down, feeds, feeds, backend_a="onnxruntime", backend_b="onnxruntime")
    values = []
    for model in (onnx.load(cnn), proto):
        model.graph.output.add().name = "c2"
        values.append(run_ort(model, feeds)[-1])
    assert result.divergence.comparison.max_abs_error == pytest.approx(float(np.abs(values[1] - values[0]).max()))


def test_the_first_of_two_divergences_in_topological_order_is_named(cnn, tmp_path):
    """conv1's and fc's weights both perturbed: conv1 comes first."""
    model = opconv.convert_version(cnn, 11)
    for name in ("fc.w", "conv1.w"):
        _bump_weight(model, name, 1.0)
    feeds = random_inputs(cnn, input_shapes=SHAPES)
    result = first_divergence(cnn, model, feeds, feeds)
    assert result.divergence.node == _reader_of(cnn, "conv1.w") and result.divergence.index == 0
    assert result.compared == 1


def test_intermediates_are_requested_in_chunks_of_bounded_size(cnn, tmp_path):
    bad, _ = _perturbed_ir(cnn, tmp_path)
    feeds = random_inputs(cnn, input_shapes=SHAPES)
    asked: list[list[str]] = []

    class Recording:
        name = "recording"

        def __init__(self):
            from opconv.backends import get_backend

            self.inner = get_backend("opconv")

        def run(self, model, feeds, extra_outputs=()):
            extra_outputs = list(extra_outputs)
            asked.append(extra_outputs)
            out = self.inner.run(model, feeds, extra_outputs)
            return out

    whole = first_divergence(cnn, bad, feeds, feeds)
    limit = 5000  # bytes: the conv outputs of the cnn are 32768 and 4096 bytes
    chunked = first_divergence(cnn, bad, feeds, feeds, backend_a=Recording(), chunk_bytes=limit)
    assert whole.runs == 1 and chunked.runs > 1
    assert chunked.divergence.node == whole.divergence.node == "conv2"
    # (asked for alone, conv1's output no longer hides a BatchNormalization folded into it: float rounding differs)
    assert chunked.divergence.comparison.max_abs_error == pytest.approx(whole.divergence.comparison.max_abs_error)
    proto = onnx.load(cnn)
    names = [v for n in proto.graph.node for v in n.output]
    for name in names[:-1]:
        proto.graph.output.add().name = name
    sizes = {name: value.nbytes for name, value in zip(names[-1:] + names[:-1], run_ort(proto, feeds))}
    for names in asked:
        assert len(names) == 1 or sum(sizes[n] for n in names) <= limit
    assert sum(len(names) for names in asked) == whole.compared  # each value asked for once


def test_a_correct_conversion_of_a_real_export_pairs_every_node_and_finds_nothing(fixtures_dir):
    """torch-exported ResNet blocks (names like /blocks/blocks.0/c1/Conv) to IR and HLO: every node output has
    a counterpart, and none is outside tolerance."""
    path = f"{fixtures_dir}/corpus/resnet_legacy_op11.onnx"
    stored = np.load(f"{fixtures_dir}/corpus/resnet_legacy_op11.npz")
    feeds = {k[len("input:") :]: v for k, v in stored.items() if k.startswith("input:")}
    nodes = len(onnx.load(path).graph.node)
    for to in ("openvino", "hlo"):
        b = opconv.convert(path, to, input_shapes={k: v.shape for k, v in feeds.items()})
        assert len(map_values(opconv.load(path), b)) == nodes
        result = first_divergence(path, b, feeds, feeds)
        assert result.divergence is None and result.compared == result.paired == nodes


def test_bisect_is_not_run_when_every_output_is_equal(cnn, tmp_path):
    result = run("verify", cnn, cnn, "--bisect", "--json", tmp_path / "r.json")
    assert result.exit_code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert "first_divergence" not in report and report["ok"]


def test_unnamed_nodes_have_no_counterpart_but_outputs_still_pair(tmp_path):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])]
    a = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
    nodes_b = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Abs", ["t"], ["y"])]
    b = helper.make_model(helper.make_graph(nodes_b, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
    feeds = {"x": np.array([[1, -2, 3], [-4, 5, -6]], np.float32)}
    result = first_divergence(a, b, feeds, feeds)
    assert [p.by for p in map_values(opconv.load(a), opconv.load(b))] == ["name"]
    first = result.divergence
    assert first.output == "y" and first.op == "Neg" and first.unchecked_before == ["Relu"]
    assert first.comparison.mismatches == 3  # the positive elements: -v vs |v|


def test_a_conversion_back_to_onnx_pairs_with_the_ir_it_came_from(cnn, tmp_path):
    """A = the IR, B = ir-to-onnx of it with WEIGHT perturbed: the IR layer reading WEIGHT is named, and on B the
    node reading the initializer."""
    xml, back = tmp_path / "cnn.xml", tmp_path / "back.onnx"
    assert run("onnx-to-ir", cnn, "--input-shape", "image=1,3,32,32", "-o", xml).exit_code == 0
    assert run("ir-to-onnx", xml, "-o", back).exit_code == 0
    _, layer = _ir_const_and_reader(xml, WEIGHT)
    _bump_initializer(back, WEIGHT, 1.0)

    first = _divergence_of(xml, back)
    assert first["node"] == layer and _reader_of(str(back), WEIGHT) in first["b_nodes"]


def test_verify_bisects_on_the_deployed_runtimes(cnn, tmp_path):
    """--backend A:onnxruntime --backend B:openvino: the runs that find the divergence are the runtimes' too."""
    pytest.importorskip("openvino")
    bad, reader = _perturbed_ir(cnn, tmp_path)
    first = _divergence_of(cnn, bad, "--backend", "A:onnxruntime", "--backend", "B:openvino")
    assert first["node"] == "conv2" and reader in first["b_nodes"]


def test_stored_outputs_cannot_be_bisected_and_say_so(cnn, tmp_path):
    bad, _ = _perturbed_ir(cnn, tmp_path)
    assert run("verify", cnn, bad, "--save-outputs", tmp_path / "ref.npz").exit_code == 1
    result = run(
        "verify",
        bad,
        "--expected",
        tmp_path / "ref.npz",
        "--bisect",
        "--json",
        tmp_path / "r.json",
        "--html",
        tmp_path / "r.html",
    )
    assert result.exit_code == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert "first_divergence" not in report and any("bisect needs two models" in n for n in report["notes"])
    page = html.fromstring((tmp_path / "r.html").read_bytes())
    assert "bisect needs two models" in page.xpath("string(//div[@id='bisect'])")


@pytest.mark.parametrize("target", ["openvino", "hlo", "onnx-11"])
def test_perturbed_weights_of_a_torch_export_are_traced_to_their_readers(fixtures_dir, target):
    """A torch (dynamo) export with depthwise convolutions, Hardswish and squeeze-excitation, converted, then
    every fourth float weight of the conversion perturbed in turn: each time the node reading it is among B's
    nodes of the divergence."""
    path = f"{fixtures_dir}/corpus/mobilenet_se_dynamo.onnx"
    stored = np.load(f"{fixtures_dir}/corpus/mobilenet_se_dynamo.npz")
    feeds = {k[len("input:") :]: v for k, v in stored.items() if k.startswith("input:")}

    def converted():
        if target == "onnx-11":
            return opconv.convert_version(path, 11)
        return opconv.convert(path, target, input_shapes={k: v.shape for k, v in feeds.items()})

    names = [
        k
        for k, v in converted().graph.initializers.items()
        if v.const is not None and v.const.dtype == "float32" and v.const.numpy().size > 16
    ][::4]
    assert len(names) >= 4
    traced = 0
    for name in names:
        model = converted()
        value = _bump_weight(model, name, 5.0)
        first = first_divergence(path, model, feeds, feeds).divergence
        if first is not None:  # (a weight can be unread by these inputs, e.g. a padded position)
            assert {n.name for n, _ in value.uses} & set(first.b_nodes), (name, first.describe())
            traced += 1
    assert traced >= len(names) - 1
