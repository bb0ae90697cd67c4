"""Arithmetic: unary math, binary arithmetic, bit operations, variadic Sum/Mean/Max/Min, Clip, CumSum/CumProd, Det.

ONNX conventions this module adds to :mod:`opconv.kernels`:

* Before opset 7 the binary ops (Add, Sub, Mul, Div, Pow) did not broadcast numpy-style: ``B`` had to
  match ``A`` unless ``broadcast=1``, and then ``B``'s dims lined up with ``A``'s from ``axis``
  (:func:`._common.legacy_broadcast`).  From opset 7 both sides broadcast numpy-style.
* The result keeps the input's element type: integer Div truncates toward zero, Pow's result has the
  base's type whatever the exponent's (opset 12 let the two differ), Mod follows Python's sign of
  the divisor unless ``fmod=1`` (C's ``fmod``).
* Sum/Mean/Max/Min before opset 8 required inputs of one shape; from opset 8 they broadcast.
* Clip-1/6 take ``min``/``max`` as attributes (Clip-1 leaves an absent bound open, Clip-6 defaults
  to +-FLT_MAX); from Clip-11 they are optional inputs.
* Element-wise ops compute narrow floats (float16, bfloat16) in float32 and keep float32 as float32:
  ``upcast`` is a no-op view for numpy's own float32/float64, so the common case is one numpy call.
"""

from __future__ import annotations

import functools

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise, linalg, reduce
from ....kernels._common import computes_natively, downcast, is_float_dtype, upcast
from ....types import from_numpy
from ..executor import onnx_dtype, onnx_op
from ._common import legacy_broadcast

# ---------------------------------------------------------------- unary


def _unary(function):
    """A kernel applying ``function`` element-wise in the input's compute dtype."""

    def kernel(ctx, x, *, consumed_inputs=None):  # consumed_inputs: legacy (opset 1), ignored
        x = np.asarray(x)
        return downcast(function(upcast(x)), x.dtype)

    kernel.__name__ = function.__name__
    return kernel


#: op -> (element-wise function, every schema version; later versions only added types)
_UNARY = {
    "Abs": (np.abs, [1, 6, 13]),
    "Neg": (np.negative, [1, 6, 13]),
    "Ceil": (np.ceil, [1, 6, 13]),
    "Floor": (np.floor, [1, 6, 13]),
    "Sqrt": (np.sqrt, [1, 6, 13]),
    "Exp": (np.exp, [1, 6, 13]),
    "Log": (np.log, [1, 6, 13]),
    "Reciprocal": (np.reciprocal, [1, 6, 13]),
    "Sin": (np.sin, [7, 22]),
    "Cos": (np.cos, [7, 22]),
    "Tan": (np.tan, [7, 22]),
    "Asin": (np.arcsin, [7, 22]),
    "Acos": (np.arccos, [7, 22]),
    "Atan": (np.arctan, [7, 22]),
    "Sinh": (np.sinh, [9, 22]),
    "Cosh": (np.cosh, [9, 22]),
    "Asinh": (np.arcsinh, [9, 22]),
    "Acosh": (np.arccosh, [9, 22]),
    "Atanh": (np.arctanh, [9, 22]),
    "Sign": (np.sign, [9, 13]),
    "Erf": (elementwise.erf, [9, 13]),
    "Round": (elementwise.round_half_even, [11, 22]),  # ties to even
}

for _op, (_function, _versions) in _UNARY.items():
    onnx_op(_op, since=_versions)(_unary(_function))


@onnx_op("IsNaN", since=[9, 13, 20])
def isnan_9(ctx, x):
    return np.isnan(upcast(x))


@onnx_op("IsInf", since=[10, 20])
def isinf_10(ctx, x, *, detect_negative, detect_positive):
    x = upcast(x)
    infinite = np.isinf(x)
    if not detect_negative:
        infinite &= x > 0
    if not detect_positive:
        infinite &= x < 0
    return infinite


# ---------------------------------------------------------------- binary arithmetic


def _same_type(function, a, b):
    """``function(a, b)`` computed in a's compute dtype, returned as a's type."""
    a, b = np.asarray(a), np.asarray(b)
    return downcast(function(upcast(a), upcast(b)), a.dtype)


