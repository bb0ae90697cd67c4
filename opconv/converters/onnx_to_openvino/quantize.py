"""QuantizeLinear, DynamicQuantizeLinear, MatMulInteger and ConvInteger -> opset1 arithmetic, exact.

QuantizeLinear is ``saturate(round_half_even(fl(x / scale)) + zero_point)``, ``fl`` the float32 quotient.  opset1
has no Round, and OpenVINO's CPU plugin divides to within about one ulp only (a quotient of -127.49999 became
the tie -127.5), so the division only proposes and exact float32 steps decide (:func:`round_quotient`, about 40 layers):

* ``k = floor(x / scale)`` from the approximate quotient, and ``t = k + 1/2``: the only tie that can decide
  between ``k`` and ``k + 1``.
* ``r = x - t * scale`` exactly, from ``t * scale = p + e`` (``p`` rounded, ``e`` its exact error by Dekker's
  product over Veltkamp's 12-bit halves) and ``x - p`` (exact by Sterbenz's lemma).
* ``fl(x / scale) == t`` when ``|r| <= ulp(t) / 2 * scale`` (``t``, a half-integer below 2**22, has an even
  significand and wins ties); above it when ``r`` is larger.  Then the even one of ``k``, ``k + 1`` is taken on
  the tie, ``k + 1`` above it.

Every step is a float32 operation whose result is exact or correctly rounded by IEEE arithmetic, which the
plugin follows (it neither contracts these multiplications and subtractions into fused multiply-adds nor
reassociates them; the tests check ties and near-ties in OpenVINO).  Values are first clamped to ``|x / scale|
<= R`` (``R`` a power of two past the output range, which only saturation sees).  Assumptions: scales are
nonzero normal numbers and inputs are not NaN (the CPU plugin flushes subnormals; NaN has no integer value).

DynamicQuantizeLinear's scale ``(max(x, 0) - min(x, 0)) / 255`` is made the correctly rounded float32 quotient
(:func:`_over_255`) before the same rounding.

MatMulInteger / ConvInteger subtract the zero points in float32 and run MatMul / Convolution there, which is
exact while every partial sum stays below 2**24; a longer reduction is split into such pieces (K, or input
channels), each converted to int32 and added there.  QLinearMatMul / QLinearConv
do the same, then rescale the exact sums as the reference does: ``rint(sum * m) + y_zero_point`` with
``m = fl(fl(scale_a * scale_b) / y_scale)`` (float32 or float16) and an exact float64 product.  ``m`` is made
correctly rounded by the exact residual of the approximate quotient (:func:`_divided`), and the rounding decided
by the exact sign of ``sum * m - t`` (:func:`_round_product`).  A float16 ``m`` is rounded by spelled-out steps
over a power-of-two normalisation (:func:`_to_float16`), whose long element-wise chains the CPU plugin fails to
compile as one JIT kernel, so they are cut by :func:`_fence`.
"""

from __future__ import annotations

import weakref

import numpy as np

from ...types import from_onnx_code
from ..lowering import lower
from ._common import Refuse, attr, const, i64, ov, rank_of, static_shape
from .dequantize import spread
from .nn import window_attrs

# Integer output types IR v10 can hold whose range fits the exact rounding (|x / scale| <= 2**17).
QUANTIZED_TYPES = {"uint8": np.uint8, "int8": np.int8, "uint16": np.uint16, "int16": np.int16}
# Largest integer below which every float32 integer sum is exact.
EXACT_SUM = 2**24


