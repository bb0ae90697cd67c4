"""``opconv verify`` on the runtimes models are deployed to: backends per side, tolerances at the precision a model
computes in, error statistics, saved references, progress.

Judged against what the project did not write: onnxruntime's outputs stored with the corpus
(``fixtures/corpus/*.npz``), and onnxruntime / OpenVINO called directly through their own APIs.
"""

from __future__ import annotations

import itertools
import json
import os
import sys

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from lxml import etree
from onnx import numpy_helper

import opconv
from opconv.backends import NAMES, get_backend
from opconv.cli import cli
from tests.runtimes import run_ort

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "corpus")

#: small corpus models every backend runs: a CNN and a transformer block (masking, LayerNorm, GELU, softmax)
MODELS = ("resnet_legacy_op11", "encoder_block_legacy_op17")


def corpus(name: str) -> tuple[str, str]:
    return os.path.join(CORPUS, f"{name}.onnx"), os.path.join(CORPUS, f"{name}.npz")


def stored(npz: str, prefix: str) -> dict[str, np.ndarray]:
    with np.load(npz) as data:
        return {k[len(prefix) :]: data[k] for k in data.files if k.startswith(prefix)}


def run(*args, color=False):
    return CliRunner().invoke(cli, [str(a) for a in args], color=color)


@pytest.fixture(scope="module")
def resnet_ir(tmp_path_factory):
    """resnet_legacy_op11 converted to OpenVINO IR by opconv at the stored inputs' shape."""
    onnx_path, _ = corpus("resnet_legacy_op11")
    xml = str(tmp_path_factory.mktemp("ir") / "resnet.xml")
    opconv.save(opconv.convert(onnx_path, to="openvino", input_shapes={"image": (2, 3, 16, 16)}), xml)
    return xml


# ---------------------------------------------------------------------------
# every backend, every pair
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_every_backend_reproduces_the_stored_onnxruntime_outputs(model):
    onnx_path, npz = corpus(model)
    for backend in NAMES:
        report = opconv.verify(onnx_path, expected=npz, backends=backend)
        assert report.ok, (backend, [o.message for o in report.outputs])
        assert report.backend_a == "expected" and report.backend_b.split()[0] == backend
        assert {o.name for o in report.outputs} == set(stored(npz, "output:"))


def test_every_pair_of_backends_agrees_on_a_corpus_model():
    onnx_path, npz = corpus("encoder_block_legacy_op17")
    for a, b in itertools.combinations(NAMES, 2):
        report = opconv.verify(onnx_path, onnx_path, stored(npz, "input:"), backends=(a, b))
        assert report.ok, (a, b, [o.message for o in report.outputs])
        assert report.backend_a.split()[0] == a and report.backend_b.split()[0] == b


def test_backends_return_intermediates_by_name():
    """The interface --bisect builds on: intermediates come back beside the outputs, equal on every backend
    that runs the model's own graph (IREE runs the HLO conversion, whose values are named differently)."""
    onnx_path, npz = corpus("resnet_legacy_op11")
    feeds = stored(npz, "input:")
    model = opconv.load(onnx_path)
    names = [node.outputs[0].name for node in model.graph.nodes if node.op in ("Conv", "MaxPool")][:3]
    direct = run_ort(_with_outputs(onnx.load(onnx_path), names), feeds)  # onnxruntime's own API
    for backend in ("opconv", "onnxruntime", "openvino"):
        out = get_backend(backend).run(onnx_path, feeds, extra_outputs=names)
        assert list(out) == ["logits", *names], backend
        for name, want in zip(["logits", *names], direct):
            np.testing.assert_allclose(out[name], want, rtol=1e-4, atol=1e-5, err_msg=f"{backend} {name}")
        # inputs and weights come back too (a runtime cannot name a Parameter or a weight as a result)
        weight = next(iter(model.graph.initializers))
        out = get_backend(backend).run(onnx_path, feeds, extra_outputs=["image", weight, "logits"])
        assert list(out) == ["logits", "image", weight], backend
        np.testing.assert_array_equal(out["image"], feeds["image"])
        np.testing.assert_array_equal(
            out[weight],
            numpy_helper.to_array(next(t for t in onnx.load(onnx_path).graph.initializer if t.name == weight)),
        )
    with pytest.raises(opconv.OpconvError, match="no value called 'nowhere'"):
        get_backend("opconv").run(onnx_path, feeds, extra_outputs=["nowhere"])


