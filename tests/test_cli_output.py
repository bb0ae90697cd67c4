"""One vocabulary for every command: -q/-v, --json on the conversions (errors too), -o FOLDER, stage times,
messages that say what to do, the default ONNX opset runtimes read, and a quiet end when the reader leaves."""

import io
import json
import os
import shutil
import subprocess
import sys

import click
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

from opconv.cli import cli
from opconv.cli.output import Progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CNN = os.path.join(ROOT, "fixtures", "cnn.onnx")
SHAPE = ["--input-shape", "image=1,3,32,32"]
IMAGE = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _onnxruntime(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture
def work(tmp_path):
    shutil.copy(CNN, tmp_path / "cnn.onnx")
    return tmp_path


def _commands(group=cli, prefix=()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, prefix + (name,))
        else:
            yield prefix + (name,)


def test_every_command_takes_quiet_and_verbose():
    commands = list(_commands())
    assert len(commands) >= 14
    for path in commands:
        result = invoke(*path, "--help")
        assert result.exit_code == 0 and "-q, --quiet" in result.output and "-v, --verbose" in result.output, path


def test_quiet_prints_nothing_and_verbose_prints_op_counts(work):
    quiet = invoke("-q", "onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", work / "q.xml")
    assert quiet.exit_code == 0 and quiet.stdout == "" and quiet.stderr == ""
    assert (work / "q.xml").exists() and (work / "q.bin").exists()
    also_after = invoke("run", work / "cnn.onnx", "-q")
    assert also_after.exit_code == 0 and also_after.output == ""
    verbose = invoke("onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", work / "v.xml", "-v")
    assert verbose.exit_code == 0
    counts = {}
    for node in onnx.load(CNN).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    source = ", ".join(f"{op} {n}" for op, n in sorted(counts.items()))
    assert f"\nsource ops: {source}\noutput ops: opset1::" in verbose.stdout


def test_json_of_each_conversion_names_the_files_and_op_counts_of_what_it_wrote(work):
    ir = json.loads(
        invoke("onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", work / "cnn.xml", "--json", "--verify").stdout
    )
    assert ir["ok"] and ir["files"] == [str(work / "cnn.xml"), str(work / "cnn.bin")]
    assert ir["verify"]["ok"] and [s["stage"].split()[0] for s in ir["stages"]] == [
        "loading",
        "converting",
        "writing",
        "verifying",
    ]
    import openvino as ov

    written = ov.Core().read_model(str(work / "cnn.xml"))
    assert ir["output"]["nodes"] == sum(
        1 for op in written.get_ordered_ops() if op.get_type_name() not in ("Parameter", "Constant", "Result")
    )
    hlo = json.loads(invoke("onnx-to-hlo", work / "cnn.onnx", *SHAPE, "--json").stdout)
    assert hlo["files"] == [str(work / "cnn.hlo"), str(work / "cnn.hlo.weights")] and hlo["fusions"]["fused_ops"]
    for command, source in (("ir-to-onnx", work / "cnn.xml"), ("hlo-to-onnx", work / "cnn.hlo")):
        out = work / f"{command}.onnx"
        record = json.loads(invoke(command, source, "-o", out, "--json").stdout)
        proto = onnx.load(str(out))
        counts = {}
        for node in proto.graph.node:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        assert record["files"] == [str(out)] and record["output"]["op_counts"] == counts, command
    down = json.loads(invoke("downgrade", "--opset", "11", work / "cnn.onnx", "--json").stdout)
    assert down["files"] == [str(work / "cnn.opset11.onnx")] and down["output"]["opsets"][""] == 11
    assert onnx.load(down["files"][0]).opset_import[0].version == 11
    up = json.loads(invoke("upgrade", "--opset", "17", work / "cnn.onnx", "--json").stdout)
    assert up["output"]["opsets"][""] == 17
    dec = json.loads(invoke("decompose", work / "cnn.onnx", "--json").stdout)
    assert dec["decomposed"] == 0 and dec["files"] == [str(work / "cnn.decomposed.onnx")]


def test_json_errors_list_every_refused_node(work):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Bernoulli", ["x"], ["b"], name="coin"),
        helper.make_node("Det", ["b"], ["y"], name="det"),
    ]
    onnx.save(
        helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]),
        str(work / "bad.onnx"),
    )
    result = invoke("onnx-to-ir", work / "bad.onnx", "--json")
    assert result.exit_code == 2
    record = json.loads(result.stdout)
    assert not record["ok"] and record["error"]["type"] == "ConversionError"
    refused = {(r["node"], r["op"], r["domain"]) for r in record["error"]["refused"]}
    assert refused == {("coin", "Bernoulli", ""), ("det", "Det", "")}
    assert all(r["reason"] for r in record["error"]["refused"])
    assert not (work / "bad.xml").exists()
    unreadable = invoke("ir-to-onnx", work / "missing.xml", "--json")
    assert unreadable.exit_code == 2 and json.loads(unreadable.stdout)["error"]["message"] == "no such file"


