"""ONNX Resize / Upsample -> opset1: Interpolate where Interpolate-1 computes the same thing, else one constant
Gather (nearest) or MatMul (linear/cubic) per resized axis.  On random data, the converted IR must give what
onnxruntime gives (onnx's reference evaluator where onnxruntime follows another reading of the specification), in
OpenVINO's CPU plugin and in opconv's IR executor, over modes x coordinate transforms x growing / shrinking axes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import opconv
from opconv.compare import compare_arrays, tolerance
from opconv.errors import ConversionError

from .runtimes import convert_and_run_ir, run_any, run_reference

ov = pytest.importorskip("openvino")

TRANSFORMS = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
)
# Transforms that divide by the output length: with a fractional in * scale, onnxruntime divides by the rounded
# length and the specification (onnx's reference, opconv's executor) by the unrounded one.
LENGTH_TRANSFORMS = ("align_corners", "tf_crop_and_resize")


def _model(shape, dtype=np.float32, *, op="Resize", opset=19, roi=None, scales=None, sizes=None, **attrs):
    """A one-node model; roi / scales / sizes are initializers (the converter needs them constant)."""
    names, initializers = ["x"], []
    for name, value, kind in (("roi", roi, np.float32), ("scales", scales, np.float32), ("sizes", sizes, np.int64)):
        if (op == "Upsample" or opset < 11) and name != "scales":  # Upsample and Resize-10: (x, scales)
            continue
        if value is None:
            names.append("")
            continue
        names.append(name)
        initializers.append(numpy_helper.from_array(np.asarray(value, kind), name))
    while names[-1] == "":
        names.pop()
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)],
        "resize",
        [helper.make_tensor_value_info("x", element, list(shape))],
        [helper.make_tensor_value_info("y", element, None)],
        initializers,
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    return proto


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def run_oracle(proto, feeds):
    """onnxruntime, or onnx's reference where onnxruntime refuses (linear / cubic on other than 2-D and 4-D)."""
    name, runner = run_any(proto, feeds)
    assert runner is not None, "neither onnxruntime nor onnx's reference runs the model"
    return runner(proto, feeds)


def _converted_ops(tmp_path, proto, x, oracle=run_oracle) -> set[str]:
    """Convert ``proto``; check OpenVINO's CPU plugin and opconv's IR executor against ``oracle``; the IR's ops."""
    (expected,) = oracle(proto, {"x": x})
    converted, outputs = convert_and_run_ir(tmp_path, proto, {"x": x})
    runs = {who: next(iter(named.values())) for who, named in outputs.items()}
    rtol, atol = tolerance(str(expected.dtype))
    for who, actual in runs.items():
        # OpenVINO reports IR v10 outputs in its legacy types (f16 -> f32, u8 -> f32): the values are compared.
        cmp = compare_arrays("y", expected, np.asarray(actual).astype(expected.dtype), rtol=rtol, atol=atol)
        assert cmp.ok, f"{who}: {cmp.message}"
    return {n.op for n in converted.graph.nodes} - {"Parameter", "Result", "Const"}


# Output sizes avoid the pairs (7 -> 4, 9 -> 5 ...) where out / in is inexact in float32 and a nearest source
# coordinate lands within rounding error of a tie: there onnxruntime, onnx's reference and opconv may round apart.
SHAPE = (2, 3, 5, 8)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize(
    "mode,extra",
    [
        ("nearest", {"nearest_mode": "round_prefer_floor"}),
        ("nearest", {"nearest_mode": "round_prefer_ceil"}),
        ("nearest", {"nearest_mode": "floor"}),
        ("nearest", {"nearest_mode": "ceil"}),
        ("linear", {}),
        ("cubic", {}),
        ("cubic", {"cubic_coeff_a": -0.5, "exclude_outside": 1}),
    ],
    ids=lambda v: str(v),
)
def test_sizes_grow_one_axis_and_shrink_another(tmp_path, mode, extra, transform):
    # H grows 5 -> 8 while W shrinks 8 -> 3, on a batch of 2 x 3 images.
    # The roi reaches past the input on H: those outputs are extrapolation_value.
    crop = (
        {"roi": [0, 0, -0.3, 0.1, 1, 1, 0.9, 1.2], "extrapolation_value": 2.5}
        if transform == "tf_crop_and_resize"
        else {}
    )
    roi = crop.pop("roi", None)
    proto = _model(
        SHAPE, sizes=[2, 3, 8, 3], roi=roi, mode=mode, coordinate_transformation_mode=transform, **extra, **crop
    )
    _converted_ops(tmp_path, proto, _data(SHAPE, np.float32))


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_fractional_scales(tmp_path, mode, transform):
    # 5 * 1.7 and 8 * 0.6 are not whole: ONNX keeps the scale for the coordinates and floors the size.
    roi = [0.1, -0.2, 0.8, 1.0] if transform == "tf_crop_and_resize" else None
    proto = _model(SHAPE, roi=roi, scales=[1.7, 0.6], axes=[2, 3], mode=mode, coordinate_transformation_mode=transform)
    oracle = run_reference if transform in LENGTH_TRANSFORMS else run_oracle
    _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 1), oracle)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("sizes", [[3, 2], [4, 9]], ids=["shrink", "mixed"])