class _F32:
    """opset1 float32 arithmetic on one builder (numpy broadcasting everywhere)."""

    def __init__(self, b):
        self.b = b
        self._consts: dict = {}
        self._made: dict = {}

    def once(self, key, make):
        """``make()``, computed once per ``key`` (work on a value that several roundings share)."""
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    def c(self, value):
        """A float32 constant, one per value and builder (each would otherwise be a layer of its own)."""
        key = np.asarray(value, np.float32).tobytes() + bytes(str(np.shape(value)), "ascii")
        if key not in self._consts:
            self._consts[key] = const(self.b, value, np.float32, "q_const")
        return self._consts[key]

    def _binary(self, op, x, y):
        y = self.c(y) if not hasattr(y, "producer") else y
        return ov(self.b, op, x, y, auto_broadcast="numpy")

    def add(self, x, y):
        return self._binary("Add", x, y)

    def sub(self, x, y):
        return self._binary("Subtract", x, y)

    def mul(self, x, y):
        return self._binary("Multiply", x, y)

    def div(self, x, y):
        return self._binary("Divide", x, y)

    def max(self, x, y):
        return self._binary("Maximum", x, y)

    def min(self, x, y):
        return self._binary("Minimum", x, y)

    def ge(self, x, y):
        return self._binary("GreaterEqual", x, y)

    def lt(self, x, y):
        return self._binary("Less", x, y)

    def le(self, x, y):
        return self._binary("LessEqual", x, y)

    def gt(self, x, y):
        return self._binary("Greater", x, y)

    def eq(self, x, y):
        return self._binary("Equal", x, y)

    def ne(self, x, y):
        return self._binary("NotEqual", x, y)

    def floor(self, x):
        return ov(self.b, "Floor", x)

    def abs(self, x):
        return ov(self.b, "Abs", x)

    def select(self, cond, x, y):
        x = self.c(x) if not hasattr(x, "producer") else x
        y = self.c(y) if not hasattr(y, "producer") else y
        return ov(self.b, "Select", cond, x, y, auto_broadcast="numpy")

    def split(self, v, bits: int):
        """``(high, low)`` with ``v = high * 2**bits + low`` and ``0 <= low < 2**bits`` (``v`` an integer)."""
        high = self.floor(self.mul(v, 2.0**-bits))
        return high, self.sub(v, self.mul(high, 2.0**bits))


_ARITHMETIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _f32(b) -> _F32:
    """The float32 arithmetic of builder ``b`` (one per rewrite, so that its constants are shared)."""
    if b not in _ARITHMETIC:
        _ARITHMETIC[b] = _F32(b)
    return _ARITHMETIC[b]


def _fence(b, v):
    """``v`` unchanged, through Unsqueeze + Concat + StridedSlice: a cut in the CPU plugin's fused subgraphs.

    The plugin fuses element-wise chains into JIT kernels ("snippets") and fails to compile one as long as this
    rounding ("active.size() != reg_pool.size()"); this copy is not optimised away, so the chain is cut.
    """
    pair = ov(b, "Concat", *[ov(b, "Unsqueeze", v, i64(b, [0], "fence_axis"))] * 2, axis=0)
    return ov(
        b,
        "StridedSlice",
        pair,
        i64(b, [0], "fence_begin"),
        i64(b, [1], "fence_end"),
        i64(b, [1], "fence_step"),
        begin_mask=[0],
        end_mask=[0],
        new_axis_mask=[],
        shrink_axis_mask=[1],
        ellipsis_mask=[],
    )


def _normalise(f: _F32, v):
    """``sigma`` and ``power`` with ``v = sigma * power`` and ``sigma`` in [1, 2), for a positive normal ``v``.

    Exact: every step multiplies by a power of two.  Returns ``(sigma, down, up, power)``, with ``1 / power``
    as two factors ``down <= 1 <= up`` (one of them 1) that another value can follow by exact multiplications
    (``1 / power`` itself may not be a float32).
    """
    down, up, power = f.c(1.0), f.c(1.0), f.c(1.0)
    for k in (64, 32, 16, 8, 4, 2, 1):
        big = f.ge(v, 2.0**k)
        v = f.mul(v, f.select(big, 2.0**-k, 1.0))
        down = f.select(big, f.mul(down, 2.0**-k), down)
        power = f.select(big, f.mul(power, 2.0**k), power)
        if k in (8, 1):
            v, down, power = _fence(f.b, v), _fence(f.b, down), _fence(f.b, power)
    for k in (64, 32, 16, 8, 4, 2, 1):
        small = f.lt(v, 2.0 ** (1 - k))
        v = f.mul(v, f.select(small, 2.0**k, 1.0))
        up = f.select(small, f.mul(up, 2.0**k), up)
        power = f.select(small, f.mul(power, 2.0**-k), power)
        if k in (8, 1):
            v, up, power = _fence(f.b, v), _fence(f.b, up), _fence(f.b, power)
    return v, down, up, power


