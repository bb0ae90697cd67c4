"""The emitter registry and the writer of one MLIR function in StableHLO's generic syntax.

Every operation is written in MLIR's generic form, ``%3 = "stablehlo.add"(%1, %2)
: (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>``, which every StableHLO
consumer parses (IREE, XLA, ``stablehlo-opt``) whatever its pretty-printer
version.  An emitter turns one HLO node into StableHLO operations; it is
registered by op name with :func:`emitter` (in the one lowering registry,
route ``("hlo", "stablehlo")``) and called like an executor kernel:
``fn(w, *operands, **attributes)`` with the node's inputs as :class:`Operand`
(``None`` for an omitted optional input) and the schema-decoded attributes.  It
returns one :class:`Operand` per node output (a single one may be returned
bare).  The writer ``w`` knows the current node (for output types and error
messages) and offers helpers for the StableHLO ops decompositions use.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections import ChainMap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .... import lowering
from ....attributes import decode_attributes
from ....errors import ConversionError, OpconvError
from ....ir import Graph, Model, Node, Value
from ....schemas import dialect_schemas
from ....types import TensorType, element_type


class StableHloExportError(ConversionError):
    """An HLO model (or one of its nodes) has no static StableHLO form."""


Emitter = Callable[..., object]
#: the lowering route of the emitters
ROUTE = ("hlo", "stablehlo")

# HLO ops that cannot have an emitter, and why: StableHLO tensor types are static, these ops' result shapes
# are data-dependent (a padded form would be another op, not theirs).
NO_STATIC_FORM = {
    "NonZero": "its row count is the number of non-zero elements, known only from the data",
    "NMS": "its row count is the number of boxes kept, known only from the data",
}


def emitter(*ops: str):
    """Decorator registering ``fn`` as the StableHLO emitter of each HLO op in ``ops``."""

    def wrap(fn: Emitter) -> Emitter:
        for op in ops:
            if lowering.find_exact(*ROUTE, op, 1) is not None:
                raise OpconvError(f"StableHLO emitter for HLO {op} registered twice")
            if dialect_schemas("hlo").find(op, 1, "") is None:
                raise OpconvError(f"StableHLO emitter registered for {op}, which is no HLO op")
        return lowering.lower(*ROUTE, ops)(fn)

    return wrap


_MLIR_ELEMENT = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "ui8",
    "uint16": "ui16",
    "uint32": "ui32",
    "uint64": "ui64",
    "bool": "i1",
    "complex64": "complex<f32>",
    "complex128": "complex<f64>",
    "float8e4m3fn": "f8E4M3FN",
    "float8e5m2": "f8E5M2",
    "float8e4m3fnuz": "f8E4M3FNUZ",
    "float8e5m2fnuz": "f8E5M2FNUZ",
    "int4": "i4",
    "uint4": "ui4",
}


def mlir_element(dtype: str) -> str:
    try:
        return _MLIR_ELEMENT[dtype]
    except KeyError:
        raise StableHloExportError(f"element type {dtype} has no StableHLO equivalent") from None


def tensor_type(dtype: str, shape: Sequence[int]) -> str:
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{mlir_element(dtype)}>"


@dataclass(frozen=True)
class Operand:
    """An SSA value of the function being written: its name and static tensor type."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def type(self) -> str:
        return tensor_type(self.dtype, self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_float(self) -> bool:
        return element_type(self.dtype).is_float

    @property
    def is_complex(self) -> bool:
        return element_type(self.dtype).is_complex


def mlir_string(text: str) -> str:
    """``text`` as an MLIR string literal: quotes, backslashes and bytes outside printable ASCII escaped."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        out.append(f"\\{byte:02X}" if byte < 0x20 or byte > 0x7E or ch in '"\\' else ch)
    return '"' + "".join(out) + '"'


def ints(values: Sequence[int]) -> str:
    """A dense i64 array attribute: ``array<i64: 1, 2>``."""
    values = [int(v) for v in values]
    return f"array<i64: {', '.join(map(str, values))}>" if values else "array<i64>"


def int_list(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def float_literal(value: float, dtype: str) -> str:
    """An MLIR float literal; non-finite values by their bit pattern (MLIR has no inf/nan keywords)."""
    value = float(value)
    if math.isfinite(value):
        return f"{value:.17e}"
    bits = np.asarray(value, dtype=element_type(dtype).numpy).tobytes()[::-1].hex().upper()
    return f"0x{bits}"


def element_literal(value, dtype: str) -> str:
    et = element_type(dtype)
    if dtype == "bool":
        return "true" if bool(value) else "false"
    if et.is_complex:
        part = "float32" if dtype == "complex64" else "float64"
        return f"({float_literal(np.real(value), part)}, {float_literal(np.imag(value), part)})"
    if et.is_float:
        return float_literal(float(value), dtype)
    return str(int(value))


def dense_literal(array: np.ndarray, dtype: str) -> str:
    """``dense<...>`` of ``array``: a splat, a nested list of booleans, or the raw little-endian bytes in hex."""
    array = np.ascontiguousarray(np.asarray(array).astype(element_type(dtype).numpy, copy=False))
    flat = array.reshape(-1)
    if flat.size == 0:
        return "dense<>"  # MLIR's literal for a zero-element tensor of any rank
    raw = flat.view(np.uint8).reshape(flat.size, -1) if dtype != "bool" else None
    splat = bool(np.all(flat == flat[0])) if raw is None else bool((raw == raw[0]).all())
    if splat:
        return f"dense<{element_literal(flat[0], dtype)}>"
    if dtype == "bool":
        return f"dense<{_nested(array)}>"
    data = array.tobytes() if sys.byteorder == "little" else array.byteswap().tobytes()  # MLIR hex is little-endian
    return f'dense<"0x{data.hex().upper()}">'


def _nested(a: np.ndarray) -> str:
    if a.ndim == 0:
        return "true" if bool(a) else "false"
    return "[" + ", ".join(_nested(x) for x in a) + "]"


_COMPARISON = {"EQ", "NE", "GE", "GT", "LE", "LT"}


class FunctionWriter:
    """Writes the body of one ``func.func``: operations, constants and nested regions."""

    def __init__(self, graph: Graph):
        self._ids = itertools.count()
        self.lines: list[str] = []
        self.depth = 1
        self.values: ChainMap = ChainMap()  # id(Value) -> Operand
        self.node: Node | None = None
        self.graph = graph
        self.results: set[int] = {id(v) for v in graph.outputs}  # ids of values some graph or region returns

    # -- SSA values ---------------------------------------------------------
    def fresh(self, hint: str = "") -> str:
        return f"%{hint}{next(self._ids)}"

    def bind(self, value: Value, operand: Operand) -> None:
        self.values[id(value)] = operand

    def use(self, value: Value) -> Operand:
        found = self.values.get(id(value))
        if found is None:
            where = self.node.label if self.node is not None else "the graph outputs"
            raise StableHloExportError(f"value {value.name!r} is read before it is defined", where=where)
        return found

    def error(self, message: str) -> StableHloExportError:
        """An export error naming the current node."""
        where = self.node.label if self.node is not None else None
        return StableHloExportError(message, [where] if where else [], where=where)

    # -- the current node -----------------------------------------------------
    def out(self, i: int = 0) -> tuple[str, tuple[int, ...]]:
        """(dtype, shape) of output ``i`` of the current node, which must be a static tensor type."""
        value = self.node.outputs[i] if i < len(self.node.outputs) else None
        if value is None:
            raise self.error(f"output {i} is needed but absent")
        return static_type(value, self.node)

    def has_output(self, i: int) -> bool:
        outs = self.node.outputs
        return i < len(outs) and outs[i] is not None and (bool(outs[i].uses) or id(outs[i]) in self.results)

    def constant_input(self, i: int, what: str, *, required: bool = True) -> np.ndarray | None:
        """The value of input ``i`` of the current node when it is a constant (initializer or Constant node)."""
        value = self.node.inputs[i] if i < len(self.node.inputs) else None
        array = None if value is None else constant_value(value)
        if array is None and required:
            raise self.error(f"{what} (input {i}) must be a constant for a static StableHLO form")
        return array

    # -- writing --------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def op(
        self,
        name: str,
        operands: Sequence[Operand],
        results: Sequence[tuple[str, Sequence[int]]],
        attrs: dict[str, str] | None = None,
        regions: Sequence[str] = (),
    ) -> list[Operand]:
        """Write one operation in generic syntax; returns its results."""
        ssa = self.fresh()
        n = len(results)
        outs = [
            Operand(ssa if n == 1 else f"{ssa}#{i}", dt, tuple(int(d) for d in sh))
            for i, (dt, sh) in enumerate(results)
        ]
        head = f"{ssa}:{n} = " if n > 1 else (f"{ssa} = " if n == 1 else "")
        text = f'{head}"{name}"({", ".join(o.name for o in operands)})'
        if regions:
            text += " (" + ", ".join(regions) + ")"
        if attrs:
            text += " {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}"
        in_types = ", ".join(o.type for o in operands)
        out_types = outs[0].type if n == 1 else "(" + ", ".join(o.type for o in outs) + ")"
        text += f" : ({in_types}) -> {out_types}"
        for chunk in text.split("\n"):
            self.line(chunk)
        return outs

    def op1(
        self,
        name: str,
        operands: Sequence[Operand],
        dtype: str,
        shape: Sequence[int],
        attrs: dict[str, str] | None = None,
        regions: Sequence[str] = (),
    ) -> Operand:
        return self.op(name, operands, [(dtype, shape)], attrs, regions)[0]

    def region(
        self, params: Sequence[tuple[str, Sequence[int]]], body: Callable[[list[Operand]], Sequence[Operand]]
    ) -> str:
        """The text of a one-block region with arguments ``params``; ``body`` returns the yielded values."""
        saved, saved_depth = self.lines, self.depth
        self.lines, self.depth = [], 1
        args = [Operand(self.fresh("a"), dt, tuple(sh)) for dt, sh in params]
        try:
            results = list(body(args))
            types = ", ".join(r.type for r in results)
            self.line(f'"stablehlo.return"({", ".join(r.name for r in results)}) : ({types}) -> ()')
            inner = self.lines
        finally:
            self.lines, self.depth = saved, saved_depth
        header = "^bb0(" + ", ".join(f"{a.name}: {a.type}" for a in args) + "):"
        return "{\n" + header + "\n" + "\n".join(inner) + "\n}"

    def scalar_region(self, dtype: str, combine: str, count: int = 2) -> str:
        """A region (a: T, b: T) -> combine(a, b) over scalars, for reduce/reduce_window/scatter bodies."""
        return self.region([(dtype, ())] * count, lambda a: [self.binary(combine, a[0], a[1])])

    # -- helpers for common StableHLO ops -------------------------------------
    def unary(self, name: str, x: Operand, dtype: str | None = None) -> Operand:
        return self.op1(name, [x], dtype or x.dtype, x.shape)

    def binary(self, name: str, a: Operand, b: Operand, dtype: str | None = None) -> Operand:
        shape = a.shape if a.rank >= b.rank else b.shape
        a, b = self.broadcast_to(a, shape), self.broadcast_to(b, shape)
        return self.op1(name, [a, b], dtype or a.dtype, shape)

    def add(self, a, b):
        return self.binary("stablehlo.add", a, b)

    def sub(self, a, b):
        return self.binary("stablehlo.subtract", a, b)

    def mul(self, a, b):
        return self.binary("stablehlo.multiply", a, b)

    def div(self, a, b):
        return self.binary("stablehlo.divide", a, b)

    def compare(self, a: Operand, b: Operand, direction: str) -> Operand:
        if direction not in _COMPARISON:
            raise self.error(f"unknown comparison direction {direction!r}")
        shape = a.shape if a.rank >= b.rank else b.shape
        a, b = self.broadcast_to(a, shape), self.broadcast_to(b, shape)
        attrs = {"comparison_direction": f"#stablehlo<comparison_direction {direction}>"}
        return self.op1("stablehlo.compare", [a, b], "bool", shape, attrs)

    def select(self, pred: Operand, on_true: Operand, on_false: Operand) -> Operand:
        shape = on_true.shape if on_true.rank >= on_false.rank else on_false.shape
        on_true, on_false = self.broadcast_to(on_true, shape), self.broadcast_to(on_false, shape)
        if pred.rank:
            pred = self.broadcast_to(pred, shape)
        return self.op1("stablehlo.select", [pred, on_true, on_false], on_true.dtype, shape)

    def constant(self, array, dtype: str, shape: Sequence[int] | None = None) -> Operand:
        """A ``stablehlo.constant`` (``array`` broadcast to ``shape`` when given)."""
        array = np.asarray(array)
        if shape is not None:
            array = np.broadcast_to(array, tuple(shape))
        return self.op1(
            "stablehlo.constant",
            [],
            dtype,
            array.shape,
            {"value": f"{dense_literal(array, dtype)} : {tensor_type(dtype, array.shape)}"},
        )

    def scalar(self, value, dtype: str) -> Operand:
        return self.constant(np.asarray(value), dtype, ())

    def full(self, value, like: Operand, dtype: str | None = None) -> Operand:
        """A splat constant of ``like``'s shape."""
        return self.constant(np.asarray(value), dtype or like.dtype, like.shape)

    def convert(self, x: Operand, dtype: str) -> Operand:
        return x if x.dtype == dtype else self.op1("stablehlo.convert", [x], dtype, x.shape)

    def reshape(self, x: Operand, shape: Sequence[int]) -> Operand:
        shape = tuple(int(d) for d in shape)
        return x if x.shape == shape else self.op1("stablehlo.reshape", [x], x.dtype, shape)

    def transpose(self, x: Operand, perm: Sequence[int]) -> Operand:
        perm = [int(p) for p in perm]
        if perm == list(range(x.rank)):
            return x
        shape = [x.shape[p] for p in perm]
        return self.op1("stablehlo.transpose", [x], x.dtype, shape, {"permutation": ints(perm)})

    def broadcast_in_dim(self, x: Operand, shape: Sequence[int], dims: Sequence[int]) -> Operand:
        return self.op1("stablehlo.broadcast_in_dim", [x], x.dtype, shape, {"broadcast_dimensions": ints(dims)})

    def broadcast_to(self, x: Operand, shape: Sequence[int], dims: Sequence[int] | None = None) -> Operand:
        """``x`` broadcast to ``shape``: its dims map to ``dims``, or right-aligned (numpy) when not given."""
        shape = tuple(int(d) for d in shape)
        if x.shape == shape and dims is None:
            return x
        if dims is None:
            if x.rank > len(shape):
                raise self.error(f"cannot broadcast {x.type} to shape {list(shape)}")
            dims = list(range(len(shape) - x.rank, len(shape)))
        for d, size in zip(dims, x.shape):
            if size not in (1, shape[d]):
                raise self.error(f"cannot broadcast {x.type} to shape {list(shape)} along dims {list(dims)}")
        return self.broadcast_in_dim(x, shape, dims)

    def slice(self, x: Operand, start: Sequence[int], limit: Sequence[int], strides: Sequence[int] | None = None):
        strides = list(strides) if strides is not None else [1] * x.rank
        shape = [max(0, -(-(hi - lo) // s)) for lo, hi, s in zip(start, limit, strides)]
        return self.op1(
            "stablehlo.slice",
            [x],
            x.dtype,
            shape,
            {"start_indices": ints(start), "limit_indices": ints(limit), "strides": ints(strides)},
        )

    def slice_axis(self, x: Operand, axis: int, start: int, limit: int, stride: int = 1) -> Operand:
        starts, limits, strides = [0] * x.rank, list(x.shape), [1] * x.rank
        starts[axis], limits[axis], strides[axis] = start, limit, stride
        return self.slice(x, starts, limits, strides)

    def concatenate(self, parts: Sequence[Operand], axis: int) -> Operand:
        if len(parts) == 1:
            return parts[0]
        shape = list(parts[0].shape)
        shape[axis] = sum(p.shape[axis] for p in parts)
        return self.op1("stablehlo.concatenate", list(parts), parts[0].dtype, shape, {"dimension": str(axis)})

    def iota(self, dtype: str, shape: Sequence[int], dim: int) -> Operand:
        return self.op1("stablehlo.iota", [], dtype, shape, {"iota_dimension": str(dim)})

    def reduce(
        self, inputs: Sequence[Operand], inits: Sequence[Operand], dims: Sequence[int], body: str
    ) -> list[Operand]:
        dims = sorted(int(d) for d in dims)
        shape = [s for i, s in enumerate(inputs[0].shape) if i not in dims]
        return self.op(
            "stablehlo.reduce",
            list(inputs) + list(inits),
            [(x.dtype, shape) for x in inputs],
            {"dimensions": ints(dims)},
            [body],
        )

    def reduce_simple(self, x: Operand, dims: Sequence[int], combine: str, init, keepdims: bool = False):
        """Reduce ``x`` over ``dims`` with the binary op ``combine`` starting at the scalar ``init``."""
        out = self.reduce([x], [self.scalar(init, x.dtype)], dims, self.scalar_region(x.dtype, combine))[0]
        if keepdims:
            out = self.reshape(out, [1 if i in dims else s for i, s in enumerate(x.shape)])
        return out

    def sum(self, x, dims, keepdims=False):
        return self.reduce_simple(x, dims, "stablehlo.add", 0, keepdims)

    def mean(self, x: Operand, dims, keepdims=False) -> Operand:
        count = math.prod(x.shape[d] for d in dims)
        total = self.sum(x, dims, keepdims)
        return self.div(total, self.full(count, total))

    def emit_node(self, node: Node) -> None:
        """Write the StableHLO form of one HLO node and bind its outputs."""
        self.node = node
        found = lowering.find(*ROUTE, node.op, node.version)
        if node.domain not in ("", "hlo") or found is None:
            reason = NO_STATIC_FORM.get(node.op) if node.domain in ("", "hlo") else None
            why = f": {reason}" if reason else " in opconv's exporter"
            raise self.error(f"HLO op {node.op} has no static StableHLO form{why}")
        schema = dialect_schemas("hlo").find(node.op, 1, "")
        attrs = decode_attributes(schema, node.attrs, node.label, strict=False)
        operands = [None if v is None else self.use(v) for v in node.inputs]
        result = found.fn(self, *operands, **attrs)
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        for value, operand in zip(node.outputs, results):
            if value is None or operand is None:
                continue
            if isinstance(value.type, TensorType):
                dtype, shape = static_type(value, node)
                if (operand.dtype, operand.shape) != (dtype, shape):
                    raise self.error(
                        f"the StableHLO form of output {value.name!r} has type {operand.type}, "
                        f"the model declares {tensor_type(dtype, shape)}"
                    )
            self.bind(value, operand)
        self.node = None

    def emit_graph(self, graph: Graph) -> None:
        """Constants of ``graph`` that are used, then its nodes, in order."""
        for value in graph.initializers.values():
            if id(value) in self.values or not (value.uses or id(value) in self.results):
                continue
            dtype, shape = static_type(value, None)
            self.bind(value, self.constant(value.const.numpy(), dtype, shape))
        for node in graph.nodes:
            self.emit_node(node)

    def emit_region(self, graph: Graph, extra_params: Sequence[tuple[str, Sequence[int]]] = ()) -> str:
        """The text of the region whose body is the HLO region ``graph`` (its inputs become block arguments)."""
        saved_node = self.node
        params = [static_type(v, saved_node) for v in graph.inputs]

        def body(args):
            self.values = self.values.new_child()
            try:
                for value, arg in zip(graph.inputs, args):
                    self.bind(value, arg)
                self.results.update(id(v) for v in graph.outputs)
                self.emit_graph(graph)
                self.node = saved_node
                return [self.use(v) for v in graph.outputs]
            finally:
                self.values = self.values.parents

        text = self.region(list(params) + list(extra_params), body)
        self.node = saved_node
        return text


def static_type(value: Value, node: Node | None) -> tuple[str, tuple[int, ...]]:
    t = value.type
    if not isinstance(t, TensorType) or t.dtype is None or not t.is_static:
        where = node.label if node is not None else f"value {value.name!r}"
        raise StableHloExportError(
            f"value {value.name!r} needs a static tensor type for StableHLO, has {t}", [where], where=where
        )
    return t.dtype, tuple(int(d) for d in t.shape)


def constant_value(value: Value) -> np.ndarray | None:
    """The array of an initializer or of a ``Constant`` node's output; None for a computed value."""
    if value.const is not None:
        return value.const.numpy()
    producer = value.producer
    if producer is not None and producer.op == "Constant" and producer.domain in ("", "hlo"):
        tensor = producer.attr("value")
        return None if tensor is None else tensor.numpy()
    return None


WEIGHTS_MODES = ("inline", "arguments")
MIN_WEIGHT_ARGUMENT_BYTES = 1024


def weight_arguments(
    model: Model, *, min_weight_bytes: int = MIN_WEIGHT_ARGUMENT_BYTES
) -> list[tuple[str, np.ndarray]]:
    """(name, array) of the main graph's constants that ``weights="arguments"`` passes as arguments, in order.

    These are the used initializers of at least ``min_weight_bytes`` bytes; they follow the model's inputs in the
    signature of the exported function, and the caller passes them after the inputs, in this order.
    """
    graph = model.graph
    inputs = {id(v) for v in graph.inputs}
    outputs = {id(v) for v in graph.outputs}
    chosen = []
    for value in graph.initializers.values():
        if id(value) in inputs or not (value.uses or id(value) in outputs):
            continue
        dtype, shape = static_type(value, None)
        numpy_dtype = np.dtype(element_type(dtype).numpy)
        if math.prod(shape) * numpy_dtype.itemsize >= min_weight_bytes:
            chosen.append((value.name, np.asarray(value.const.numpy()).astype(numpy_dtype, copy=False)))
    return chosen


def export_function(
    model: Model, name: str = "main", *, weights: str = "inline", min_weight_bytes: int = MIN_WEIGHT_ARGUMENT_BYTES
) -> str:
    """The ``func.func @name`` text of an HLO model's main graph (``weights``: see :func:`export`)."""
    if model.dialect != "hlo":
        raise StableHloExportError(f"StableHLO export needs an HLO model, got a {model.dialect} model")
    if weights not in WEIGHTS_MODES:
        raise StableHloExportError(f"weights must be one of {', '.join(WEIGHTS_MODES)}, got {weights!r}")
    graph = model.graph
    writer = FunctionWriter(graph)
    args = []
    for i, value in enumerate(graph.inputs):
        dtype, shape = static_type(value, None)
        operand = Operand(f"%arg{i}", dtype, shape)
        writer.bind(value, operand)
        args.append(operand)
    weight_names = []
    if weights == "arguments":
        weight_names = [n for n, _ in weight_arguments(model, min_weight_bytes=min_weight_bytes)]
        for i, weight in enumerate(weight_names):
            value = graph.initializers[weight]
            operand = Operand(f"%w{i}", *static_type(value, None))
            writer.bind(value, operand)
            args.append(operand)
    writer.emit_graph(graph)
    results = [writer.use(v) for v in graph.outputs]
    names = ", ".join(v.name for v in graph.inputs)
    # Argument and result names travel as JAX writes them (jax.arg_info / jax.result_info attributes).
    arg_names = [v.name for v in graph.inputs] + weight_names
    signature = ", ".join(f"{a.name}: {a.type} {{jax.arg_info = {mlir_string(n)}}}" for a, n in zip(args, arg_names))
    result_types = ", ".join(r.type for r in results)
    named_results = ", ".join(
        f"{r.type} {{jax.result_info = {mlir_string(v.name)}}}" for r, v in zip(results, graph.outputs)
    )
    lines = [
        f"  // inputs: {names}" if names else "",
        f"  // weights (arguments after the inputs): {', '.join(weight_names)}" if weight_names else "",
        f"  // outputs: {', '.join(v.name for v in graph.outputs)}",
        f"  func.func @{name}({signature}) -> ({named_results}) {{",
    ]
    lines = [ln for ln in lines if ln]
    lines += ["  " + ln for ln in writer.lines]
    lines.append(f'    "func.return"({", ".join(r.name for r in results)}) : ({result_types}) -> ()')
    lines.append("  }")
    return "\n".join(lines)


def module_text(functions: Sequence[str], name: str | None = None) -> str:
    """An MLIR module (named ``@name`` when given) holding the given ``func.func`` texts."""
    head = f"module @{name} {{" if name else "module {"
    return head + "\n" + "\n".join(functions) + "\n}\n"


def export(
    model: Model,
    *,
    function_name: str = "main",
    weights: str = "inline",
    min_weight_bytes: int = MIN_WEIGHT_ARGUMENT_BYTES,
) -> str:
    """StableHLO MLIR text of an HLO model: a module with one ``func.func @main``.

    ``weights="inline"`` writes every constant as a ``dense<...>`` literal;
    ``weights="arguments"`` turns the main graph's constants of at least
    ``min_weight_bytes`` bytes into extra function arguments after the model's
    inputs, in the order :func:`weight_arguments` lists them (large literals
    are slow to write, parse and compile).  Raises :class:`StableHloExportError`
    naming the node when an op, an attribute combination or a dynamic type has
    no static StableHLO form.
    """
    return module_text([export_function(model, function_name, weights=weights, min_weight_bytes=min_weight_bytes)])


def exportable_ops() -> list[str]:
    """HLO ops the exporter has an emitter for (some refuse particular attribute values)."""
    return sorted(op for _, op in lowering.ops(*ROUTE))
