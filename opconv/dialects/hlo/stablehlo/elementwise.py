"""Element-wise HLO ops: one StableHLO (or CHLO) op each, and the fused activations decomposed."""

from __future__ import annotations

import math

import numpy as np

from ._writer import FunctionWriter, Operand, emitter

# HLO op -> StableHLO op applied to the input converted to the output's element type.
_UNARY = {
    "Abs": "stablehlo.abs",
    "Ceil": "stablehlo.ceil",
    "Floor": "stablehlo.floor",
    "Cos": "stablehlo.cosine",
    "Sin": "stablehlo.sine",
    "Tan": "stablehlo.tan",
    "Tanh": "stablehlo.tanh",
    "Exp": "stablehlo.exponential",
    "Expm1": "stablehlo.exponential_minus_one",
    "Log": "stablehlo.log",
    "Log1p": "stablehlo.log_plus_one",
    "Neg": "stablehlo.negate",
    "Not": "stablehlo.not",
    "Sign": "stablehlo.sign",
    "Sqrt": "stablehlo.sqrt",
    "Cbrt": "stablehlo.cbrt",
    "Sigmoid": "stablehlo.logistic",
    "Round": "stablehlo.round_nearest_afz",
    "RoundNearestEven": "stablehlo.round_nearest_even",
    "PopulationCount": "stablehlo.popcnt",
    # CHLO ops: StableHLO decompositions that IREE and XLA legalize themselves.
    "Erf": "chlo.erf",
    "Acos": "chlo.acos",
    "Asin": "chlo.asin",
    "Asinh": "chlo.asinh",
    "Atan": "chlo.atan",
    "Atanh": "chlo.atanh",
    "Sinh": "chlo.sinh",
}

# HLO op -> StableHLO op on operands broadcast to the output's shape.
_BINARY = {
    "Add": "stablehlo.add",
    "Sub": "stablehlo.subtract",
    "Div": "stablehlo.divide",
    "Max": "stablehlo.maximum",
    "Min": "stablehlo.minimum",
    "And": "stablehlo.and",
    "Or": "stablehlo.or",
    "Xor": "stablehlo.xor",
    "Atan2": "stablehlo.atan2",
    "Rem": "stablehlo.remainder",
    "Pow": "stablehlo.power",
    "ShiftLeft": "stablehlo.shift_left",
    "ShiftRightArithmetic": "stablehlo.shift_right_arithmetic",
    "ShiftRightLogical": "stablehlo.shift_right_logical",
}


def _unary(stablehlo_op: str):
    def emit(w: FunctionWriter, x: Operand) -> Operand:
        dtype, _ = w.out()  # Cbrt and Expm1 of integers give floats
        return w.unary(stablehlo_op, w.convert(x, dtype))

    return emit


for _op, _name in _UNARY.items():
    emitter(_op)(_unary(_name))


def operand_to_output(w: FunctionWriter, x: Operand, broadcast_dimensions=None) -> Operand:
    """``x`` broadcast to the current node's output shape (XLA or numpy rules)."""
    _, shape = w.out()
    if x.shape == tuple(shape):
        return x
    if broadcast_dimensions:
        return w.broadcast_to(x, shape, broadcast_dimensions)
    return w.broadcast_to(x, shape)


def _binary(stablehlo_op: str):
    def emit(w: FunctionWriter, lhs: Operand, rhs: Operand, *, broadcast_dimensions=None) -> Operand:
        dtype, shape = w.out()
        if lhs.rank != rhs.rank and broadcast_dimensions:
            # broadcast_dimensions places the lower-rank operand.
            low, high = (lhs, rhs) if lhs.rank < rhs.rank else (rhs, lhs)
            low = w.broadcast_to(low, shape, broadcast_dimensions)
            lhs, rhs = (low, high) if lhs.rank < rhs.rank else (high, low)
        lhs, rhs = operand_to_output(w, lhs), operand_to_output(w, rhs)
        rhs = w.convert(rhs, lhs.dtype)  # Pow's exponent and the shift amounts may have their own type
        if stablehlo_op == "stablehlo.power" and lhs.is_float:
            return _float_power(w, lhs, rhs)
        return w.op1(stablehlo_op, [lhs, rhs], dtype, shape)

    return emit


