"""Element-wise arithmetic, math functions, conversions and bit operations.

Binary ops take operands of equal shape; an operand of lower rank is placed
by ``broadcast_dimensions`` (XLA's explicit broadcast, see
:func:`broadcast_operands`), and without it numpy broadcasting applies.

Integer semantics are XLA's (its CPU/GPU emitters and the StableHLO -> linalg
lowering all agree):

* Div truncates toward zero, like C; ``x / 0`` is -1 (all bits set) and
  ``INT_MIN / -1`` is INT_MIN.
* Rem has the sign of the dividend (C ``fmod``/``%``); ``x % 0`` is ``x`` and
  ``INT_MIN % -1`` is 0.
* Shifts by a negative amount or by the bit width or more saturate: 0 for
  ShiftLeft and ShiftRightLogical, the sign fill (0 or -1) for
  ShiftRightArithmetic.  Logical/arithmetic shifts reinterpret the bits as
  unsigned/signed whatever the element type.
* Pow with a negative integer exponent is 0, except for bases 1 and -1.
* Convert truncates floats toward zero, saturates out-of-range values and
  maps NaN to 0; narrowing a signed integer keeps its sign bit (the low
  ``width - 1`` bits plus the sign), as the dialect's document specifies.

Unary float functions compute float16/bfloat16 in float32 and round back.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise as ew
from ....kernels._common import downcast, is_float_dtype, is_int_dtype, upcast
from ..executor import hlo_op
from .shape import result_dtype

# ---------------------------------------------------------------- broadcasting


def broadcast_operands(lhs, rhs, broadcast_dimensions=None):
    """``(lhs, rhs)`` made shape-compatible: XLA ``broadcast_dimensions`` place the lower-rank operand.

    ``broadcast_dimensions[i]`` is the dim of the higher-rank operand that dim
    ``i`` of the lower-rank one maps to; absent or empty, numpy broadcasting
    applies (which covers scalars and equal shapes).
    """
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    if not broadcast_dimensions or lhs.ndim == rhs.ndim:
        return lhs, rhs
    dims = [int(d) for d in broadcast_dimensions]
    small, big = (lhs, rhs) if lhs.ndim < rhs.ndim else (rhs, lhs)
    if len(dims) != small.ndim or any(not 0 <= d < big.ndim for d in dims) or dims != sorted(set(dims)):
        raise ExecutionError(
            f"broadcast_dimensions {dims} must map each of the {small.ndim} dims of the "
            f"lower-rank operand to increasing dims of the rank-{big.ndim} one"
        )
    placed = [1] * big.ndim
    for i, d in enumerate(dims):
        placed[d] = small.shape[i]
    small = small.reshape(placed)
    return (small, big) if lhs.ndim < rhs.ndim else (big, small)


# ---------------------------------------------------------------- unary math


def _float_unary(function):
    """A float function computed in the compute dtype (float32 for narrow floats) and cast back."""

    def apply(x):
        with np.errstate(all="ignore"):
            return downcast(function(upcast(x)), x.dtype)

    return apply


def _in_type(function):
    """A numeric function whose result keeps the input's type (integers wrap)."""
    return lambda x: np.asarray(function(x)).astype(x.dtype, copy=False)


def _rsqrt(x):
    # 1/sqrt(0) = +inf (IEEE, XLA); the document's NaN for 0 is a known defect.  Integer inputs are
    # computed in float64 and converted back like Convert does.
    if is_int_dtype(x.dtype):
        with np.errstate(all="ignore"):
            return convert_elements(1.0 / np.sqrt(x.astype(np.float64)), x.dtype)
    return _float_unary(lambda v: 1 / np.sqrt(v))(x)


def _sign(x):
    if is_float_dtype(x.dtype):
        return _float_unary(np.sign)(x)  # NaN stays NaN
    return np.sign(x).astype(x.dtype)


_UNARY = {
    "Abs": _in_type(np.abs),  # abs(INT_MIN) wraps to INT_MIN, as in two's complement
    "Neg": _in_type(np.negative),
    "Sign": _sign,
    "Ceil": _float_unary(np.ceil),
    "Floor": _float_unary(np.floor),
    "Round": ew.round_half_away,  # halves away from zero: Round(2.5) = 3
    "RoundNearestEven": ew.round_half_even,
    "Sqrt": _float_unary(np.sqrt),
    "Rsqrt": _rsqrt,
    "Exp": _float_unary(np.exp),
    "Log": _float_unary(np.log),
    "Log1p": _float_unary(np.log1p),
    "Sin": _float_unary(np.sin),
    "Cos": _float_unary(np.cos),
    "Tan": _float_unary(np.tan),
    "Tanh": _float_unary(np.tanh),
    "Sinh": _float_unary(np.sinh),
    "Asin": _float_unary(np.arcsin),
    "Acos": _float_unary(np.arccos),
    "Atan": _float_unary(np.arctan),
    "Asinh": _float_unary(np.arcsinh),
    "Atanh": _float_unary(np.arctanh),
    "Erf": ew.erf,
}


