"""Fuzzing in CI: mutated ONNX, IR and HLO files and CLI nonsense end in OpconvError or success, nothing else.

Hypothesis draws the mutation seeds (``scripts/fuzz_mutations.py``: protobuf fields, XML attributes and
dims, HLO tokens and lines, sidecar bytes); each mutant goes through the Python API (load, check, run on
random inputs, convert, save) and a few through the command line (click's CliRunner).  The bounds keep
the whole file under ~30 s; ``scripts/fuzz_campaign.py`` is the long campaign.  Below the property tests,
every crash a campaign found is a regression case of its own.
"""

from __future__ import annotations

import importlib.util
import os
import random
import signal

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opconv
from opconv import budget
from opconv.cli import cli
from opconv.errors import OpconvError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("fuzz_mutations", os.path.join(ROOT, "scripts", "fuzz_mutations.py"))
fm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fm)

FUZZ = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def seeds():
    return fm.seed_inputs(node_cases=0)


@pytest.fixture(autouse=True)
def bounded(monkeypatch):
    """Small budgets and a 20 s alarm: a mutant that hangs or allocates fails its example, not the run."""
    monkeypatch.setenv(budget.MAX_BYTES_VARIABLE, "256M")
    monkeypatch.setenv("OPCONV_SHAPE_INFERENCE_SECONDS", "5")

    def hung(signum, frame):
        raise TimeoutError("a fuzz example ran for over 20 s")

    previous = signal.signal(signal.SIGALRM, hung)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _only_opconv_errors(step, *args, **kwargs):
    """``step(...)``, where an OpconvError is a fine answer; anything else fails the test."""
    try:
        return step(*args, **kwargs)
    except OpconvError as e:
        assert str(e) and "\n" not in str(e).strip() or isinstance(e, opconv.ValidationError), str(e)
        return None


def _through_the_api(path: str, folder: str) -> None:
    from opconv.verification import random_inputs

    model = _only_opconv_errors(opconv.load, path)
    if model is None:
        return
    _only_opconv_errors(opconv.check, model)
    feeds = _only_opconv_errors(random_inputs, model)
    if feeds is not None:
        _only_opconv_errors(opconv.run, model, feeds)
    targets = {"onnx": ("openvino", "hlo"), "openvino": ("onnx",), "hlo": ("onnx",)}[model.dialect]
    for target in targets:
        converted = _only_opconv_errors(opconv.convert, model, to=target)
        if converted is not None:
            suffix = {"openvino": ".xml", "hlo": ".hlo", "onnx": ".onnx"}[target]
            _only_opconv_errors(opconv.save, converted, os.path.join(folder, "converted" + suffix))


@pytest.mark.parametrize("kind", ["onnx", "ir", "hlo"])
def test_mutants_through_the_python_api_raise_only_opconv_errors(seeds, kind, tmp_path):
    @FUZZ
    @given(st.integers(0, 2**32 - 1))
    def mutant(seed):
        folder = tmp_path / f"{kind}-{seed}"
        folder.mkdir()
        path = fm.write_mutant(kind, seeds, random.Random(seed), str(folder))
        signal.alarm(20)
        try:
            _through_the_api(path, str(folder))
        finally:
            signal.alarm(0)

    mutant()


def test_mutants_and_nonsense_through_the_command_line_end_in_one_line(seeds, tmp_path):
    runner = CliRunner()

    @FUZZ
    @given(st.integers(0, 2**32 - 1), st.sampled_from(fm.FORMATS))
    def command(seed, kind):
        rng = random.Random(seed)
        folder = tmp_path / f"cli-{seed}-{kind}"
        folder.mkdir()
        path = fm.write_mutant(kind, seeds, rng, str(folder))
        args = (
            fm.cli_nonsense(rng, path, str(folder / "out"))
            if kind == "cli"
            else [rng.choice(["check", "run", "inspect"]), path]
        )
        signal.alarm(20)
        try:
            result = runner.invoke(cli, args)
        finally:
            signal.alarm(0)
        assert result.exit_code in (0, 1, 2), (args, result.output, result.exception)
        assert "Traceback" not in result.output and "internal error" not in result.output, (args, result.output)

    command()


# ---------------------------------------------------------------------------
# Regression cases: each a crash a campaign found, minimised by hand
# ---------------------------------------------------------------------------


def test_dot_general_with_a_contracting_dim_beyond_the_rank_is_refused(tmp_path):
    """scripts/fuzz_campaign.py: IndexError in hlo_to_onnx's dot_general (rhs_contracting_dimensions=[2**32])."""
    path = tmp_path / "m.hlo"
    path.write_text(
        "HloModule m\n\nfunc @main(%a: f32[2,3], %b: f32[3,4]) -> (f32[2,4]) {\n"
        '  node "d": %d: f32[2,4] = DotGeneral(%a, %b) {lhs_contracting_dimensions=[1], '
        "rhs_contracting_dimensions=[4294967296], lhs_batching_dimensions=[], rhs_batching_dimensions=[]}\n"
        "  return %d\n}\n"
    )
    model = opconv.load(str(path))
    with pytest.raises(OpconvError, match=r"rhs batching/contracting dimensions \[4294967296\]"):
        opconv.convert(model, to="onnx")