for _op, _name in _BINARY.items():
    emitter(_op)(_binary(_name))


def _float_power(w: FunctionWriter, base: Operand, exponent: Operand) -> Operand:
    """C ``pow``: a negative base gives |base| ** exponent, negated for odd integral exponents, and NaN for
    non-integral ones.  Spelled out because IREE returns NaN for every negative base."""
    magnitude = w.binary("stablehlo.power", w.unary("stablehlo.abs", base), exponent)
    integral = w.compare(w.unary("stablehlo.floor", exponent), exponent, "EQ")
    odd = w.compare(w.binary("stablehlo.remainder", exponent, w.full(2, exponent)), w.full(0, exponent), "NE")
    signed = w.select(odd, w.unary("stablehlo.negate", magnitude), magnitude)
    negative_result = w.select(integral, signed, w.full(np.nan, base))
    return w.select(w.compare(base, w.full(0, base), "LT"), negative_result, magnitude)


@emitter("Complex")
def complex_(w, lhs, rhs):
    dtype, shape = w.out()
    return w.op1("stablehlo.complex", [operand_to_output(w, lhs), operand_to_output(w, rhs)], dtype, shape)


@emitter("Real", "Imag")
def real_imag(w, x):
    dtype, shape = w.out()
    if x.is_complex:
        name = "stablehlo.real" if w.node.op == "Real" else "stablehlo.imag"
        return w.op1(name, [x], dtype, shape)
    return w.convert(x, dtype) if w.node.op == "Real" else w.constant(0, dtype, shape)


@emitter("Copy")
def copy(w, x):
    return x


@emitter("Rsqrt")
def rsqrt(w, x):
    if not x.is_float:
        raise w.error(f"Rsqrt of {x.dtype} has no StableHLO form (stablehlo.rsqrt takes floating types)")
    return w.unary("stablehlo.rsqrt", x)


@emitter("IsFinite")
def is_finite(w, x):
    dtype, _ = w.out()
    return w.convert(w.unary("stablehlo.is_finite", x, "bool"), dtype)


@emitter("Compare")
def compare(w, lhs, rhs, *, comparison_direction):
    return w.compare(operand_to_output(w, lhs), operand_to_output(w, rhs), comparison_direction)


@emitter("Select")
def select(w, pred, on_true, on_false):
    if pred.rank:
        pred = operand_to_output(w, pred)
    return w.select(pred, operand_to_output(w, on_true), operand_to_output(w, on_false))


@emitter("Clamp")
def clamp(w, low, x, high):
    dtype, shape = w.out()
    x = operand_to_output(w, x)
    bounds = [b if b.rank == 0 else operand_to_output(w, b) for b in (low, high)]
    return w.op1("stablehlo.clamp", [bounds[0], x, bounds[1]], dtype, shape)


@emitter("Convert")
def convert(w, x):
    dtype, _ = w.out()
    return w.convert(x, dtype)


@emitter("BitcastConvert")
def bitcast_convert(w, x):
    dtype, shape = w.out()
    if "bool" in (x.dtype, dtype):
        # A bool is one byte holding 0 or 1 in the dialect, but an i1 in MLIR, which bitcast_convert
        # cannot reinterpret as 8 bits; for 0/1 bytes a value conversion gives the same result.
        return w.op1("stablehlo.convert", [x], dtype, shape)
    return w.op1("stablehlo.bitcast_convert", [x], dtype, shape)


# -- activations -----------------------------------------------------------------


def _float_only(w, x):
    if not x.is_float:
        raise w.error(f"{w.node.op} of {x.dtype} is only exported for floating types")


@emitter("Relu")
def relu(w, x):
    return w.binary("stablehlo.maximum", x, w.full(0, x))


@emitter("Relu6")
def relu6(w, x):
    return w.op1("stablehlo.clamp", [w.scalar(0, x.dtype), x, w.scalar(6, x.dtype)], x.dtype, x.shape)


@emitter("LeakyRelu")
def leaky_relu(w, x, *, alpha):
    _float_only(w, x)
    return w.select(w.compare(x, w.full(0, x), "GE"), x, w.mul(x, w.full(alpha, x)))


