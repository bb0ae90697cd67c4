"""Cast and CastLike, every version.

The conversion itself is :func:`opconv.kernels.elementwise.cast` (C truncation and wrap-around for
integer targets, 4-bit and 2-bit ones included; strings both ways; saturating float8; float8e8m0
rounding).  What changed across versions:

* Cast-1 names the target type by string (``"FLOAT"``); from Cast-6 it is a TensorProto code;
* Cast-19 added float8 targets and ``saturate``.  Up to Cast-23 the FNUZ float8 types turn
  infinities into NaN even when saturating (they have no infinity); from Cast-24 a saturating cast
  takes them to +-max like every other float8 type;
* Cast-24 added float8e8m0 and its ``round_mode``;
* other versions only added types (strings at 9, bfloat16 at 13, int4 at 21, float4 at 23, int2 at
  25, float6 at 28).

CastLike casts to the element type of its second input, with the same version history.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise
from ....kernels._common import is_float_dtype
from ..executor import onnx_dtype, onnx_op
from ..proto import messages as pb

_FNUZ = frozenset(np.dtype(t) for t in (ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz))


def _saturating_fnuz_infinities(x, to: np.dtype, saturate: bool) -> np.ndarray:
    """Cast-19..23: a saturating cast to a FNUZ float8 type turns +-inf into NaN."""
    x = np.asarray(x)
    if saturate and to in _FNUZ and is_float_dtype(x.dtype):
        x = np.where(np.isinf(x.astype(np.float32)), np.float32(np.nan), x.astype(np.float32))
    return x


def _type_name_code(name: str) -> int:
    try:
        return pb.TensorProto.DataType.Value(name.upper())
    except ValueError:
        raise ExecutionError(f"unknown Cast target type {name!r}") from None


@onnx_op("Cast", since=1)
def cast_1(ctx, x, *, to):
    return elementwise.cast(x, onnx_dtype(_type_name_code(to)))


@onnx_op("Cast", since=[6, 9, 13])
def cast_6(ctx, x, *, to):
    return elementwise.cast(x, onnx_dtype(to))


@onnx_op("Cast", since=[19, 21, 23])
def cast_19(ctx, x, *, saturate, to):
    target = onnx_dtype(to)
    return elementwise.cast(_saturating_fnuz_infinities(x, target, saturate), target, bool(saturate))


@onnx_op("Cast", since=[24, 25, 28])
def cast_24(ctx, x, *, round_mode, saturate, to):
    return elementwise.cast(x, onnx_dtype(to), bool(saturate), round_mode)


@onnx_op("CastLike", since=15)
def cast_like_15(ctx, x, target_type):
    return elementwise.cast(x, np.asarray(target_type).dtype)


@onnx_op("CastLike", since=[19, 21, 23])
def cast_like_19(ctx, x, target_type, *, saturate):
    target = np.asarray(target_type).dtype
    return elementwise.cast(_saturating_fnuz_infinities(x, target, saturate), target, bool(saturate))


@onnx_op("CastLike", since=[24, 25])
def cast_like_24(ctx, x, target_type, *, round_mode, saturate):
    return elementwise.cast(x, np.asarray(target_type).dtype, bool(saturate), round_mode)