def _unary_kernel(function):
    def kernel(ctx, x):
        return function(np.asarray(x))

    return kernel


for _name, _function in _UNARY.items():
    hlo_op(_name)(_unary_kernel(_function))


def _to_float_result(ctx, x, function):
    """Cbrt/Expm1: integer inputs give a float result, of the declared result type (float32 if undeclared)."""
    to = result_dtype(ctx, default=x.dtype if is_float_dtype(x.dtype) else np.float32)
    source = x if is_float_dtype(x.dtype) else x.astype(np.float64)
    with np.errstate(all="ignore"):
        return function(upcast(source)).astype(to)


@hlo_op("Cbrt")
def cbrt(ctx, x):
    return _to_float_result(ctx, x, np.cbrt)


@hlo_op("Expm1")
def expm1(ctx, x):
    return _to_float_result(ctx, x, np.expm1)


@hlo_op("IsFinite")
def is_finite(ctx, x):
    return np.isfinite(upcast(x)).astype(result_dtype(ctx, default=np.bool_))


@hlo_op("PopulationCount")
def population_count(ctx, x):
    # Count the bits of the two's-complement pattern (numpy counts those of |x| for signed types).
    bits = x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "i" else x
    return np.bitwise_count(bits).astype(x.dtype)


# ---------------------------------------------------------------- complex numbers


@hlo_op("Complex")
def complex_(ctx, real, imag):
    real, imag = np.broadcast_arrays(real, imag)
    default = np.complex128 if real.dtype == np.float64 else np.complex64
    out = np.empty(real.shape, dtype=result_dtype(ctx, default=default))
    out.real, out.imag = real, imag
    return out


@hlo_op("Real")
def real(ctx, x):
    return np.real(x).copy()


@hlo_op("Imag")
def imag(ctx, x):
    return np.imag(x).copy() if np.iscomplexobj(x) else np.zeros_like(x)


# ---------------------------------------------------------------- binary arithmetic


def integer_divide(a: np.ndarray, b: np.ndarray, remainder: bool = False) -> np.ndarray:
    """XLA integer ``a / b`` (truncating) or ``a % b`` (sign of ``a``) with XLA's overflow results."""
    dtype = a.dtype
    zero = b == 0
    overflow = (a == np.iinfo(dtype).min) & (b == -1) if dtype.kind == "i" else np.zeros(np.shape(a), bool)
    safe_b = np.where(zero | overflow, 1, b).astype(dtype)
    rest = np.fmod(a, safe_b)  # C remainder: the sign of the dividend
    if remainder:
        return np.where(zero, a, np.where(overflow, 0, rest)).astype(dtype)
    # a - rest is a multiple of b and lies between 0 and a, so this division is exact and cannot overflow.
    quotient = (a - rest) // safe_b
    return np.where(zero, np.array(-1).astype(dtype), np.where(overflow, a, quotient)).astype(dtype)


def _divide(a, b):
    if is_int_dtype(a.dtype):
        return integer_divide(a, b.astype(a.dtype))
    with np.errstate(divide="ignore", invalid="ignore"):
        return downcast(upcast(a) / upcast(b), a.dtype)


