"""Element-wise ONNX ops: arithmetic (numpy broadcasting), unary math and activations.

One-to-one maps are tables (ONNX op -> opset1 op) turned into rules in a loop,
so each line states one mapping.
"""

from __future__ import annotations

import numpy as np

from ._common import Refuse, Rule, attr, const, dtype_of, ov, pattern

# ONNX binary ops with numpy broadcasting (opset 7 on; earlier versions used the `broadcast` attribute).
BINARY = {
    "Add": "Add",
    "Sub": "Subtract",
    "Mul": "Multiply",
    "Div": "Divide",
    "Pow": "Power",
    "Max": "Maximum",
    "Min": "Minimum",
    "Equal": "Equal",
    "Less": "Less",
    "Greater": "Greater",
    "LessOrEqual": "LessEqual",
    "GreaterOrEqual": "GreaterEqual",
    "And": "LogicalAnd",
    "Or": "LogicalOr",
    "Xor": "NotEqual",  # on booleans; OpenVINO reads LogicalXor as an opset2 layer
}

UNARY = {
    "Relu": "ReLU",
    "Sigmoid": "Sigmoid",
    "Tanh": "Tanh",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Abs": "Abs",
    "Neg": "Negative",
    "Erf": "Erf",
    "Floor": "Floor",
    "Ceil": "Ceiling",
    "Sign": "Sign",
    "Sin": "Sin",
    "Cos": "Cos",
    "Tan": "Tan",
    "Asin": "Asin",
    "Acos": "Acos",
    "Atan": "Atan",
    "Sinh": "Sinh",
    "Cosh": "Cosh",
    "Not": "LogicalNot",
}


def _binary(ov_op: str):
    def replace(b, m):
        a, c = m["a"], m["b"]
        if a.dtype is not None and c.dtype is not None and a.dtype != c.dtype:
            # ONNX Pow allows a different exponent type; opset1 binary ops need one element type.
            raise Refuse(f"inputs have different element types ({a.dtype}, {c.dtype})")
        extra = {}
        if ov_op == "Divide" and a.dtype is not None and np.dtype(dtype_of(a)).kind in "iu":
            extra["m_pythondiv"] = False  # ONNX integer Div truncates toward zero, like C
        return ov(b, ov_op, a, c, auto_broadcast="numpy", **extra)
    return replace


def _unary(ov_op: str):
    return lambda b, m: ov(b, ov_op, m["x"])


def _leaky_relu(b, m):
    x = m["x"]
    slope = const(b, [attr(m.root, "alpha", 0.01)], dtype_of(x), "slope")
    return ov(b, "PReLU", x, slope)


def _elu(b, m):
    return ov(b, "Elu", m["x"], alpha=float(attr(m.root, "alpha", 1.0)))


def _reciprocal(b, m):
    x = m["x"]
    if np.dtype(dtype_of(x)).kind != "f":
        raise Refuse("Reciprocal of integers is not defined the same way (ONNX: floats only)")
    return ov(b, "Divide", const(b, 1, dtype_of(x), "one"), x, auto_broadcast="numpy")


def _where(b, m):
    return ov(b, "Select", m["cond"], m["a"], m["b"], auto_broadcast="numpy")


def _clip_bounds(m) -> tuple[float, float]:
    """Clip's bounds: attributes before opset 11, constant inputs from 11 (omitted: unbounded)."""
    x = m["x"]
    info = np.finfo(dtype_of(x)) if np.dtype(dtype_of(x)).kind == "f" else np.iinfo(dtype_of(x))
    if m.root.version is not None and m.root.version < 11:
        return float(attr(m.root, "min", info.min)), float(attr(m.root, "max", info.max))
    bounds = []
    for i, default in ((1, info.min), (2, info.max)):
        v = m.root.inputs[i] if len(m.root.inputs) > i else None
        if v is None:
            bounds.append(float(default))
            continue
        data = m.constant("lo" if i == 1 else "hi")
        if data is None:
            raise Refuse(f"Clip bound {v.name!r} must be a constant for Clamp")
        bounds.append(float(np.asarray(data).reshape(())))
    return bounds[0], bounds[1]