# Veltkamp's splitter for float32: fl(v * 4097) cancels to v's top 12 significant bits (the rest in 12 more).
_SPLITTER = 4097.0
# For a positive normal float32 v, v * 5 * 2**-26 lies strictly between half an ulp and one and a half ulps of v
# on either side (the gap below a power of two is half the gap above), so fl(v + it) and fl(v - it) are v's
# neighbours.
_NEIGHBOUR = 5 * 2.0**-26


def _split(f: _F32, v):
    """``(high, low)``: ``v = high + low`` with 12 significant bits each (Veltkamp's split, exact)."""
    c = f.mul(v, _SPLITTER)
    high = f.sub(c, f.sub(c, v))
    return high, f.sub(v, high)


def _product_error(f: _F32, a, b, product, a_parts=None, b_parts=None):
    """``a * b - product`` for ``product = fl(a * b)``, exactly (Dekker: every partial product is exact)."""
    a_high, a_low = a_parts or _split(f, a)
    b_high, b_low = b_parts or _split(f, b)
    error = f.sub(f.mul(a_high, b_high), product)
    error = f.add(f.add(error, f.mul(a_high, b_low)), f.mul(a_low, b_high))
    return f.add(error, f.mul(a_low, b_low))


def _gap_above(f: _F32, v):
    """The distance from a positive normal float32 ``v`` to the next float32 (exact)."""
    return f.sub(f.add(v, f.mul(v, _NEIGHBOUR)), v)


def round_quotient(b, x, scale, bound: int, positive: bool = False):
    """``round_half_even(fl(x / scale))`` as exact float32 integers, saturated beyond ``+-bound`` (<= 2**17).

    ``x`` and ``scale`` are float32 and broadcast; the scale-side work is on ``scale``'s (small) shape.
    ``k = floor(x / scale)`` from the approximate division brackets the result by ``k`` and ``k + 1``, and
    ``t = k + 1/2`` is the only tie that can decide between them.  ``r = x - t * scale`` is exact: ``t * scale``
    is ``p + e`` with ``p`` rounded and ``e`` its exact error (Dekker), ``x - p`` is exact (Sterbenz: ``x`` and
    ``p`` are within a factor 2 whenever ``|t| > 1/2``; for ``t = +-1/2`` only its sign matters there) and so is
    ``r``, a float32.  ``fl(x / scale)`` is ``t`` when ``|r| <= ulp(t) / 2 * scale`` (``t`` has an even
    significand, so it wins the ties at the ends), above ``t`` when ``r`` is larger.  ``positive`` says the scale
    is known to be positive; the work on the scale alone is shared by the roundings of one rewrite.
    """
    f = _f32(b)
    limit = 1 << max(int(bound) + 2, 2).bit_length()  # R: a power of two past the saturation bound
    if limit > 2**17:
        raise Refuse(f"a quantization range of {bound} (exact rounding covers 2**17)")
    if not positive:
        x = f.select(f.lt(scale, 0.0), ov(b, "Negative", x), x)  # x / scale == (-x) / |scale|

    def scale_side():
        magnitude = scale if positive else f.abs(scale)
        edge = f.mul(magnitude, float(limit))  # |x / scale| <= R: beyond it only saturation sees x (exact clamp)
        return magnitude, edge, ov(b, "Negative", edge), _split(f, magnitude)

    scale, edge, neg_edge, scale_parts = f.once(("scale", id(scale), limit, positive), scale_side)
    x = f.min(f.max(x, neg_edge), edge)
    below = f.floor(f.div(x, scale))
    tie = f.add(below, 0.5)
    product = f.mul(tie, scale)
    residual = f.sub(f.sub(x, product), _product_error(f, tie, scale, product, b_parts=scale_parts))
    half_gap = f.mul(f.mul(_gap_above(f, f.abs(tie)), 0.5), scale)
    above = f.gt(residual, half_gap)
    at_tie = ov(b, "LogicalAnd", ov(b, "LogicalNot", above), f.ge(residual, ov(b, "Negative", half_gap)))
    half, _ = f.split(below, 1)
    odd = f.ne(below, f.mul(half, 2.0))
    bump = ov(b, "LogicalOr", above, ov(b, "LogicalAnd", at_tie, odd))
    return f.add(below, f.select(bump, 1.0, 0.0))


