"""The decomposition registry and the emitter decompositions build their nodes with.

A decomposition is a function ``(e: Emitter) -> list of output values`` registered beside its code with
``@decomposes(op, domain=..., since=...)``; the pass picks, for a node, the registration with the highest
``since`` not above the node's domain version (as the kernel registry does): the registrations are the
lowering registry's route ("onnx", "standard") (:mod:`opconv.converters.lowering`).  It reads the node through
``e`` (inputs, attributes with their schema defaults, element types) and emits standard ai.onnx nodes at
the model's ai.onnx opset through ``e`` too; nothing reaches the graph unless it returns normally, so a
decomposition refuses by raising :class:`Refusal` with a reason at any point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...attributes import text_value
from ...ir import Node, Tensor, Value, infer_attr
from .. import lowering
from ..lowering import lower
from ..rewrite import REDUCE_AXES_INPUT_SINCE

MS = "com.microsoft"

Decomposition = Callable[["Emitter"], list]

#: Node.meta key of emitted nodes the pass may drop once nothing reads them (a layout change later nodes undo)
DROPPABLE = "decompose_droppable"

#: the (domain, op) pairs of ai.onnx composites (Attention, LSTM ...): decomposed only when asked, as the converters
#: do once shapes are static (``decompose_composites``); the contrib pass leaves them alone
COMPOSITES: set[tuple[str, str]] = set()


class Refusal(Exception):
    """A node this pass cannot decompose; the message is the reason (shared by every node it applies to)."""


def decomposes(op: str, *, domain: str = MS, since: int = 1, composite: bool = False):
    """Register a decomposition of ``domain::op`` for node versions from ``since`` on, on the lowering route
    ("onnx", "standard"); ``composite``: an ai.onnx operator decomposed only on request."""
    if composite:
        COMPOSITES.add(("" if domain == "ai.onnx" else domain, op))
    return lower("onnx", "standard", op, since=since, domain=domain)


def keep_standard(e: Emitter) -> list:
    """The "decomposition" of an ai.onnx op ONNX itself defines: the pass leaves such nodes as they are."""
    raise AssertionError("keep_standard is a marker, never called")


def standard(op: str, *, since: int, domain: str = "") -> None:
    """Mark ``domain::op`` from version ``since`` on as a standard operator the pass leaves alone
    (onnxruntime defines some ai.onnx-domain operators before ONNX does, e.g. LayerNormalization-1)."""
    lower("onnx", "standard", op, since=since, domain=domain)(keep_standard)


def registered(domain: str, op: str) -> bool:
    """Whether ``domain::op`` has a registration (a decomposition or a standard mark) at some version."""
    return lowering.find("onnx", "standard", op, None, domain) is not None


def decompositions() -> dict[tuple[str, str], dict[int, Decomposition | None]]:
    """Every registration: (domain, op) -> {since version: decomposition, None where the op is standard}."""
    table: dict[tuple[str, str], dict[int, Decomposition | None]] = {}
    for t in lowering.translators("onnx", "standard"):
        table.setdefault((t.domain, t.op), {})[t.since] = None if t.fn is keep_standard else t.fn
    return table


def lookup(domain: str, op: str, version: int) -> Decomposition | None:
    """The decomposition in force for ``domain::op`` at ``version``; None when there is none (or it is standard)."""
    found = lowering.find("onnx", "standard", op, version, domain)
    return None if found is None or found.fn is keep_standard else found.fn


#: ops whose output has their first input's dim 0 (as the first dims of a transformer's layers keep the batch)
_LEADING_DIM_KEEPERS = {
    "Add",
    "Sub",
    "Mul",
    "Div",
    "MatMul",
    "Cast",
    "Identity",
    "Relu",
    "Gelu",
    "Erf",
    "Tanh",
    "Sigmoid",
    "Softmax",
    "LayerNormalization",
    "Sqrt",
    "Reciprocal",
    "Where",
    "Concat",
    "Split",
    "DynamicQuantizeLinear",
    "QuantizeLinear",
    "DequantizeLinear",
    "MatMulInteger",
}


def _keeps_leading_dim(node: Node) -> bool:
    if node.op in _LEADING_DIM_KEEPERS and not node.domain:
        return node.op not in ("Concat", "Split") or node.attr("axis", 0) != 0
    if node.op == "Transpose":
        return list(node.attr("perm") or [0])[0] == 0
    if node.op == "Reshape" and len(node.inputs) > 1 and node.inputs[1] is not None and node.inputs[1].const:
        target = node.inputs[1].const.numpy()
        return target.size > 0 and int(target.reshape(-1)[0]) == 0
    return False


#: ops whose result has the element type of another input than their first
_TYPED_BY_INPUT = {"DequantizeLinear": 1, "QuantizeLinear": 2, "Where": 1}
_INT64_RESULTS = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin"}

_NP_NAMES = {"float": "float32", "double": "float64", "half": "float16"}


class Emitter:
    """Builds the standard nodes that replace one contrib node (kept aside until the decomposition succeeds)."""

    def __init__(self, graph, node: Node, opset: int, defaults: dict[str, Any], prefix: str | None = None):
        self.graph = graph
        self.node = node
        self.opset = opset  # the model's ai.onnx opset: every emitted node is of that version
        self.defaults = defaults
        self.nodes: list[Node] = []
        self.constants: list[Value] = []
        # names start with the node's (a subgraph's emitter has its own prefix: the enclosing emitter's pending
        # names are not yet in its graph, so only the prefix keeps them apart)
        self._prefix = prefix or node.name or node.op

    # -- reading the node -------------------------------------------------
    def input(self, i: int) -> Value | None:
        ins = self.node.inputs
        return ins[i] if i < len(ins) and ins[i] is not None and ins[i].name != "" else None

    def attr(self, name: str, default: Any = None) -> Any:
        """The node's attribute, else the schema's default, else ``default`` (ORT documents some in prose only)."""
        a = self.node.attrs.get(name)
        if a is not None:
            return text_value(a.value)
        schema_default = self.defaults.get(name)
        return default if schema_default is None else schema_default

    def copy_attrs(self, names) -> dict[str, Any]:
        """The node's own attributes among ``names`` (strings decoded), to pass on to a standard op."""
        return {k: text_value(self.node.attrs[k].value) for k in names if k in self.node.attrs}

    def output_used(self, i: int) -> bool:
        """Whether output ``i`` is read by a node or is a graph output (an unread output need not be computed)."""
        outs = self.node.outputs
        if i >= len(outs) or outs[i] is None or not outs[i].name:
            return False
        return bool(outs[i].uses) or any(v is outs[i] for v in self.graph.outputs)

    def require_opset(self, version: int, what: str) -> None:
        if self.opset < version:
            raise Refusal(f"{what} needs ai.onnx opset {version} (the model is at {self.opset})")

    def dtype(self, value: Value) -> str:
        """The element type of ``value`` (numpy name), from its declared type, its constant or its producers
        (the input that types a producer's result; for an op typed by its first input, the others too when the
        first one's type cannot be found: a SkipLayerNormalization reading an untyped contrib output and a
        typed weight)."""
        found = self._dtype(value, budget=[256])
        if found is None:
            raise Refusal("the element type of an input is unknown (run ONNX shape inference on the model first)")
        return found

    def _dtype(self, value: Value | None, budget: list[int]) -> str | None:
        budget[0] -= 1
        if value is None or budget[0] < 0:
            return None
        if value.dtype:
            return _NP_NAMES.get(value.dtype, value.dtype)
        if value.const is not None:
            return str(value.const.dtype)
        node = value.producer
        if node is None:
            return None
        if node.op == "Cast" and node.attrs.get("to") is not None:
            from ...types import from_onnx_code

            return from_onnx_code(int(node.attr("to"))).name
        if node.op in _INT64_RESULTS:
            return "int64"
        typed_by = _TYPED_BY_INPUT.get(node.op, 0)
        if typed_by >= len(node.inputs) or node.inputs[typed_by] is None:
            return "uint8"  # QuantizeLinear without a zero point
        candidates = [node.inputs[typed_by]] + (list(node.inputs[1:]) if typed_by == 0 and value.index == 0 else [])
        for candidate in candidates:
            found = self._dtype(candidate, budget)
            if found is not None:
                return found
        return None

    def leading_dim(self, value: Value):
        """Dim 0 of ``value`` (an int or a symbol), from its type or from producers that keep dim 0; None if unknown."""
        for _ in range(256):
            shape = value.const.shape if value.const is not None else value.shape
            if shape:
                return shape[0]
            node = value.producer
            if node is None or not node.inputs or node.inputs[0] is None or not _keeps_leading_dim(node):
                return None
            if value.index != 0 and node.op != "Split":  # e.g. a quantizer's scale, a norm's statistics
                return None
            value = node.inputs[0]
        return None

    def rank(self, value: Value) -> int | None:
        if value.const is not None:
            return len(value.const.shape)
        shape = value.shape
        return None if shape is None else len(shape)

    def last_dim(self, value: Value) -> int | None:
        """The size of the last axis of ``value`` when it is a known number."""
        shape = value.const.shape if value.const is not None else value.shape
        last = shape[-1] if shape else None
        return int(last) if isinstance(last, (int, np.integer)) else None

    def static_shape(self, value: Value) -> tuple | None:
        shape = value.const.shape if value.const is not None else value.shape
        if shape is None or not all(isinstance(d, (int, np.integer)) for d in shape):
            return None
        return tuple(int(d) for d in shape)

    # -- emitting ---------------------------------------------------------
    def __call__(self, op: str, *inputs: Value | None, outputs: int = 1, **attrs) -> Value | list[Value]:
        graph = self.graph
        name = graph.unique_name(f"{self._prefix}/{op}")
        outs = [Value(graph.unique_name(name if outputs == 1 else f"{name}:{i}")) for i in range(outputs)]
        typed = {k: infer_attr(k, v) for k, v in attrs.items() if v is not None}
        self.nodes.append(Node(op, inputs, outs, version=self.opset, name=name, attrs=typed))
        return outs[0] if outputs == 1 else outs

    def const(self, array, dtype: str | None = None) -> Value:
        array = np.asarray(array, dtype=dtype)
        value = Value(self.graph.unique_name(f"{self._prefix}/const"), const=Tensor.from_array(array))
        value.const.name = value.name
        value.type = value.const.type
        self.constants.append(value)
        return value

    def ints(self, values) -> Value:
        return self.const(np.asarray(values, np.int64))

    # -- opset-aware forms of ops whose signature changed ------------------
    def reduce(self, op: str, x: Value, axes, keepdims: int = 1) -> Value:
        if self.opset >= REDUCE_AXES_INPUT_SINCE[op]:
            return self(op, x, self.ints(axes), keepdims=keepdims)
        return self(op, x, axes=list(axes), keepdims=keepdims)

    def unsqueeze(self, x: Value, axes) -> Value:
        return self("Unsqueeze", x, self.ints(axes)) if self.opset >= 13 else self("Unsqueeze", x, axes=list(axes))

    def slice(self, x: Value, starts, ends, axes, steps=None) -> Value:
        """``x[starts:ends:steps]`` on ``axes``; ``ends`` may be a value (a 1-D int64 tensor)."""
        self.require_opset(10, "a Slice with computed bounds")
        ends_value = ends if isinstance(ends, Value) else self.ints(ends)
        extra = [self.ints(steps)] if steps is not None else []
        return self("Slice", x, self.ints(starts), ends_value, self.ints(axes), *extra)

    def split(self, x: Value, sizes: list[int], axis: int) -> list[Value]:
        if len(sizes) == 1:
            return [x]
        if self.opset >= 13:
            return self("Split", x, self.ints(sizes), outputs=len(sizes), axis=axis)
        return self("Split", x, outputs=len(sizes), axis=axis, split=list(sizes))

    def dim(self, x: Value, axis: int) -> Value:
        """Dimension ``axis`` of ``x`` as an int64 scalar."""
        return self("Gather", self("Shape", x), self.const(np.int64(axis)), axis=0)

    def scalar(self, value: float, like: str) -> Value:
        return self.const(np.asarray(value, dtype=like))

    def cast(self, x: Value, dtype: str) -> Value:
        from ...types import from_numpy

        return self("Cast", x, to=from_numpy(np.dtype(dtype)).onnx)
