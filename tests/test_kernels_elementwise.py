"""opconv.kernels.elementwise against onnxruntime (Round, Div, Mod, BitShift, Clip,
activations, Gelu, Erf, Cast) and erf against math.erf."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from opconv.errors import ExecutionError
from opconv.kernels import elementwise as K

from .test_kernels_helpers import assert_close, rng, run_ort


def _samples(dtype=np.float32, n=64):
    x = np.concatenate([rng(1).standard_normal(n) * 3, [-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 20.0, -20.0]])
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_round_matches_ort(dtype):
    x = _samples(dtype)
    (expected,) = run_ort("Round", [x])
    assert_close(K.round_half_even(x), expected)


def test_round_half_away():
    assert_close(
        K.round_half_away(np.array([-2.5, -0.5, 0.5, 1.5, 2.4], np.float32)), np.array([-3, -1, 1, 2, 2], np.float32)
    )


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
def test_int_div_matches_ort(dtype):
    r = rng(2)
    signed = np.iinfo(dtype).min < 0
    a = r.integers(-100 if signed else 0, 100, 50).astype(dtype)
    b = r.integers(1, 9, 50).astype(dtype) * (np.where(r.random(50) < 0.5, -1, 1).astype(dtype) if signed else 1)
    (expected,) = run_ort("Div", [a, b])
    assert_close(K.int_div(a, b), expected)


def test_int_div_floor_and_zero():
    assert_close(K.int_div(np.array([-7, 7]), np.array([2, -2]), "floor"), np.array([-4, -4]))
    with pytest.raises(ExecutionError):
        K.int_div(np.array([1]), np.array([0]))


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_integer_mod_matches_ort(fmod, dtype):
    r = rng(3)
    a = r.integers(-50, 50, 40).astype(dtype)
    b = (r.integers(1, 7, 40) * np.where(r.random(40) < 0.5, -1, 1)).astype(dtype)
    (expected,) = run_ort("Mod", [a, b], {"fmod": fmod})
    assert_close(K.mod(a, b, bool(fmod)), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_fmod_matches_ort(dtype):
    a, b = _samples(dtype), np.full(73, -1.7, dtype)
    (expected,) = run_ort("Mod", [a, b], {"fmod": 1})
    assert_close(K.mod(a, b, fmod=True), expected)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_bitshift_matches_ort(direction, dtype):
    r = rng(4)
    x = r.integers(0, 200, 30).astype(dtype)
    bits = np.dtype(dtype).itemsize * 8
    y = r.integers(0, bits, 30).astype(dtype)
    (expected,) = run_ort("BitShift", [x, y], {"direction": direction})
    assert_close(K.bitshift(x, y, direction), expected)


def test_bitshift_past_width_is_zero():
    assert_close(K.bitshift(np.array([255], np.uint8), np.array([9], np.uint8), "left"), np.array([0], np.uint8))


@pytest.mark.parametrize("low,high", [(None, None), (-1.0, None), (None, 0.5), (-0.5, 2.0), (1.0, -1.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_clip_matches_ort(low, high, dtype):
    x = (_samples(np.float64) * 2).astype(dtype)
    bound = [None if v is None else np.array(v, dtype) for v in (low, high)]
    (expected,) = run_ort("Clip", [x] + bound)
    assert_close(K.clip(x, *bound), expected)


ACTIVATIONS = [
    ("Sigmoid", K.sigmoid, {}, {}),
    ("HardSigmoid", K.hard_sigmoid, {"alpha": 0.3, "beta": 0.4}, {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", K.hard_swish, {}, {}),
    ("Softplus", K.softplus, {}, {}),
    ("Softsign", K.softsign, {}, {}),
    ("Mish", K.mish, {}, {}),
    ("Relu", K.relu, {}, {}),
    ("LeakyRelu", K.leaky_relu, {"alpha": 0.2}, {"alpha": 0.2}),
    ("ThresholdedRelu", K.thresholded_relu, {"alpha": 0.7}, {"alpha": 0.7}),
    ("Elu", K.elu, {"alpha": 1.3}, {"alpha": 1.3}),
    ("Celu", K.celu, {"alpha": 0.8}, {"alpha": 0.8}),
    ("Selu", K.selu, {}, {}),
    ("Selu", K.selu, {"alpha": 1.2, "gamma": 0.9}, {"alpha": 1.2, "gamma": 0.9}),
    ("Shrink", K.shrink, {"lambd": 0.6, "bias": 0.2}, {"lambd": 0.6, "bias": 0.2}),
    ("Erf", K.erf, {}, {}),
    ("Gelu", K.gelu, {}, {}),
    ("Gelu", K.gelu, {"approximate": "tanh"}, {"approximate": "tanh"}),
]


@pytest.mark.parametrize("op,function,attrs,kwargs", ACTIVATIONS, ids=lambda v: v if isinstance(v, str) else None)
def test_activation_matches_ort(op, function, attrs, kwargs):
    x = _samples(np.float32)
    (expected,) = run_ort(op, [x], attrs, opset=20)
    assert_close(function(x, **kwargs), expected, rtol=1e-5, atol=1e-6)
    # Most of these have no double kernel in onnxruntime: float64 must stay
    # float64 and agree with the float32 oracle to float32 precision.
    got64 = function(x.astype(np.float64), **kwargs)
    assert got64.dtype == np.float64
    assert_close(got64.astype(np.float32), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,function", [("Sigmoid", K.sigmoid), ("Erf", K.erf), ("Gelu", K.gelu)])
def test_float16_activation_matches_ort(op, function):
    x = _samples(np.float16)
    (expected,) = run_ort(op, [x], opset=20)
    assert_close(function(x), expected, rtol=2e-3, atol=2e-3)


def test_erf_is_float64_exact():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 1e-300, 2.9999999, 3.0, 3.0000001, np.inf, -np.inf]])
    expected = np.array([math.erf(v) for v in x])
    assert_close(K.erf(x), expected, rtol=0, atol=5e-15)
    assert np.isnan(K.erf(np.array([np.nan])))[0]


_math_erf = np.frompyfunc(math.erf, 1, 1)


def _ulp_errors(got, x, dtype):
    """|got - erf(x)| in units of ``dtype``'s last place at the true value, erf(x) from math.erf in float64."""
    info = ml_dtypes.finfo(dtype)
    reference = _math_erf(x.astype(np.float64)).astype(np.float64)
    _, exponent = np.frexp(reference)  # |reference| in [2**(exponent-1), 2**exponent)
    ulp = np.ldexp(1.0, np.maximum(exponent - 1, int(info.minexp)) - int(info.nmant))
    return np.abs(got.astype(np.float64) - reference) / ulp


