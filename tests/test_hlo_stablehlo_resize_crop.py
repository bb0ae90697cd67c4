"""StableHLO export of HLO Resize with TF_CROP_AND_RESIZE: sampling inside a constant roi, and
``extrapolation_value`` wherever a source coordinate leaves the input along any dim.

Every case is one function of ONE IREE module compiled once; its IREE output is compared with opconv's HLO
executor and with an ONNX Resize (opset 19) on the same input, roi, scales/sizes and attributes, run by
onnxruntime, or by onnx's reference evaluator where a dim keeps its size: onnxruntime leaves such a dim as it
is, while the specification (and opconv) still crops it to the roi.  The rois reach outside the input on both
sides, so every case has extrapolated elements (checked).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import opconv
from opconv.dialects.hlo.build import OPSETS, hlo_node
from opconv.dialects.hlo.stablehlo import export_function, module_text
from opconv.ir import Graph, Model, Tensor
from opconv.types import TensorType, from_numpy
from tests.runtimes import run_ort, run_reference

iree_runtime = pytest.importorskip("tests.iree_runtime")

RNG = np.random.default_rng(19)


@dataclass
class Case:
    id: str
    x: np.ndarray
    roi: np.ndarray  # [starts..., ends...], normalized
    scales: np.ndarray | None
    sizes: np.ndarray | None
    mode: str  # ONNX spelling (lower case)
    extrapolation_value: float
    oracle: str = "onnxruntime"


CASES = [
    # NCHW; H and W cropped past both edges, H keeps its size (the roi still applies), W grows.
    Case(
        "nearest_sizes",
        RNG.standard_normal((1, 2, 4, 5)).astype(np.float32),
        np.array([0, 0, -0.3, 0.2, 1, 1, 1.2, 1.4], np.float32),
        None,
        np.array([1, 2, 4, 7], np.int64),
        "nearest",
        10.0,
        "onnx reference",
    ),
    # One output row along H: the single sample sits at the roi's centre (outside the input here).
    Case(
        "nearest_single_row_int32",
        RNG.integers(-50, 50, (2, 3, 6)).astype(np.int32),
        np.array([0, 1.1, -0.25, 1, 1.5, 0.75], np.float32),
        None,
        np.array([2, 1, 5], np.int64),
        "nearest",
        -7.0,
    ),
    Case(
        "linear_scales",
        RNG.standard_normal((1, 3, 4, 5)).astype(np.float32),
        np.array([0, 0, -0.4, 0.1, 1, 1, 0.8, 1.25], np.float32),
        np.array([1, 1, 1.5, 0.8], np.float32),
        None,
        "linear",
        -1.5,
    ),
    Case(
        "linear_sizes_3d",
        RNG.standard_normal((2, 5, 3)).astype(np.float32),
        np.array([0, 0.3, -0.5, 1, 1.3, 0.6], np.float32),
        None,
        np.array([2, 7, 4], np.int64),
        "linear",
        0.25,
    ),
]
CASE_IDS = [case.id for case in CASES]


def hlo_model(case: Case) -> Model:
    """One HLO Resize node; roi and scales/sizes are initializers (the export needs them constant)."""
    graph = Graph(case.id)
    x = graph.add_input("x", TensorType(from_numpy(case.x.dtype).name, case.x.shape))
    roi = graph.add_initializer("roi", Tensor.from_array(case.roi))
    scales = None if case.scales is None else graph.add_initializer("scales", Tensor.from_array(case.scales))
    sizes = None if case.sizes is None else graph.add_initializer("sizes", Tensor.from_array(case.sizes))
    y = hlo_node(
        graph,
        "Resize",
        x,
        roi,
        scales,
        sizes,
        mode=case.mode.upper(),
        coordinate_transformation_mode="TF_CROP_AND_RESIZE",
        extrapolation_value=case.extrapolation_value,
    )
    y.type = TensorType(from_numpy(case.x.dtype).name, tuple(onnx_resize(case).shape))
    graph.outputs = [y]
    return Model(graph, "hlo", dict(OPSETS))


def onnx_resize(case: Case) -> np.ndarray:
    inputs = {"roi": case.roi, "scales": case.scales, "sizes": case.sizes}
    names = ["x"] + [name if value is not None else "" for name, value in inputs.items()]
    node = helper.make_node(
        "Resize",
        names,
        ["y"],
        mode=case.mode,
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=case.extrapolation_value,
    )
    elem = helper.np_dtype_to_tensor_dtype(case.x.dtype)
    graph = helper.make_graph(
        [node],
        case.id,
        [helper.make_tensor_value_info("x", elem, case.x.shape)],
        [helper.make_tensor_value_info("y", elem, [None] * case.x.ndim)],
        [numpy_helper.from_array(v, n) for n, v in inputs.items() if v is not None],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    run = run_ort if case.oracle == "onnxruntime" else run_reference
    return np.asarray(run(model, {"x": case.x})[0])


MODELS = [hlo_model(case) for case in CASES]


@pytest.fixture(scope="module")
def compiled():
    """Every case as ``@case_N`` of one module, compiled once."""
    return iree_runtime.IreeModule(
        module_text([export_function(m, f"case_{i}") for i, m in enumerate(MODELS)], "resize_crop")
    )


@pytest.mark.parametrize("index", range(len(CASES)), ids=CASE_IDS)
def test_iree_matches_onnxruntime_and_executor(compiled, index):
    case, model = CASES[index], MODELS[index]
    got = np.asarray(compiled.call(f"case_{index}", case.x)[0])
    want = onnx_resize(case)
    executed = opconv.run(model, {"x": case.x})[model.graph.outputs[0].name]
    fill = np.asarray(case.extrapolation_value).astype(case.x.dtype)
    assert (want == fill).any(), f"the roi should make {case.oracle} extrapolate"
    for reference, name in ((want, case.oracle), (executed, "opconv HLO executor")):
        assert (got.shape, got.dtype) == (reference.shape, reference.dtype), name
        np.testing.assert_allclose(got, reference, rtol=1e-6, atol=1e-6, err_msg=f"{case.id} vs {name}")
