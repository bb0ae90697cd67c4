"""Element-wise kernels numpy lacks or defines differently from ONNX/OpenVINO/XLA.

Conventions
-----------
Every function takes arrays (or scalars) and returns an array of the input's
dtype, computing narrow floats in float32.  Activation parameters are plain
keyword floats with the ONNX defaults.

* :func:`round_half_even` / :func:`round_half_away`: the two rounding rules
  of ONNX ``Round`` / OpenVINO ``Round`` modes.
* :func:`int_div` divides integers truncating toward zero (C, ONNX ``Div``)
  or flooring (Python, OpenVINO ``Divide`` with ``python_division``);
  :func:`mod` is Python's sign-of-divisor modulo or, with ``fmod``, C's
  sign-of-dividend remainder.  Integer division by zero raises.
* :func:`power` keeps the base's type whatever the exponent's (ONNX ``Pow``):
  exact for integer bases with non-negative integer exponents.
* :func:`bitshift` shifts integers, arithmetically for signed right shifts;
  shifting by a negative amount or by the bit width or more gives the sign
  fill (0, or -1 for a negative number shifted right), not C's undefined
  behaviour.
* :func:`erf` is exact to about 1e-15 in float64 (a series for ``|x| < 3``
  and a continued fraction for ``erfc`` beyond) and within 1 ulp for float32
  and narrower floats (fitted polynomials evaluated in float64).
* :func:`cast` follows ONNX ``Cast``: float8 targets saturate (or not) as
  ``Cast-19`` describes; other integer targets, 4-bit ones included, truncate
  floats toward zero and wrap out-of-range values (two's complement);
  strings are parsed/printed as onnxruntime does (``%.8g``, ``INF``, ``NaN``);
  float8e8m0 (powers of two) rounds up, down or to nearest as ``round_mode``
  says.
* :func:`quantize` / :func:`dequantize` are linear (de)quantization with
  scale and zero point already broadcastable against the data: round half
  to even and clamp for integer targets, a saturating cast for float ones.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

from ..errors import ExecutionError
from ._common import computes_natively, downcast, is_float_dtype, is_int_dtype, upcast


def _float_op(function):
    """Run ``function`` on the compute dtype of its first argument; cast back."""

    @functools.wraps(function)
    def wrapper(x, *args, **kwargs):
        x = np.asarray(x)
        return downcast(function(upcast(x), *args, **kwargs), x.dtype)

    return wrapper


# ---------------------------------------------------------------- rounding & integer arithmetic


@_float_op
def round_half_even(x):
    """Round to nearest, ties to even (ONNX ``Round``); integers pass through."""
    return np.round(x)


@_float_op
def round_half_away(x):
    """Round to nearest, ties away from zero (OpenVINO ``half_away_from_zero``)."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5) if is_float_dtype(x.dtype) else x


def _check_divisor(b):
    if np.any(np.asarray(b) == 0):
        raise ExecutionError("integer division by zero")


_INT_DIVISIONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "trunc": lambda a, b: np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b)),
    "floor": np.floor_divide,
}


def int_div(a, b, rounding: str = "trunc"):
    """``a / b``; for integers the quotient is truncated (``"trunc"``) or floored."""
    a, b = np.asarray(a), np.asarray(b)
    if not is_int_dtype(a.dtype):
        if b.size == 1 and b.dtype.kind == "f" and math.isfinite(divisor := b.item()) and divisor:
            return downcast(upcast(a) / upcast(b), a.dtype)  # cannot divide by zero nor make inf / inf
        with np.errstate(divide="ignore", invalid="ignore"):
            return downcast(upcast(a) / upcast(b), a.dtype)
    _check_divisor(b)
    dtype = np.result_type(a, b)
    # Work in int64 so abs(INT_MIN) and sign products cannot overflow.
    return _INT_DIVISIONS[rounding](a.astype(np.int64), b.astype(np.int64)).astype(dtype)


def mod(a, b, fmod: bool = False):
    """Remainder: sign of the divisor (Python ``%``) or, with ``fmod``, of the dividend."""
    a, b = np.asarray(a), np.asarray(b)
    if is_int_dtype(a.dtype):
        _check_divisor(b)
    function = np.fmod if fmod else np.mod
    with np.errstate(divide="ignore", invalid="ignore"):
        return downcast(function(upcast(a), upcast(b)), a.dtype)


