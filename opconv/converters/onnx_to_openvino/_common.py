"""Helpers shared by the ONNX -> OpenVINO opset1 translators.

Translators build opset1 nodes with :func:`ov`, which types every attribute from the
OpenVINO schema (the IR writer encodes attributes by their schema type, so an
untyped ``True`` would be written as an int).  Attribute names may be given in
their Python-safe spelling (``exclude_pad`` for ``exclude-pad``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...attributes import typed_attributes
from ...ir import Value
from ...types import element_type
from ..rewrite import (
    Builder,
    Match,
    Refuse,
    Rule,
    attr,
    const_input,
    constant_value,
    np_dtype,
    rank_of,
    static_shape,
    text_attr,
)

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


def constant_list(m: Match, name: str) -> list | None:
    """The constant input ``name`` (axes, pads, starts ...) as a flat list; None when the node omits it; refuses
    one computed at run time."""
    return None if m[name] is None else const_input(m, name, name).reshape(-1).tolist()


def variadic_inputs(m: Match) -> list[Value]:
    """The inputs of a variadic op's node (trailing omitted ones dropped); refuses one omitted before the last."""
    inputs = list(m.root.inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    if any(v is None for v in inputs):
        raise Refuse(f"{m.root.label} omits an input before its last")
    return inputs


# The pattern helpers below multiplied one-node rules by arity; the translators of this package no longer use
# them (onnx_to_hlo still does).

__all__ = [
    "OPSET",
    "ov",
    "const",
    "i64",
    "variadic_inputs",
    "constant_list",
    "attr",
    "rank_of",
    "static_shape",
    "text_attr",
    "const_input",
    "np_dtype",
    "constant_value",
    "Refuse",
    "Rule",
    "Match",
    "Builder",
]
