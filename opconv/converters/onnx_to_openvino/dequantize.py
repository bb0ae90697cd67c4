"""DequantizeLinear -> opset1 arithmetic: ``(x - zero_point) * scale`` in the scale's type, with scales and
zero points per tensor, per axis (1-D), or per block (``block_size``: each repeated over a block along the axis).

QuantizeLinear is in :mod:`.quantize`: its rounding must not trust OpenVINO's division (within one ulp only).
"""

from __future__ import annotations

from ...types import from_onnx_code
from ..lowering import lower
from ._common import Refuse, attr, i64, np_dtype, ov, rank_of, static_shape

INTEGER_INPUTS = {"uint8", "int8", "uint16", "int16", "int32"}


def spread(b, param, x, axis: int, block: int):
    """``param`` (scale or zero point) laid out to broadcast against ``x``."""
    shape = static_shape(param)
    rank = rank_of(x)
    if len(shape) == 0 or (len(shape) == 1 and shape[0] == 1 and not block):
        return param
    if block:
        if len(shape) != rank:
            raise Refuse(f"a blocked parameter of rank {len(shape)} for an input of rank {rank}")
        x_shape = static_shape(x)
        if x_shape[axis] != shape[axis] * block:
            raise Refuse(f"axis {axis} of size {x_shape[axis]} is not {shape[axis]} blocks of {block}")
        wide = list(shape[: axis + 1]) + [block] + list(shape[axis + 1 :])
        param = ov(b, "Unsqueeze", param, i64(b, [axis + 1], "block_axis"))
        param = ov(b, "Broadcast", param, i64(b, wide, "blocks"), mode="numpy")
        return ov(b, "Reshape", param, i64(b, x_shape, "shape"), special_zero=False)
    if len(shape) != 1:
        raise Refuse(f"a per-axis parameter of rank {len(shape)}")
    return ov(b, "Reshape", param, i64(b, [shape[0]] + [1] * (rank - axis - 1), "per_axis"), special_zero=False)


def _axis_and_block(m) -> tuple[int, int]:
    rank = rank_of(m["x"])
    return int(attr(m.root, "axis", 1)) % max(rank, 1), int(attr(m.root, "block_size", 0))


@lower("onnx", "openvino", "DequantizeLinear", inputs=(2, 3), names=("x", "scale", "zero_point"))
def _dequantize(b, m):
    x, scale = m["x"], m["scale"]
    if x.dtype not in INTEGER_INPUTS:
        raise Refuse(f"DequantizeLinear of {x.dtype}")
    wanted = attr(m.root, "output_dtype", 0)
    if wanted and from_onnx_code(int(wanted)).numpy != np_dtype(scale):
        raise Refuse("output_dtype other than the scale's type")
    axis, block = _axis_and_block(m)
    y = ov(b, "Convert", x, destination_type=scale.dtype)
    zero_point = m.values.get("zero_point")
    if zero_point is not None:
        y = ov(
            b,
            "Subtract",
            y,
            ov(b, "Convert", spread(b, zero_point, x, axis, block), destination_type=scale.dtype),
            auto_broadcast="numpy",
        )
    return ov(b, "Multiply", y, spread(b, scale, x, axis, block), auto_broadcast="numpy")