def _float32_sweep():
    """Every float32 exponent (denormals included), 200 mantissas each, both signs; a dense 0..5 grid."""
    r = rng(11)
    mantissas = np.concatenate([[0, 1, 2, (1 << 23) - 1], r.integers(0, 1 << 23, 196)]).astype(np.uint32)
    exponents = np.arange(0, 255, dtype=np.uint32)  # 0: denormals; 255 (inf/NaN) apart
    bits = (exponents[:, None] << 23 | mantissas[None, :]).reshape(-1)
    positive = bits.view(np.float32)
    dense = np.linspace(0, 5, 100001, dtype=np.float32)
    return np.concatenate([positive, -positive, dense, -dense])


def test_float32_erf_within_one_ulp_over_the_whole_range():
    x = _float32_sweep()
    got = K.erf(x)
    assert got.dtype == np.float32
    errors = _ulp_errors(got, x, np.float32)
    assert errors.max() <= 1.0, x[np.argmax(errors)]
    # Nearly always correctly rounded (<= 0.5 ulp) as well.
    assert np.mean(errors <= 0.5) > 0.999


def test_float32_erf_special_values_and_tails():
    x = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 3.9, 3.92, 3.93, 4.0, 10.0, 1e30, -1e30, 3.4e38, 1e-45, -1e-45, 1.17e-38],
        np.float32,
    )
    got = K.erf(x)
    expected = _math_erf(x.astype(np.float64)).astype(np.float64).astype(np.float32)
    np.testing.assert_array_equal(got, expected)  # NaN == NaN for assert_array_equal
    assert np.signbit(got[1]) and not np.signbit(got[0])  # erf(-0) = -0
    assert got[2] == 1 and got[3] == -1


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_float_erf_is_within_one_ulp_for_every_value(dtype):
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    got = K.erf(x)
    assert got.dtype == np.dtype(dtype)
    finite = np.isfinite(x.astype(np.float32))
    assert _ulp_errors(got[finite], x[finite], dtype).max() <= 1.0
    assert np.isnan(got[np.isnan(x.astype(np.float32))].astype(np.float32)).all()


