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
* :func:`bitshift` shifts unsigned integers; shifting by the bit width or more
  gives 0 (not the C undefined behaviour).
* :func:`erf` is exact to about 1e-15 in float64: a series for ``|x| < 3``
  and a continued fraction for ``erfc`` beyond.
* :func:`cast` follows ONNX ``Cast``: float8 targets saturate (or not) as
  ``Cast-19`` describes; other integer targets, 4-bit ones included, truncate
  floats toward zero and wrap out-of-range values (two's complement);
  strings are parsed/printed as onnxruntime does (``%.8g``, ``INF``, ``NaN``).
"""

from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np

from ..errors import ExecutionError
from ._common import downcast, is_float_dtype, is_int_dtype, upcast


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


_INT_DIVISIONS = {
    "trunc": lambda a, b: np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b)),
    "floor": np.floor_divide,
}


def int_div(a, b, rounding: str = "trunc"):
    """``a / b``; for integers the quotient is truncated (``"trunc"``) or floored."""
    a, b = np.asarray(a), np.asarray(b)
    if not is_int_dtype(a.dtype):
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


def bitshift(x, y, direction: str):
    """``x << y`` (``direction="left"``) or ``x >> y`` on unsigned integers."""
    x, y = np.asarray(x), np.asarray(y)
    bits = x.dtype.itemsize * 8
    too_far = y >= bits
    y = np.where(too_far, 0, y).astype(x.dtype)
    shifted = np.left_shift(x, y) if direction.lower() == "left" else np.right_shift(x, y)
    return np.where(too_far, 0, shifted).astype(x.dtype)


def clip(x, low=None, high=None):
    """Clamp into ``[low, high]``; ``None`` leaves that side open.

    ``max(x, low)`` is applied before ``min(., high)``, so ``low > high``
    gives ``high`` everywhere, as ONNX ``Clip`` specifies.
    """
    x = np.asarray(x)
    y = x
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


def erf(x):
    """The error function, vectorized (float64 internally, cast back)."""
    x = np.asarray(x)
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
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


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
def relu(x):
    return np.maximum(x, 0)


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
        y = 0.5 * xc * (1 + np.tanh(_GELU_TANH_SCALE * (xc + 0.044715 * xc ** 3)))
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
        return "%.8g" % value
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


def cast(x, to, saturate: bool = True) -> np.ndarray:
    """Convert ``x`` to dtype ``to`` (numpy/ml_dtypes dtype; ``object``/``str`` = string)."""
    x = np.asarray(x)
    string_target = _is_string(to)
    to = np.dtype(object) if string_target else np.dtype(to)
    if string_target:
        return _to_strings(x)
    if _is_string(x.dtype):
        return _from_strings(x, to)
    if to in _SATURATING_FLOAT8 and saturate:
        limit = _SATURATING_FLOAT8[to]
        x = np.clip(x.astype(np.float32), -limit, limit)  # NaN stays NaN; +-inf -> +-max
    with np.errstate(invalid="ignore", over="ignore"):
        if is_int_dtype(to) and not is_int_dtype(x.dtype) and x.dtype != np.bool_:
            # C semantics: truncate toward zero, then keep the low bits.
            x = np.trunc(x.astype(np.float64))
            x = np.where(np.isfinite(x), x, 0).astype(np.int64)
        return x.astype(to)
