"""ONNX load -> save is lossless, on every node case and shipped model test of the onnx package.

For each case: opconv loads the model and saves it again; the result must pass
``onnx.checker``, equal the original structurally (same nodes, attributes,
initializers, inputs/outputs and value_info), and run to bit-identical outputs
in the same oracle (onnxruntime, or onnx.reference where onnxruntime cannot
run the original).
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

import opconv
from opconv import testdata
from tests import known
from tests.runtimes import run_any, same

NODE_CASES = testdata.node_cases()
MODEL_CASES = testdata.model_cases() + testdata.light_cases()


def _roundtrip(case: testdata.Case, tmp_path) -> onnx.ModelProto:
    source = case.path if case.path else case.load_model()
    model = opconv.load(source)
    out = os.path.join(tmp_path, "saved.onnx")
    opconv.save(model, out)
    return onnx.load(out)


def _clear_defaults(msg) -> None:
    """proto2 keeps an explicitly set default ("" or 0) apart from an unset field; ONNX reads both alike."""
    for fd, value in msg.ListFields():
        if fd.type == fd.TYPE_MESSAGE:
            for item in value if fd.is_repeated else [value]:
                _clear_defaults(item)
        elif not fd.is_repeated and fd.containing_oneof is None and value == fd.default_value:
            msg.ClearField(fd.name)


def _normalized(model: onnx.ModelProto) -> bytes:
    """Serialized form with value_info sorted by name (the only order opconv may change)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    _clear_defaults(m)

    def sort_graph(g: onnx.GraphProto):
        infos = sorted(g.value_info, key=lambda v: v.name)
        del g.value_info[:]
        g.value_info.extend(infos)
        for n in g.node:
            for a in n.attribute:
                if a.HasField("g"):
                    sort_graph(a.g)
                for sub in a.graphs:
                    sort_graph(sub)

    sort_graph(m.graph)
    for f in m.functions:
        infos = sorted(f.value_info, key=lambda v: v.name)
        del f.value_info[:]
        f.value_info.extend(infos)
    return m.SerializeToString(deterministic=True)


def _check_case(case: testdata.Case, tmp_path, feeds: dict) -> None:
    original = case.load_model()
    saved = _roundtrip(case, tmp_path)
    onnx.checker.check_model(saved)
    assert _normalized(saved) == _normalized(original), "the saved model differs from the original"
    oracle, runner = run_any(original, feeds)
    ran = oracle is not None
    if ran:
        expected = runner(original, feeds)
        actual = runner(saved, feeds)
        # Random ops without a seed (Bernoulli, RandomUniform...) differ between any two runs:
        # for those only shapes and types can be compared.
        deterministic = same(expected, runner(original, feeds))
        assert len(expected) == len(actual)
        for i, (e, a) in enumerate(zip(expected, actual)):
            if deterministic:
                assert same(e, a), f"output {i} differs after the round trip ({oracle})"
            else:
                assert np.shape(e) == np.shape(a) and np.asarray(e).dtype == np.asarray(a).dtype
    known.check("onnx-roundtrip", case.name, ran, "no oracle could run the original model")


@pytest.mark.slow
@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case_roundtrip(case, tmp_path):
    _check_case(case, tmp_path, case.feeds(0))


@pytest.mark.slow
@pytest.mark.parametrize("case", MODEL_CASES, ids=[f"{c.kind}/{c.name}" for c in MODEL_CASES])
def test_model_roundtrip(case, tmp_path):
    feeds = testdata.random_feeds(case.load_model()) if case.kind == "light" else case.feeds(0)
    _check_case(case, tmp_path, feeds)