def _over_255(f: _F32, a):
    """``fl(a / 255)`` for a positive normal float32 ``a``: the approximate quotient ``q`` moved to a
    neighbour while the exact ``a - 255 q = (a - 256 q) + q`` (both steps exact by Sterbenz's lemma) is past
    the midpoint; two steps cover a quotient two ulps off (a quotient is never a midpoint)."""
    q = f.div(a, 255.0)
    for _ in range(2):
        residual = f.add(f.sub(a, f.mul(q, 256.0)), q)
        step = f.mul(q, _NEIGHBOUR)
        up, down = f.add(q, step), f.sub(q, step)
        q = f.select(
            f.gt(residual, f.mul(f.sub(up, q), 127.5)),
            up,
            f.select(f.lt(residual, f.mul(f.sub(down, q), 127.5)), down, q),
        )
    return q


def quantize(b, x, scale, zero_point, target: str, positive: bool = False):
    """``saturate(round_half_even(fl(x / scale)) + zero_point)`` of ``target`` type (all float32 until the end)."""
    info = np.iinfo(QUANTIZED_TYPES[target])
    f = _f32(b)
    n = round_quotient(b, x, scale, int(info.max) - int(info.min), positive)
    if zero_point is not None:
        n = f.add(n, ov(b, "Convert", zero_point, destination_type="float32"))
    n = f.min(f.max(n, float(info.min)), float(info.max))
    return ov(b, "Convert", n, destination_type=target)


# ---------------------------------------------------------------------------
# QuantizeLinear
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "QuantizeLinear", inputs=(2, 3), names=("x", "scale", "zero_point"))
def _quantize_linear(b, m):
    x, scale = m["x"], m["scale"]
    zero_point = m.values.get("zero_point")
    if x.dtype != "float32" or scale.dtype != "float32":
        raise Refuse(f"QuantizeLinear of {x.dtype} by a {scale.dtype} scale (exact rounding is for float32)")
    wanted = attr(m.root, "output_dtype", 0)
    if zero_point is not None:
        target = zero_point.dtype
    elif wanted:
        target = from_onnx_code(int(wanted)).name
    else:
        target = "uint8"
    if target not in QUANTIZED_TYPES:
        raise Refuse(f"QuantizeLinear to {target} (converted: {', '.join(QUANTIZED_TYPES)})")
    if attr(m.root, "precision", 0):
        raise Refuse("the precision attribute")
    rank = rank_of(x)
    axis, block = int(attr(m.root, "axis", 1)) % max(rank, 1), int(attr(m.root, "block_size", 0))
    scale = spread(b, scale, x, axis, block)
    if zero_point is not None:
        zero_point = spread(b, zero_point, x, axis, block)
    return quantize(b, x, scale, zero_point, target)


