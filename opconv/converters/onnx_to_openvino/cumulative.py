"""CumSum and CumProd -> opset1 (which has no scan operation) as a log-step prefix scan.

After step k every element holds the combination of the 2**k elements ending at it; each step combines the
tensor with a copy of itself shifted by 2**k along the axis (the vacated positions hold the identity, 0 or 1).
ceil(log2(n)) steps of Concat + StridedSlice + Add/Multiply: exact for integers, in any element type, unlike
a triangular MatMul.
"""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ._common import Refuse, attr, const_input, i64, np_dtype, ov, static_shape


def _shifted(b, x, shape, dtype, axis: int, step: int, identity, toward_end: bool):
    """``x`` moved ``step`` places along ``axis`` (toward the end or the start), ``identity`` filling the gap."""
    rank = len(shape)
    n = shape[axis]
    fill_shape = list(shape)
    fill_shape[axis] = step
    fill = b.const(np.full(fill_shape, identity, dtype), "scan_fill")
    begin, end = [0] * rank, list(shape)
    if toward_end:
        end[axis] = n - step
    else:
        begin[axis] = step
    kept = ov(
        b,
        "StridedSlice",
        x,
        i64(b, begin, "begin"),
        i64(b, end, "end"),
        i64(b, [1] * rank, "stride"),
        begin_mask=[0] * rank,
        end_mask=[0] * rank,
        new_axis_mask=[],
        shrink_axis_mask=[],
        ellipsis_mask=[],
    )
    parts = [fill, kept] if toward_end else [kept, fill]
    return ov(b, "Concat", *parts, axis=axis)


#: op -> (the opset1 op that combines two elements, its identity)
SCANS = {"CumSum": ("Add", 0), "CumProd": ("Multiply", 1)}


@lower("onnx", "openvino", tuple(SCANS), inputs=2, names=("x", "axis"))
def _scan(b, m):
    combine, identity = SCANS[m.root.op]
    x = m["x"]
    shape = static_shape(x)
    dtype = np_dtype(x)
    if not shape:
        raise Refuse("a scalar has no axis to accumulate along")
    axis = int(np.asarray(const_input(m, "axis", "the axis")).reshape(())) % len(shape)
    reverse = bool(attr(m.root, "reverse", 0))
    y = x
    if attr(m.root, "exclusive", 0):
        y = (
            _shifted(b, y, shape, dtype, axis, 1, identity, not reverse)
            if shape[axis] > 1
            else b.const(np.full(shape, identity, dtype), "scan_identity")
        )
    step = 1
    while step < shape[axis]:
        y = ov(b, combine, y, _shifted(b, y, shape, dtype, axis, step, identity, not reverse), auto_broadcast="numpy")
        step *= 2
    return y