@emitter("PRelu")
def prelu(w, x, slope):
    slope = w.convert(w.broadcast_to(slope, x.shape), x.dtype)
    return w.select(w.compare(x, w.full(0, x), "GE"), x, w.mul(x, slope))


@emitter("Elu")
def elu(w, x, *, alpha):
    _float_only(w, x)
    negative = w.mul(w.unary("stablehlo.exponential_minus_one", x), w.full(alpha, x))
    return w.select(w.compare(x, w.full(0, x), "GE"), x, negative)


def gelu_of(w: FunctionWriter, x: Operand, approximate: bool) -> Operand:
    """0.5 * x * (1 + erf(x / sqrt(2))), or with tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)) for approximate."""
    if approximate:
        cube = w.mul(w.mul(x, x), x)
        inner = w.mul(w.add(x, w.mul(cube, w.full(0.044715, x))), w.full(math.sqrt(2 / math.pi), x))
        shape = w.unary("stablehlo.tanh", inner)
    else:
        shape = w.unary("chlo.erf", w.mul(x, w.full(1 / math.sqrt(2), x)))
    return w.mul(w.mul(x, w.full(0.5, x)), w.add(shape, w.full(1, x)))


@emitter("Gelu")
def gelu(w, x, *, approximate):
    return gelu_of(w, x, bool(approximate))


@emitter("Silu", "Swish")
def silu(w, x):
    return w.mul(x, w.unary("stablehlo.logistic", x))


@emitter("Mish")
def mish(w, x):
    softplus = w.unary("stablehlo.log_plus_one", w.unary("stablehlo.exponential", x))
    return w.mul(x, w.unary("stablehlo.tanh", softplus))


def hard_sigmoid_of(w, x, slope, offset):
    line = w.add(w.mul(x, w.full(slope, x)), w.full(offset, x))
    return w.op1("stablehlo.clamp", [w.scalar(0, x.dtype), line, w.scalar(1, x.dtype)], x.dtype, x.shape)


@emitter("HardSigmoid")
def hard_sigmoid(w, x, *, slope, offset):
    return hard_sigmoid_of(w, x, slope, offset)


@emitter("HardSwish")
def hard_swish(w, x):
    return w.mul(x, hard_sigmoid_of(w, x, 1 / 6, 0.5))


@emitter("Softplus")
def softplus(w, x, *, beta, threshold):
    scaled = w.mul(x, w.full(beta, x))
    smooth = w.div(w.unary("stablehlo.log_plus_one", w.unary("stablehlo.exponential", scaled)), w.full(beta, x))
    return w.select(w.compare(scaled, w.full(threshold, x), "GT"), x, smooth)


def _halves(w: FunctionWriter, x: Operand, dim: int) -> tuple[Operand, Operand]:
    dim = dim % x.rank
    half = x.shape[dim] // 2
    if x.shape[dim] % 2:
        raise w.error(f"dim {dim} of {x.type} does not split into two equal halves")
    return w.slice_axis(x, dim, 0, half), w.slice_axis(x, dim, half, 2 * half)


@emitter("Glu")
def glu(w, x, *, dim):
    a, b = _halves(w, x, dim)
    return w.mul(a, w.unary("stablehlo.logistic", b))


@emitter("GeGlu")
def geglu(w, x, *, approximate, dim):
    a, b = _halves(w, x, dim)
    return w.mul(a, gelu_of(w, b, bool(approximate)))


@emitter("Gtu")
def gtu(w, x, *, dim):
    a, b = _halves(w, x, dim)
    return w.mul(w.unary("stablehlo.tanh", a), w.unary("stablehlo.logistic", b))


def _rng(distribution: str):
    def emit(w, low, high, shape, *, seed):
        """stablehlo.rng of the distribution; its draws are the consumer's own (``seed`` is not expressible),
        so only their distribution matches the reference executor."""
        dtype, out_shape = w.out()
        dims = w.constant(np.asarray(out_shape, np.int64), "int64")
        attrs = {"rng_distribution": f"#stablehlo<rng_distribution {distribution}>"}
        return w.op1("stablehlo.rng", [w.reshape(low, ()), w.reshape(high, ()), dims], dtype, out_shape, attrs)

    return emit


emitter("RngUniform")(_rng("UNIFORM"))
emitter("RngNormal")(_rng("NORMAL"))