# ---------------------------------------------------------------------------
# DynamicQuantizeLinear
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "DynamicQuantizeLinear", inputs=1, names=("x",))
def _dynamic_quantize_linear(b, m):
    x = m["x"]
    if x.dtype != "float32":
        raise Refuse(f"DynamicQuantizeLinear of {x.dtype}")
    f = _f32(b)
    rank = rank_of(x)
    axes = const(b, list(range(rank)), np.int64, "all_axes")
    high = f.max(ov(b, "ReduceMax", x, axes, keep_dims=False), 0.0) if rank else f.max(x, 0.0)
    low = f.min(ov(b, "ReduceMin", x, axes, keep_dims=False), 0.0) if rank else f.min(x, 0.0)
    spread = f.sub(high, low)
    zero_range = f.eq(spread, 0.0)
    # all zeros (ONNX's formula divides by 0): onnxruntime's scale 1, so zero point 0 and zeros
    scale = f.select(zero_range, 1.0, _over_255(f, f.select(zero_range, 1.0, spread)))
    zero_point = quantize(b, ov(b, "Negative", low), scale, None, "uint8", positive=True)
    y = quantize(b, x, scale, zero_point, "uint8", positive=True)
    return [y, scale, zero_point]


# ---------------------------------------------------------------------------
# MatMulInteger and ConvInteger
# ---------------------------------------------------------------------------

_INTEGER_OPERANDS = {"uint8", "int8"}


def _centred(b, value, zero_point, spread_to=None):
    """``value - zero_point`` in float32 (exact: 8-bit operands) and the largest magnitude it can reach."""
    if value.dtype not in _INTEGER_OPERANDS:
        raise Refuse(f"an operand of {value.dtype}")
    f = _f32(b)
    info = np.iinfo(QUANTIZED_TYPES[value.dtype])
    y = ov(b, "Convert", value, destination_type="float32")
    if zero_point is None:
        return y, max(abs(int(info.min)), int(info.max))
    if zero_point.dtype != value.dtype:
        raise Refuse(f"a {zero_point.dtype} zero point for a {value.dtype} operand")
    zp = ov(b, "Convert", zero_point, destination_type="float32")
    if spread_to is not None:
        zp = spread_to(zp)
    return f.sub(y, zp), int(info.max) - int(info.min)


def _chunks(length: int, per_step: int, a_range: int, b_range: int, what: str) -> list[int]:
    """Lengths of the pieces of a reduction over ``length`` steps of ``per_step`` products each whose float32
    sums stay exact (every partial sum below 2**24)."""
    steps = (EXACT_SUM - 1) // (per_step * a_range * b_range)
    if steps < 1:
        raise Refuse(
            f"{what} sums {per_step} products of up to {a_range} * {b_range} in one step: float32 is "
            f"exact only below 2**24"
        )
    return [min(steps, length - start) for start in range(0, length, steps)]


def _exact_sum(b, a, w, axes: tuple[int, int], lengths: list[int], product):
    """``product(a, w)`` as int32, by pieces of the reduction (``lengths`` along ``a``'s and ``w``'s ``axes``)
    each exact in float32, converted to int32 and added there (int32 addition is exact)."""
    if len(lengths) == 1:
        return ov(b, "Convert", product(a, w), destination_type="int32")

    def pieces(v, axis):
        parts = ov(
            b,
            "VariadicSplit",
            v,
            b.const(np.asarray(axis, np.int64), "axis"),
            i64(b, lengths, "lengths"),
            _outputs=len(lengths),
        )
        return parts if isinstance(parts, list) else [parts]

    total = None
    for a_part, w_part in zip(pieces(a, axes[0]), pieces(w, axes[1])):
        part = ov(b, "Convert", product(a_part, w_part), destination_type="int32")
        total = part if total is None else ov(b, "Add", total, part, auto_broadcast="numpy")
    return total