def test_antialias(tmp_path, mode, sizes):
    proto = _model(SHAPE, sizes=sizes, axes=[2, 3], mode=mode, antialias=1, opset=18)
    assert "MatMul" in _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 2))


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_keep_aspect_ratio(tmp_path, policy, mode):
    proto = _model(SHAPE, sizes=[7, 9], axes=[3, 2], mode=mode, keep_aspect_ratio_policy=policy, opset=18)
    _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 3))


@pytest.mark.parametrize(
    "shape,sizes",
    [((6,), [11]), ((4, 9, 3), [2, 9, 5]), ((2, 3, 4, 5, 3), [3, 3, 2, 7, 3])],
    ids=["1d", "3d-outer-and-inner", "5d"],
)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_other_ranks_and_the_batch_axis(tmp_path, shape, sizes, mode):
    proto = _model(shape, sizes=sizes, mode=mode, coordinate_transformation_mode="half_pixel")
    _converted_ops(tmp_path, proto, _data(shape, np.float32, 4))


@pytest.mark.parametrize(
    "shape,sizes,mode",
    [((2, 2, 6), [5, 2, 3], "cubic"), ((2, 3, 4, 5), [4, 2, 6, 5], "linear")],
    ids=["3d-cubic", "4d-linear-three-axes"],
)
def test_batch_and_channel_axes_are_not_left_to_interpolate(tmp_path, shape, sizes, mode):
    # align_corners would suit Interpolate-1, but the CPU plugin miscomputes (cubic) or refuses (three axes) these.
    proto = _model(shape, sizes=sizes, mode=mode, coordinate_transformation_mode="align_corners")
    assert "Interpolate" not in _converted_ops(tmp_path, proto, _data(shape, np.float32, 11))


def test_cubic_half_pixel_is_a_matmul_per_axis(tmp_path):
    # Interpolate-1 has no half_pixel cubic: the weights must come out as two constant MatMuls.
    proto = _model(SHAPE, sizes=[2, 3, 9, 4], mode="cubic")
    assert _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 5)) >= {"MatMul"}
    assert "Interpolate" not in _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 5))


def test_interpolate_where_it_computes_the_same(tmp_path):
    proto = _model(SHAPE, scales=[1, 1, 2, 3], mode="linear", coordinate_transformation_mode="asymmetric")
    assert _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 6)) == {"Interpolate"}


def test_float16_linear(tmp_path):
    proto = _model(SHAPE, np.float16, sizes=[2, 3, 3, 10], mode="linear", coordinate_transformation_mode="half_pixel")
    _converted_ops(tmp_path, proto, _data(SHAPE, np.float16, 7))


@pytest.mark.parametrize("dtype", [np.uint8, np.int32])
def test_integer_nearest_gathers(tmp_path, dtype):
    proto = _model(
        SHAPE,
        dtype,
        sizes=[2, 3, 9, 4],
        mode="nearest",
        coordinate_transformation_mode="half_pixel",
        nearest_mode="round_prefer_ceil",
    )
    assert "Gather" in _converted_ops(tmp_path, proto, _data(SHAPE, dtype, 8))


def test_bool_nearest_gathers(tmp_path):
    # Interpolate-1 would compute the same indices, but the CPU plugin cannot load a boolean Interpolate.
    proto = _model(
        SHAPE,
        np.bool_,
        sizes=[2, 3, 10, 16],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    # No runtime resizes booleans; doubling with asymmetric floor repeats every element twice.
    doubled = lambda proto, feeds: [feeds["x"].repeat(2, axis=2).repeat(2, axis=3)]  # noqa: E731
    assert "Gather" in _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 12) > 0, doubled)


@pytest.mark.parametrize(
    "op,opset,mode,scales",
    [
        ("Upsample", 9, "nearest", [1, 1, 2, 3]),
        ("Upsample", 9, "linear", [1, 1, 2.5, 1.5]),
        ("Resize", 10, "nearest", [1, 1, 0.6, 1.3]),
        ("Resize", 10, "linear", [1, 1, 0.7, 2]),
    ],
)
def test_legacy_versions(tmp_path, op, opset, mode, scales):
    proto = _model(SHAPE, op=op, opset=opset, scales=scales, mode=mode)
    _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 9))


def test_sizes_as_scales_on_the_spec_length(tmp_path):
    # align_corners with a fractional in * scale: the specification divides by 5 * 1.7 - 1, not by 8 - 1.
    proto = _model(SHAPE, scales=[1, 1, 1.7, 1], mode="linear", coordinate_transformation_mode="align_corners")
    _converted_ops(tmp_path, proto, _data(SHAPE, np.float32, 10), run_reference)


@pytest.mark.parametrize(
    "dtype,shape,sizes,reason",
    [
        (np.int32, SHAPE, [2, 3, 9, 4], "linear on int32"),
        (np.float32, (1, 5000), [1, 4000], "weight matrix over 64 MiB"),
    ],
)
def test_refusals_say_why(dtype, shape, sizes, reason):
    proto = _model(shape, dtype, sizes=sizes, mode="linear")
    with pytest.raises(ConversionError, match=reason):
        opconv.convert(opconv.load(proto), to="openvino")


def test_a_mode_that_is_not_utf8_is_refused_by_name():
    """The reader keeps a non-UTF-8 STRING attribute as bytes; the translator names it instead of failing to
    decode it."""
    proto = _model((1, 1, 2, 2), scales=[1, 1, 2, 2], mode=b"\xffnearest")
    with pytest.raises(ConversionError, match="mode '\ufffdnearest'"):
        opconv.convert(opconv.load(proto), to="openvino")
