"""Helpers shared by the ONNX -> OpenVINO opset1 rule modules.

Rules build opset1 nodes with :func:`ov`, which types every attribute from the
OpenVINO schema (the IR writer encodes attributes by their schema type, so an
untyped ``True`` would be written as an int).  Attribute names may be given in
their Python-safe spelling (``exclude_pad`` for ``exclude-pad``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...attributes import typed_attributes
from ...ir import Value
from ...types import element_type
from ..rewrite import (Builder, Match, Refuse, Rule, attr, const_input, constant_value, np_dtype, rank_of,
                       static_shape)

OPSET = "opset1"


def ov(b: Builder, op: str, *inputs: Value | None, **attrs: Any) -> Value:
    """Build an opset1 ``op`` node with schema-typed attributes (``None`` values left out)."""
    options = {k: attrs.pop(k) for k in list(attrs) if k.startswith("_")}  # the builder's _outputs, _name
    return b.op(op, *inputs, **options, **typed_attributes("openvino", op, attrs, domain=OPSET))


def const(b: Builder, array, dtype: Any, name: str = "const") -> Value:
    """A constant of ``dtype`` (a numpy dtype or an opconv element-type name)."""
    if isinstance(dtype, str):
        dtype = element_type(dtype).numpy
    return b.const(np.asarray(array, dtype=dtype), name)


def i64(b: Builder, values, name: str = "const") -> Value:
    """A 1-D int64 constant (shapes, axes, permutations)."""
    return b.const(np.asarray(values, dtype=np.int64).reshape(-1), name)


def captures(fn: Callable, names: list[str]) -> Callable:
    """Name the captures of a ``(op, *inputs)`` pattern function.

    The rewrite engine reads capture names from a pattern function's parameters,
    or from its ``capture_names``; variadic ONNX ops (Concat) need one pattern per
    arity, generated with this.
    """
    fn.capture_names = list(names)
    return fn


def pattern(op: str, names: list[str], **options) -> Callable:
    """A one-node pattern function ``op(*names)`` (``options``: the engine's ``_version=``, attributes ...)."""
    fn = captures(lambda p, *xs: p.node(op, *xs, **options), names)
    fn.__name__ = op
    return fn


def rules_for_arities(name: str, op: str, replacement, arities, check=None, **pattern_options) -> list[Rule]:
    """One rule per input count for a variadic ONNX op; the replacement reads ``m.root.inputs``."""
    rules = []
    for n in arities:
        names = [f"x{i}" for i in range(n)]
        rules.append(Rule(f"{name}-{n}", pattern(op, names, **pattern_options), replacement, check=check))
    return rules


def variadic_rule(name: str, op: str, replacement, arities) -> Rule:
    """The rule for a variadic ONNX op given any of ``arities`` inputs, none omitted before the last; the
    replacement reads ``m.root.inputs``.

    One pattern that takes any inputs, and a check of their number: :func:`rules_for_arities` would make a
    pattern per input count (Concat has 64), which every process that loads the rules builds, and every
    Concat node tries one after another.
    """
    allowed = frozenset(arities)

    def takes_inputs(m: Match) -> str | None:
        inputs = list(m.root.inputs)
        while inputs and inputs[-1] is None:  # trailing omitted inputs do not count
            inputs.pop()
        if any(v is None for v in inputs):
            return f"{m.root.label} omits an input before its last"
        if len(inputs) not in allowed:
            return f"{m.root.label} has {len(inputs)} inputs, which this rule does not take"
        return None

    return Rule(name, pattern(op, [], _any_inputs=True), replacement, check=takes_inputs)


__all__ = ["OPSET", "ov", "const", "i64", "attr", "rank_of", "static_shape", "const_input", "np_dtype",
           "captures", "pattern", "rules_for_arities", "variadic_rule", "constant_value", "Refuse", "Rule", "Match",
           "Builder"]