def test_an_ir_const_whose_byte_count_overflows_int64_is_refused(tmp_path):
    """issue 17: shape 2**62 x 4 of f32 is 0 bytes in int64 arithmetic, so size="0" passed the size check."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    opconv.save(opconv.convert(model, to="openvino"), tmp_path / "m.xml")
    xml = (tmp_path / "m.xml").read_text()
    hostile = xml.replace('shape="2,3" offset="0" size="24"', 'shape="4611686018427387904,4" offset="0" size="0"')
    assert hostile != xml
    (tmp_path / "m.xml").write_text(hostile)
    with pytest.raises(OpconvError, match="Const size 0 does not match 73786976294838206464 bytes"):
        opconv.load(tmp_path / "m.xml")


def test_a_rule_check_that_refuses_gives_a_reason_instead_of_leaking_refuse():
    """issue 17: onnx-to-hlo's checks call helpers that raise Refuse (the rules' internal exception), which
    escaped the rewrite engine as an internal error."""
    from onnx import TensorProto, helper

    from opconv.converters.rewrite import Refuse, Rule, apply

    def pattern(op, x):
        return op.Relu(x)

    def check(m):
        raise Refuse("the input's shape is unknown")

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = opconv.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    report = apply(model.graph, [Rule("relu-rule", pattern, lambda b, m: m["x"], check=check)])
    assert not report.fired
    assert report.reasons_for(model.graph.nodes[0]) == ["relu-rule: the input's shape is unknown"]


def test_onnx_to_hlo_trial_run_takes_no_memory_for_a_declared_input():
    """issue 17: onnx-to-hlo's run that types what ONNX inference left open (here Range's length, computed
    from the input's shape) filled every input with ones; a float input declared 64 MiB now costs nothing."""
    import tracemalloc

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    import opconv.converters.onnx_to_hlo  # noqa: F401 - imported before tracing

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ReduceMax", ["s"], ["m"], keepdims=0),
        helper.make_node("Div", ["m", "d"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
    ]
    constants = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("d", 2**18), ("zero", 0), ("one", 1))]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**24])],
        [helper.make_tensor_value_info("r", TensorProto.INT64, None)],
        constants,
    )
    model = opconv.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    tracemalloc.start()
    try:
        # HLO wants Range's limit constant: the refusal comes after the trial run typed 'r' as int64[64]
        with pytest.raises(OpconvError, match="limit \\('n'\\) must be a constant"):
            opconv.convert(model, to="hlo")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak >> 20} MiB for a 64 MiB input"


def test_a_numpy_warning_is_not_a_second_line_of_the_command_line():
    """Fuzz regression onnx-19: `run` of a GlobalAveragePool over a zero-size dim printed numpy's
    "RuntimeWarning: Mean of empty slice" on stderr beside its result (the value itself is NaN)."""
    import warnings

    path = os.path.join(ROOT, "tests", "fuzz_regressions", "onnx-19.onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CliRunner().invoke(cli, ["run", path])
    assert result.exit_code == 0, result.output
    assert [str(w.message) for w in caught] == []


def _regressions() -> list[dict]:
    import json

    with open(os.path.join(ROOT, "tests", "fuzz_regressions", "cases.json"), encoding="utf-8") as f:
        return json.load(f)["cases"]


@pytest.mark.parametrize("case", _regressions(), ids=lambda c: c["file"])
def test_what_a_campaign_found_now_ends_cleanly(case, tmp_path):
    """Each file under tests/fuzz_regressions once crashed the command beside it (see ``found``)."""
    import shutil

    source = os.path.join(ROOT, "tests", "fuzz_regressions", case["file"])
    model = str(tmp_path / ("m" + os.path.splitext(case["file"])[1]))
    shutil.copy(source, model)
    for side in (".bin", ".weights"):
        if os.path.exists(source[:-4] + side) or os.path.exists(source + side):
            shutil.copy(
                source[:-4] + side if side == ".bin" else source + side,
                model[:-4] + side if side == ".bin" else model + side,
            )
    args = [a.format(model=model, out=str(tmp_path / "out")) for a in case["args"]]
    signal.alarm(20)
    try:
        result = CliRunner().invoke(cli, args)
    finally:
        signal.alarm(0)
    assert result.exit_code in (0, 1, 2), (case["found"], result.output, result.exception)
    assert "internal error" not in result.output, (case["found"], result.output)
    said = result.output.splitlines()
    errors = [i for i, line in enumerate(said) if line.startswith("opconv: error:")]
    assert errors in ([], [len(said) - 1]), (case["found"], result.output)  # one error line, and the last
