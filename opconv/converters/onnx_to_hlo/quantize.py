"""Integer and quantized products: MatMulInteger, DynamicQuantizeLinear, and onnxruntime's MatMulNBits,
MatMulIntegerToFloat and DynamicQuantizeMatMul (domain ``com.microsoft``).

HLO computes in the operands' types exactly as written (IEEE division, round half to even), so the ONNX
formulas map directly:

* MatMulInteger / ConvInteger: int32 operands minus their zero points (exact for 8-bit values), an int32
  DotGeneral / Conv.
* DynamicQuantizeLinear: ``scale = (max(x, 0) - min(x, 0)) / 255``, ``zero_point = rne(-min / scale)`` and
  ``y = clamp(rne(x / scale) + zero_point, 0, 255)``; an all-zero ``x`` (where the formula divides by 0) gives
  onnxruntime's scale 1, zero point 0 and zeros.
* MatMulNBits: the packed weight ``[N, blocks, bytes]`` unpacked in the graph (ShiftRightLogical and And; the
  first value in the lowest bits), ``(q - zero_point) * scale`` per block, cut to K, and a float32 DotGeneral
  against it (float16 inputs are computed in float32, as opconv's kernel does).
"""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ._common import (
    Refuse,
    TensorType,
    attr,
    binary,
    broadcast_in_dim,
    compare,
    concat,
    convert,
    dtype_of,
    hlo,
    optional_input,
    out_type,
    reduce,
    reshape,
    scalar,
    select,
    shape_of,
    slice_,
    transpose,
    unary,
)
from .nn import conv_attrs, dot

MS = "com.microsoft"
_INTEGER_OPERANDS = ("int8", "uint8")


def _centred(b, x, zero_point, per_row: bool = False):
    """``x - zero_point`` in int32 (a per-row zero point of A becomes a column)."""
    if dtype_of(x) not in _INTEGER_OPERANDS:
        raise Refuse(f"an integer product of {dtype_of(x)} operands is not mapped")
    y = convert(b, x, "int32")
    if zero_point is None:
        return y
    z = convert(b, zero_point, "int32")
    zs, xs = shape_of(z), shape_of(y)
    if len(zs) == 0 or zs == (1,):
        z = broadcast_in_dim(b, reshape(b, z, ()), xs, [])
    elif len(zs) == 1 and per_row:
        z = broadcast_in_dim(b, z, xs, [len(xs) - 2])
    elif len(zs) == 1:
        z = broadcast_in_dim(b, z, xs, [len(xs) - 1])
    else:
        raise Refuse(f"a zero point of shape {list(zs)}")
    return binary(b, "Sub", y, z)


def _integer_product(b, a, w, a_zero_point, b_zero_point):
    return dot(b, _centred(b, a, a_zero_point, per_row=True), _centred(b, w, b_zero_point))


@lower("onnx", "hlo", "MatMulInteger", inputs=range(2, 5))
def _matmul_integer(b, m):
    return _integer_product(b, *m.root.inputs[:2], optional_input(m, 2), optional_input(m, 3))


@lower("onnx", "hlo", "ConvInteger", inputs=range(2, 5))
def _conv_integer(b, m):
    """ConvInteger as an int32 Conv of the centred operands (zero padding of a centred input is ONNX's padding
    with the zero point); the weight's zero point may be one per output channel."""
    node = m.root
    x, w = node.inputs[:2]
    x_zero, w_zero = optional_input(m, 2), optional_input(m, 3)
    if w_zero is not None and len(shape_of(w_zero)) == 1 and shape_of(w_zero)[0] > 1:
        if dtype_of(w) not in _INTEGER_OPERANDS:
            raise Refuse(f"ConvInteger of {dtype_of(w)} weights is not mapped")
        centred_w = binary(
            b, "Sub", convert(b, w, "int32"), broadcast_in_dim(b, convert(b, w_zero, "int32"), shape_of(w), [0])
        )
    else:
        centred_w = _centred(b, w, w_zero)
    attrs = conv_attrs(node, shape_of(x), shape_of(w))
    return hlo(b, "Conv", _centred(b, x, x_zero), centred_w, type=TensorType("int32", out_type(m).shape), **attrs)


def _scalar_of(b, v):
    return reshape(b, v, ()) if shape_of(v) != () else v


def _along_last(b, v, shape):
    """A scalar or one-per-column parameter broadcast to ``shape`` (float32)."""
    v = convert(b, v, "float32")
    if len(shape_of(v)) == 0 or shape_of(v) == (1,):
        return broadcast_in_dim(b, _scalar_of(b, v), shape, [])
    return broadcast_in_dim(b, v, shape, [len(shape) - 1])


def _to_float(b, acc, a_scale, b_scale, bias, out_dtype: str):
    """An int32 accumulator times ``a_scale * b_scale`` (per tensor or per column), plus ``bias``."""
    shape = shape_of(acc)
    y = binary(
        b,
        "Mul",
        convert(b, acc, "float32"),
        binary(b, "Mul", _along_last(b, a_scale, shape), _along_last(b, b_scale, shape)),
    )
    if bias is not None:
        y = binary(b, "Add", y, _along_last(b, bias, shape))
    return convert(b, y, out_dtype) if out_dtype != "float32" else y


@lower("onnx", "hlo", "MatMulIntegerToFloat", domain=MS, inputs=range(4, 8))
def _matmul_integer_to_float(b, m):
    a, w, a_scale, b_scale = m.root.inputs[:4]
    acc = _integer_product(b, a, w, optional_input(m, 4), optional_input(m, 5))
    return _to_float(b, acc, a_scale, b_scale, optional_input(m, 6), dtype_of(a_scale))