def _clip(b, m):
    lo, hi = _clip_bounds(m)
    return ov(b, "Clamp", m["x"], min=lo, max=hi)


def _mod(b, m):
    a, c = m["a"], m["b"]
    if a.dtype != c.dtype:
        raise Refuse(f"inputs have different element types ({a.dtype}, {c.dtype})")
    # fmod=0: the remainder takes the divisor's sign (floor); fmod=1: the dividend's (C fmod).
    if not attr(m.root, "fmod", 0) and np.dtype(dtype_of(a)).kind == "f":
        raise Refuse("float Mod with fmod=0: OpenVINO's FloorMod differs at infinite and zero operands")
    return ov(b, "Mod" if attr(m.root, "fmod", 0) else "FloorMod", a, c, auto_broadcast="numpy")


def _bit_shift(b, m):
    """x * 2**y or floor(x / 2**y) for unsigned x; the power is exact in float32 up to 2**31."""
    x, y = m["a"], m["b"]
    kind = np.dtype(dtype_of(x))
    if kind.kind != "u" or kind.itemsize > 2:
        raise Refuse(f"BitShift of {x.dtype} (decomposed for uint8/uint16, whose shifted values float32 holds "
                     "exactly)")
    power = ov(b, "Power", const(b, 2, np.float32, "two"), ov(b, "Convert", y, destination_type="float32"),
               auto_broadcast="numpy")
    wide = ov(b, "Convert", x, destination_type="float32")
    if attr(m.root, "direction", "LEFT") in ("LEFT", b"LEFT"):
        # Bits shifted past the type's width are lost: keep the product modulo 2**bits.
        shifted = ov(b, "FloorMod", ov(b, "Multiply", wide, power, auto_broadcast="numpy"),
                     const(b, 2.0 ** (8 * kind.itemsize), np.float32, "modulus"), auto_broadcast="numpy")
    else:
        shifted = ov(b, "Floor", ov(b, "Divide", wide, power, auto_broadcast="numpy"))
    return ov(b, "Convert", shifted, destination_type=x.dtype)


def _rules():
    rules = []
    for onnx_op, ov_op in BINARY.items():
        rules.append(Rule(f"{onnx_op}-to-{ov_op}",
                          pattern(onnx_op, ["a", "b"], _version=lambda v: v is None or v >= 7),
                          _binary(ov_op)))
    for onnx_op, ov_op in UNARY.items():
        rules.append(Rule(f"{onnx_op}-to-{ov_op}", pattern(onnx_op, ["x"]), _unary(ov_op)))
    rules += [
        Rule("LeakyRelu-to-PReLU", lambda op, x: op.LeakyRelu(x), _leaky_relu),
        Rule("Reciprocal-to-Divide", pattern("Reciprocal", ["x"]), _reciprocal),
        Rule("Where-to-Select", pattern("Where", ["cond", "a", "b"]), _where),
        Rule("Mod-to-FloorMod", pattern("Mod", ["a", "b"]), _mod),
        Rule("BitShift-decomposed", pattern("BitShift", ["a", "b"]), _bit_shift),
        Rule("Elu-to-Elu", lambda op, x: op.Elu(x), _elu),
        Rule("Clip-to-Clamp", lambda op, x: op.Clip(x), _clip),
        Rule("Clip-min-to-Clamp", lambda op, x, lo: op.Clip(x, lo), _clip),
        Rule("Clip-max-to-Clamp", lambda op, x, hi: op.Clip(x, None, hi), _clip),
        Rule("Clip-min-max-to-Clamp", lambda op, x, lo, hi: op.Clip(x, lo, hi), _clip),
    ]
    return rules


RULES = _rules()