_FLOAT64_BLOCK = 1 << 16  # values per block: float64 temporaries of 512 KiB, in cache, whatever the input


def _in_float64_blocks(function, x):
    """``function`` (an element-wise map of float64 arrays) of narrower floats ``x``, block by block, in x's dtype.

    Blocks bound the float64 temporaries (a run's peak memory stays what a float32 kernel needs)
    and keep them in cache.
    """
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.shape, x.dtype)
    for start in range(0, flat.size, _FLOAT64_BLOCK):
        block = flat[start : start + _FLOAT64_BLOCK]
        out[start : start + _FLOAT64_BLOCK] = function(block.astype(np.float64))
    return out.reshape(x.shape)


_SMALL_INTEGER_POWERS = {
    2: lambda x: x * x,
    3: lambda x: x * x * x,
    4: lambda x: np.square(x * x),
    -1: lambda x: 1 / x,
    -2: lambda x: 1 / (x * x),
}


def power(x, y):
    """``x ** y`` in ``x``'s type, whatever ``y``'s type.

    Float bases raise to the exponent converted to the base's compute type.
    Integer bases with non-negative integer exponents are exact (int64, then
    wrapped to the base's type); otherwise the power is taken in float64 and
    truncated toward zero, as a C cast would.
    """
    x, y = np.asarray(x), np.asarray(y)
    if y.size > 1 and not any(y.strides) and y.shape == x.shape:
        # one exponent broadcast to x's shape (HLO's BroadcastInDim of a scalar)
        y = y[(slice(0, 1),) * y.ndim].reshape(1)
    if is_float_dtype(x.dtype) and x.dtype != np.float64 and y.size == 1 and y.ndim <= x.ndim:
        n = y.reshape(()).item()
        if n == 2 and x.dtype == np.float32:  # the exact square rounded once, as from float64: the same bits
            with np.errstate(over="ignore", under="ignore"):
                return np.multiply(x, x)
        if n in _SMALL_INTEGER_POWERS:
            # numpy's float32 pow runs ~100x slower than products (x**3 of Gelu's tanh form); float64 products
            # of float32 numbers are within 2**-48 of the power, so the rounded result is the correctly
            # rounded power but for rare double-rounding ties.
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                return _in_float64_blocks(_SMALL_INTEGER_POWERS[n], x)
    if is_float_dtype(x.dtype):
        xc = upcast(x)
        return downcast(np.power(xc, upcast(y).astype(xc.dtype, copy=False)), x.dtype)
    if is_int_dtype(y.dtype) and not np.any(y < 0):
        return np.power(x.astype(np.int64), y.astype(np.int64)).astype(x.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return cast(np.power(x.astype(np.float64), upcast(y).astype(np.float64)), x.dtype)


def bitshift(x, y, direction: str):
    """``x << y`` (``direction="left"``) or ``x >> y``; ``y`` broadcasts against ``x``.

    Right shifts of signed integers are arithmetic (they copy the sign bit).
    A shift by a negative amount, or by the bit width or more, leaves only the
    sign fill: -1 for a right shift of a negative ``x``, 0 otherwise (not the C
    undefined behaviour).
    """
    x, y = np.asarray(x), np.asarray(y)
    direction = direction.lower()
    if direction not in ("left", "right"):
        raise ExecutionError(f"bit shift direction must be 'left' or 'right', got {direction!r}")
    bits = x.dtype.itemsize * 8
    out_of_range = (y < 0) | (y >= bits)
    amount = np.where(out_of_range, 0, y).astype(x.dtype)
    if direction == "left":
        shifted, fill = np.left_shift(x, amount), 0
    else:
        shifted = np.right_shift(x, amount)
        fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
    return np.where(out_of_range, fill, shifted).astype(x.dtype)


def clip(x, low=None, high=None, out=None):
    """Clamp into ``[low, high]``; ``None`` leaves that side open; written into ``out`` when given.

    ``max(x, low)`` is applied before ``min(., high)``, so ``low > high``
    gives ``high`` everywhere, as ONNX ``Clip`` specifies.
    """
    x = np.asarray(x)
    if low is not None and high is not None and np.size(low) == 1 and np.size(high) == 1 and computes_natively(x.dtype):
        # numpy's clip with scalar bounds is max-then-min (NaN kept) and ~5x faster than the two
        # broadcasting ufuncs (ReLU6 of every MobileNet activation).
        with np.errstate(over="ignore"):
            low, high = np.asarray(low).astype(x.dtype).reshape(()), np.asarray(high).astype(x.dtype).reshape(())
        return np.clip(x, low, high, out=out)
    if out is not None:
        out[...] = clip(x, low, high)
        return out
    y = x
    with np.errstate(over="ignore"):  # a bound beyond the type's range (FLT_MAX for float16) becomes +-inf
        if low is not None:
            y = np.maximum(y, np.asarray(low).astype(x.dtype))
        if high is not None:
            y = np.minimum(y, np.asarray(high).astype(x.dtype))
    return y.astype(x.dtype, copy=False)


# ---------------------------------------------------------------- erf

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SERIES_LIMIT = 3.0  # series below, continued fraction above
_SERIES_TERMS = 60  # enough for relative 1e-16 at |x| = 3
_FRACTION_DEPTH = 60  # continued-fraction levels; ample for |x| >= 3


def _erf_series(x):
    """erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)).

    All terms share the sign of x, so there is no cancellation.
    """
    two_x2 = 2.0 * x * x
    term = x.copy()
    total = x.copy()
    for n in range(1, _SERIES_TERMS):
        term = term * two_x2 / (2 * n + 1)
        total = total + term
    return _TWO_OVER_SQRT_PI * np.exp(-x * x) * total


def _erfc_fraction(x):
    """erfc(x) for x > 0 from its continued fraction, evaluated bottom-up:
    erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))."""
    denominator = x.copy()
    for k in range(_FRACTION_DEPTH, 0, -1):
        denominator = x + (k / 2.0) / denominator
    return np.exp(-x * x) / (math.sqrt(math.pi) * denominator)


# Fast erf for float32 and narrower inputs, evaluated in float64 (a float32 product of two float32
# numbers is exact there, and a relative error below 2**-25 keeps the rounded float32 within 1 ulp);
# the coefficients come from scripts/fit_erf.py (relative error 4.4e-11 against math.erf).
_ERF_SMALL_LIMIT = 1.0  # erf(x) = x * P(x**2) below, 1 - exp(-x**2) * Q(1 / (1 + |x|)) above
_ERF_TAIL_LIMIT = 3.92  # erfc(3.92) < 2**-25: beyond it erf is +-1 in float32
_ERF_SMALL = (
    -9.689738194508606e-06,
    0.00011274736859702177,
    -0.0008485438757358175,
    0.0052211386841029914,
    -0.026865475509929487,
    0.11283783443769743,
    -0.37612638552814404,
    1.128379167080099,
)
_ERFC_TAIL = (
    1.032509160709535,
    -3.4926714975151905,
    4.793449745760851,
    -2.9933918833912423,
    0.36564716380353174,
    0.1641722321018161,
    0.5777477213508769,
    0.5632898913062525,
    2.6324759469065206e-05,
)


def _horner(coefficients, variable):
    """The polynomial (highest power first) at ``variable``, in one reused buffer."""
    result = variable * coefficients[0]
    result += coefficients[1]
    for c in coefficients[2:]:
        result *= variable
        result += c
    return result


def _erf_fast(x):
    """erf of a float64 array holding float32-or-narrower values, to ~1e-10 relative."""
    square = x * x
    with np.errstate(over="ignore", invalid="ignore"):  # the small-|x| polynomial of large |x| is discarded
        result = _horner(_ERF_SMALL, square)
        result *= x
    magnitude = np.abs(x, out=square).reshape(-1)  # the square's buffer, done with
    tail = np.flatnonzero(magnitude >= _ERF_SMALL_LIMIT)  # NaN stays on the polynomial, which keeps it NaN
    if tail.size:
        a = magnitude[tail]
        complement = _horner(_ERFC_TAIL, 1 / (1 + np.minimum(a, _ERF_TAIL_LIMIT)))
        complement *= np.exp(-a * a)
        result.reshape(-1)[tail] = np.copysign(1 - complement, x.reshape(-1)[tail])
    return result


def erf(x):
    """The error function, vectorized.

    float64 (and integer) inputs go through the series / continued fraction, exact to ~1e-15; float32
    and narrower floats through two fitted polynomials evaluated in float64, within 1 ulp of the true
    value after rounding (and ~100x faster).
    """
    x = np.asarray(x)
    if is_float_dtype(x.dtype) and x.dtype != np.float64:
        with np.errstate(invalid="ignore"):  # ml_dtypes flags NaN cast to bfloat16 and friends
            return _in_float64_blocks(_erf_fast, x)
    xd = x.astype(np.float64)
    magnitude = np.abs(xd)
    small = magnitude < _SERIES_LIMIT
    result = np.empty_like(xd)
    result[small] = _erf_series(xd[small])
    large = ~small & ~np.isnan(xd)
    result[large] = np.sign(xd[large]) * (1.0 - _erfc_fraction(magnitude[large]))
    result[np.isnan(xd)] = np.nan
    return result.astype(x.dtype if is_float_dtype(x.dtype) else np.float64)


# ---------------------------------------------------------------- activations


@_float_op
def sigmoid(x):
    # exp of a non-positive argument only, so nothing overflows.
    e = np.exp(-np.abs(x))
    total = 1 + e  # shared by both branches
    return np.where(x >= 0, 1 / total, e / total)


@_float_op
def hard_sigmoid(x, alpha=0.2, beta=0.5):
    return np.clip(alpha * x + beta, 0, 1)


@_float_op
def hard_swish(x):
    return x * np.clip(x / 6 + 0.5, 0, 1)


@_float_op
def softplus(x):
    return np.logaddexp(0, x)


@_float_op
def softsign(x):
    return x / (1 + np.abs(x))


@_float_op
def mish(x):
    return x * np.tanh(np.logaddexp(0, x))


@_float_op
def swish(x, alpha=1.0):
    """``x * sigmoid(alpha * x)`` (ONNX ``Swish``, OpenVINO ``Swish`` with ``beta``)."""
    return x * sigmoid(alpha * x)


def relu(x, out=None):
    """``max(x, 0)``, written into ``out`` when given (``out`` may be ``x`` itself)."""
    x = np.asarray(x)
    if not computes_natively(x.dtype):  # narrow floats: computed in float32
        y = downcast(np.maximum(upcast(x), 0), x.dtype)
        if out is None:
            return y
        out[...] = y
        return out
    if out is None:
        out = np.empty_like(x)
    zeros = _zero_row(x.dtype)
    if x.flags.c_contiguous and out.flags.c_contiguous and x.shape == out.shape:
        # numpy's maximum against a broadcast scalar runs ~4x slower than against an array of zeros,
        # so the data goes through in rows as long as a shared row of zeros (same results, bit for bit).
        flat, flat_out = x.reshape(-1), out.reshape(-1)
        full = x.size - x.size % zeros.size
        np.maximum(flat[:full].reshape(-1, zeros.size), zeros, out=flat_out[:full].reshape(-1, zeros.size))
        np.maximum(flat[full:], zeros[: x.size - full], out=flat_out[full:])
    else:
        np.maximum(x, zeros[: x.shape[-1]] if 0 < x.ndim and x.shape[-1] <= zeros.size else 0, out=out)
    return out


@functools.cache
def _zero_row(dtype: np.dtype) -> np.ndarray:
    # Not a power of two: rows of 4096 values ran 4-7x slower inside a session (on an AMD EPYC), where the
    # data rows and the zero row presumably fell on the same cache sets; 1000 values is long enough
    # for numpy's vector loop.
    zeros = np.zeros(1000, dtype)
    zeros.flags.writeable = False
    return zeros


@_float_op
def leaky_relu(x, alpha=0.01):
    return np.where(x >= 0, x, alpha * x)


@_float_op
def thresholded_relu(x, alpha=1.0):
    return np.where(x > alpha, x, 0)


@_float_op
def elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


@_float_op
def celu(x, alpha=1.0):
    return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


@_float_op
def selu(x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


@_float_op
def shrink(x, lambd=0.5, bias=0.0):
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


@_float_op
def scaled_tanh(x, alpha=1.0, beta=1.0):
    return alpha * np.tanh(beta * x)


@_float_op
def affine(x, alpha=1.0, beta=0.0):
    return alpha * x + beta


_GELU_TANH_SCALE = math.sqrt(2 / math.pi)


def gelu(x, approximate: str = "none"):
    """``x * Phi(x)``; ``approximate="tanh"`` uses the tanh formula."""
    x = np.asarray(x)
    xc = upcast(x)
    if approximate == "tanh":
        # the cube as ``power`` takes it (float32's own pow is ~100x slower than products)
        y = 0.5 * xc * (1 + np.tanh(_GELU_TANH_SCALE * (xc + 0.044715 * power(xc, np.asarray(3.0, xc.dtype)))))
    elif approximate == "none":
        y = 0.5 * xc * (1 + erf(xc / math.sqrt(2)))
    else:
        raise ExecutionError(f"unknown gelu approximation {approximate!r}")
    return downcast(y, x.dtype)


# ---------------------------------------------------------------- cast

_SATURATING_FLOAT8 = {
    np.dtype(t): float(ml_dtypes.finfo(t).max)
    for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)
}


def _is_string(dtype) -> bool:
    return np.dtype(dtype).kind in "OUS"


def _format_number(value) -> str:
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "INF" if value > 0 else "-INF"
        return f"{value:.8g}"
    return str(int(value))


def _to_strings(x: np.ndarray) -> np.ndarray:
    values = x.astype(np.float64) if is_float_dtype(x.dtype) else x
    out = np.empty(x.shape, dtype=object)
    out.reshape(-1)[:] = [_format_number(v) for v in values.reshape(-1).tolist()]
    return out


def _parse_number(text: str, integer: bool):
    text = str(text).strip()
    if integer:
        try:
            return int(text)
        except ValueError:
            return int(float(text))  # "2.7" -> 2, like C's strtol on the prefix
    return float(text)  # accepts INF, +INF, -inf, NaN in any case


def _from_strings(x: np.ndarray, to: np.dtype) -> np.ndarray:
    integer = is_int_dtype(to)
    values = [_parse_number(v, integer) for v in x.reshape(-1).tolist()]
    if to == np.bool_:
        return (np.array(values, dtype=np.float64) != 0).reshape(x.shape)
    parsed = np.array(values, dtype=np.int64 if integer else np.float64).reshape(x.shape)
    return parsed.astype(to)


_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
_E8M0_NAN = 0xFF  # the one non-number code; codes 0..254 are 2**(code - 127)
_E8M0_ROUNDING = {
    # mantissa fraction f in [1, 2) of x = f * 2**k -> whether x rounds to 2**(k + 1) rather than 2**k
    "up": lambda f: f > 1,
    "down": lambda f: np.zeros(f.shape, bool),
    "nearest": lambda f: f >= 1.5,  # ties (f = 1.5) round up
}


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """Powers of two: round ``|x|`` to ``2**k`` by ``round_mode``; out of range saturates or is NaN."""
    try:
        rounds_up = _E8M0_ROUNDING[round_mode]
    except KeyError:
        raise ExecutionError(f"unknown round_mode {round_mode!r}; expected one of {sorted(_E8M0_ROUNDING)}") from None
    magnitude = np.abs(x.astype(np.float64))
    with np.errstate(invalid="ignore"):
        mantissa, exponent = np.frexp(magnitude)  # magnitude = mantissa * 2**exponent, mantissa in [0.5, 1)
    code = exponent - 1 + rounds_up(2 * mantissa).astype(np.int64) + 127
    finite_nonzero = np.isfinite(magnitude) & (magnitude > 0)
    if saturate:
        # 0 and values below the smallest power go to 2**-127, infinities and large values to 2**127.
        code = np.where(finite_nonzero, np.clip(code, 0, 254), np.where(magnitude == 0, 0, 254))
    else:
        code = np.where(finite_nonzero & (code >= 0) & (code <= 254), code, _E8M0_NAN)
    code = np.where(np.isnan(magnitude), _E8M0_NAN, code)
    return code.astype(np.uint8).view(_E8M0)


def cast(x, to, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """Convert ``x`` to dtype ``to`` (numpy/ml_dtypes dtype; ``object``/``str`` = string).

    ``saturate`` applies to the float8 targets; ``round_mode`` (``up``,
    ``down`` or ``nearest``) to float8e8m0, whose values are powers of two.
    """
    x = np.asarray(x)
    string_target = _is_string(to)
    to = np.dtype(object) if string_target else np.dtype(to)
    if string_target:
        return _to_strings(x)
    if _is_string(x.dtype):
        return _from_strings(x, to)
    if x.dtype == to:  # e.g. LLaMA's normalizations "cast" float32 to float32: nothing to copy
        return x
    if to == _E8M0 and x.dtype != _E8M0:
        return _to_e8m0(x, saturate, round_mode)
    if to in _SATURATING_FLOAT8 and saturate:
        limit = _SATURATING_FLOAT8[to]
        x = np.clip(x.astype(np.float32), -limit, limit)  # NaN stays NaN; +-inf -> +-max
    if (
        to.kind == "f"
        and to.itemsize >= 4
        and (x.dtype.kind in "biu" or x.dtype.kind == "f" and x.itemsize <= to.itemsize)
    ):
        return x.astype(to)  # nothing can overflow (and np.errstate costs more than a small cast)
    with np.errstate(invalid="ignore", over="ignore"):
        if is_int_dtype(to) and not is_int_dtype(x.dtype) and x.dtype != np.bool_:
            # C semantics: truncate toward zero, then keep the low bits.
            x = np.trunc(x.astype(np.float64))
            x = np.where(np.isfinite(x), x, 0).astype(np.int64)
        return x.astype(to)


# ---------------------------------------------------------------- linear quantization


_DIVISION_TYPES = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, ml_dtypes.bfloat16))