def test_output_folder_takes_the_model_name(work):
    model = work / "cnn.onnx"
    for args, written in (
        (["onnx-to-ir", model, *SHAPE], ["cnn.xml", "cnn.bin"]),
        (["onnx-to-hlo", model, *SHAPE], ["cnn.hlo", "cnn.hlo.weights"]),
        (["downgrade", "--opset", "11", model], ["cnn.opset11.onnx"]),
    ):
        folder = work / args[0]
        result = invoke(*args, "-o", f"{folder}/")  # a path ending in / is a folder, made when missing
        assert result.exit_code == 0, result.output
        assert sorted(os.listdir(folder)) == sorted(written), args[0]
    refused = invoke("onnx-to-ir", model, "-o", f"{work / 'never'}/")  # the batch dim is left open
    assert refused.exit_code == 2 and not (work / "never").exists()  # nothing made for a failed conversion
    existing = work / "existing"
    existing.mkdir()
    assert invoke("onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", existing).exit_code == 0
    np.testing.assert_allclose(
        _ir_output(existing / "cnn.xml"), _onnxruntime(CNN, {"image": IMAGE})[0], rtol=1e-4, atol=1e-6
    )


def _ir_output(xml):
    import openvino as ov

    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled(IMAGE)[0]


def test_messages_say_what_to_do_before_any_work(work):
    wrong_suffix = invoke("onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", work / "out.onnx")
    assert wrong_suffix.exit_code == 2
    assert wrong_suffix.output == (
        f"opconv: error: {work / 'out.onnx'}: onnx-to-ir writes OpenVINO IR, whose file is "
        ".xml (its .bin goes beside it); give -o a .xml path or a folder\n"
    )
    assert invoke("onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", work / "cnn.xml").exit_code == 0
    for command, given, hint in (
        ("onnx-to-ir", "cnn.xml", "ir-to-onnx"),
        ("upgrade", "cnn.xml", "ir-to-onnx"),
        ("ir-to-onnx", "cnn.onnx", "onnx-to-ir"),
        ("hlo-to-onnx", "cnn.onnx", "onnx-to-hlo"),
    ):
        extra = ["--opset", "17"] if command == "upgrade" else []
        result = invoke(command, *extra, work / given)
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.output.strip().endswith(f"did you mean `opconv {hint}`?"), (command, result.output)
    shutil.copy(work / "cnn.xml", work / "misnamed.onnx")  # the content tells, whatever the name says
    misnamed = invoke("onnx-to-ir", work / "misnamed.onnx", "-o", work / "m.xml")
    assert (
        misnamed.exit_code == 2
        and "this is OpenVINO IR, not ONNX: did you mean `opconv ir-to-onnx`?" in misnamed.output
    )


