"""What the two directions into ONNX share (OpenVINO IR -> ONNX, HLO -> ONNX): the translator context, the
constant helpers, the target opset's range, and the finishing of the converted graph into an ONNX model.

A translator of either direction is registered with :func:`opconv.converters.lowering.lower` and called as
``fn(c, *inputs)`` (:func:`call_with_ctx`): ``c`` is the direction's subclass of :class:`Ctx` (the builder, the
source node, its attributes decoded once from the *source* schema with defaults, the target opset, and
``c.onnx`` which types ONNX attributes from the ONNX schema in force at the target opset, so ``alpha=1`` is
written as a float when the schema says float), the inputs are the node's (``None`` for an omitted one).
It returns the value(s) replacing the node's outputs, or raises :class:`Refuse` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import onnx

from ..attributes import decode_attributes, typed_attributes
from ..errors import ConversionError
from ..ir import Graph, Model, Node, Value
from ..schemas import dialect_schemas
from ..types import element_type
from . import lowering
from .lowering import Translator
from .rewrite import (
    REDUCE_AXES_INPUT_SINCE,
    Builder,
    Match,
    Refuse,
    RuleSet,
    constant_value,
    convert_graph,
    np_dtype,
    rank_of,
)

#: the lowest ai.onnx opset the translators target (axes as inputs of Squeeze/Unsqueeze/ReduceSum, Split sizes)
MIN_OPSET = 13

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def newest_opset() -> int:
    """The newest ai.onnx opset the installed onnx package defines (the default target)."""
    return onnx.defs.onnx_opset_version()


class Ctx:
    """What a translator works with: builder ``b``, source ``node``, decoded attributes ``a``, ``opset``.

    Each direction subclasses it and names the schema its attributes are decoded from in ``source``.
    """

    #: (dialect, domain) of the source schemas
    source: tuple[str, str]

    def __init__(self, b: Builder, node: Node):
        self.b = b
        self.node = node
        self.opset: int = b.version
        dialect, domain = self.source
        schema = dialect_schemas(dialect).find(node.op, 1, domain)
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
        if self.opset >= REDUCE_AXES_INPUT_SINCE[op]:
            axes_value = axes if isinstance(axes, Value) else self.i64(axes)
            return self.onnx(op, x, axes_value, keepdims=int(bool(keepdims)))
        if isinstance(axes, Value):
            raise Refuse(f"{op} before opset {REDUCE_AXES_INPUT_SINCE[op]} takes constant axes only")
        return self.onnx(op, x, axes=list(axes), keepdims=int(bool(keepdims)))

    def unsqueeze(self, x: Value, axes: Iterable[int]) -> Value:
        return self.onnx("Unsqueeze", x, self.i64(list(axes)))

    def squeeze(self, x: Value, axes: Iterable[int]) -> Value:
        return self.onnx("Squeeze", x, self.i64(list(axes)))

    def transpose_last_two(self, x: Value) -> Value:
        rank = rank_of(x)
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        return self.onnx("Transpose", x, perm=perm)


def call_with_ctx(ctx: type[Ctx]) -> Callable[[Translator, Builder, Match], Any]:
    """The calling convention of the directions into ONNX: ``fn(ctx(b, node), *node.inputs)``."""

    def call(t: Translator, b: Builder, m: Match):
        return t.fn(ctx(b, m.root), *m.root.inputs)

    return call


def rule_set(source: str, ctx: type[Ctx]) -> RuleSet:
    """The rewrite rules of the direction ``(source, "onnx")``, its translators called with ``ctx``."""
    return lowering.rule_set(source, "onnx", call_with_ctx(ctx))


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


def target_opset(opset: int | None, source: str, where: str | None) -> int:
    """The ai.onnx opset to convert ``source`` (a dialect's name for messages) to: ``opset``, checked, or the
    newest the installed onnx defines."""
    newest = newest_opset()
    if opset is None:
        return newest
    opset = int(opset)
    if not MIN_OPSET <= opset <= newest:
        raise ConversionError(
            f"target opset {opset} is out of range: opconv converts {source} to ai.onnx "
            f"opsets {MIN_OPSET}..{newest} (the newest the installed onnx defines)",
            where=where,
        )
    return opset


def identity(b: Builder, value: Value) -> Value:
    """A copy of ``value`` that can take a graph output's name."""
    return b.op("Identity", value)


def convert_to_onnx(
    graph: Graph, rules: RuleSet, target: int, where: str | None, is_target: Callable[[Node], bool] | None = None
) -> None:
    """Rewrite ``graph`` in place with a direction's ``rules`` (:func:`rule_set`), then forget the types of its
    intermediate values: ONNX shape inference (and ``onnx.checker``'s full check) derives them rather than
    trusting types the source dialect may have written with runtime-specific types."""
    convert_graph(graph, rules, "", target, is_target=is_target, identity=identity, where=where)
    keep_io_types_only(graph)


def keep_io_types_only(graph: Graph) -> None:
    """Drop the types of every value but the graph's inputs and outputs."""
    io = {id(v) for v in graph.inputs} | {id(v) for v in graph.outputs}
    for node in graph.nodes:
        for v in node.outputs:
            if v is not None and id(v) not in io:
                v.type = None


def onnx_model(graph: Graph, target: int, source: Model) -> Model:
    """The converted ``graph`` as an ai.onnx ``target`` model, with ``source``'s doc and metadata."""
    meta = {"ir_version": onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", target)])}
    return Model(
        graph,
        "onnx",
        {"": target},
        producer="opconv",
        doc=source.doc,
        metadata=dict(source.metadata),
        meta=meta,
        path=None,
    )


__all__ = [
    "MIN_OPSET",
    "INT64_MAX",
    "INT64_MIN",
    "Ctx",
    "Refuse",
    "call_with_ctx",
    "rule_set",
    "const_ints",
    "const_scalar",
    "newest_opset",
    "target_opset",
    "identity",
    "convert_to_onnx",
    "keep_io_types_only",
    "onnx_model",
]
