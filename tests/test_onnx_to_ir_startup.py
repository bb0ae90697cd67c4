"""What a fresh ``opconv onnx-to-ir`` process pays besides the conversion: imports, schema files, exit, .bin bytes.

The timings themselves are measured by ``benchmarks/bench_onnx_to_ir.py``; these tests pin down the
behaviour the savings rest on, each against something opconv does not compute itself (the json
module, the interpreter's own module table and collector, OpenVINO's CPU plugin, numpy).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import openvino as ov
import pytest
from onnx import TensorProto, helper

import opconv
from opconv.schemas import DIALECT_FILES, split_ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA_FOLDER = os.path.join(ROOT, "opconv", "schemas")
F32 = {"INFERENCE_PRECISION_HINT": "f32"}  # a bf16-capable CPU otherwise computes in bf16

# A child process: converts with the command line, reports what it imported, and, from an atexit handler
# registered before the command's own (so it runs after it), whether the collector was frozen for the exit.
_CHILD = """
import atexit, gc, json, sys
sys.path.insert(0, {root!r})
atexit.register(lambda: print(json.dumps({{"frozen": gc.get_freeze_count()}}), flush=True))
from opconv.cli import main
try:
    main(["onnx-to-ir", {model!r}, "-o", {xml!r}, "--input-shape", "image=1,3,32,32"])
except SystemExit as e:
    assert not e.code, e.code