# ---------------------------------------------------------------- cast

FLOAT8 = [
    (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
]


def _cast_chain(x, to, back, saturate=1):
    """Cast to ``to`` and back to ``back`` in onnxruntime (its Python API cannot return float8/int4)."""
    nodes = [
        helper.make_node("Cast", ["x"], ["m"], to=to, saturate=saturate),
        helper.make_node("Cast", ["m"], ["y"], to=back),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_tensor_value_info("y", back, x.shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("onnx_type,dtype", FLOAT8)
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_float8_matches_ort(onnx_type, dtype, saturate):
    x = np.concatenate([_samples(np.float32) * 30, [500, 1e6, -1e6, np.inf, -np.inf, np.nan, 464, 1e-9, 57344]])
    x = x.astype(np.float32)
    expected = _cast_chain(x, onnx_type, TensorProto.FLOAT, saturate)
    got = K.cast(x, dtype, saturate=bool(saturate)).astype(np.float32)
    assert_close(got, expected)


@pytest.mark.parametrize("onnx_type,dtype", [(TensorProto.INT4, ml_dtypes.int4), (TensorProto.UINT4, ml_dtypes.uint4)])
def test_cast_int_to_int4_wraps_like_ort(onnx_type, dtype):
    x = np.array([-9, -8, -1, 0, 7, 8, 15, 16, 17, 300], np.int32)
    expected = _cast_chain(x, onnx_type, TensorProto.INT32)
    assert_close(K.cast(x, dtype).astype(np.int32), expected)
    integral = x.astype(np.float32)  # integral floats agree too (onnxruntime rounds halves, see report)
    assert_close(K.cast(integral, dtype).astype(np.int32), _cast_chain(integral, onnx_type, TensorProto.INT32))


def test_cast_float_to_int4_truncates():
    got = K.cast(np.array([-2.7, -0.5, 0.5, 2.7, 7.9], np.float32), ml_dtypes.int4).astype(np.int32)
    assert_close(got, np.array([-2, 0, 0, 2, 7], np.int32))


@pytest.mark.parametrize("source", [np.float32, np.float64, np.float16, np.int64, np.int8, np.bool_])
def test_cast_to_string_matches_ort(source):
    x = np.array([1.5, 0.1, 1e20, np.nan, np.inf, -np.inf, 3.0, -0.0, 123456789.0, 2.5e-5, 1 / 3])
    if np.dtype(source).kind in "ib":
        x = np.array([-5, 7, 0, 1, 100])
    with np.errstate(over="ignore"):  # 1e20 overflows float16 to inf, on purpose
        x = x.astype(source)
    (expected,) = run_ort("Cast", [x], {"to": TensorProto.STRING})
    got = K.cast(x, str)
    assert got.dtype == object
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize(
    "onnx_type,dtype,texts",
    [
        (TensorProto.FLOAT, np.float32, ["1.5", "-INF", "NaN", "+Inf", "1e3", " 7", "-0.25"]),
        (TensorProto.DOUBLE, np.float64, ["0.1", "inf", "-1e-300"]),
        (TensorProto.INT32, np.int32, ["15", "-7", "3", "2147483647"]),
        (TensorProto.INT8, np.int8, ["1.9", "300", "-3"]),
        (TensorProto.BOOL, np.bool_, ["1", "0", "2"]),
    ],
)
def test_cast_from_string_matches_ort(onnx_type, dtype, texts):
    x = np.array(texts, dtype=object)
    (expected,) = run_ort("Cast", [x], {"to": onnx_type})
    assert_close(K.cast(x, dtype), expected)


@pytest.mark.parametrize("target", [np.int32, np.int8, np.uint8, np.bool_, np.float16, np.float32])
def test_cast_numeric_matches_ort(target):
    x = np.array([-3.7, -1.2, -0.0, 0.3, 2.5, 100.9, 127.0, 300.6], np.float32)
    if target == np.uint8:
        x = np.abs(x)
    if target in (np.int8,):
        x = x[x < 128]
    (expected,) = run_ort("Cast", [x], {"to": helper.np_dtype_to_tensor_dtype(np.dtype(target))})
    assert_close(K.cast(x, target), expected)


def test_cast_int_wraps_like_ort():
    x = np.array([200, -200, 65535, 2**40 + 5], np.int64)
    for target in (np.int8, np.uint16, np.int32):
        (expected,) = run_ort("Cast", [x], {"to": helper.np_dtype_to_tensor_dtype(np.dtype(target))})
        assert_close(K.cast(x, target), expected)


def test_bfloat16_computes_in_float32():
    x = np.array([0.3, -1.7, 2.2], ml_dtypes.bfloat16)
    got = K.sigmoid(x)
    assert got.dtype == x.dtype
    assert_close(
        got.astype(np.float32), (1 / (1 + np.exp(-x.astype(np.float32)))).astype(ml_dtypes.bfloat16).astype(np.float32)
    )


@pytest.mark.parametrize("exponent", [2.0, 3.0, 4.0, -1.0, -2.0, 2.5])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_power_by_small_integers_matches_ort(exponent, dtype):
    """Small integer exponents take products (float64) instead of numpy's slow float32 pow."""
    with np.errstate(over="ignore"):  # 1e30 is inf in float16, on purpose
        x = np.concatenate([_samples(np.float32), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -3e-20]]).astype(dtype)
    y = np.array(exponent, dtype)
    (expected,) = run_ort("Pow", [x, y])
    with np.errstate(all="ignore"):
        got = K.power(x, y)
    assert got.dtype == x.dtype
    # Correctly rounded powers: the same float32 numbers up to one ulp (onnxruntime's own products or pow).
    np.testing.assert_array_max_ulp(got, expected, maxulp=1)
    if exponent == 2:  # a square is the exact float64 product rounded once: the same bits, denormals included
        with np.errstate(over="ignore"):
            exact = (x.astype(np.float64) * x.astype(np.float64)).astype(dtype)
        np.testing.assert_array_equal(got, exact)


def test_power_by_an_exponent_broadcast_to_the_base_shape_matches_ort():
    """HLO broadcasts a scalar exponent to the base's shape (a view of one value): the same result as the
    scalar, taken as products."""
    x = _samples(np.float32).reshape(1, -1)
    exponent = np.broadcast_to(np.float32(3.0), x.shape)
    (expected,) = run_ort("Pow", [x, np.ascontiguousarray(exponent)])
    with np.errstate(all="ignore"):
        got = K.power(x, exponent)
    np.testing.assert_array_max_ulp(got, expected, maxulp=1)


def test_gelu_tanh_matches_ort():
    x = _samples(np.float32)
    (expected,) = run_ort("Gelu", [x], {"approximate": "tanh"}, opset=20)
    with np.errstate(all="ignore"):
        got = K.gelu(x, "tanh")
    assert_close(got, expected)
