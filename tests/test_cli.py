"""The command line: help texts, versions, schema browsing, inspect, errors as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import onnx.defs
from click.testing import CliRunner

import opconv
from opconv.cli import cli


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_version_and_help():
    assert run("--version").output.strip() == f"opconv, version {opconv.__version__}"
    for cmd in ([], ["inspect"], ["check"], ["schema"], ["schema", "list"], ["schema", "show"]):
        result = run(*cmd, "--help")
        assert result.exit_code == 0 and "Usage:" in result.output


def test_console_script_entry_point(fixtures_dir):
    result = subprocess.run(
        [sys.executable, "-m", "opconv", "inspect", os.path.join(fixtures_dir, "lstm.onnx")],
        capture_output=True,
        text=True,
        env={**os.environ, "CI": "true"},
    )
    assert result.returncode == 0 and "LSTM" in result.stdout


def test_schema_list_onnx_counts_match_onnx_defs():
    entries = json.loads(run("schema", "list", "onnx", "--json").output)
    ours = {(e["op"], e["since_version"]) for e in entries if e["domain"] == ""}
    theirs = {(s.name, s.since_version) for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""}
    # ONNX Runtime also registers operators in the ai.onnx domain (LayerNormalization-1 ...): opconv lists them
    # from its contrib schema file, below ONNX's own first version of each op.
    with open(os.path.join(os.path.dirname(opconv.__file__), "schemas", "onnx_contrib.json"), encoding="utf-8") as f:
        ort = {(o["name"], o["version"]) for o in json.load(f)["ops"] if o["domain"] == ""}
    assert theirs <= ours and ours - theirs == ort - theirs and len(ort) >= 20
    training = {(e["op"], e["since_version"]) for e in entries if e["domain"] == "ai.onnx.preview.training"}
    assert training == {
        (s.name, s.since_version)
        for s in onnx.defs.get_all_schemas_with_history()
        if s.domain == "ai.onnx.preview.training"
    }
    assert {"com.microsoft", "com.microsoft.nchwc", "ai.onnx.training"} <= {e["domain"] for e in entries}


def test_schema_list_openvino_and_hlo():
    ov = json.loads(run("schema", "list", "openvino", "--json").output)
    names = {e["op"] for e in ov}
    assert len(ov) >= 112 and {"Squeeze", "Unsqueeze", "StridedSlice", "Convolution"} <= names
    hlo = json.loads(run("schema", "list", "hlo", "--json").output)
    assert len(hlo) == 141


def test_schema_show_picks_the_version_in_force():
    shown = json.loads(run("schema", "show", "onnx", "Softmax", "--version", "12", "--json").output)
    assert shown["version"] == 11
    text = run("schema", "show", "openvino", "Convolution").output
    assert "auto_pad" in text and "strides" in text
    result = run("schema", "show", "onnx", "NoSuchOp")
    assert result.exit_code == 2 and result.output.startswith("opconv: error:")


def test_inspect_json(fixtures_dir):
    info = json.loads(run("inspect", os.path.join(fixtures_dir, "mlp_external.onnx"), "--json").output)
    assert info["dialect"] == "onnx" and info["opsets"] == {"": 13}
    assert info["op_counts"] == {"Gemm": 3, "Relu": 2}
    assert info["inputs"] == [{"name": "x", "type": "float32[batch,64]"}]
    assert info["weight_bytes"] == 4 * (64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10)