def _into_dying_input(ufunc, ctx, a, b):
    """``ufunc(a, b)`` written into an owned input (ExecContext.owns) of the result's shape, else None."""
    if not (
        isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and computes_natively(a.dtype)
    ):
        return None
    for i, (x, other) in enumerate(((a, b), (b, a))):
        if ctx.owns(i) and _broadcasts_into(other.shape, x.shape):
            return ufunc(a, b, out=x)
    return None


def _broadcasts_into(shape: tuple, target: tuple) -> bool:
    """Whether ``shape`` broadcasts to ``target`` unchanged (cheaper than np.broadcast_shapes)."""
    return shape == target or (
        len(shape) <= len(target) and all(s == 1 or s == t for s, t in zip(reversed(shape), reversed(target)))
    )


def _register_binary(op: str, function, legacy: list[int], modern: list[int], ufunc=None) -> None:
    """Register ``op`` in its pre-opset-7 form (``broadcast``/``axis`` attributes) and numpy-broadcasting form.

    With ``ufunc``, a dying input of the result's shape receives the result (no allocation).
    """

    def legacy_kernel(ctx, a, b, *, axis, broadcast, consumed_inputs=None):
        return function(a, legacy_broadcast(a, b, broadcast, axis))

    def kernel(ctx, a, b):
        if ufunc is not None and ctx.owned:
            y = _into_dying_input(ufunc, ctx, a, b)
            if y is not None:
                return y
        return function(a, b)

    legacy_kernel.__name__ = f"{op.lower()}_{legacy[0]}"
    kernel.__name__ = f"{op.lower()}_{modern[0]}"
    onnx_op(op, since=legacy)(legacy_kernel)
    onnx_op(op, since=modern)(kernel)


_register_binary("Add", functools.partial(_same_type, np.add), [1, 6], [7, 13, 14], np.add)
_register_binary("Sub", functools.partial(_same_type, np.subtract), [1, 6], [7, 13, 14], np.subtract)
_register_binary("Mul", functools.partial(_same_type, np.multiply), [1, 6], [7, 13, 14], np.multiply)
# Integer Div truncates toward zero (C), floats divide IEEE-style.
_register_binary("Div", elementwise.int_div, [1, 6], [7, 13, 14])
# Pow-12 let the exponent's type differ from the base's; the result has the base's type.
_register_binary("Pow", elementwise.power, [1], [7, 12, 13, 15])


@onnx_op("Mod", since=[10, 13, 28])
def mod_10(ctx, a, b, *, fmod):
    # fmod=0: Python's %, sign of the divisor; fmod=1: C's fmod, sign of the dividend.
    # (Mod-28 only spelled out the float cases of fmod=0, which numpy already follows.)
    return elementwise.mod(a, b, fmod=bool(fmod))


# ---------------------------------------------------------------- bit operations


@onnx_op("BitShift", since=[11, 28])
def bitshift_11(ctx, x, y, *, direction):
    # BitShift-28 added signed types (arithmetic right shift); unsigned shifts mean the same as in 11.
    return elementwise.bitshift(x, y, direction)


@onnx_op("BitwiseAnd", since=18)
def bitwise_and_18(ctx, a, b):
    return np.bitwise_and(a, b)


@onnx_op("BitwiseOr", since=18)
def bitwise_or_18(ctx, a, b):
    return np.bitwise_or(a, b)


@onnx_op("BitwiseXor", since=18)
def bitwise_xor_18(ctx, a, b):
    return np.bitwise_xor(a, b)


@onnx_op("BitwiseNot", since=18)
def bitwise_not_18(ctx, x):
    return np.invert(x)


@onnx_op("BitCast", since=26)
def bitcast_26(ctx, x, *, to):
    x = np.asarray(x)
    target = onnx_dtype(to)
    if target.kind == "O" or x.dtype.kind == "O":
        raise ExecutionError("BitCast does not apply to strings")
    source_bits, target_bits = from_numpy(x.dtype).bits, from_numpy(target).bits
    if source_bits != target_bits:
        raise ExecutionError(
            f"BitCast needs types of one bit width: {x.dtype} has {source_bits} bits, {target} has {target_bits}"
        )
    # numpy stores every type of one bit width in the same number of bytes, little endian here.
    return (x if x.flags.c_contiguous else x.copy()).view(target)