def quantize(x, scale, zero_point=None, dtype=np.uint8, saturate: bool = True, precision=None) -> np.ndarray:
    """Linear quantization: ``x / scale``, rounded, plus ``zero_point``, as ``dtype``.

    ``scale`` and ``zero_point`` broadcast against ``x`` (callers expand
    per-axis or blocked parameters).  The division is done in ``precision``
    (default: the scale's dtype), the quotient rounded half to even.  Integer
    targets (4-bit and 2-bit ones included) clamp to their range; float
    targets (float8, float4, float6) are a :func:`cast` of ``x / scale +
    zero_point`` (round to nearest even, ``saturate`` as for Cast).
    """
    x, scale, dtype = np.asarray(x), np.asarray(scale), np.dtype(dtype)
    precision = np.dtype(precision) if precision is not None else scale.dtype
    if precision not in _DIVISION_TYPES:  # an integer or float8e8m0 scale: divide in float32
        precision = np.dtype(np.float32)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        quotient = upcast(x.astype(precision)) / upcast(scale.astype(precision))
        # A narrow precision rounds the quotient too, as a division done in that type would.
        quotient = upcast(quotient.astype(precision))
    zero = upcast(np.asarray(0 if zero_point is None else zero_point))
    if is_int_dtype(dtype):
        info = ml_dtypes.iinfo(dtype)  # numpy's integers and the 4/2-bit ones
        return np.clip(np.round(quotient) + zero, int(info.min), int(info.max)).astype(dtype)
    return cast(quotient + zero, dtype, saturate)


def _exact(x: np.ndarray) -> np.ndarray:
    """Integers as int64 (so differences cannot wrap), floats in their compute dtype."""
    return x.astype(np.int64) if is_int_dtype(x.dtype) else upcast(x)


def dequantize(x, scale, zero_point=None, dtype=None) -> np.ndarray:
    """Linear dequantization: ``(x - zero_point) * scale`` as ``dtype`` (default: the scale's dtype).

    ``scale`` and ``zero_point`` broadcast against ``x``; the difference is
    exact (int64 for integers), the product computed in float32 at least.
    """
    x, scale = np.asarray(x), np.asarray(scale)
    dtype = np.dtype(dtype) if dtype is not None else scale.dtype
    centred = _exact(x)
    if zero_point is not None:
        centred = centred - _exact(np.asarray(zero_point))
    product_type = np.result_type(np.float32, upcast(scale).dtype)
    return downcast(centred.astype(product_type) * upcast(scale).astype(product_type), dtype)