@lower("onnx", "openvino", "MatMulInteger", inputs=(2, 3, 4), names=("a", "b", "a_zero_point", "b_zero_point"))
def _matmul_integer(b, m):
    a, w = m["a"], m["b"]
    a_shape = static_shape(a)
    f_a, range_a = _centred(b, a, m.values.get("a_zero_point"), _row_zero_point(b, m, a_shape))
    f_b, range_b = _centred(b, w, m.values.get("b_zero_point"))
    lengths = _chunks(a_shape[-1], 1, range_a, range_b, "MatMulInteger")
    w_rank = len(static_shape(w))
    return _exact_sum(
        b,
        f_a,
        f_b,
        (len(a_shape) - 1, max(w_rank - 2, 0)),
        lengths,
        lambda x, y: ov(b, "MatMul", x, y, transpose_a=False, transpose_b=False),
    )


def _row_zero_point(b, m, a_shape):
    """A's zero point is per tensor or per row (its M dimension): a vector becomes a column."""
    zp = m.values.get("a_zero_point")
    if zp is None or not static_shape(zp) or static_shape(zp) == (1,) or len(a_shape) < 2:
        return None
    return lambda v: ov(b, "Reshape", v, i64(b, [-1, 1], "row_zero_point"), special_zero=False)


def _is_vector(value) -> bool:
    return value is not None and int(np.prod(static_shape(value))) > 1


def _channel_column(b, ones: int):
    """A reshape of a per-output-channel vector to ``[C, 1 (x ones)]``, to broadcast against weights or outputs."""
    return lambda v: ov(b, "Reshape", v, i64(b, [-1] + [1] * ones, "per_channel"), special_zero=False)


@lower("onnx", "openvino", "ConvInteger", inputs=(2, 3, 4), names=("x", "w", "x_zero_point", "w_zero_point"))
def _conv_integer(b, m):
    x, w = m["x"], m["w"]
    node = m.root
    w_shape = static_shape(w)
    if int(attr(node, "group", 1)) != 1:
        raise Refuse("grouped ConvInteger")
    spatial = len(w_shape) - 2
    kernel = attr(node, "kernel_shape")
    if kernel is not None and list(kernel) != list(w_shape[2:]):
        raise Refuse(f"kernel_shape {list(kernel)} differs from the weights' {list(w_shape[2:])}")
    f_x, range_x = _centred(b, x, m.values.get("x_zero_point"))
    w_zp = m.values.get("w_zero_point")
    f_w, range_w = _centred(b, w, w_zp, _channel_column(b, spatial + 1) if _is_vector(w_zp) else None)
    lengths = _chunks(w_shape[1], int(np.prod(w_shape[2:])), range_x, range_w, "ConvInteger")
    window = window_attrs(node, spatial)
    window["dilations"] = list(attr(node, "dilations", [1] * spatial))
    return _exact_sum(b, f_x, f_w, (1, 1), lengths, lambda x, y: ov(b, "Convolution", x, y, **window))


# ---------------------------------------------------------------------------
# QLinearMatMul and QLinearConv: rint(sum * fl(fl(scale_a * scale_b) / y_scale)) + y_zero_point
# ---------------------------------------------------------------------------
# The reference multiplies the exact integer sums by the float32 (or float16) multiplier in float64, an exact
# product, and rounds half to even.  Both the correctly rounded multiplier and the rounding are decided here
# by exact residuals (Dekker's product error), as QuantizeLinear's rounding is.


