"""Which of onnxruntime's CPU contrib kernels opconv's ONNX executor has a kernel for.

The list is onnxruntime's own registry, committed as tests/ort_cpu_contrib_ops.json by
scripts/ort_contrib_kernels.py.  Every entry must have a kernel registered (at the entry's first
version or before), or be listed with its reason in tests/known_failures.json, suite
``contrib-kernels``.  Whether each kernel matches onnxruntime is tested per family
(tests/test_contrib_kernels_*.py); this file counts, and prints the table with ``pytest -s``.
Operators onnxruntime runs only on other execution providers are refused with a message that says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import opconv
from opconv.dialects.onnx.executor import EXECUTOR, REGISTRY
from opconv.errors import OpconvError
from opconv.schemas import dialect_schemas
from tests import known

LIST = Path(__file__).with_name("ort_cpu_contrib_ops.json")
DATA = json.loads(LIST.read_text(encoding="utf-8"))
SUITE = "contrib-kernels"
EXECUTOR.load_kernels()


def label(op: dict) -> str:
    return f"{op['domain']}::{op['name']}-{op['since']}"


def has_kernel(op: dict) -> bool:
    domain = "" if op["domain"] == "ai.onnx" else op["domain"]
    registration = REGISTRY.resolve(op["name"], op["since"], domain)
    return registration is not None


def test_print_coverage():
    covered = [op for op in DATA["ops"] if has_kernel(op)]
    missing = [op for op in DATA["ops"] if not has_kernel(op)]
    print(f"\nopconv runs {len(covered)} of the {len(DATA['ops'])} contrib kernels of {DATA['source']}")
    for op in missing:
        print(f"  no kernel: {label(op):60} {known.reason(SUITE, label(op)) or 'UNLISTED'}")
    assert len(covered) + len(missing) == len(DATA["ops"]) > 100


@pytest.mark.parametrize("op", DATA["ops"], ids=label)
def test_ort_cpu_contrib_op_has_a_kernel(op):
    known.check(SUITE, label(op), has_kernel(op), f"no kernel for {label(op)}, which onnxruntime's CPU provider runs")


@pytest.mark.parametrize(
    "op", [op for op in DATA["no_cpu_kernel"] if op["domain"] == "com.microsoft"][:8], ids=lambda op: op["name"]
)
def test_gpu_only_op_is_refused_with_the_reason(op):
    # as many operands as the schema asks, so that the refusal is the missing kernel, not a malformed node
    schema = dialect_schemas("onnx").find(op["name"], op["since"], op["domain"])
    placeholder = {"int": 1, "float": 1.0, "string": "x", "ints": [1], "floats": [1.0], "strings": ["x"]}
    attrs = {a.name: placeholder[a.type] for a in schema.attributes if a.required}
    node = helper.make_node(op["name"], ["x"] * max(1, schema.min_inputs), ["y"], domain=op["domain"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(op["domain"], op["since"])]
    )
    with pytest.raises(OpconvError) as info:
        opconv.run(opconv.load(model), {"x": np.zeros(2, np.float32)})
    message = str(info.value)
    assert f"no kernel for {op['domain']}::{op['name']}" in message
    assert "only for execution providers other than CPU" in message