def test_ir_and_hlo_to_onnx_write_opset_21_which_onnxruntime_reads(work):
    invoke("onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", work / "cnn.xml")
    invoke("onnx-to-hlo", work / "cnn.onnx", *SHAPE, "-o", work / "cnn.hlo")
    expected = _onnxruntime(CNN, {"image": IMAGE})[0]
    for command, source in (("ir-to-onnx", "cnn.xml"), ("hlo-to-onnx", "cnn.hlo")):
        out = work / f"{command}.onnx"
        assert invoke(command, work / source, "-o", out).exit_code == 0
        proto = onnx.load(str(out))
        assert [o.version for o in proto.opset_import if o.domain == ""] == [21]
        onnx.checker.check_model(proto, full_check=True)
        np.testing.assert_allclose(_onnxruntime(out, {"image": IMAGE})[0], expected, rtol=1e-4, atol=1e-6)
    assert "default: 21" in invoke("ir-to-onnx", "--help").output


def test_stages_are_timed_live_on_a_terminal_plain_elsewhere_and_silent_with_quiet(work):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal, log, eager, silent = Terminal(), io.StringIO(), io.StringIO(), io.StringIO()
    for stream, options in ((terminal, {}), (log, {}), (eager, {"as_they_end": True}), (silent, {"enabled": False})):
        progress = Progress(stream, **options)
        progress.stage("loading m.onnx")
        progress.stage("converting")
        if stream is eager:
            assert stream.getvalue().startswith("loading m.onnx: ")  # written as the stage ended
        elif stream is log:
            assert stream.getvalue() == ""  # written when the command ends (a failure prints only its error)
        progress.done()
    for stream in (log, eager):
        lines = stream.getvalue().splitlines()
        assert [line.rsplit(":", 1)[0] for line in lines] == ["loading m.onnx", "converting"]
        assert all(line.endswith("s") for line in lines)
    shown = terminal.getvalue()
    assert "\r[" in shown and "converting" in shown  # the live line
    kept = shown.rsplit("\r", 1)[-1]  # what stays on screen after the live line is cleared
    assert kept.startswith("loading m.onnx ") and ", converting " in kept and "(total " in kept
    assert kept.endswith("s)\n") and silent.getvalue() == ""
    result = invoke("onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", work / "cnn.xml")
    assert [line.split(":")[0] for line in result.stderr.splitlines()] == [
        f"loading {work / 'cnn.onnx'}",
        "converting to OpenVINO opset1",
        f"writing {work / 'cnn.xml'}",
    ]
    assert result.stdout.startswith(f"wrote {work / 'cnn.xml'} and {work / 'cnn.bin'} (")
    assert invoke("onnx-to-ir", work / "cnn.onnx", *SHAPE, "-o", work / "cnn.xml", "-q").stderr == ""
    failed = invoke("onnx-to-ir", work / "cnn.onnx", "-o", work / "open.xml")  # the batch dim is left open
    assert failed.exit_code == 2 and failed.stderr.startswith("opconv: error: ") and failed.stderr.count("\n") == 1


def test_a_reader_leaving_early_ends_the_command_quietly():
    for _ in range(5):
        result = subprocess.run(
            f"{sys.executable} -m opconv schema list onnx | head -1",
            shell=True,
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": ROOT},
        )
        assert result.stdout.startswith("Abs ") and len(result.stdout.splitlines()) == 1
        assert "error" not in result.stderr.lower() and "Traceback" not in result.stderr, result.stderr


def test_run_json_describes_the_outputs_onnxruntime_computes(work):
    np.savez(work / "in.npz", image=IMAGE)
    result = invoke("run", work / "cnn.onnx", "--inputs", work / "in.npz", "-o", work / "out.npz", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    [expected] = _onnxruntime(CNN, {"image": IMAGE})
    assert record["outputs"]["probs"]["type"] == f"{expected.dtype}[{','.join(map(str, expected.shape))}]"
    figures = record["outputs"]["probs"]["stats"].split()
    assert float(figures[figures.index("max") + 1]) == pytest.approx(float(expected.max()), rel=1e-5)
    assert record["files"] == [str(work / "out.npz")]
    np.testing.assert_allclose(np.load(work / "out.npz")["probs"], expected, rtol=1e-5, atol=1e-7)
    missing = invoke("run", work / "nope.onnx", "--json")
    assert missing.exit_code == 2 and json.loads(missing.stdout)["error"]["where"] == str(work / "nope.onnx")