def _divided(f: _F32, p, d):
    """``fl(p / d)`` for positive normal float32 ``p`` and ``d``: the approximate quotient ``q`` moved to a
    neighbour while the residual ``p - q * d`` (``p - fl(q * d)`` exact by Sterbenz's lemma, minus the product's
    exact error) is past the midpoint; two steps cover a quotient two ulps off, and from one ulp off the residual
    is a float32 exactly (a quotient is never a midpoint, so there are no ties)."""
    q = f.div(p, d)
    d_parts = _split(f, d)
    for _ in range(2):
        product = f.mul(q, d)
        residual = f.sub(f.sub(p, product), _product_error(f, q, d, product, b_parts=d_parts))
        step = f.mul(q, _NEIGHBOUR)
        up, down = f.add(q, step), f.sub(q, step)
        q = f.select(
            f.gt(residual, f.mul(f.mul(f.sub(up, q), 0.5), d)),
            up,
            f.select(f.lt(residual, f.mul(f.mul(f.sub(down, q), 0.5), d)), down, q),
        )
    return q


def _to_float16(f: _F32, v):
    """``v`` (positive, below float16's largest value) rounded half to even to float16, exactly: 11 significant
    bits, or a multiple of 2**-24 below 2**-14 (float16's subnormals).

    (A Convert to f16 and back is removed by the CPU plugin, so the rounding is spelled out.)
    """
    sigma, _, _, power = _normalise(f, v)
    subnormal = f.lt(v, 2.0**-14)
    scaled = f.select(subnormal, f.mul(v, 2.0**24), f.mul(sigma, 2.0**10))
    unit = f.select(subnormal, 2.0**-24, f.mul(power, 2.0**-10))
    whole = f.floor(scaled)
    fraction = f.sub(scaled, whole)
    half, _ = f.split(whole, 1)
    odd = f.ne(whole, f.mul(half, 2.0))
    bump = ov(f.b, "LogicalOr", f.gt(fraction, 0.5), ov(f.b, "LogicalAnd", f.eq(fraction, 0.5), odd))
    return f.mul(f.add(whole, f.select(bump, 1.0, 0.0)), unit)


def _round_product(f: _F32, total, multiplier, offset, limit: int):
    """``rint(total * multiplier + offset)`` exactly, for integer ``|total| < 2**20``, a positive normal
    multiplier and an integer ``offset`` (which decides the parity of ties); ``total * multiplier`` saturated
    beyond ``+-limit``.  ``k = floor(fl(total * multiplier))`` and ``t = k + 1/2`` decide: the exact
    ``total * multiplier - t`` is ``(p - t) + e`` (``p`` the rounded product, ``p - t`` exact by Sterbenz's lemma
    or far from 0, ``e`` the product's exact error), and a float32 sum of two floats has the exact sum's sign."""
    product = f.mul(total, multiplier)
    below = f.floor(f.min(f.max(product, float(-limit)), float(limit)))
    excess = f.add(f.sub(product, f.add(below, 0.5)), _product_error(f, total, multiplier, product))
    below = f.add(below, offset)
    half, _ = f.split(below, 1)
    odd = f.ne(below, f.mul(half, 2.0))
    bump = ov(f.b, "LogicalOr", f.gt(excess, 0.0), ov(f.b, "LogicalAnd", f.eq(excess, 0.0), odd))
    return f.add(below, f.select(bump, 1.0, 0.0))


def _multiplier(f: _F32, scale_a, scale_b, y_scale):
    """``|fl(fl(scale_a * scale_b) / y_scale)|`` in the scales' type (float32 or float16) as float32, and
    whether it is negative (scales are nonzero)."""
    half = scale_a.dtype == "float16"
    scales = [ov(f.b, "Convert", v, destination_type="float32") if half else v for v in (scale_a, scale_b, y_scale)]
    signs = [f.lt(v, 0.0) for v in scales]
    negative = ov(
        f.b,
        "NotEqual",
        ov(f.b, "NotEqual", signs[0], signs[1], auto_broadcast="numpy"),
        signs[2],
        auto_broadcast="numpy",
    )
    scale_a, scale_b, y_scale = (f.abs(v) for v in scales)
    product = f.mul(scale_a, scale_b)  # IEEE float32; exact for float16 operands
    if half:
        product = _to_float16(f, product)
    quotient = _divided(f, product, y_scale)
    # float32 then float16 is an innocuous double rounding (24 >= 2 * 11 + 2 bits).
    return (_to_float16(f, quotient) if half else quotient), negative


