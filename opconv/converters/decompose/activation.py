"""Activations of com.microsoft: Gelu, BiasGelu, FastGelu, QuickGelu, BiasAdd.

The Gelus become ai.onnx Gelu from opset 20 (``approximate="tanh"`` for FastGelu), else their formulas:
``x * 0.5 * (1 + erf(x / sqrt(2)))`` and ``x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))``.
"""

from __future__ import annotations

import math

from .registry import Emitter, Refusal, decomposes


def _with_bias(e: Emitter, x, bias):
    return x if bias is None else e("Add", x, bias)


def gelu(e: Emitter, x, approximate: str = "none"):
    if e.opset >= 20:
        return e("Gelu", x, approximate=approximate)
    dtype = e.dtype(x)
    half = e("Mul", x, e.scalar(0.5, dtype))
    if approximate == "tanh":
        cube = e("Mul", e("Mul", x, x), x)
        inner = e("Add", x, e("Mul", cube, e.scalar(0.044715, dtype)))
        shaped = e("Tanh", e("Mul", inner, e.scalar(math.sqrt(2 / math.pi), dtype)))
    else:
        shaped = e("Erf", e("Mul", x, e.scalar(1 / math.sqrt(2), dtype)))
    return e("Mul", half, e("Add", shaped, e.scalar(1.0, dtype)))


def gelu_20(e: Emitter):
    """ai.onnx Gelu-20 in older operators: the version converter's downgrade below opset 20."""
    approximate = e.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise Refusal(f"unknown approximate={approximate!r}")
    return [gelu(e, e.input(0), approximate)]


@decomposes("Gelu")
def gelu_ms(e: Emitter):
    return [gelu(e, e.input(0))]


@decomposes("BiasGelu")
def bias_gelu(e: Emitter):
    return [gelu(e, _with_bias(e, e.input(0), e.input(1)))]


@decomposes("FastGelu")
def fast_gelu(e: Emitter):
    return [gelu(e, _with_bias(e, e.input(0), e.input(1)), "tanh")]


@decomposes("QuickGelu")
def quick_gelu(e: Emitter):
    x = e.input(0)
    alpha = e.attr("alpha", 1.702)
    return [e("Mul", x, e("Sigmoid", e("Mul", x, e.scalar(alpha, e.dtype(x)))))]


@decomposes("BiasAdd")
def bias_add(e: Emitter):
    return [e("Add", e("Add", e.input(0), e.input(1)), e.input(2))]
