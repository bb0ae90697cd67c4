"""``opconv run`` and ``opconv conformance`` on the command line."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

from opconv.cli import cli
from tests.runtimes import run_ort


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def mlp(fixtures_dir):
    return os.path.join(fixtures_dir, "mlp_external.onnx")


def test_run_with_inputs_writes_the_outputs(mlp, tmp_path):
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "out.npz"
    result = run("run", mlp, "--inputs", tmp_path / "in.npz", "-o", out)
    assert result.exit_code == 0, result.output
    assert "float32[3,10]" in result.output and "min " in result.output and f"wrote {out}" in result.output
    with np.load(out) as saved:
        assert saved.files == ["y"]
        np.testing.assert_allclose(saved["y"], run_ort(onnx.load(mlp), {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".opconv-")] == []


def test_run_with_random_inputs_is_seeded(mlp, tmp_path):
    outputs = []
    for seed in (1, 1, 2):
        path = tmp_path / f"out{len(outputs)}.npz"
        result = run("run", mlp, "--seed", seed, "--shape", "x=2,64", "-o", path)
        assert result.exit_code == 0, result.output
        assert "random, seed" in result.output and "float32[2,64]" in result.output
        with np.load(path) as saved:
            outputs.append(saved["y"])
    assert np.array_equal(outputs[0], outputs[1]) and not np.array_equal(outputs[0], outputs[2])


def test_run_errors_are_one_line(mlp, tmp_path):
    np.savez(tmp_path / "wrong.npz", x=np.zeros((2, 64)))
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    for args, message in [
        (("--inputs", tmp_path / "wrong.npz"), "input 'x' expects float32, got float64"),
        (("--inputs", tmp_path / "junk.npz"), "not a numpy .npz file"),
        (("--inputs", tmp_path / "none.npz"), "no such file"),
        (("-o", tmp_path / "no" / "out.npz"), "the output folder does not exist"),
    ]:
        result = run("run", mlp, *args)
        assert result.exit_code == 2, result.output
        assert result.output.startswith("opconv: error:") and message in result.output
        assert len(result.output.strip().splitlines()) == 1
    result = run("run", mlp, "--shape", "x:2")
    assert result.exit_code == 2 and "NAME=D0,D1" in result.output


def test_run_saves_strings_and_odd_names(tmp_path):
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Identity", ["s"], ["file"]), helper.make_node("Identity", ["s"], ["a.b/c"])],
            "g",
            [helper.make_tensor_value_info("s", TensorProto.STRING, [3])],
            [
                helper.make_tensor_value_info("file", TensorProto.STRING, [3]),
                helper.make_tensor_value_info("a.b/c", TensorProto.STRING, [3]),
            ],
        ),
        opset_imports=[helper.make_opsetid("", 13)],
    )
    onnx.save(model, tmp_path / "s.onnx")
    np.savez(tmp_path / "in.npz", s=np.array(["x", "yy", "zzz"]))
    result = run("run", tmp_path / "s.onnx", "--inputs", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    assert result.exit_code == 0, result.output
    with np.load(tmp_path / "out.npz") as saved:
        assert sorted(saved.files) == ["a.b/c", "file"] and saved["file"].tolist() == ["x", "yy", "zzz"]


def test_help_texts_have_examples():
    for command in ("run", "verify", "conformance"):
        result = run(command, "--help")
        assert result.exit_code == 0 and "Examples:" in result.output and "Exit code" in result.output


def test_conformance_runs_a_filtered_selection(tmp_path):
    report = tmp_path / "conformance.json"
    result = run("conformance", "--kind", "node", "-k", "test_gather_0", "--report", report)
    lines = result.output.strip().splitlines()
    assert lines[-1] == "1 passed, 0 failed" and result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["passed"] == 1 and data["failed"] == 0
    assert data["cases"][0]["name"] == "test_gather_0" and data["cases"][0]["passed"] is True


def test_benchmark_reports_a_runtime_error_and_goes_on(monkeypatch, tmp_path, capsys):
    """The benchmark on two tiny stand-in models (the real light models take minutes): one no runtime can run."""
    import importlib.util

    from opconv import testdata

    spec = importlib.util.spec_from_file_location(
        "bench_onnx_executor", os.path.join(os.path.dirname(__file__), "..", "benchmarks", "bench_onnx_executor.py")
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def save(name, op, domain=""):
        model = helper.make_model(
            helper.make_graph(
                [helper.make_node(op, ["x"], ["y"], domain=domain)],
                "g",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
            ),
            opset_imports=[helper.make_opsetid("", 13)] + ([helper.make_opsetid(domain, 1)] if domain else []),
        )
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, path)
        return testdata.Case(name, "light", path=str(path))

    cases = [save("light_unknown", "NoSuchOp", "example.domain"), save("light_identity", "Identity")]
    monkeypatch.setattr(testdata, "light_cases", lambda: cases)
    assert bench.main(["--suites", "light", "--rounds", "2", "--json", str(tmp_path / "bench.json")]) == 0
    out = capsys.readouterr().out
    assert "  opconv: " in out and "NoSuchOp" in out
    assert "light_identity" in out.split("light_unknown ...")[-1] and "target >= 10x" in out
    report = json.loads((tmp_path / "bench.json").read_text())
    unknown, identity = report["models"]
    assert unknown["runtimes"]["opconv"]["error"] and unknown["speedup_vs_reference"] is None
    assert len(identity["runtimes"]["opconv"]["rounds_ms"]) == 2 and identity["opconv_matches_onnxruntime"] is True


def test_more_dimensions_than_numpy_broadcasts_is_an_execution_error(tmp_path):
    """numpy's broadcasting functions raise a RuntimeError past 32 dimensions (PRelu checks its slope's shape
    with one): an ExecutionError naming the node from the API, one line from the command line."""
    import opconv
    from opconv.errors import ExecutionError

    shape = [1] * 40
    graph = helper.make_graph(
        [helper.make_node("PRelu", ["x", "slope"], ["y"], name="deep_prelu")],
        "deep",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [onnx.numpy_helper.from_array(np.array([0.5], np.float32), "slope")],
    )
    path = tmp_path / "deep.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(ExecutionError, match="more dimensions than numpy supports") as raised:
        opconv.run(str(path), {"x": -np.ones(shape, np.float32)})
    assert "deep_prelu" in str(raised.value)
    result = run("run", path)
    assert result.exit_code == 2, result.output
    said = result.output.strip().splitlines()  # the input shapes it drew, then the error: one line, the last
    assert [line for line in said if line.startswith("opconv: error:")] == said[-1:], result.output
    assert "deep_prelu" in said[-1] and "Traceback" not in result.output
