"""The HLO executor's element-wise, logic, shape, reduce, sort and region operations.

Each test builds a one-op HLO model with ``hlo_node`` and runs it through
``opconv.run``; expected values come from formulas of the dialect's document
(``/work/shared/specs/hlo-ops-english.md``), XLA/StableHLO semantics where the
document is silent, computed here with numpy, ``math`` or plain Python loops.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opconv
from opconv.dialects.hlo.build import hlo_node
from opconv.errors import ExecutionError
from opconv.ir import Graph, Model
from opconv.types import TensorType, TupleType, from_numpy

FAST = settings(max_examples=15, deadline=None)


def tensor_type(x) -> TensorType:
    x = np.asarray(x)
    return TensorType(from_numpy(x.dtype).name, tuple(x.shape))


def run(op, *inputs, outputs=1, types=None, **attrs):
    """Run one HLO ``op`` on ``inputs`` (graph inputs; ``None`` = an omitted optional input); list of outputs."""
    graph = Graph("main")
    values, feeds = [], {}
    for i, x in enumerate(inputs):
        if x is None:
            values.append(None)
            continue
        x = np.asarray(x)
        v = graph.add_input(f"in{i}", tensor_type(x))
        values.append(v)
        feeds[v.name] = x
    outs = hlo_node(graph, op, *values, _outputs=outputs, **attrs)
    outs = outs if isinstance(outs, list) else [outs]
    for v, t in zip(outs, types or []):
        v.type = t
    graph.outputs = outs
    result = opconv.run(Model(graph, "hlo", {"": 1}), feeds)
    return [result[v.name] for v in outs]


def run1(op, *inputs, **kw):
    return run(op, *inputs, **kw)[0]


def region(name, param_types, build, parent=None) -> Graph:
    """A region: parameters of ``param_types``; ``build(region, *params)`` returns its results."""
    r = Graph(name, parent=parent)
    params = [r.add_input(f"{name}_p{i}", t) for i, t in enumerate(param_types)]
    results = build(r, *params)
    r.outputs = list(results) if isinstance(results, (list, tuple)) else [results]
    return r


def scalar(dtype):
    return TensorType(np.dtype(dtype).name if np.dtype(dtype).name != "bool" else "bool", ())


RNG = np.random.default_rng(1234)
TOL = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}


def close(actual, expected, dtype):
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    np.testing.assert_allclose(
        actual.astype(np.float64), np.asarray(expected, np.float64), rtol=TOL[dtype], atol=TOL[dtype], equal_nan=True
    )


# ---------------------------------------------------------------- unary float math

# op -> (float64 reference, input range)
UNARY_FLOAT = {
    "Abs": (np.abs, (-5, 5)),
    "Neg": (lambda x: -x, (-5, 5)),
    "Sign": (lambda x: np.where(x > 0, 1.0, np.where(x < 0, -1.0, 0.0)), (-3, 3)),
    "Ceil": (lambda x: np.array([math.ceil(v) for v in x.flat]).reshape(x.shape), (-4, 4)),
    "Floor": (lambda x: np.array([math.floor(v) for v in x.flat]).reshape(x.shape), (-4, 4)),
    "Sqrt": (lambda x: x**0.5, (0.01, 9)),
    "Rsqrt": (lambda x: x**-0.5, (0.01, 9)),
    "Exp": (lambda x: np.e**x, (-4, 4)),
    "Expm1": (lambda x: np.array([math.expm1(v) for v in x.flat]).reshape(x.shape), (-2, 2)),
    "Log": (lambda x: np.array([math.log(v) for v in x.flat]).reshape(x.shape), (0.05, 9)),
    "Log1p": (lambda x: np.array([math.log1p(v) for v in x.flat]).reshape(x.shape), (-0.9, 5)),
    "Sin": (lambda x: np.array([math.sin(v) for v in x.flat]).reshape(x.shape), (-4, 4)),
    "Cos": (lambda x: np.array([math.cos(v) for v in x.flat]).reshape(x.shape), (-4, 4)),
    "Tan": (lambda x: np.array([math.tan(v) for v in x.flat]).reshape(x.shape), (-1.2, 1.2)),
    "Tanh": (lambda x: (np.e ** (2 * x) - 1) / (np.e ** (2 * x) + 1), (-3, 3)),
    "Sinh": (lambda x: (np.e**x - np.e**-x) / 2, (-3, 3)),
    "Asin": (lambda x: np.array([math.asin(v) for v in x.flat]).reshape(x.shape), (-0.95, 0.95)),
    "Acos": (lambda x: np.array([math.acos(v) for v in x.flat]).reshape(x.shape), (-0.95, 0.95)),
    "Atan": (lambda x: np.array([math.atan(v) for v in x.flat]).reshape(x.shape), (-5, 5)),
    "Asinh": (lambda x: np.log(x + np.sqrt(x * x + 1)), (-5, 5)),
    "Atanh": (lambda x: 0.5 * np.log((1 + x) / (1 - x)), (-0.9, 0.9)),
    "Erf": (lambda x: np.array([math.erf(v) for v in x.flat]).reshape(x.shape), (-3, 3)),
    "Cbrt": (lambda x: np.sign(x) * np.abs(x) ** (1 / 3), (-8, 8)),
    # Round: halves away from zero (the dialect's rule); RoundNearestEven: halves to even.
    "Round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), (-4, 4)),
    "RoundNearestEven": (lambda x: np.array([float(round(v)) for v in x.flat]).reshape(x.shape), (-4, 4)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", sorted(UNARY_FLOAT))
def test_unary_float(op, dtype):
    reference, (low, high) = UNARY_FLOAT[op]
    for shape in [(), (7,), (2, 3, 4)]:
        x = RNG.uniform(low, high, shape).astype(dtype)
        if op.startswith("Round"):
            x = (np.round(x.astype(np.float64) * 2) / 2).astype(dtype)  # plenty of exact halves
        out = run1(op, x, types=[tensor_type(x)])
        close(out, reference(x.astype(np.float64)), dtype)


def test_unary_float_edges():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.0], np.float32)
    assert run1("Round", x).tolist() == [1, 2, 3, -1, -3, 0]
    assert run1("RoundNearestEven", x).tolist() == [0, 2, 2, -0, -2, 0]
    r = run1("Rsqrt", np.array([0.0, -1.0, 4.0, np.inf], np.float32))
    assert r[0] == np.inf and np.isnan(r[1]) and r[2] == 0.5 and r[3] == 0  # Rsqrt(0) = +inf, not the doc's NaN
    s = run1("Sign", np.array([np.nan, -0.0, 3, -np.inf], np.float64))
    assert np.isnan(s[0]) and s[1] == 0 and s[2] == 1 and s[3] == -1
    assert run1("Log", np.array([0.0], np.float32))[0] == -np.inf


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_unary_integer(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, -7, -1, 0, 1, 9, info.max], dtype)
    abs_ = [(-v if v < 0 else v) for v in x.tolist()]
    wrap = lambda v: (v - info.min) % (1 << info.bits) + info.min  # noqa: E731 - two's complement
    assert run1("Abs", x).tolist() == [wrap(v) for v in abs_]
    assert run1("Neg", x).tolist() == [wrap(-v) for v in x.tolist()]
    assert run1("Sign", x).tolist() == [(v > 0) - (v < 0) for v in x.tolist()]
    assert run1("Abs", x).dtype == dtype


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_population_count(dtype):
    x = RNG.integers(0, np.iinfo(dtype).max, (3, 5), dtype=dtype, endpoint=True)
    x.flat[0] = np.iinfo(dtype).max
    out = run1("PopulationCount", x)
    assert out.dtype == dtype
    assert out.tolist() == [[bin(int(v)).count("1") for v in row] for row in x]


def test_population_count_of_signed_counts_the_bit_pattern():
    # XLA's popcnt also takes signed integers: -1 has every bit set.
    x = np.array([-1, -128, 5, 0], np.int8)
    assert run1("PopulationCount", x).tolist() == [bin(v & 0xFF).count("1") for v in x.tolist()]


def test_cbrt_and_expm1_of_integers_give_the_declared_float():
    x = np.array([-27, -8, 0, 1, 64], np.int32)
    out = run1("Cbrt", x, types=[TensorType("float32", (5,))])
    assert out.dtype == np.float32 and out.tolist() == [-3, -2, 0, 1, 4]
    out = run1("Expm1", x[:3], types=[TensorType("float64", (3,))])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [math.expm1(v) for v in (-27, -8, 0)], rtol=1e-15)


@pytest.mark.parametrize("out_dtype", ["bool", "int32", "float32"])
def test_is_finite(out_dtype):
    x = np.array([1.0, np.inf, -np.inf, np.nan, -0.0, 3e38], np.float32)
    out = run1("IsFinite", x, types=[TensorType(out_dtype, (6,))])
    assert out.dtype == np.dtype(out_dtype)
    assert out.tolist() == [1, 0, 0, 0, 1, 1]


def test_not_and_bitwise_logic():
    a = np.array([[True, False], [True, True]])
    b = np.array([[False, False], [True, False]])
    assert run1("Not", a).tolist() == [[not v for v in row] for row in a.tolist()]
    assert run1("And", a, b).tolist() == [[x and y for x, y in zip(r, s)] for r, s in zip(a.tolist(), b.tolist())]
    assert run1("Or", a, b).tolist() == [[x or y for x, y in zip(r, s)] for r, s in zip(a.tolist(), b.tolist())]
    assert run1("Xor", a, b).tolist() == [[x != y for x, y in zip(r, s)] for r, s in zip(a.tolist(), b.tolist())]
    # Integers: bitwise, as in XLA; broadcast_dimensions place the lower-rank operand.
    x = np.array([[12, 10, 7], [1, 2, 3]], np.int32)
    y = np.array([10, 6], np.int32)
    out = run1("And", x, y, broadcast_dimensions=[0])
    assert out.tolist() == [[v & y[i] for v in row] for i, row in enumerate(x.tolist())]
    out = run1("Xor", y, x, broadcast_dimensions=[0])
    assert out.tolist() == [[v ^ y[i] for v in row] for i, row in enumerate(x.tolist())]


# ---------------------------------------------------------------- binary arithmetic

BINARY_FLOAT = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Div": lambda a, b: a / b,
    "Max": lambda a, b: np.where(a > b, a, b),
    "Min": lambda a, b: np.where(a < b, a, b),
    "Pow": lambda a, b: a**b,
    "Atan2": lambda a, b: np.array([math.atan2(u, v) for u, v in zip(a.flat, b.flat)]).reshape(a.shape),
    "Rem": lambda a, b: np.array([math.fmod(u, v) for u, v in zip(a.flat, b.flat)]).reshape(a.shape),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", sorted(BINARY_FLOAT))
def test_binary_float(op, dtype):
    for shape in [(), (6,), (2, 3, 4)]:
        a = RNG.uniform(-4, 4, shape).astype(dtype)
        b = RNG.uniform(0.5, 3, shape).astype(dtype) * np.where(RNG.random(shape) < 0.5, -1, 1).astype(dtype)
        if op == "Pow":
            a = np.abs(a) + dtype(0.1)
        out = run1(op, a, b)
        close(out, BINARY_FLOAT[op](a.astype(np.float64), b.astype(np.float64)), dtype)


def test_max_min_propagate_nan():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([0.0, np.nan, 1.0], np.float32)
    for op in ("Max", "Min"):
        out = run1(op, a, b)
        assert np.isnan(out[0]) and np.isnan(out[1])
    assert run1("Max", a, b)[2] == 2 and run1("Min", a, b)[2] == 1


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
@FAST
def test_add_with_broadcast_dimensions(shape, data):
    dims = sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), max_size=len(shape))))
    x = RNG.standard_normal(shape).astype(np.float32)
    y = RNG.standard_normal([shape[d] for d in dims]).astype(np.float32)
    placed = [shape[d] if d in dims else 1 for d in range(len(shape))]
    expected = x + y.reshape(placed)
    np.testing.assert_array_equal(run1("Add", x, y, broadcast_dimensions=dims), expected)
    np.testing.assert_array_equal(run1("Div", y, x, broadcast_dimensions=dims), y.reshape(placed) / x)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_integer_div_rem_xla_semantics(dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, 40, dtype=dtype, endpoint=True)
    b = RNG.integers(info.min, info.max, 40, dtype=dtype, endpoint=True) // 7
    a[:4] = [info.min, info.max, 5, info.min]
    b[:4] = [0, 0, 0, (-1 if info.min < 0 else 3)]
    expected_q, expected_r = [], []
    for u, v in zip(a.tolist(), b.tolist()):
        if v == 0:  # XLA: x / 0 = -1 (all bits set), x % 0 = x
            expected_q.append(-1 if info.min < 0 else info.max)
            expected_r.append(u)
        elif u == info.min and v == -1 and info.min < 0:  # INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0
            expected_q.append(u)
            expected_r.append(0)
        else:  # C: truncation toward zero, remainder with the dividend's sign
            q = _trunc_div(u, v)
            expected_q.append(q)
            expected_r.append(u - q * v)
    assert run1("Div", a, b).tolist() == expected_q
    assert run1("Rem", a, b).tolist() == expected_r


def test_integer_pow_xla_semantics():
    base = np.array([2, -3, 1, -1, -1, 0, 5, 7, 3], np.int32)
    exponent = np.array([10, 3, -5, -3, -4, 0, -1, 0, 21], np.int32)
    expected = []
    for b, e in zip(base.tolist(), exponent.tolist()):
        if e < 0:
            expected.append(1 if b == 1 else ((-1) ** (-e) if b == -1 else 0))
        else:
            v = (b**e) & 0xFFFFFFFF
            expected.append(v - (1 << 32) if v >= 1 << 31 else v)
    assert run1("Pow", base, exponent).tolist() == expected
    # A float exponent for a float base of another width.
    out = run1("Pow", np.array([4.0, 9.0], np.float32), np.array([0.5, -0.5], np.float64))
    np.testing.assert_allclose(out, [2.0, 1 / 3], rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.uint64, np.int64])
def test_shifts_xla_semantics(dtype):
    bits = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, 30, dtype=dtype, endpoint=True)
    x[:3] = [info.min, info.max, 1]
    amounts = RNG.integers(0, bits + 3, 30).astype(dtype)
    if info.min < 0:
        amounts[:2] = -1  # negative amounts read as huge unsigned amounts: saturate
    mask = (1 << bits) - 1

    def to_signed(v):
        v &= mask
        return v - (1 << bits) if info.min < 0 and v >> (bits - 1) else v

    left, logical, arithmetic = [], [], []
    for v, s in zip(x.tolist(), amounts.tolist()):
        out_of_range = s < 0 or s >= bits
        u = v & mask  # the bit pattern
        signed = u - (1 << bits) if u >> (bits - 1) else u
        left.append(0 if out_of_range else to_signed(u << s))
        logical.append(0 if out_of_range else to_signed(u >> s))
        arithmetic.append(to_signed((-1 if signed < 0 else 0) if out_of_range else signed >> s))
    if info.min >= 0:  # ShiftLeft's schema types lhs as unsigned
        assert run1("ShiftLeft", x, amounts).tolist() == left
    assert run1("ShiftRightLogical", x, amounts).tolist() == logical
    assert run1("ShiftRightArithmetic", x, amounts).tolist() == arithmetic


def test_shift_left_amount_of_another_type():
    x = np.array([1, 3, 255], np.uint8)
    assert run1("ShiftLeft", x, np.array([1, 7, 8], np.int64)).tolist() == [2, 128, 0]


def test_clamp():
    x = RNG.uniform(-3, 3, (4, 5)).astype(np.float32)
    lo, hi = np.float32(-1), np.float32(1.5)
    expected = [[min(max(v, lo), hi) for v in row] for row in x.tolist()]
    np.testing.assert_array_equal(run1("Clamp", lo, x, hi), np.array(expected, np.float32))
    low = RNG.uniform(-2, 0, (4, 5)).astype(np.float32)
    high = low + 1
    np.testing.assert_array_equal(
        run1("Clamp", low, x, high),
        np.array(
            [
                [min(max(v, a), b) for v, a, b in zip(r, s, t)]
                for r, s, t in zip(x.tolist(), low.tolist(), high.tolist())
            ],
            np.float32,
        ),
    )
    assert run1("Clamp", np.int8(0), np.array([-5, 3, 9], np.int8), np.int8(6)).tolist() == [0, 3, 6]


@pytest.mark.parametrize("direction", ["EQ", "NE", "GE", "GT", "LE", "LT"])
def test_compare(direction):
    a = np.array([1.0, 2.0, np.nan, 3.0, -np.inf, np.nan], np.float32)
    b = np.array([1.0, 3.0, 1.0, 2.0, -np.inf, np.nan], np.float32)
    python = {
        "EQ": lambda u, v: u == v,
        "NE": lambda u, v: u != v,
        "GE": lambda u, v: u >= v,
        "GT": lambda u, v: u > v,
        "LE": lambda u, v: u <= v,
        "LT": lambda u, v: u < v,
    }[direction]
    out = run1("Compare", a, b, comparison_direction=direction)
    assert out.dtype == np.bool_
    assert out.tolist() == [python(u, v) for u, v in zip(a.tolist(), b.tolist())]  # IEEE: NaN compares unequal
    ints = np.array([[1, 5], [7, -2]], np.int64)
    assert run1("Compare", ints, np.int64(5), comparison_direction=direction).tolist() == [
        [python(v, 5) for v in row] for row in ints.tolist()
    ]


def test_select():
    pred = np.array([[True, False, True], [False, False, True]])
    t = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = -t
    assert run1("Select", pred, t, f).tolist() == [
        [u if p else v for p, u, v in zip(a, b, c)] for a, b, c in zip(pred.tolist(), t.tolist(), f.tolist())
    ]
    assert run1("Select", np.bool_(False), t, f).tolist() == f.tolist()  # scalar pred picks a whole operand


def test_complex_real_imag():
    re = RNG.standard_normal((2, 3)).astype(np.float32)
    im = RNG.standard_normal((2, 3)).astype(np.float32)
    z = run1("Complex", re, im, types=[TensorType("complex64", (2, 3))])
    assert z.dtype == np.complex64
    assert [[complex(v) for v in row] for row in z] == [
        [complex(a, b) for a, b in zip(r, s)] for r, s in zip(re.tolist(), im.tolist())
    ]
    assert run1("Real", z, types=[TensorType("float32", (2, 3))]).tolist() == re.tolist()
    assert run1("Imag", z, types=[TensorType("float32", (2, 3))]).tolist() == im.tolist()
    assert run1("Real", re).tolist() == re.tolist()
    assert run1("Imag", re).tolist() == [[0.0] * 3] * 2


# ---------------------------------------------------------------- conversions


def test_convert_float_to_int_truncates_and_saturates():
    x = np.array([2.7, -2.7, 0.5, -0.5, 1e10, -1e10, np.nan, np.inf, -np.inf, 127.9], np.float32)
    out = run1("Convert", x, types=[TensorType("int8", (10,))])
    expected = [
        max(-128, min(127, math.trunc(v))) if math.isfinite(v) else (0 if math.isnan(v) else (127 if v > 0 else -128))
        for v in x.tolist()
    ]
    assert out.dtype == np.int8 and out.tolist() == expected
    out = run1("Convert", x, types=[TensorType("uint32", (10,))])
    assert out.tolist() == [
        max(0, min(2**32 - 1, math.trunc(v))) if math.isfinite(v) else (0 if math.isnan(v) or v < 0 else 2**32 - 1)
        for v in x.tolist()
    ]


def test_convert_narrowing_keeps_the_sign_bit():
    # The document's example: convert<int64, int32>(0x8FFFFFFF1FFFFFFF) = 0x9FFFFFFF.
    big = 0x8FFFFFFF1FFFFFFF - (1 << 64)
    x = np.array([big, -1, 5, 1 << 31, -(1 << 40) - 3, 123456789012], np.int64)
    out = run1("Convert", x, types=[TensorType("int32", (6,))])
    assert out.view(np.uint32)[0] == 0x9FFFFFFF

    def keep_sign(v, bits):
        low = v & ((1 << (bits - 1)) - 1)
        return low - (1 << (bits - 1)) if v < 0 else low

    assert out.tolist() == [keep_sign(v, 32) for v in x.tolist()]
    assert run1("Convert", x, types=[TensorType("int8", (6,))]).tolist() == [keep_sign(v, 8) for v in x.tolist()]


def test_convert_other_pairs():
    x = np.array([0, 1, -2, 3], np.int32)
    assert run1("Convert", x, types=[TensorType("bool", (4,))]).tolist() == [False, True, True, True]
    assert run1("Convert", x, types=[TensorType("float16", (4,))]).tolist() == [0.0, 1.0, -2.0, 3.0]
    b = np.array([True, False])
    assert run1("Convert", b, types=[TensorType("float32", (2,))]).tolist() == [1.0, 0.0]
    f = np.array([1.0000001, 65504.0, 1e6], np.float64)
    out = run1("Convert", f, types=[TensorType("float16", (3,))])
    assert out.dtype == np.float16 and out.tolist() == [1.0, 65504.0, float("inf")]
    bf = run1("Convert", f[:1], types=[TensorType("bfloat16", (1,))])
    assert str(bf.dtype) == "bfloat16" and float(bf[0]) == 1.0


def test_bitcast_convert():
    x = np.array([1.0, -2.5, 0.0], np.float32)
    out = run1("BitcastConvert", x, types=[TensorType("int32", (3,))])
    assert out.tolist() == [struct.unpack("<i", struct.pack("<f", v))[0] for v in x.tolist()]
    # A narrower result type adds a minor dim holding the bytes in memory (little-endian) order.
    out = run1("BitcastConvert", x, types=[TensorType("uint8", (3, 4))])
    assert out.tolist() == [list(struct.pack("<f", v)) for v in x.tolist()]
    back = run1("BitcastConvert", out, types=[TensorType("float32", (3,))])
    assert back.tolist() == x.tolist()
    with pytest.raises(ExecutionError, match="minor dim"):
        run1("BitcastConvert", np.zeros((3, 3), np.uint8), types=[TensorType("float32", (3,))])


# ---------------------------------------------------------------- shapes and data movement


def test_constant_copy_iota():
    graph = Graph("main")
    c = hlo_node(graph, "Constant", value=np.array([[1, 2], [3, 4]], np.int16))
    c.type = TensorType("int16", (2, 2))
    copy = hlo_node(graph, "Copy", c)
    graph.outputs = [copy]
    out = opconv.run(Model(graph, "hlo", {"": 1}), {})[copy.name]
    assert out.dtype == np.int16 and out.tolist() == [[1, 2], [3, 4]]
    for dim in (0, 1, 2):
        out = run1("Iota", iota_dimension=dim, types=[TensorType("float32", (2, 3, 4))])
        expected = [[[(i, j, k)[dim] for k in range(4)] for j in range(3)] for i in range(2)]
        assert out.dtype == np.float32 and out.tolist() == expected
    out = run1("DynamicIota", np.array([3, 2], np.int64), iota_dimension=0, types=[TensorType("int32", (3, 2))])
    assert out.dtype == np.int32 and out.tolist() == [[0, 0], [1, 1], [2, 2]]
    with pytest.raises(ExecutionError, match="result type"):
        run1("Iota", iota_dimension=0)


def test_broadcasts():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = run1("Broadcast", x, broadcast_sizes=[4, 1])
    assert out.shape == (4, 1, 2, 3) and all((out[i, 0] == x).all() for i in range(4))
    # BroadcastInDim: result[i0, i1, i2] = x[i_dims[0], i_dims[1]]; size-1 dims replicate.
    for dims, shape in [([0, 2], (2, 5, 3)), ([2, 0], (3, 4, 2)), ([1, 2], (4, 2, 3))]:
        out = run1("BroadcastInDim", x, broadcast_dimensions=dims, types=[TensorType("int32", shape)])
        expected = np.empty(shape, np.int32)
        for index in np.ndindex(*shape):
            expected[index] = x[index[dims[0]], index[dims[1]]]
        np.testing.assert_array_equal(out, expected)
    column = np.array([[7], [8]], np.float32)
    out = run1("DynamicBroadcastInDim", column, np.array([2, 3, 4], np.int32), broadcast_dimensions=[0, 2])
    assert out.shape == (2, 3, 4) and (out[0] == 7).all() and (out[1] == 8).all()


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.randoms())
@FAST
def test_reshape_transpose_reverse(shape, random):
    x = RNG.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1).tolist()
    target = (int(np.prod(shape)),)
    assert run1("Reshape", x, types=[TensorType("float32", target)]).tolist() == flat
    perm = list(range(len(shape)))
    random.shuffle(perm)
    out = run1("Transpose", x, permutation=perm)
    for index in np.ndindex(*out.shape):
        source = [0] * len(shape)
        for i, p in enumerate(perm):
            source[p] = index[i]
        assert out[index] == x[tuple(source)]
    dims = [d for d in range(len(shape)) if random.random() < 0.5]
    out = run1("Reverse", x, dimensions=dims)
    for index in np.ndindex(*shape):
        source = tuple(shape[d] - 1 - i if d in dims else i for d, i in enumerate(index))
        assert out[index] == x[source]


def test_dynamic_reshape():
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    assert run1("DynamicReshape", x, np.array([0, -1], np.int64)).shape == (2, 12)  # 0 copies the dim
    assert run1("DynamicReshape", x, np.array([4, 0, 2], np.int32)).shape == (4, 3, 2)
    assert run1("DynamicReshape", x, np.array([-1], np.int64)).tolist() == list(range(24))
    empty = np.zeros((0, 3), np.float32)
    assert run1("DynamicReshape", empty, np.array([3, 0], np.int64), allowzero=1).shape == (3, 0)
    with pytest.raises(ExecutionError):
        run1("DynamicReshape", x, np.array([5, -1], np.int64))


def test_squeeze_unsqueeze():
    x = np.zeros((1, 3, 1, 2), np.float32)
    assert run1("Squeeze", x).shape == (3, 2)
    assert run1("Squeeze", x, np.array([-2], np.int64)).shape == (1, 3, 2)
    with pytest.raises(ExecutionError, match="not 1"):
        run1("Squeeze", x, np.array([1], np.int64))
    assert run1("Unsqueeze", np.zeros((3, 2)), np.array([0, 3], np.int64)).shape == (1, 3, 2, 1)
    assert run1("Unsqueeze", np.zeros((3, 2)), np.array([-1], np.int32)).shape == (3, 2, 1)


def test_concatenate_and_general_split():
    a, b, c = (RNG.standard_normal((2, n, 3)).astype(np.float32) for n in (1, 2, 3))
    out = run1("Concatenate", a, b, c, dimension=-2)
    assert out.shape == (2, 6, 3)
    assert out[:, 0].tolist() == a[:, 0].tolist() and out[:, 1:3].tolist() == b.tolist()
    assert out[:, 3:].tolist() == c.tolist()
    pieces = run("GeneralSplit", out, np.array([1, 2, 3], np.int64), outputs=3, axis=1)
    assert [p.tolist() for p in pieces] == [a.tolist(), b.tolist(), c.tolist()]
    with pytest.raises(ExecutionError, match="add up"):
        run("GeneralSplit", out, np.array([1, 2], np.int64), outputs=2, axis=1)


@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.data())
@FAST
def test_slice(shape, data):
    x = RNG.standard_normal(shape).astype(np.float32)
    starts, limits, strides = [], [], []
    for n in shape:
        s = data.draw(st.integers(0, n))
        starts.append(s)
        limits.append(data.draw(st.integers(s, n)))
        strides.append(data.draw(st.integers(1, 3)))
    out = run1("Slice", x, start_indices=starts, limit_indices=limits, strides=strides)
    ranges = [list(range(s, e, t)) for s, e, t in zip(starts, limits, strides)]
    assert out.shape == tuple(len(r) for r in ranges)
    for index in np.ndindex(*out.shape):
        assert out[index] == x[tuple(r[i] for r, i in zip(ranges, index))]
    dim = data.draw(st.integers(0, len(shape) - 1))
    out = run1("SliceInDim", x, start_index=starts[dim], limit_index=limits[dim], stride=strides[dim], dim=dim)
    assert out.shape == tuple(len(ranges[dim]) if d == dim else n for d, n in enumerate(shape))
    with pytest.raises(ExecutionError):
        run1("Slice", x, start_indices=[0] * len(shape), limit_indices=[n + 1 for n in shape], strides=[1] * len(shape))


def test_dynamic_slice_clamps_like_xla():
    x = np.arange(30, dtype=np.int32).reshape(5, 6)
    for starts in ([1, 2], [4, 5], [-3, 1], [0, 100]):
        out = run1("DynamicSlice", x, np.array(starts, np.int64), slice_sizes=[2, 3])
        s0, s1 = min(max(starts[0], 0), 5 - 2), min(max(starts[1], 0), 6 - 3)
        assert out.tolist() == [[x[s0 + i, s1 + j] for j in range(3)] for i in range(2)]


def test_dynamic_update_slice_clamps_like_xla():
    x = np.zeros((4, 5), np.float32)
    update = np.ones((2, 2), np.float32) * 7
    for starts in ([1, 1], [3, 4], [-1, 0]):
        out = run1("DynamicUpdateSlice", x, update, np.array(starts, np.int32))
        s0, s1 = min(max(starts[0], 0), 2), min(max(starts[1], 0), 3)
        expected = [[7.0 if s0 <= i < s0 + 2 and s1 <= j < s1 + 2 else 0.0 for j in range(5)] for i in range(4)]
        assert out.tolist() == expected
    assert x.sum() == 0  # the input is not modified


def test_real_dynamic_slice():
    x = np.arange(40, dtype=np.float32).reshape(5, 8)
    out = run1("RealDynamicSlice", x, np.array([1, 0]), np.array([4, 8]), np.array([2, 3]))
    assert out.tolist() == [[x[i, j] for j in range(0, 8, 3)] for i in range(1, 4, 2)]
    out = run1("RealDynamicSlice", x, np.array([2]), np.array([7]), np.array([2]), np.array([-1]))
    assert out.tolist() == [[x[i, j] for j in range(2, 7, 2)] for i in range(5)]
    with pytest.raises(ExecutionError, match="positive"):
        run1("RealDynamicSlice", x, np.array([0, 0]), np.array([5, 8]), np.array([1, 0]))


def _xla_pad_reference(x, value, low, high, interior):
    """Interior padding first, then edge padding; negative edges crop (XLA Pad)."""
    shape = [lo + hi + n + max(n - 1, 0) * i for n, lo, hi, i in zip(x.shape, low, high, interior)]
    out = np.full(shape, value, x.dtype)
    for index in np.ndindex(*x.shape):
        target = tuple(lo + k * (i + 1) for k, lo, i in zip(index, low, interior))
        if all(0 <= t < n for t, n in zip(target, shape)):
            out[target] = x[index]
    return out


@pytest.mark.parametrize(
    "low, high, interior",
    [
        ([1, 0], [2, 3], [0, 0]),
        ([0, 2], [1, 0], [1, 2]),
        ([-1, 2], [1, -2], [0, 1]),
        ([2, -3], [-2, 1], [2, 0]),
    ],
)
def test_pad_value(low, high, interior):
    x = RNG.integers(1, 9, (3, 4)).astype(np.float32)
    out = run1("Pad", x, np.float32(-1), edge_padding_low=low, edge_padding_high=high, interior_padding=interior)
    np.testing.assert_array_equal(out, _xla_pad_reference(x, -1, low, high, interior))


def test_pad_modes():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    # Along one axis: REFLECT mirrors without the edge, SYMMETRIC with it, EDGE repeats it.
    expected = {"PAD_EDGE": [1, 1, 1, 2, 3, 3], "PAD_REFLECT": [3, 2, 1, 2, 3, 2], "PAD_SYMMETRIC": [2, 1, 1, 2, 3, 3]}
    for mode, line in expected.items():
        out = run1(
            "Pad", x, np.int32(0), mode=mode, edge_padding_low=[0, 2], edge_padding_high=[0, 1], interior_padding=[0, 0]
        )
        assert out[0].tolist() == line and out[1].tolist() == [v + 3 for v in line], mode
    # pads = [x1_begin, x2_begin, x1_end, x2_end]
    out = run1("DynamicPad", x, np.array([1, 0, 0, 2], np.int64), np.int32(9))
    assert out.tolist() == [[9, 9, 9, 9, 9], [1, 2, 3, 9, 9], [4, 5, 6, 9, 9]]
    out = run1("DynamicPad", x, np.array([1, 1, 0, -1], np.int32), np.int32(0), mode="PAD_EDGE")
    assert out.tolist() == [[1, 1, 2], [1, 1, 2], [4, 4, 5]]


def test_shape_size_nonzero():
    x = np.zeros((2, 3, 4, 5), np.float16)
    assert run1("Shape", x).tolist() == [2, 3, 4, 5]
    assert run1("Shape", x, start=1, end=-1).tolist() == [3, 4]
    assert run1("Shape", x, start=-2).tolist() == [4, 5]
    assert run1("Shape", x).dtype == np.int64
    size = run1("Size", x)
    assert size.dtype == np.int64 and size.shape == () and int(size) == 120
    y = np.array([[0, 3, 0], [5, 0, 0]], np.int32)
    out = run1("NonZero", y)
    assert out.dtype == np.int64
    assert out.tolist() == [[i, j] for i in range(2) for j in range(3) if y[i, j]]


def test_tile_trilu_reverse_sequence():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = run1("Tile", x, np.array([2, 3], np.int64))
    assert out.tolist() == [[x[i % 2, j % 3] for j in range(9)] for i in range(4)]
    m = RNG.integers(1, 9, (2, 4, 5)).astype(np.float32)
    for upper in (True, False):
        for k in (-2, 0, 1, 4):
            out = run1("Trilu", m, upper=upper, k=k)
            keep = (lambda i, j: j - i >= k) if upper else (lambda i, j: j - i <= k)  # noqa: B023 (used at once)
            expected = [[[m[b, i, j] if keep(i, j) else 0 for j in range(5)] for i in range(4)] for b in range(2)]
            assert out.tolist() == expected, (upper, k)
    seq = np.arange(12, dtype=np.float32).reshape(4, 3)  # time_axis 0, batch_axis 1
    lens = np.array([4, 1, 2], np.int64)
    out = run1("ReverseSequence", seq, lens)
    expected = [[seq[lens[b] - 1 - t, b] if t < lens[b] else seq[t, b] for b in range(3)] for t in range(4)]
    assert out.tolist() == expected
    out = run1("ReverseSequence", seq.T.copy(), lens, batch_axis=0, time_axis=1)
    assert out.tolist() == np.array(expected).T.tolist()


def _space_to_depth_nchw(x, b):
    """ONNX SpaceToDepth: y[n, (bh*b + bw)*C + c, h, w] = x[n, c, h*b + bh, w*b + bw]."""
    n, c, h, w = x.shape
    y = np.empty((n, c * b * b, h // b, w // b), x.dtype)
    for i, ch, hh, ww, bh, bw in np.ndindex(n, c, h // b, w // b, b, b):
        y[i, (bh * b + bw) * c + ch, hh, ww] = x[i, ch, hh * b + bh, ww * b + bw]
    return y


def test_space_to_depth_and_back():
    x = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)
    expected = _space_to_depth_nchw(x, 2)
    out = run1("SpaceToDepth", x, space_dims=[2, 3], depth_dim=1, blocksize=2)
    np.testing.assert_array_equal(out, expected)
    # NHWC layout: the same values with the channel dim last.
    nhwc = run1("SpaceToDepth", x.transpose(0, 2, 3, 1).copy(), space_dims=[1, 2], depth_dim=3, blocksize=2)
    np.testing.assert_array_equal(nhwc, expected.transpose(0, 2, 3, 1))
    back = run1("DepthToSpace", expected, space_dims=[2, 3], depth_dim=1, blocksize=2, mode="DCR")
    np.testing.assert_array_equal(back, x)
    # CRD: y[n, c, h*b + bh, w*b + bw] = x[n, c*b*b + bh*b + bw, h, w] (ONNX DepthToSpace).
    d = RNG.standard_normal((1, 8, 2, 3)).astype(np.float32)
    out = run1("DepthToSpace", d, space_dims=[2, 3], depth_dim=1, blocksize=2, mode="CRD")
    for c, h, w, bh, bw in np.ndindex(2, 2, 3, 2, 2):
        assert out[0, c, h * 2 + bh, w * 2 + bw] == d[0, c * 4 + bh * 2 + bw, h, w]


def test_set_dimension_size():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = run1("SetDimensionSize", x, np.int32(2), dimension=1)
    assert out.tolist() == [row[:2] for row in x.tolist()]
    with pytest.raises(ExecutionError, match="bound"):
        run1("SetDimensionSize", x, np.int32(5), dimension=0)


# ---------------------------------------------------------------- reductions


def _fold(values, init, combine):
    acc = init
    for v in values:
        acc = combine(acc, v)
    return acc


FOLDS = {
    "ADD": lambda a, v: a + v,
    "SUB": lambda a, v: a - v,
    "MUL": lambda a, v: a * v,
    "DIV": lambda a, v: a / v,
    "MIN": min,
    "MAX": max,
    "L2": lambda a, v: math.sqrt(a * a + v * v),
    "COUNT": lambda a, v: a + 1,
    "UPDATE": lambda a, v: v,
}


@pytest.mark.parametrize("computation", sorted(FOLDS))
@pytest.mark.parametrize("dims", [[1], [0, 2], [], [0, 1, 2]])
def test_reduce_float(computation, dims):
    x = RNG.uniform(0.5, 2, (2, 3, 4))
    init = 1.5
    out = run1("Reduce", x, np.float64(init), dimensions=dims, computation=computation)
    kept = [d for d in range(3) if d not in dims]
    expected = np.empty([x.shape[d] for d in kept])
    for index in np.ndindex(*expected.shape):
        # The reduced elements in row-major order.
        group = [x[full] for full in np.ndindex(*x.shape) if all(full[d] == i for d, i in zip(kept, index))]
        expected[index] = _fold(group, init, FOLDS[computation])
    np.testing.assert_allclose(out, expected, rtol=1e-12)


@pytest.mark.parametrize(
    "computation, combine",
    [
        ("ADD", lambda a, v: a + v),
        ("MUL", lambda a, v: a * v),
        ("AND", lambda a, v: a & v),
        ("OR", lambda a, v: a | v),
        ("XOR", lambda a, v: a ^ v),
        ("MAX", max),
        ("MIN", min),
    ],
)
def test_reduce_int8_wraps(computation, combine):
    x = RNG.integers(-128, 127, (3, 5), dtype=np.int8, endpoint=True)
    init = np.int8(3)
    out = run1("Reduce", x, init, dimensions=[1], computation=computation)
    expected = [((_fold(row, 3, combine) + 128) % 256) - 128 for row in x.tolist()]
    assert out.dtype == np.int8 and out.tolist() == expected


def test_reduce_bool_and_float16():
    b = np.array([[True, True], [True, False]])
    assert run1("Reduce", b, np.bool_(True), dimensions=[1], computation="AND").tolist() == [True, False]
    assert run1("Reduce", b, np.bool_(False), dimensions=[0], computation="OR").tolist() == [True, True]
    h = np.full((4, 1000), 0.1, np.float16)
    out = run1("Reduce", h, np.float16(0), dimensions=[1], computation="ADD")
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), 1000 * float(np.float16(0.1)), rtol=1e-3)


def test_reduce_several_inputs_carries_the_argmax():
    values = np.array([[1.0, 5.0, 5.0, 2.0], [-1.0, -3.0, -0.5, -2.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
    index = np.broadcast_to(np.arange(4, dtype=np.int32), (3, 4)).copy()
    best, where = run(
        "Reduce", values, index, np.float32(-np.inf), np.int32(-1), outputs=2, dimensions=[1], computation="MAX"
    )
    assert best.tolist() == [max(row) for row in values.tolist()]
    assert where.tolist() == [row.index(max(row)) for row in values.tolist()]  # the first maximum
    # The init wins when the data never beats it.
    best, where = run(
        "Reduce", values, index, np.float32(0.5), np.int32(-1), outputs=2, dimensions=[1], computation="ARGMAX"
    )
    assert best.tolist() == [5.0, 0.5, 0.5] and where.tolist() == [1, -1, -1]
    low, where = run(
        "Reduce", values, index, np.float32(np.inf), np.int32(-1), outputs=2, dimensions=[1], computation="MIN"
    )
    assert where.tolist() == [row.index(min(row)) for row in values.tolist()]
    with pytest.raises(ExecutionError, match="MIN/MAX"):
        run("Reduce", values, index, np.float32(0), np.int32(0), outputs=2, dimensions=[1], computation="ADD")


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_max_min(op):
    x = RNG.integers(0, 4, (3, 4, 5)).astype(np.float32)  # many ties
    pick = max if op == "ArgMax" else min
    for axis in range(3):
        for keepdims in (True, False):
            for last in (False, True):
                out = run1(op, x, axis=axis, keepdims=keepdims, select_last_index=last)
                moved = np.moveaxis(x, axis, -1)
                expected = np.empty(moved.shape[:-1], np.int64)
                for index in np.ndindex(*expected.shape):
                    row = moved[index].tolist()
                    target = pick(row)
                    hits = [i for i, v in enumerate(row) if v == target]
                    expected[index] = hits[-1] if last else hits[0]
                if keepdims:
                    expected = np.expand_dims(expected, axis)
                assert out.dtype == np.int64
                np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------- sorting


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dimension", [0, 1, -1])
def test_sort_several_operands(descending, dimension):
    keys = RNG.integers(0, 4, (4, 6)).astype(np.float32)  # ties: the sort is stable
    payload = np.arange(24, dtype=np.int32).reshape(4, 6)
    sorted_keys, sorted_payload = run(
        "Sort", keys, payload, outputs=2, dimension=dimension, descending=descending, is_stable=True
    )
    axis = dimension % 2
    mk, mp = np.moveaxis(keys, axis, -1), np.moveaxis(payload, axis, -1)
    for index in np.ndindex(*mk.shape[:-1]):
        pairs = sorted(zip(mk[index].tolist(), mp[index].tolist()), key=lambda p: -p[0] if descending else p[0])
        assert np.moveaxis(sorted_keys, axis, -1)[index].tolist() == [p[0] for p in pairs]
        assert np.moveaxis(sorted_payload, axis, -1)[index].tolist() == [p[1] for p in pairs]


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("axis", [0, -1])
def test_topk(largest, axis):
    x = RNG.integers(0, 5, (5, 7)).astype(np.float64)
    values, indices = run(
        "Topk",
        x,
        np.array([3], np.int64),
        outputs=2,
        axis=axis,
        largest=largest,
        types=[None, TensorType("int32", None)],
    )
    assert indices.dtype == np.int32
    moved = np.moveaxis(x, axis, -1)
    for index in np.ndindex(*moved.shape[:-1]):
        row = moved[index].tolist()
        order = sorted(range(len(row)), key=lambda i: (-row[i] if largest else row[i], i))[:3]
        assert np.moveaxis(indices, axis, -1)[index].tolist() == order
        assert np.moveaxis(values, axis, -1)[index].tolist() == [row[i] for i in order]


def test_partial_reduce_is_an_exact_top_k():
    graph = Graph("main")
    x = RNG.standard_normal((3, 37)).astype(np.float32)
    x[0, 5] = x[0, 9] = 10.0  # a tie: the lower index first
    idx = np.broadcast_to(np.arange(37, dtype=np.int32), (3, 37)).copy()
    vx, vi = graph.add_input("x", tensor_type(x)), graph.add_input("i", tensor_type(idx))
    ix, ii = graph.const(np.float32(-np.inf)), graph.const(np.int32(-1))
    f, i32 = scalar(np.float32), scalar(np.int32)
    greater = region(
        "cmp",
        [f, f, i32, i32],
        lambda r, a, b, c, d: hlo_node(r, "Compare", a, b, comparison_direction="GT"),
        parent=graph,
    )
    top, where = hlo_node(
        graph, "PartialReduce", vx, vi, ix, ii, _outputs=2, size=5, comparator=greater, reduction_dim=1
    )
    graph.outputs = [top, where]
    out = opconv.run(Model(graph, "hlo", {"": 1}), {"x": x, "i": idx})
    for r in range(3):
        order = sorted(range(37), key=lambda j: (-x[r, j], j))[:5]
        assert out[where.name][r].tolist() == order
        assert out[top.name][r].tolist() == [x[r, j] for j in order]


# ---------------------------------------------------------------- regions and tuples


def test_while_counting_loop_with_outer_value():
    graph = Graph("main")
    start = graph.add_input("start", TensorType("float32", (2,)))
    limit = graph.const(np.int32(10), "limit")
    step = graph.const(np.float32(1.5), "step")
    i32, f2 = scalar(np.int32), TensorType("float32", (2,))
    cond = region(
        "cond", [i32, f2], lambda r, i, acc: hlo_node(r, "Compare", i, limit, comparison_direction="LT"), parent=graph
    )

    def body_fn(r, i, acc):
        one = r.const(np.int32(1))
        return [hlo_node(r, "Add", i, one), hlo_node(r, "Add", acc, step)]  # step is read from the outer graph

    body = region("body", [i32, f2], body_fn, parent=graph)
    counter = graph.const(np.int32(3), "counter")
    count, acc = hlo_node(graph, "While", counter, start, _outputs=2, cond=cond, body=body)
    graph.outputs = [count, acc]
    out = opconv.run(Model(graph, "hlo", {"": 1}), {"start": np.array([0.0, 1.0], np.float32)})
    i, total = 3, [0.0, 1.0]
    while i < 10:
        i, total = i + 1, [t + 1.5 for t in total]
    assert int(out[count.name]) == i and out[acc.name].tolist() == total


def test_while_carries_a_tuple():
    graph = Graph("main")
    x = graph.add_input("x", TensorType("int64", ()))
    tup_t = TupleType((TensorType("int64", ()), TensorType("int64", ())))
    packed = hlo_node(graph, "Tuple", x, graph.const(np.int64(1)))
    packed.type = tup_t

    def cond_fn(r, t):
        n = hlo_node(r, "GetTupleElement", t, index=0)
        return hlo_node(r, "Compare", n, r.const(np.int64(0)), comparison_direction="GT")

    def body_fn(r, t):
        n, prod = hlo_node(r, "GetTupleElement", t, index=0), hlo_node(r, "GetTupleElement", t, index=1)
        # The dialect has no Mul: n * prod is a MUL Reduce over the pair [n, prod].
        new_prod = hlo_node(
            r,
            "Reduce",
            hlo_node(
                r,
                "Concatenate",
                hlo_node(r, "Broadcast", n, broadcast_sizes=[1]),
                hlo_node(r, "Broadcast", prod, broadcast_sizes=[1]),
                dimension=0,
            ),
            r.const(np.int64(1)),
            dimensions=[0],
            computation="MUL",
        )
        return hlo_node(r, "Tuple", hlo_node(r, "Sub", n, r.const(np.int64(1))), new_prod)

    loop = hlo_node(
        graph, "While", packed, cond=region("c", [tup_t], cond_fn, graph), body=region("b", [tup_t], body_fn, graph)
    )
    result = hlo_node(graph, "GetTupleElement", loop, index=1)
    graph.outputs = [result]
    out = opconv.run(Model(graph, "hlo", {"": 1}), {"x": np.int64(6)})
    assert int(out[result.name]) == math.factorial(6)


@pytest.mark.parametrize("flag", [True, False])
def test_if_runs_one_branch(flag):
    graph = Graph("main")
    pred = graph.add_input("pred", TensorType("bool", ()))
    x = graph.add_input("x", TensorType("float32", (3,)))
    then = region("then", [], lambda r: [hlo_node(r, "Exp", x), hlo_node(r, "Neg", x)], parent=graph)
    other = region("else", [], lambda r: [hlo_node(r, "Abs", x), x], parent=graph)
    a, b = hlo_node(graph, "If", pred, _outputs=2, true_branch=then, false_branch=other)
    graph.outputs = [a, b]
    data = np.array([-1.0, 0.0, 2.0], np.float32)
    out = opconv.run(Model(graph, "hlo", {"": 1}), {"pred": np.bool_(flag), "x": data})
    if flag:
        np.testing.assert_allclose(out[a.name], [math.exp(v) for v in data.tolist()], rtol=1e-6)
        assert out[b.name].tolist() == [-v for v in data.tolist()]
    else:
        assert out[a.name].tolist() == [abs(v) for v in data.tolist()] and out[b.name].tolist() == data.tolist()


def test_map_elementwise_and_per_element_bodies():
    graph = Graph("main")
    a = graph.add_input("a", TensorType("float32", (2, 3)))
    b = graph.add_input("b", TensorType("float32", (2, 3)))
    f = scalar(np.float32)

    def affine(r, u, v):  # max(u, v) - u * 0 + v  ->  max(u, v) + v
        return hlo_node(r, "Add", hlo_node(r, "Max", u, v), v)

    mapped = hlo_node(graph, "Map", a, b, dimensions=[0, 1], computation=region("f", [f, f], affine, graph))

    def branchy(r, u):  # an If on the element: runs element by element
        positive = hlo_node(r, "Compare", u, r.const(np.float32(0)), comparison_direction="GT")
        return hlo_node(
            r,
            "If",
            positive,
            true_branch=region("t", [], lambda q: hlo_node(q, "Sqrt", u), r),
            false_branch=region("e", [], lambda q: hlo_node(q, "Neg", u), r),
        )

    mapped2 = hlo_node(graph, "Map", a, dimensions=[0, 1], computation=region("g", [f], branchy, graph))

    def plus_size(r, u):  # the body sees one element: Size(u) is 1
        count = hlo_node(r, "Convert", hlo_node(r, "Size", u))
        count.type = f
        return hlo_node(r, "Add", u, count)

    mapped3 = hlo_node(graph, "Map", a, dimensions=[0, 1], computation=region("h", [f], plus_size, graph))
    graph.outputs = [mapped, mapped2, mapped3]
    da = np.array([[1.0, -2.0, 4.0], [-0.5, 9.0, 0.0]], np.float32)
    db = np.array([[0.0, 1.0, 5.0], [2.0, -1.0, 0.0]], np.float32)
    out = opconv.run(Model(graph, "hlo", {"": 1}), {"a": da, "b": db})
    assert out[mapped.name].tolist() == [
        [max(u, v) + v for u, v in zip(r, s)] for r, s in zip(da.tolist(), db.tolist())
    ]
    assert out[mapped2.name].tolist() == [[math.sqrt(u) if u > 0 else -u for u in r] for r in da.tolist()]
    assert out[mapped3.name].tolist() == [[u + 1 for u in r] for r in da.tolist()]


def test_tuple_and_get_tuple_element():
    graph = Graph("main")
    x = graph.add_input("x", TensorType("float32", (2,)))
    y = graph.add_input("y", TensorType("int32", (3,)))
    t = hlo_node(graph, "Tuple", x, y)
    t.type = TupleType((x.type, y.type))
    second, first = hlo_node(graph, "GetTupleElement", t, index=1), hlo_node(graph, "GetTupleElement", t, index=0)
    graph.outputs = [second, first]
    out = opconv.run(
        Model(graph, "hlo", {"": 1}), {"x": np.array([1, 2], np.float32), "y": np.array([3, 4, 5], np.int32)}
    )
    assert out[second.name].tolist() == [3, 4, 5] and out[first.name].tolist() == [1.0, 2.0]
    with pytest.raises(ExecutionError, match="tuple operand"):
        run1("GetTupleElement", np.zeros(2), index=0)


def test_custom_call_names_its_target():
    with pytest.raises(ExecutionError, match="my_vendor_kernel"):
        run1("CustomCall", np.zeros(2, np.float32), call_target_name="my_vendor_kernel")