# ---------------------------------------------------------------- variadic Sum / Mean / Max / Min


def _same_shapes(inputs) -> None:
    shapes = {np.shape(x) for x in inputs}
    if len(shapes) > 1:
        raise ExecutionError(
            f"inputs must have one shape before opset 8 (no broadcasting), got {sorted(map(list, shapes))}"
        )


def _fold(function, inputs):
    if not inputs:
        raise ExecutionError("needs at least one input")
    dtype = np.asarray(inputs[0]).dtype
    return downcast(functools.reduce(function, (upcast(x) for x in inputs)), dtype)


def _register_variadic(op: str, function, same_shape: list[int], broadcasting: list[int], in_place=None) -> None:
    """Register ``op``'s same-shape form (opset < 8) and its broadcasting form.

    With the ufunc ``in_place``, two inputs combine into a dying one of the result's shape.
    """

    def same_shape_kernel(ctx, *inputs, consumed_inputs=None):
        _same_shapes(inputs)
        return function(inputs)

    def kernel(ctx, *inputs):
        if in_place is not None and len(inputs) == 2 and ctx.owned:
            y = _into_dying_input(in_place, ctx, *inputs)
            if y is not None:
                return y
        return function(inputs)

    same_shape_kernel.__name__ = f"{op.lower()}_{same_shape[0]}"
    kernel.__name__ = f"{op.lower()}_{broadcasting[0]}"
    onnx_op(op, since=same_shape)(same_shape_kernel)
    onnx_op(op, since=broadcasting)(kernel)


def _mean_of(inputs):
    dtype = np.asarray(inputs[0]).dtype
    total = _fold(np.add, [upcast(x) for x in inputs])
    return downcast(total / np.asarray(len(inputs), dtype=total.dtype), dtype)


_register_variadic("Sum", functools.partial(_fold, np.add), [1, 6], [8, 13], np.add)
_register_variadic("Mean", _mean_of, [1, 6], [8, 13])
# Max-12/Min-12 only added integer types.
_register_variadic("Max", functools.partial(_fold, np.maximum), [1, 6], [8, 12, 13], np.maximum)
_register_variadic("Min", functools.partial(_fold, np.minimum), [1, 6], [8, 12, 13], np.minimum)


# ---------------------------------------------------------------- Clip


@onnx_op("Clip", since=1)
def clip_1(ctx, x, *, consumed_inputs, max, min):  # noqa: A002 - the schema's attribute names
    return elementwise.clip(x, min, max)  # an absent bound leaves that side open


@onnx_op("Clip", since=6)
def clip_6(ctx, x, *, max, min):  # noqa: A002 - the schema's attribute names; defaults are +-FLT_MAX
    return elementwise.clip(x, min, max)


@onnx_op("Clip", since=[11, 12, 13])
def clip_11(ctx, x, low=None, high=None):
    # Clip-12 added integer types; an omitted (or empty-name) bound is open.
    return elementwise.clip(x, low, high)


# ---------------------------------------------------------------- CumSum / CumProd / Det


def _axis(axis) -> int:
    axis = np.asarray(axis)
    if axis.size != 1:
        raise ExecutionError(f"axis must be a scalar (or 1-element tensor), got shape {list(axis.shape)}")
    return int(axis.reshape(-1)[0])


@onnx_op("CumSum", since=[11, 14])
def cumsum_11(ctx, x, axis, *, exclusive, reverse):
    return reduce.cumsum(x, _axis(axis), bool(exclusive), bool(reverse))


@onnx_op("CumProd", since=26)
def cumprod_26(ctx, x, axis, *, exclusive, reverse):
    return reduce.cumprod(x, _axis(axis), bool(exclusive), bool(reverse))


@onnx_op("Det", since=[11, 22])
def det_11(ctx, x):
    if not is_float_dtype(np.asarray(x).dtype):
        raise ExecutionError(f"Det needs a float tensor, got {np.asarray(x).dtype}")
    return linalg.det(x)
