"""Helpers shared by the OpenVINO opset1 -> ONNX rule modules.

A rule module declares one translator per opset1 operation with the
:class:`Rules` decorator::

    RULES = Rules()

    @RULES.op("Elu", inputs=1)
    def elu(c: Ctx, x):
        return c.onnx("Elu", x, alpha=c.a["alpha"])

The translator receives a :class:`Ctx` (the builder, the IR layer, its
attributes decoded once from the opset1 schema with defaults, and the target
ONNX opset) and the layer's inputs; it returns the value(s) that replace the
layer's outputs, or raises :class:`Refuse` with the reason.  ``c.onnx`` types
attributes from the ONNX schema in force at the target opset, so ``alpha=1``
is written as a float when the schema says float.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable

import numpy as np

from ...attributes import decode_attributes, typed_attributes
from ...ir import Node, Value
from ...schemas import dialect_schemas
from ...types import element_type
from ..rewrite import Builder, Match, Refuse, Rule, constant_value, np_dtype, rank_of, static_shape

#: the domain of IR layers in the graph core
OPSET = "opset1"
#: the lowest ai.onnx opset the rules target (axes as inputs of Squeeze/Unsqueeze/ReduceSum, Split sizes input)
MIN_OPSET = 13

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


class Ctx:
    """What a translator works with: builder ``b``, IR layer ``node``, decoded attributes ``a``, ``opset``."""

    def __init__(self, b: Builder, node: Node):
        self.b = b
        self.node = node
        self.opset: int = b.version
        schema = dialect_schemas("openvino").find(node.op, 1, OPSET)
        self.a: dict[str, Any] = decode_attributes(schema, node.attrs, node.label, strict=False)

    # -- building -------------------------------------------------------------
    def onnx(self, op: str, *inputs: Value | None, _outputs: int = 1, **attrs) -> Value | list[Value]:
        """An ai.onnx node at the target opset, attributes typed by its schema (``None`` values omitted)."""
        return self.b.op(op, *inputs, _outputs=_outputs, **typed_attributes("onnx", op, attrs, version=self.opset))

    def const(self, array, dtype=None, name: str = "const") -> Value:
        if isinstance(dtype, str):
            dtype = element_type(dtype).numpy
        return self.b.const(np.asarray(array, dtype=dtype), name)

    def i64(self, values, name: str = "const") -> Value:
        """A 1-D int64 constant (shapes, axes, pads)."""
        return self.b.const(np.asarray(values, dtype=np.int64).reshape(-1), name)

    def scalar_like(self, value: float, like: Value, name: str = "const") -> Value:
        """A scalar constant of ``like``'s element type."""
        return self.b.const(np.asarray(value, dtype=np_dtype(like)), name)

    def as_i64(self, v: Value) -> Value:
        """``v`` as int64 (a Cast unless it already is)."""
        if v.dtype == "int64":
            return v
        data = constant_value(v)
        if data is not None:
            return self.i64(data)
        return self.onnx("Cast", v, to=element_type("int64").onnx)

    # -- opset-dependent forms --------------------------------------------------
    def reduce(self, op: str, x: Value, axes: list[int] | Value, keepdims: bool) -> Value:
        """``op`` over ``axes`` (a constant list or an int64 value); axes are an input from ReduceSum-13 / 18."""
        as_input = self.opset >= (13 if op == "ReduceSum" else 18)
        if as_input:
            axes_value = axes if isinstance(axes, Value) else self.i64(axes)
            return self.onnx(op, x, axes_value, keepdims=int(bool(keepdims)))
        if isinstance(axes, Value):
            raise Refuse(f"{op} before opset 18 takes constant axes only")
        return self.onnx(op, x, axes=list(axes), keepdims=int(bool(keepdims)))

    def unsqueeze(self, x: Value, axes: Iterable[int]) -> Value:
        return self.onnx("Unsqueeze", x, self.i64(list(axes)))

    def squeeze(self, x: Value, axes: Iterable[int]) -> Value:
        return self.onnx("Squeeze", x, self.i64(list(axes)))

    def transpose_last_two(self, x: Value) -> Value:
        rank = rank_of(x)
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        return self.onnx("Transpose", x, perm=perm)


def const_ints(value: Value | None, what: str) -> list[int]:
    """The integers of a constant input; refuses when it is computed at run time."""
    data = constant_value(value)
    if data is None:
        raise Refuse(f"{what} ({value.name!r}) must be a constant" if value is not None else f"{what} is missing")
    return [int(v) for v in np.asarray(data).reshape(-1)]


def const_scalar(value: Value, what: str) -> float:
    data = constant_value(value)
    if data is None or np.size(data) != 1:
        raise Refuse(f"{what} ({value.name!r}) must be a one-element constant")
    return np.asarray(data).reshape(()).item()


class Rules:
    """An ordered list of rules, filled by the :meth:`op` decorator beside each translator."""

    def __init__(self, ctx: type | None = None, domain: str = OPSET):
        self.rules: list[Rule] = []
        self.ctx = ctx or Ctx  # the translator's helper object (another direction may subclass Ctx)
        self.domain = domain  # the source dialect's node domain

    def op(self, op: str, inputs: int | Iterable[int], outputs: int | Iterable[int] = 1,
           check: Callable[[Match], str | None] | None = None):
        """Register ``fn(c, *inputs)`` for source ``op`` nodes with ``inputs`` inputs and ``outputs`` outputs.

        Each is a count or the allowed counts; one rule is made per combination.
        """
        in_counts = [inputs] if isinstance(inputs, int) else list(inputs)
        out_counts = [outputs] if isinstance(outputs, int) else list(outputs)

        def wrap(fn: Callable) -> Callable:
            def replacement(b: Builder, m: Match):
                return fn(self.ctx(b, m.root), *m.root.inputs)

            for n_in in in_counts:
                for n_out in out_counts:
                    name = f"{op}-to-onnx/{n_in}" + (f"/{n_out}" if len(out_counts) > 1 else "")
                    self.rules.append(Rule(name, _layer_pattern(op, n_in, n_out, self.domain), replacement,
                                           check=_all_checks(has_outputs(n_out), check)))
            return fn

        return wrap

    def __iter__(self):
        return iter(self.rules)


def _layer_pattern(op: str, n_in: int, n_out: int, domain: str = OPSET) -> Callable:
    """A one-node pattern function matching an opset1 ``op`` layer with ``n_in`` inputs and ``n_out`` outputs."""
    names = [f"x{i}" for i in range(n_in)]

    def fn(p, *xs):
        return p.node(op, *xs, _domain=domain, _outputs=n_out)

    params = [inspect.Parameter("op", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(x, inspect.Parameter.POSITIONAL_OR_KEYWORD) for x in names]
    fn.__signature__ = inspect.Signature(params)
    fn.__name__ = op
    return fn


def has_outputs(n: int) -> Callable[[Match], str | None]:
    # The engine replaces the pattern's outputs only, so the layer must have exactly as many.
    def check(m: Match) -> str | None:
        count = len(m.root.outputs)
        return None if count == n else f"the layer has {count} outputs, this rule {n}"
    return check


def _all_checks(*checks) -> Callable[[Match], str | None]:
    def check(m: Match) -> str | None:
        for c in checks:
            why = c(m) if c is not None else None
            if why:
                return why
        return None
    return check


__all__ = ["OPSET", "MIN_OPSET", "INT64_MAX", "INT64_MIN", "Ctx", "Rules", "Refuse", "rank_of", "static_shape",
           "np_dtype", "const_ints", "const_scalar", "constant_value"]