# ---------------------------------------------------------------- dynamic quantization


def dynamic_quantize(b, x):
    """``(y, scale, zero_point)`` of DynamicQuantizeLinear for a float32 ``x``."""
    if dtype_of(x) != "float32":
        raise Refuse(f"DynamicQuantizeLinear of {dtype_of(x)}")
    axes = list(range(len(shape_of(x))))
    zero = scalar(b, 0.0, "float32")
    high = binary(b, "Max", reduce(b, x, axes, "MAX") if axes else x, zero)
    low = binary(b, "Min", reduce(b, x, axes, "MIN") if axes else x, zero)
    scale = binary(b, "Div", binary(b, "Sub", high, low), scalar(b, 255.0, "float32"))
    scale = select(b, compare(b, scale, zero, "EQ"), scalar(b, 1.0, "float32"), scale)  # all zeros: scale 1
    zero_point = _saturate(b, unary(b, "RoundNearestEven", binary(b, "Div", unary(b, "Neg", low), scale)))
    shape = shape_of(x)
    quotient = binary(b, "Div", x, broadcast_in_dim(b, scale, shape, []))
    y = binary(b, "Add", unary(b, "RoundNearestEven", quotient), broadcast_in_dim(b, zero_point, shape, []))
    return convert(b, _saturate(b, y), "uint8"), scale, convert(b, zero_point, "uint8")


def _saturate(b, v):
    return hlo(
        b, "Clamp", scalar(b, 0.0, "float32"), v, scalar(b, 255.0, "float32"), type=TensorType("float32", shape_of(v))
    )


@lower("onnx", "hlo", "DynamicQuantizeLinear", inputs=1)
def _dynamic_quantize_linear(b, m):
    return list(dynamic_quantize(b, m.root.inputs[0]))


@lower("onnx", "hlo", "DynamicQuantizeMatMul", domain=MS, inputs=range(3, 6))
def _dynamic_quantize_matmul(b, m):
    a, w, b_scale = m.root.inputs[:3]
    qa, a_scale, a_zero_point = dynamic_quantize(b, a)
    acc = _integer_product(b, qa, w, a_zero_point, optional_input(m, 3))
    return _to_float(b, acc, a_scale, b_scale, optional_input(m, 4), dtype_of(a))


# ---------------------------------------------------------------- n-bit weights


def _unpack(b, packed, bits: int, rows: int):
    """uint8 ``packed`` ``[rows, bytes]`` -> ``[rows, bytes * 8 / bits]`` unsigned values, lowest bits first."""
    packed = reshape(b, packed, (rows, int(np.prod(shape_of(packed))) // rows))
    if bits == 8:
        return packed
    per_byte = 8 // bits
    width = shape_of(packed)[1]
    mask = broadcast_in_dim(b, scalar(b, (1 << bits) - 1, "uint8"), (rows, width), [])
    parts = []
    for i in range(per_byte):
        shifted = (
            packed
            if i == 0
            else binary(
                b, "ShiftRightLogical", packed, broadcast_in_dim(b, scalar(b, i * bits, "uint8"), (rows, width), [])
            )
        )
        parts.append(reshape(b, binary(b, "And", shifted, mask), (rows, width, 1)))
    return reshape(b, concat(b, parts, 2), (rows, width * per_byte))


@lower("onnx", "hlo", "MatMulNBits", domain=MS, inputs=range(3, 7))
def _matmul_nbits(b, m):
    node = m.root
    a, packed, scales = node.inputs[:3]
    zero_points = optional_input(m, 3)
    if optional_input(m, 4) is not None:
        raise Refuse("MatMulNBits with g_idx (deprecated by onnxruntime) is not mapped")
    if int(attr(node, "weight_prepacked", 0)):
        raise Refuse("MatMulNBits with weights in onnxruntime's prepacked layout")
    k, n, bits, block = (
        int(attr(node, name, default)) for name, default in (("K", 0), ("N", 0), ("bits", 4), ("block_size", 0))
    )
    if bits not in (2, 4, 8) or not k or not n or not block:
        raise Refuse(f"MatMulNBits with K={k}, N={n}, bits={bits}, block_size={block}")
    blocks = -(-k // block)
    q = convert(b, _unpack(b, packed, bits, n), "float32")  # [N, blocks * block_size]
    if zero_points is None:
        zero = broadcast_in_dim(b, scalar(b, float(1 << (bits - 1)), "float32"), (n, blocks), [])
    elif dtype_of(zero_points) == "uint8":
        zero = slice_(b, convert(b, _unpack(b, zero_points, bits, n), "float32"), [0, 0], [n, blocks])
    else:
        zero = reshape(b, convert(b, zero_points, "float32"), (n, blocks))
    scale = reshape(b, convert(b, scales, "float32"), (n, blocks))
    per_block = (n, blocks, block)
    centred = binary(b, "Sub", reshape(b, q, per_block), broadcast_in_dim(b, zero, per_block, [0, 1]))
    weight = binary(b, "Mul", centred, broadcast_in_dim(b, scale, per_block, [0, 1]))
    weight = slice_(b, reshape(b, weight, (n, blocks * block)), [0, 0], [n, k])
    out_dtype = dtype_of(a)
    bias = optional_input(m, 5)
    y = dot(
        b, convert(b, a, "float32"), transpose(b, weight, [1, 0]), None if bias is None else convert(b, bias, "float32")
    )
    return convert(b, y, out_dtype) if out_dtype != "float32" else y