def _remainder(a, b):
    if is_int_dtype(a.dtype):
        return integer_divide(a, b.astype(a.dtype), remainder=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return downcast(np.fmod(upcast(a), upcast(b)), a.dtype)


def _same_type(function):
    """A binary numpy function whose result keeps lhs's type (integers wrap)."""

    def apply(a, b):
        with np.errstate(over="ignore"):
            return np.asarray(function(a, b)).astype(a.dtype, copy=False)

    return apply


def _atan2(a, b):
    return downcast(np.arctan2(upcast(a), upcast(b)), a.dtype)


def _shift(direction: str, view_kind: str | None):
    """A shift on the bits of lhs seen as unsigned ("u"), signed ("i") or as they are (None)."""

    def apply(a, b):
        if view_kind and a.dtype.kind != view_kind:
            bits = np.dtype(f"{view_kind}{a.dtype.itemsize}")
            return ew.bitshift(a.view(bits), b, direction).view(a.dtype)
        return ew.bitshift(a, b, direction)

    return apply


_BINARY = {
    "Add": _same_type(np.add),
    "Sub": _same_type(np.subtract),
    "Div": _divide,
    "Rem": _remainder,
    "Max": _same_type(np.maximum),  # NaN propagates, as in XLA
    "Min": _same_type(np.minimum),
    "Pow": ew.power,  # integer bases: exact, and 0 for negative exponents except bases +-1
    "Atan2": _atan2,
    "ShiftLeft": _shift("left", None),
    "ShiftRightLogical": _shift("right", "u"),
    "ShiftRightArithmetic": _shift("right", "i"),
}

# Ops whose schema has broadcast_dimensions; the others take operands of equal (or numpy-broadcastable) shapes.
_EXPLICIT_BROADCAST = {"Add", "Div", "ShiftRightLogical", "ShiftRightArithmetic"}


def _binary_kernel(function, explicit_broadcast: bool):
    def explicit_kernel(ctx, a, b, *, broadcast_dimensions=None):
        a, b = broadcast_operands(a, b, broadcast_dimensions)
        a, b = np.broadcast_arrays(a, b)
        return function(a, b)

    def kernel(ctx, a, b):
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        return function(a, b)

    return explicit_kernel if explicit_broadcast else kernel


for _name, _function in _BINARY.items():
    hlo_op(_name)(_binary_kernel(_function, _name in _EXPLICIT_BROADCAST))


@hlo_op("Clamp")
def clamp(ctx, low, x, high):
    # min(max(x, low), high); scalar bounds broadcast.
    return np.minimum(np.maximum(x, low), high).astype(x.dtype, copy=False)


#: Ops of this module that act on each element independently of the shape (Map runs bodies made of them on
#: whole arrays at once).
ELEMENTWISE_OPS = (
    frozenset(_UNARY)
    | frozenset(_BINARY)
    | {"Cbrt", "Expm1", "IsFinite", "PopulationCount", "Complex", "Real", "Imag", "Clamp", "Convert"}
)


# ---------------------------------------------------------------- conversions


def _float_to_int(x: np.ndarray, to: np.dtype) -> np.ndarray:
    info = np.iinfo(to)
    truncated = np.trunc(x.astype(np.float64))
    truncated = np.where(np.isnan(truncated), 0.0, truncated)
    upper = 2.0 ** (info.bits - (1 if info.min < 0 else 0))  # first value past the range, exact in float64
    high, low = truncated >= upper, truncated < float(info.min)
    inside = np.where(high | low, 0.0, truncated).astype(to)
    return np.where(high, info.max, np.where(low, info.min, inside)).astype(to)


def _narrow_signed(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """Signed -> narrower signed integer keeping the sign bit: the low (width-1) bits, then the sign."""
    width = to.itemsize * 8
    low_bits = x.astype(np.int64) & ((1 << (width - 1)) - 1)
    return np.where(x < 0, low_bits - (1 << (width - 1)), low_bits).astype(to)


def convert_elements(x, to) -> np.ndarray:
    """HLO Convert of ``x`` to dtype ``to`` (see the module docstring for the integer rules)."""
    x, to = np.asarray(x), np.dtype(to)
    if to == np.bool_:
        return x != 0
    if np.iscomplexobj(x) and to.kind != "c":
        x = np.real(x)  # the imaginary part is dropped
    if is_int_dtype(to) and is_float_dtype(x.dtype):
        return _float_to_int(x, to)
    if to.kind == "i" and x.dtype.kind == "i" and x.dtype.itemsize > to.itemsize:
        return _narrow_signed(x, to)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(to)


@hlo_op("Convert")
def convert(ctx, x):
    return convert_elements(x, result_dtype(ctx))


@hlo_op("BitcastConvert")
def bitcast_convert(ctx, x):
    """Reinterpret the bytes (host order, little-endian); a width change adds or removes a minor dim."""
    to = result_dtype(ctx)
    x = np.ascontiguousarray(x).reshape(np.shape(x))  # ascontiguousarray makes a 0-d array 1-d
    source, target = x.dtype.itemsize, to.itemsize
    if source == target:
        return x.view(to).copy()
    if source > target:  # each element becomes source/target narrower ones in a new minor dim
        return x.view(to).reshape(x.shape + (source // target,)).copy()
    ratio = target // source
    if target % source or x.ndim == 0 or x.shape[-1] != ratio:
        raise ExecutionError(
            f"cannot bitcast {x.dtype} {list(x.shape)} to {to}: the minor dim must hold "
            f"{target}/{source} = {ratio} elements"
        )
    return x.view(to).reshape(x.shape[:-1]).copy()