print(json.dumps({{"modules": sorted(sys.modules)}}), flush=True)
"""

# A child process that only locates the opconv package (as the child above does first) and lists its modules.
_FIND = """
import importlib.util, json, sys
sys.path.insert(0, {root!r})
assert importlib.util.find_spec("opconv") is not None
print(json.dumps(sorted(sys.modules)))
"""

#: modules a conversion has no use for, each of which costs a fresh process milliseconds to import
NOT_IMPORTED = (
    "onnx",
    "importlib.abc",
    "importlib.resources",
    "pathlib",
    "tempfile",
    "zipfile",
    "shutil",
    "opconv.verification",
    "opconv.compare",
)


def test_command_line_conversion_imports_only_what_it_needs_and_exits_without_collecting(tmp_path, fixtures_dir):
    xml = tmp_path / "cnn.xml"
    code = _CHILD.format(root=ROOT, model=os.path.join(fixtures_dir, "cnn.onnx"), xml=str(xml))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "CI": "true"}
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(f"wrote {xml} and ")  # the command's own output got out
    modules = set(json.loads(lines[1])["modules"])
    assert {"opconv.converters.onnx_to_openvino", "opconv.dialects.openvino.io"} <= modules
    # What merely finding the package imports belongs to how it is installed (an editable install's finder
    # imports pathlib), not to opconv.
    found = subprocess.run(
        [sys.executable, "-c", _FIND.format(root=ROOT)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "CI": "true"},
    )
    assert found.returncode == 0, found.stderr
    installation = set(json.loads(found.stdout))
    unwanted = (modules - installation) & set(NOT_IMPORTED)
    assert not unwanted, sorted(unwanted)
    # The handler registered before the command ran last and saw the collector frozen: the interpreter's
    # final collections skip everything that was alive when the command ended.
    assert json.loads(lines[2])["frozen"] > 1000
    # ... and the IR the command wrote is whole: OpenVINO runs it like the source runs in onnxruntime.
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    expected = ort.InferenceSession(os.path.join(fixtures_dir, "cnn.onnx")).run(None, {"image": x})[0]
    got = ov.Core().compile_model(str(xml), "CPU", F32)(x)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_the_python_api_leaves_the_exit_alone():
    code = (
        "import gc, opconv, opconv.converters.onnx_to_openvino, atexit; "
        "atexit.register(lambda: print(gc.get_freeze_count()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "CI": "true"}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def test_verify_stays_a_function_when_its_module_loads_later():
    code = (
        "import sys, types, opconv; loaded_early = 'opconv.verification' in sys.modules; "
        "from opconv.verification import random_inputs; import opconv.verification as v; "
        "print(loaded_early, isinstance(opconv.verify, types.FunctionType), v is not opconv.verify)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "CI": "true"}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "True"]


@pytest.mark.parametrize("filename", sorted(f for files in DIALECT_FILES.values() for f in files))
def test_schema_files_split_into_the_entries_json_parses(filename):
    with open(os.path.join(SCHEMA_FOLDER, filename), "rb") as f:
        text = f.read()
    whole = json.loads(text)
    header, entries = split_ops(text)
    assert header == {k: v for k, v in whole.items() if k != "ops"}
    assert [json.loads(e.text) for e in entries] == whole["ops"]
    assert [(e.domain, e.name, e.version) for e in entries] == [
        (o["domain"], o["name"], o["version"]) for o in whole["ops"]
    ]


def test_schema_files_in_another_layout_are_parsed_whole():
    with open(os.path.join(SCHEMA_FOLDER, "openvino.json"), "rb") as f:
        whole = json.loads(f.read())
    assert split_ops(json.dumps(whole).encode()) is None  # compact: no layout to rely on
    reordered = dict(whole, ops=[{"version": op["version"], **op} for op in whole["ops"]])
    assert split_ops(json.dumps(reordered, indent=1).encode()) is None  # an entry not starting with its name
    escaped = dict(whole, ops=[dict(whole["ops"][0], name='Odd"Name')] + whole["ops"][1:])
    header, entries = split_ops(json.dumps(escaped, indent=1, ensure_ascii=False).encode())
    assert entries[0].name == 'Odd"Name' and json.loads(entries[0].text) == escaped["ops"][0]


def _two_equal_fills_model(path):
    """y = x @ W1 + x @ W2 with W1, W2 two ConstantOfShape fills of the same value and shape, and W3 another."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [64, 64])
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [0.25])
    other = helper.make_tensor("other", TensorProto.FLOAT, [1], [-0.5])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["w1"], value=fill),
        helper.make_node("ConstantOfShape", ["shape"], ["w2"], value=fill),
        helper.make_node("ConstantOfShape", ["shape"], ["w3"], value=other),
        helper.make_node("MatMul", ["x", "w1"], ["a"]),
        helper.make_node("MatMul", ["x", "w2"], ["b"]),
        helper.make_node("MatMul", ["x", "w3"], ["c"]),
        helper.make_node("Sum", ["a", "b", "c"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fills",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])],
        [shape],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_equal_constants_share_their_bytes_in_the_bin(tmp_path):
    source = str(tmp_path / "fills.onnx")
    _two_equal_fills_model(source)
    opconv.save(opconv.convert(opconv.load(source), to="openvino"), tmp_path / "fills.xml")
    # Two 64x64 float32 regions (0.25 once for W1 and W2, -0.5 for W3), not three.
    assert os.path.getsize(tmp_path / "fills.bin") == 2 * 64 * 64 * 4
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    expected = x @ np.full((64, 64), 0.25, np.float32) * 2 + x @ np.full((64, 64), -0.5, np.float32)
    got = ov.Core().compile_model(str(tmp_path / "fills.xml"), "CPU", F32)(x)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    ours = opconv.run(opconv.load(tmp_path / "fills.xml"), {"x": x})
    np.testing.assert_allclose(next(iter(ours.values())), expected, rtol=1e-5, atol=1e-5)


def test_saved_files_get_the_usual_mode(tmp_path, fixtures_dir):
    previous = os.umask(0o027)
    try:
        model = opconv.convert(
            opconv.load(os.path.join(fixtures_dir, "cnn.onnx")), to="openvino", input_shapes={"image": (1, 3, 32, 32)}
        )
        opconv.save(model, tmp_path / "cnn.xml")
    finally:
        os.umask(previous)
    for name in ("cnn.xml", "cnn.bin"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o640
    assert sorted(os.listdir(tmp_path)) == ["cnn.bin", "cnn.xml"]  # no temporary file left behind
