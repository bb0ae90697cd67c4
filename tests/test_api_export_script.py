"""The README's "Using opconv from an export script" runs as written; its flow (load bytes -> convert -> verify
-> save) is also checked from a committed ONNX file against onnxruntime and OpenVINO, so that it never depends on
torch being installed."""

import os
import re

import numpy as np
import onnxruntime as ort
import pytest

import opconv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme_block() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Using opconv from an export script", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _openvino(xml, image):
    import openvino as ov

    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled(image)[compiled.output("logits")]


@pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript:DeprecationWarning")
def test_readme_export_script_runs_and_its_ir_matches_torch(tmp_path, monkeypatch):
    pytest.importorskip("torch")  # the flow itself is checked without torch below
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(_readme_block(), "README.md (export script)", "exec"), names)
    torch, model, image = names["torch"], names["model"], names["image"]
    with torch.no_grad():
        expected = model(image).numpy()
    np.testing.assert_allclose(
        _openvino(tmp_path / "out" / "classifier.xml", image.numpy()), expected, rtol=1e-4, atol=1e-5
    )


def test_the_same_flow_from_a_committed_onnx_file(tmp_path):
    with open(os.path.join(ROOT, "fixtures", "cnn.onnx"), "rb") as f:
        exported = f.read()  # what an exporter hands over in memory
    image = np.random.default_rng(11).standard_normal((1, 3, 32, 32)).astype(np.float32)
    onnx_model = opconv.load(exported)
    ir = opconv.convert(onnx_model, to="openvino", input_shapes={"image": (1, 3, 32, 32)})
    report = opconv.verify(onnx_model, ir, {"image": image})
    assert report.ok, report.summary()
    expected = ort.InferenceSession(exported, providers=["CPUExecutionProvider"]).run(None, {"image": image})[0]
    np.testing.assert_allclose(opconv.run(ir, {"image": image})["probs"], expected, rtol=1e-4, atol=1e-6)
    opconv.save(ir, tmp_path / "classifier.xml")

    import openvino as ov

    compiled = ov.Core().compile_model(str(tmp_path / "classifier.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    np.testing.assert_allclose(compiled(image)[compiled.output("probs")], expected, rtol=1e-4, atol=1e-6)