def _with_outputs(proto: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    for name in names:
        proto.graph.output.add().name = name
    return proto


# ---------------------------------------------------------------------------
# ONNX vs its IR on onnxruntime and OpenVINO; a perturbed weight in the .bin
# ---------------------------------------------------------------------------


def test_onnx_and_its_ir_on_onnxruntime_and_openvino(resnet_ir):
    onnx_path, _ = corpus("resnet_legacy_op11")
    result = run("verify", onnx_path, resnet_ir, "--backend", "A:onnxruntime", "--backend", "B:openvino")
    assert result.exit_code == 0, result.output
    assert f"B: {resnet_ir} on openvino CPU f32" in result.output
    assert result.output.splitlines()[-1] == "verify: 1 outputs equal"


def test_a_weight_perturbed_in_the_bin_fails_with_the_runtimes_own_figures(resnet_ir, tmp_path):
    import openvino as ov

    onnx_path, npz = corpus("resnet_legacy_op11")
    xml = tmp_path / "perturbed.xml"
    xml.write_bytes(open(resnet_ir, "rb").read())
    weights = bytearray(open(resnet_ir[:-4] + ".bin", "rb").read())
    # the largest float32 Const (a convolution's kernel): its first element + 3.0
    consts = [layer.find("data") for layer in etree.parse(resnet_ir).iter("layer") if layer.get("type") == "Const"]
    data = max((d for d in consts if d.get("element_type") == "f32"), key=lambda d: int(d.get("size")))
    offset = int(data.get("offset"))
    weights[offset : offset + 4] = (np.frombuffer(weights[offset : offset + 4], np.float32) + 3.0).tobytes()
    (tmp_path / "perturbed.bin").write_bytes(bytes(weights))

    json_path = tmp_path / "report.json"
    result = run(
        "verify",
        onnx_path,
        xml,
        "--backend",
        "A:onnxruntime",
        "--backend",
        "B:openvino",
        "--inputs",
        _inputs_npz(npz, tmp_path),
        "--json",
        json_path,
    )
    assert result.exit_code == 1, result.output
    [out] = json.loads(json_path.read_text())["outputs"]

    feeds = stored(npz, "input:")
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    b = compiled(feeds)[compiled.output(0)]
    a = run_ort(onnx.load(onnx_path), feeds)[0]
    error = np.abs(b.astype(np.float64) - a)
    bad = error > 1e-4 + 1e-3 * np.abs(a)
    assert out["mismatches"] == int(bad.sum()) > 0
    assert out["max_abs_error"] == pytest.approx(error.max(), rel=1e-5)
    assert out["mean_abs_error"] == pytest.approx(error.mean(), rel=1e-5)
    assert out["median_abs_error"] == pytest.approx(np.median(error), rel=1e-5)
    assert out["p99_abs_error"] == pytest.approx(np.percentile(error, 99), rel=1e-5)
    rel = error / np.abs(a.astype(np.float64))
    assert out["max_rel_error"] == pytest.approx(rel.max(), rel=1e-5)
    assert out["first_mismatch"] == [int(i) for i in np.argwhere(bad)[0]]
    first = tuple(out["first_mismatch"])
    # the message gives A then B, as the table's header "first mismatch (A vs B)" does
    assert out["message"].endswith(f"A {a[first]:.7g} vs B {b[first]:.7g}")
    row = next(line for line in result.output.splitlines() if line.split()[:2] == ["FAIL", "logits"])
    assert f"{a[first]:.7g} vs {b[first]:.7g}" in row


def _inputs_npz(npz: str, tmp_path) -> str:
    path = str(tmp_path / "inputs.npz")
    np.savez(path, **stored(npz, "input:"))
    return path


# ---------------------------------------------------------------------------
# tolerances
# ---------------------------------------------------------------------------


def test_a_float16_model_verifies_at_float16_tolerance(tmp_path):
    """bert_ort_fp16 is onnxruntime's float16 rewrite of bert_legacy_op14 (float32 inputs and outputs)."""
    fp16, npz = corpus("bert_ort_fp16")
    fp32, _ = corpus("bert_legacy_op14")
    feeds = stored(npz, "input:")
    report = opconv.verify(fp32, fp16, feeds, backends="onnxruntime")
    assert report.ok and report.precision == "float16"
    assert all((o.rtol, o.atol) == (1e-2, 1e-3) for o in report.outputs)
    # the errors are onnxruntime's own: float16 arithmetic against float32
    a, b = run_ort(onnx.load(fp32), feeds), run_ort(onnx.load(fp16), feeds)
    for o, x, y in zip(report.outputs, a, b):
        assert o.max_abs_error == pytest.approx(np.abs(y.astype(np.float64) - x).max(), rel=1e-5)
    worst = max(report.outputs, key=lambda o: o.max_abs_error)
    assert worst.max_abs_error > 1e-4  # more than float32's tolerance allows: the float16 default matters
    assert not opconv.verify(fp32, fp16, feeds, rtol=1e-3, atol=1e-4, backends="onnxruntime").ok

    result = run("verify", fp32, fp16, "--inputs", _inputs_npz(npz, tmp_path), "--backend", "onnxruntime")
    assert result.exit_code == 0 and "compute in float16" in result.output, result.output


def test_per_output_tolerances(tmp_path):
    fp16, npz = corpus("bert_ort_fp16")
    fp32, _ = corpus("bert_legacy_op14")
    inputs = _inputs_npz(npz, tmp_path)
    base = ["verify", fp32, fp16, "--inputs", inputs, "--backend", "onnxruntime", "-q"]
    report = opconv.verify(fp32, fp16, stored(npz, "input:"), backends="onnxruntime")
    names = [o.name for o in report.outputs]
    worst = max(report.outputs, key=lambda o: o.max_abs_error)

    # float32 tolerance everywhere fails; loosening only the worst output's makes it pass only if the others hold
    strict = run(*base, "--rtol", "1e-3", "--atol", "1e-4")
    assert strict.exit_code == 1
    json_path = tmp_path / "r.json"
    loose = run(*base, "--rtol", "0", "--atol", "1", "--atol", f"{worst.name}=1e-9", "--json", json_path)
    assert loose.exit_code == 1, loose.output
    data = json.loads(json_path.read_text())
    assert data["output_atol"] == {worst.name: 1e-9} and data["atol"] == 1.0
    verdicts = {o["name"]: o["ok"] for o in data["outputs"]}
    assert verdicts == {n: n != worst.name for n in names}
    assert {o["name"]: o["atol"] for o in data["outputs"]} == {n: 1e-9 if n == worst.name else 1.0 for n in names}
    # per output from Python, "*" for the rest
    mixed = opconv.verify(
        fp32, fp16, stored(npz, "input:"), backends="onnxruntime", atol={worst.name: 1.0, "*": 1e-9}, rtol=0
    )
    assert {o.name: o.ok for o in mixed.outputs} == {n: n == worst.name for n in names}

    unknown = run(*base, "--rtol", "nosuch=1e-2")
    assert unknown.exit_code == 2 and "no output has that name" in unknown.output
    assert len(unknown.output.strip().splitlines()) == 1
    bad = run(*base, "--atol", "x=abc")
    assert bad.exit_code == 2 and "OUTPUT=NUMBER" in bad.output


# ---------------------------------------------------------------------------
# saved references
# ---------------------------------------------------------------------------


def test_saved_outputs_gate_later_runs(resnet_ir, tmp_path):
    onnx_path, npz = corpus("resnet_legacy_op11")
    ref = tmp_path / "ref.npz"
    result = run(
        "verify",
        onnx_path,
        resnet_ir,
        "--backend",
        "A:onnxruntime",
        "--inputs",
        _inputs_npz(npz, tmp_path),
        "--save-outputs",
        ref,
        "-q",
    )
    assert result.exit_code == 0, result.output
    saved = dict(np.load(ref))
    assert sorted(saved) == ["input:image", "output:logits"]
    # what was saved is onnxruntime's output on the saved inputs (the corpus stored the same)
    by_onnxruntime = run_ort(onnx.load(onnx_path), {"image": saved["input:image"]})[0]
    np.testing.assert_array_equal(saved["output:logits"], by_onnxruntime)
    np.testing.assert_array_equal(saved["output:logits"], stored(npz, "output:")["logits"])

    junit = tmp_path / "r.xml"
    ok = run("verify", resnet_ir, "--expected", ref, "--backend", "openvino", "--junit", junit)
    assert ok.exit_code == 0, ok.output
    assert f"A: {ref} (expected outputs)" in ok.output
    suite = etree.parse(str(junit)).getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["backend_a"] == "expected" and props["backend_b"] == "openvino CPU f32"
    case = suite.find("testcase")
    figures = {p.get("name"): float(p.get("value")) for p in case.find("properties")}
    assert figures["total"] == 20 and figures["mismatches"] == 0 and figures["max_abs_error"] < 1e-5

    # a stored output moved: the model no longer matches its reference
    moved = dict(saved)
    moved["output:logits"] = saved["output:logits"] + np.float32(0.5) * (np.arange(20).reshape(2, 10) == 7)
    np.savez(tmp_path / "moved.npz", **moved)
    failing = run("verify", resnet_ir, "--expected", tmp_path / "moved.npz", "--junit", junit)
    assert failing.exit_code == 1
    case = etree.parse(str(junit)).getroot().find("testsuite/testcase")
    assert "1 of 20 elements differ; first at [0, 7]" in case.find("failure").get("message")
    # the Python API takes the same reference as a path or a mapping
    assert opconv.verify(resnet_ir, expected=str(ref), backends="openvino").ok
    assert not opconv.verify(resnet_ir, expected=moved).ok


def test_reference_misuse_is_a_one_line_error(tmp_path):
    onnx_path, npz = corpus("resnet_legacy_op11")
    both = run("verify", onnx_path, onnx_path, "--expected", npz)
    assert both.exit_code == 2 and "not both" in both.output
    side = run("verify", onnx_path, "--expected", npz, "--backend", "A:onnxruntime")
    assert side.exit_code == 2 and "A is the expected outputs" in side.output
    assert len(side.output.strip().splitlines()) == 1


# ---------------------------------------------------------------------------
# progress, verdicts, missing runtimes
# ---------------------------------------------------------------------------


def test_progress_says_what_ran_where_and_quiet_silences_it():
    onnx_path, _ = corpus("resnet_legacy_op11")
    result = run("verify", onnx_path, onnx_path, "--backend", "B:onnxruntime")
    lines = result.output.splitlines()
    timed = [line for line in lines if line.startswith(("A: ", "B: ")) and line.endswith(" s")]
    assert [line.split(" on ")[1].rsplit(":", 1)[0] for line in timed] == ["opconv", "onnxruntime"], lines
    assert all(float(line.rsplit(": ", 1)[1][:-2]) >= 0 for line in timed)
    quiet = run("verify", onnx_path, onnx_path, "--backend", "B:onnxruntime", "-q")
    assert not [line for line in quiet.output.splitlines() if line.endswith(" s")]
    assert "input shapes:" not in quiet.output and quiet.exit_code == 0


def test_the_verdict_column_is_coloured_only_on_a_terminal(tmp_path):
    onnx_path, npz = corpus("resnet_legacy_op11")
    moved = {"output:logits": stored(npz, "output:")["logits"] + 1, "input:image": stored(npz, "input:")["image"]}
    np.savez(tmp_path / "moved.npz", **moved)
    plain = run("verify", onnx_path, "--expected", tmp_path / "moved.npz")
    assert "\x1b[" not in plain.output
    assert any(line.split()[:2] == ["FAIL", "logits"] for line in plain.output.splitlines()), plain.output
    coloured = run("verify", onnx_path, "--expected", tmp_path / "moved.npz", color=True)
    assert "\x1b[31m" in coloured.output and coloured.exit_code == 1
    good = run("verify", onnx_path, "--expected", npz, color=True)
    assert "\x1b[32m" in good.output and good.exit_code == 0


@pytest.mark.parametrize(
    "backend, module, extra",
    [
        ("onnxruntime", "onnxruntime", "onnxruntime"),
        ("openvino", "openvino", "openvino"),
        ("iree", "iree.runtime", "iree"),
    ],
)
def test_a_missing_runtime_names_its_extra(backend, module, extra, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    onnx_path, npz = corpus("resnet_legacy_op11")
    with pytest.raises(opconv.OpconvError, match=rf"pip install 'opconv\[{extra}\]'"):
        opconv.verify(onnx_path, expected=npz, backends=backend)
    result = run("verify", onnx_path, "--expected", npz, "--backend", backend)
    assert result.exit_code == 2 and f"pip install 'opconv[{extra}]'" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_unknown_backends_and_precisions_are_refused():
    onnx_path, npz = corpus("resnet_legacy_op11")
    result = run("verify", onnx_path, onnx_path, "--backend", "tensorrt")
    assert result.exit_code == 2 and "unknown backend 'tensorrt'" in result.output
    result = run("verify", onnx_path, onnx_path, "--backend", "C:opconv")
    assert result.exit_code == 2 and "A:NAME or B:NAME" in result.output
    with pytest.raises(opconv.OpconvError, match="unknown OpenVINO precision"):
        opconv.verify(onnx_path, expected=npz, backends="openvino", openvino_precision="f8")


def test_openvino_precision_is_the_plugins_hint(resnet_ir):
    """bf16/f16 inference is compared at that type's tolerance; f32 at float32's."""
    _, npz = corpus("resnet_legacy_op11")
    f32 = opconv.verify(resnet_ir, expected=npz, backends="openvino")
    assert f32.precision is None and f32.outputs[0].rtol == 1e-3
    bf16 = opconv.verify(resnet_ir, expected=npz, backends="openvino", openvino_precision="bf16")
    assert bf16.precision == "bfloat16" and bf16.outputs[0].rtol == 2e-2 and bf16.backend_b == "openvino CPU bf16"


def test_onnx_and_its_hlo_on_onnxruntime_and_iree(tmp_path):
    onnx_path, npz = corpus("encoder_block_legacy_op17")
    hlo = str(tmp_path / "encoder.hlo")
    opconv.save(opconv.convert(onnx_path, to="hlo", input_shapes={"input_ids": (2, 8)}), hlo)
    result = run(
        "verify",
        onnx_path,
        hlo,
        "--backend",
        "A:onnxruntime",
        "--backend",
        "B:iree",
        "--inputs",
        _inputs_npz(npz, tmp_path),
    )
    assert result.exit_code == 0, result.output
    assert f"B: {hlo} on iree llvm-cpu" in result.output
    refused = run("verify", hlo, "--expected", npz, "--backend", "onnxruntime")
    assert refused.exit_code == 2 and "runs onnx models, not hlo (which opconv, iree run)" in refused.output


def test_the_plugins_default_precision_is_what_openvino_reports(resnet_ir):
    import openvino as ov

    _, npz = corpus("resnet_legacy_op11")
    report = opconv.verify(resnet_ir, expected=npz, backends="openvino", openvino_precision="default")
    hint = ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()
    assert report.precision == {"bf16": "bfloat16", "f16": "float16"}.get(hint)
    assert report.ok  # within the tolerance of the precision the plugin computes in


def test_on_a_terminal_the_progress_line_is_live_and_keeps_its_time():
    import io

    from opconv.cli.run_cmd import SideProgress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = SideProgress(stream)
    progress("A", "m.onnx on onnxruntime", None)
    progress("A", "m.onnx on onnxruntime", 1.5)
    progress("B", "m.xml on openvino CPU f32", None)
    progress.close()  # B failed: its line goes, the error follows on a line of its own
    lines = stream.getvalue().split("\n")
    assert lines[0].startswith("\rA: running m.onnx on onnxruntime ...")
    assert lines[0].rsplit("\r", 1)[1].rstrip() == "A: m.onnx on onnxruntime: 1.50 s"
    assert lines[1].startswith("\rB: running m.xml on openvino CPU f32 ...") and lines[1].endswith("\r")
    assert lines[1].rsplit("\r", 2)[1].strip() == ""


def test_openvino_returns_intermediates_of_an_ir_by_layer(resnet_ir):
    """Layers of opconv's IR as extra Results, against onnxruntime's values of the ONNX nodes they came from."""
    onnx_path, npz = corpus("resnet_legacy_op11")
    feeds = stored(npz, "input:")
    ir = opconv.load(resnet_ir)
    # the first ReLU and MaxPool layers, named after their ONNX nodes
    onnx_names = {"ReLU": "/stem/stem.2/Relu_output_0", "MaxPool": "/stem/stem.3/MaxPool_output_0"}
    layers = {
        op: next(n.outputs[0].name for n in ir.graph.nodes if n.op == op and n.name.startswith(prefix))
        for op, prefix in (("ReLU", "/stem/stem.2/"), ("MaxPool", "/stem/stem.3/"))
    }
    got = get_backend("openvino").run(
        resnet_ir, feeds, extra_outputs=[layers["ReLU"], layers["MaxPool"], layers["ReLU"]]
    )
    assert list(got) == ["logits", layers["ReLU"], layers["MaxPool"]]
    want = run_ort(_with_outputs(onnx.load(onnx_path), list(onnx_names.values())), feeds)
    for op, value in zip(onnx_names, want[1:]):
        np.testing.assert_allclose(got[layers[op]], value, rtol=1e-5, atol=1e-5, err_msg=op)
