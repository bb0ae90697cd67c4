"""Tests of ``opconv/schemas/openvino.json``, the OpenVINO opset1 schemas.

The file is written by ``scripts/gen_openvino_schemas.py`` from hand-kept data, so
besides checking that it is up to date, these tests hold the data against the real
OpenVINO runtime: every op that ``openvino.opset1`` can build is built once, and
each attribute the runtime reports (which is exactly what its IR serializer writes)
must be declared by our schema with a matching type.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("CI", "true")  # `import openvino` otherwise waits on telemetry

from opconv.schemas import dialect_schemas, lookup  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_FILE = ROOT / "opconv" / "schemas" / "openvino.json"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_openvino_schemas", ROOT / "scripts" / "gen_openvino_schemas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the file itself


def test_committed_file_matches_generator():
    fresh = _generator().generate()
    assert SCHEMA_FILE.read_text(encoding="utf-8") == fresh, (
        "openvino.json is stale: run python scripts/gen_openvino_schemas.py"
    )


def test_every_opset1_op_is_present():
    ops = list(dialect_schemas("openvino"))
    names = {op.name for op in ops}
    assert len(ops) >= 112
    # The three the text spec lost, and a sample of the rest.
    assert {"Squeeze", "Unsqueeze", "StridedSlice"} <= names
    assert {"Convolution", "TensorIterator", "Parameter", "Result", "Constant", "LSTMSequence"} <= names
    assert {(op.domain, op.version) for op in ops} == {("opset1", 1)}


def test_lookup_convolution():
    conv = lookup("openvino", "Convolution", 1, domain="opset1")
    assert [p.name for p in conv.inputs] == ["data", "filters"]
    assert conv.attribute("strides").required
    assert conv.attribute("auto_pad").default == "explicit"
    assert "same_upper" in conv.attribute("auto_pad").allowed


def test_arities_of_special_ops():
    # Graph boundaries and variadic ops, whose arity the loader cannot infer from single params alone.
    def arity(name):
        s = lookup("openvino", name, 1, domain="opset1")
        return s.min_inputs, s.max_inputs, s.min_outputs, s.max_outputs

    variadic = 2**31 - 1
    assert arity("Parameter") == (0, 0, 1, 1)
    assert arity("Constant") == (0, 0, 1, 1)
    assert arity("Result") == (1, 1, 0, 0)
    assert arity("Concat") == (1, variadic, 1, 1)
    assert arity("Split") == (2, 2, 1, variadic)
    assert arity("NonMaxSuppression") == (2, 5, 1, 1)


def test_type_constraints_are_declared():
    for op in dialect_schemas("openvino"):
        for param in op.inputs + op.outputs:
            assert op.allowed_types(param), f"{op.name}.{param.name}: type {param.type!r} is not declared"


# --------------------------------------------------------------------------- against the runtime

#: runtime type names that differ from the spec's (and IR's) op names
RUNTIME_NAMES = {"Relu": "ReLU", "PRelu": "PReLU", "Softmax": "SoftMax"}
#: runtime classes registered in opset1 whose type info nevertheless names another opset
RUNTIME_VERSION_QUIRKS = {"LogicalXor": "opset2"}
#: ops whose runtime node has outputs that IR does not show (a Result's output is internal)
RUNTIME_ONLY_OUTPUTS = {"Result"}
#: required schema attributes the runtime does not report as attributes (IR child elements)
STRUCTURAL_ATTRIBUTES = {("TensorIterator", "body")}

#: Python type of a runtime attribute value (get_attributes()) for each schema attribute type;
#: lists give the type of their elements
_PY_TYPES = {
    "int": int,
    "float": float,
    "bool": bool,
    "string": str,
    "element_type": str,
    "ints": [int],
    "floats": [float],
    "strings": [str],
    "shape": [int],
}


def _fits(schema_type: str, value) -> bool:
    """Whether a runtime value has the Python type a schema attribute type implies.

    Exact type comparison, because ``bool`` is a subclass of ``int`` and a flag must not
    pass for an integer attribute (or the reverse).
    """
    expected = _PY_TYPES[schema_type]
    if isinstance(expected, list):
        return type(value) is list and all(type(v) is expected[0] for v in value)
    return type(value) is expected


def _builders():
    """Factory name -> function building one node with small, valid inputs."""
    import openvino as ov
    import openvino.opset1 as ops
    import openvino.opset3 as ops3

    def p(shape, dtype=np.float32):
        return ops.parameter(shape, dtype)

    def c(values, dtype=np.int64):
        return ops.constant(np.array(values, dtype=dtype))

    def image():
        return p([1, 4, 8, 8])

    def unary(fn):
        return lambda: fn(p([2, 3]))

    def binary(fn, dtype=np.float32):
        return lambda: fn(p([2, 3], dtype), p([2, 3], dtype))

    def reduce(fn, dtype=np.float32):
        return lambda: fn(p([2, 3, 4], dtype), c([1]), True)

    def tensor_iterator():
        x = p([1, 3])
        body = ov.Model([ops.relu(x)], [x])
        node = ops.tensor_iterator()
        node.set_body(body)
        node.set_sliced_input(x, p([4, 3]).output(0), 0, 1, 1, -1, 0)
        node.get_concatenated_slices(body.get_results()[0].output(0), 0, 1, 1, -1, 0)
        return node

    u32 = np.uint32
    opset1 = {
        "abs": unary(ops.abs),
        "absolute": unary(ops.absolute),
        "acos": unary(ops.acos),
        "add": binary(ops.add),
        "asin": unary(ops.asin),
        "atan": unary(ops.atan),
        "avg_pool": lambda: ops.avg_pool(image(), [1, 1], [0, 0], [0, 0], [2, 2], True),
        "batch_norm_inference": lambda: ops.batch_norm_inference(image(), p([4]), p([4]), p([4]), p([4]), 1e-5),
        "binary_convolution": lambda: ops.binary_convolution(
            image(), p([2, 4, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1], "xnor-popcount", 0.0
        ),
        "broadcast": lambda: ops.broadcast(p([3]), c([2, 3])),
        "ceil": unary(ops.ceil),
        "ceiling": unary(ops.ceiling),
        "clamp": lambda: ops.clamp(p([2, 3]), 0.0, 6.0),
        "concat": lambda: ops.concat([p([2, 3]), p([2, 3])], 0),
        "constant": lambda: c([1, 2]),
        "convert": lambda: ops.convert(p([2, 3]), "i32"),
        "convert_like": lambda: ops.convert_like(p([2, 3]), p([1], np.int32)),
        "convolution": lambda: ops.convolution(image(), p([2, 4, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1]),
        "convolution_backprop_data": lambda: ops.convolution_backprop_data(image(), p([4, 2, 3, 3]), [1, 1]),
        "cos": unary(ops.cos),
        "cosh": unary(ops.cosh),
        "ctc_greedy_decoder": lambda: ops.ctc_greedy_decoder(p([5, 2, 10]), p([5, 2])),
        "deformable_convolution": lambda: ops.deformable_convolution(
            image(), p([1, 18, 6, 6]), p([2, 4, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1]
        ),
        "deformable_psroi_pooling": lambda: ops.deformable_psroi_pooling(
            p([1, 8, 8, 8]), p([3, 5]), 2, 0.5, group_size=2
        ),
        "depth_to_space": lambda: ops.depth_to_space(image(), "blocks_first", 2),
        "detection_output": lambda: ops.detection_output(
            p([1, 8]),
            p([1, 4]),
            p([1, 2, 8]),
            {"num_classes": 2, "keep_top_k": [1], "nms_threshold": 0.5, "normalized": True},
        ),
        "divide": binary(ops.divide),
        "elu": lambda: ops.elu(p([2, 3]), 1.0),
        "equal": binary(ops.equal),
        "erf": unary(ops.erf),
        "exp": unary(ops.exp),
        "fake_quantize": lambda: ops.fake_quantize(p([2, 3]), p([1]), p([1]), p([1]), p([1]), 256),
        "floor": unary(ops.floor),
        "floor_mod": binary(ops.floor_mod),
        "gather": lambda: ops.gather(p([4, 3]), c([0, 2]), c(0)),
        "gather_tree": lambda: ops.gather_tree(p([3, 1, 2]), p([3, 1, 2]), p([1]), p([])),
        "greater": binary(ops.greater),
        "greater_equal": binary(ops.greater_equal),
        "grn": lambda: ops.grn(image(), 1e-6),
        "group_convolution": lambda: ops.group_convolution(image(), p([2, 2, 2, 3, 3]), [1, 1], [0, 0], [0, 0], [1, 1]),
        "group_convolution_backprop_data": lambda: ops.group_convolution_backprop_data(
            image(), p([2, 2, 2, 3, 3]), [1, 1]
        ),
        "hard_sigmoid": lambda: ops.hard_sigmoid(p([2, 3]), p([]), p([])),
        "interpolate": lambda: ops.interpolate(image(), c([16, 16]), {"axes": [2, 3], "mode": "linear"}),
        "less": binary(ops.less),
        "less_equal": binary(ops.less_equal),
        "log": unary(ops.log),
        "logical_and": binary(ops.logical_and, bool),
        "logical_not": lambda: ops.logical_not(p([2], bool)),
        "logical_or": binary(ops.logical_or, bool),
        "logical_xor": binary(ops.logical_xor, bool),
        "lrn": lambda: ops.lrn(image(), c([1])),
        "lstm_cell": lambda: ops.lstm_cell(p([2, 3]), p([2, 4]), p([2, 4]), p([16, 3]), p([16, 4]), p([16]), 4),
        "matmul": lambda: ops.matmul(p([2, 3]), p([3, 4]), False, False),
        "max_pool": lambda: ops.max_pool(image(), [1, 1], [0, 0], [0, 0], [2, 2]),
        "maximum": binary(ops.maximum),
        "minimum": binary(ops.minimum),
        "mod": binary(ops.mod),
        "multiply": binary(ops.multiply),
        "negative": unary(ops.negative),
        "non_max_suppression": lambda: ops.non_max_suppression(p([1, 6, 4]), p([1, 1, 6])),
        "normalize_l2": lambda: ops.normalize_l2(image(), c([1]), 1e-6, "add"),
        "not_equal": binary(ops.not_equal),
        "one_hot": lambda: ops.one_hot(c([0, 2]), c(3), c(1.0, np.float32), c(0.0, np.float32), -1),
        "pad": lambda: ops.pad(p([2, 3]), c([1, 1]), c([1, 1]), "constant"),
        "parameter": lambda: p([2, 3]),
        "power": binary(ops.power),
        "prelu": lambda: ops.prelu(p([2, 3]), p([3])),
        "prior_box": lambda: ops.prior_box(c([2, 2]), c([16, 16]), {"offset": 0.5, "min_size": [2.0]}),
        "prior_box_clustered": lambda: ops.prior_box_clustered(
            c([2, 2]), c([16, 16]), {"offset": 0.5, "width": [1.0], "height": [1.0]}
        ),
        "proposal": lambda: ops.proposal(
            p([1, 6, 4, 4]),
            p([1, 12, 4, 4]),
            p([3]),
            {
                "base_size": u32(16),
                "pre_nms_topn": u32(10),
                "post_nms_topn": u32(5),
                "nms_thresh": 0.5,
                "feat_stride": u32(16),
                "min_size": u32(1),
                "ratio": [1.0],
                "scale": [1.0, 2.0, 3.0],
            },
        ),
        "psroi_pooling": lambda: ops.psroi_pooling(p([1, 8, 8, 8]), p([3, 5]), 2, 2, 1.0, 1, 1, "average"),
        "range": lambda: ops.range(c(0), c(10), c(1)),
        "reduce_logical_and": reduce(ops.reduce_logical_and, bool),
        "reduce_logical_or": reduce(ops.reduce_logical_or, bool),
        "reduce_max": reduce(ops.reduce_max),
        "reduce_mean": reduce(ops.reduce_mean),
        "reduce_min": reduce(ops.reduce_min),
        "reduce_prod": reduce(ops.reduce_prod),
        "reduce_sum": reduce(ops.reduce_sum),
        "region_yolo": lambda: ops.region_yolo(p([1, 125, 13, 13]), 4, 20, 5, True, [], 1, 3),
        "relu": unary(ops.relu),
        "reshape": lambda: ops.reshape(p([2, 3]), c([3, 2]), False),
        "result": lambda: ops.result(p([2, 3])),
        "reverse_sequence": lambda: ops.reverse_sequence(p([2, 3]), c([1, 2]), 0, 1),
        "select": lambda: ops.select(p([2, 3], bool), p([2, 3]), p([2, 3])),
        "selu": lambda: ops.selu(p([2, 3]), p([1]), p([1])),
        "shape_of": unary(ops.shape_of),
        "sigmoid": unary(ops.sigmoid),
        "sign": unary(ops.sign),
        "sin": unary(ops.sin),
        "sinh": unary(ops.sinh),
        "softmax": lambda: ops.softmax(p([2, 3]), 1),
        "space_to_depth": lambda: ops.space_to_depth(image(), "blocks_first", 2),
        "split": lambda: ops.split(p([4, 3]), c(0), 2),
        "sqrt": unary(ops.sqrt),
        "squared_difference": binary(ops.squared_difference),
        "squeeze": lambda: ops.squeeze(p([1, 3]), c([0])),
        "strided_slice": lambda: ops.strided_slice(p([4, 3]), c([0, 0]), c([2, 3]), c([1, 1]), [0, 0], [0, 0]),
        "subtract": binary(ops.subtract),
        "tan": unary(ops.tan),
        "tanh": unary(ops.tanh),
        "tensor_iterator": tensor_iterator,
        "tile": lambda: ops.tile(p([2, 3]), c([2, 1])),
        "topk": lambda: ops.topk(p([2, 5]), c(2), 1, "max", "value"),
        "transpose": lambda: ops.transpose(p([2, 3]), c([1, 0])),
        "unsqueeze": lambda: ops.unsqueeze(p([2, 3]), c([0])),
        "variadic_split": lambda: ops.variadic_split(p([4, 3]), c(0), c([1, 3])),
    }
    # opset1 classes that only a later openvino.opsetN module has a factory for.
    later = {
        "opset3.rnn_cell": lambda: ops3.rnn_cell(
            p([2, 3]), p([2, 4]), p([4, 3]), p([4, 4]), p([4]), 4, ["tanh"], [], [], 0.0
        ),
        "opset3.shuffle_channels": lambda: ops3.shuffle_channels(image(), 1, 2),
    }
    return opset1, later


def _opset1_factories() -> list[str]:
    import openvino.opset1 as ops

    # `ops` itself lists a submodule of that name; everything else public is a node factory.
    return sorted(n for n in dir(ops) if not n.startswith("_") and callable(getattr(ops, n)))


def test_every_op_the_runtime_registers_in_opset1_has_a_schema():
    # The wheel ships the C++ opset table: one _OPENVINO_OP_REG(Name, namespace) line per op.
    openvino = pytest.importorskip("openvino")
    table = Path(openvino.__file__).parent / "include" / "openvino" / "opsets" / "opset1_tbl.hpp"
    if not table.exists():
        pytest.skip("this openvino build ships no C++ headers")
    registered = re.findall(r"^_OPENVINO_OP_REG\((\w+),", table.read_text(), flags=re.MULTILINE)
    assert len(registered) > 100, "the opset table format changed; update this test"
    names = {op.name for op in dialect_schemas("openvino")}
    missing = sorted(RUNTIME_NAMES.get(n, n) for n in registered if RUNTIME_NAMES.get(n, n) not in names)
    assert not missing, f"registered in the runtime's opset1 but without a schema: {missing}"


@pytest.fixture(scope="module")
def builders():
    pytest.importorskip("openvino")
    return _builders()


def test_every_opset1_factory_has_a_builder(builders):
    missing = sorted(set(_opset1_factories()) - set(builders[0]))
    assert not missing, f"openvino.opset1 factories without a builder in this test: {missing}"


def _runtime_cases():
    try:
        factories = _opset1_factories()
    except ImportError:
        return [pytest.param(None, marks=pytest.mark.skip(reason="openvino is not installed"))]
    return factories + ["opset3.rnn_cell", "opset3.shuffle_channels"]


@pytest.mark.parametrize("factory", _runtime_cases())
def test_schema_covers_runtime_node(builders, factory):
    opset1, later = builders
    build = opset1.get(factory) or later.get(factory)
    if build is None:
        pytest.fail(f"no builder for {factory}")  # reported once more by the coverage test above
    node = build()

    runtime_name = node.get_type_name()
    name = RUNTIME_NAMES.get(runtime_name, runtime_name)
    assert node.get_type_info().version_id == RUNTIME_VERSION_QUIRKS.get(runtime_name, "opset1")
    schema = lookup("openvino", name, 1, domain="opset1")

    reported = node.get_attributes()
    for attr_name, value in reported.items():
        declared = schema.attribute(attr_name)
        assert declared is not None, f"{name}: the runtime reports attribute {attr_name!r}, the schema lacks it"
        assert _fits(declared.type, value), (
            f"{name}.{attr_name}: runtime value {value!r} does not fit schema type {declared.type}"
        )
        if declared.allowed is not None:
            assert value in declared.allowed, f"{name}.{attr_name}: runtime value {value!r} not in {declared.allowed}"
    for declared in schema.attributes:
        if declared.required and (name, declared.name) not in STRUCTURAL_ATTRIBUTES:
            assert declared.name in reported, f"{name}: required attribute {declared.name!r} unknown to the runtime"

    assert schema.min_inputs <= len(node.inputs()) <= schema.max_inputs
    if name not in RUNTIME_ONLY_OUTPUTS:
        assert schema.min_outputs <= len(node.outputs()) <= schema.max_outputs