def _requantize(b, m, total, reduction: int, ranges, scales, out_zero_point, spread=None):
    f = _f32(b)
    if int(reduction) * ranges[0] * ranges[1] >= 2**20:
        raise Refuse(
            f"{m.root.op} sums {reduction} products of up to {ranges[0]} * {ranges[1]}: the exact "
            f"requantization covers sums below 2**20"
        )
    dtypes = {v.dtype for v in scales}
    if len(dtypes) != 1 or not dtypes <= {"float32", "float16"}:
        raise Refuse(f"{m.root.op} scales of {sorted(map(str, dtypes))}")
    if out_zero_point.dtype not in _INTEGER_OPERANDS:
        raise Refuse(f"{m.root.op} to {out_zero_point.dtype}")
    info = np.iinfo(QUANTIZED_TYPES[out_zero_point.dtype])
    multiplier, negative = _multiplier(f, *scales)
    if spread is not None:
        multiplier, negative = spread(multiplier), spread(negative)
    total = f.select(negative, ov(b, "Negative", total), total)  # rint(s * -m) = rint(-s * m)
    # The reference rounds after adding the zero point: its parity decides ties.
    n = _round_product(
        f,
        total,
        multiplier,
        ov(b, "Convert", out_zero_point, destination_type="float32"),
        int(info.max) - int(info.min) + 2,
    )
    n = f.min(f.max(n, float(info.min)), float(info.max))
    return ov(b, "Convert", n, destination_type=out_zero_point.dtype)


def _per_tensor(m, *names):
    for name in names:
        if int(np.prod(static_shape(m[name]))) != 1:
            raise Refuse(f"{m.root.op} with a {name} of shape {list(static_shape(m[name]))} (per tensor only)")


@lower(
    "onnx",
    "openvino",
    "QLinearMatMul",
    inputs=8,
    names=("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"),
)
def _qlinear_matmul(b, m):
    _per_tensor(m, "a_scale", "a_zero_point", "y_scale", "y_zero_point")
    a_shape = static_shape(m["a"])
    f_a, range_a = _centred(b, m["a"], m["a_zero_point"])
    f_b, range_b = _centred(b, m["b"], m["b_zero_point"])  # b's zero point and scale may be per column
    total = ov(b, "MatMul", f_a, f_b, transpose_a=False, transpose_b=False)
    return _requantize(
        b, m, total, a_shape[-1], (range_a, range_b), (m["a_scale"], m["b_scale"], m["y_scale"]), m["y_zero_point"]
    )


@lower(
    "onnx",
    "openvino",
    "QLinearConv",
    inputs=8,
    names=("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"),
)
def _qlinear_conv(b, m):
    _per_tensor(m, "x_scale", "x_zero_point", "y_scale", "y_zero_point")
    node = m.root
    w_shape = static_shape(m["w"])
    if int(attr(node, "group", 1)) != 1:
        raise Refuse("grouped QLinearConv")
    spatial = len(w_shape) - 2
    f_x, range_x = _centred(b, m["x"], m["x_zero_point"])
    w_zp = m["w_zero_point"]
    f_w, range_w = _centred(b, m["w"], w_zp, _channel_column(b, spatial + 1) if _is_vector(w_zp) else None)
    window = window_attrs(node, spatial)
    window["dilations"] = list(attr(node, "dilations", [1] * spatial))
    total = ov(b, "Convolution", f_x, f_w, **window)
    spread = _channel_column(b, spatial) if _is_vector(m["w_scale"]) else None  # against [N, C, spatial...]
    return _requantize(
        b,
        m,
        total,
        int(np.prod(w_shape[1:])),
        (range_x, range_w),
        (m["x_scale"], m["w_scale"], m["y_scale"]),
        m["y_zero_point"],
        spread,
    )
