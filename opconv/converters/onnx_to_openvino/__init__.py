"""ONNX -> OpenVINO IR opset1: the converter registered for ``("onnx", "openvino")``.

Steps of :func:`onnx_to_openvino`:

1. **Copy** the source through a *weight-less* ONNX protobuf (``to_proto``
   then ``load``), so the caller's model is never mutated: initializers of
   :data:`WEIGHTLESS_BYTES` or more travel as typed graph inputs (all shape
   inference needs of them) and the copy gets the caller's lazy, memory-mapped
   :class:`~opconv.ir.Tensor` objects back, so no weight is read or copied.
2. **Static input shapes**: opset1 IR needs them.  Symbolic or unknown dims of
   graph inputs come from ``input_shapes`` (``{"x": (1, 3, 224, 224)}``); a dim
   left unresolved is an error naming the input.
3. **Source shape inference**: ``onnx.shape_inference`` runs on the copy with
   the static input shapes, so rules that need a static shape (Flatten, Squeeze
   without axes) or a rank (Softmax, Concat with a negative axis) see them.
4. **Constant folding** (:mod:`opconv.converters.fold`): shape computations over static shapes
   become constants, so Reshape targets and axes computed at run time convert; then the ai.onnx composites
   (Attention, RNN/GRU/LSTM, RotaryEmbedding, the losses) become standard ops, as for HLO
   (:func:`opconv.converters.decompose.decompose_composites`, inside ``static_copy``).
5. **Rewrite** with the translators of this package's modules (one per op
   family: :mod:`.elementwise`, :mod:`.nn`, :mod:`.shape`, :mod:`.movement`,
   :mod:`.scatter`, ...), each registered beside its code with
   ``@lower("onnx", "openvino", op, since=V, inputs=..., names=...)``:
   :func:`~opconv.converters.lowering.discover` imports every module of the
   package (no list to keep), and a node is translated by the registration of
   its op with the highest ``since`` not above its version.  A translator is
   called as ``fn(builder, match)``: ``match.root`` is the ONNX node and
   ``match["x"]`` its input named ``x`` by position (None when omitted); it
   returns the opset1 values of the node's outputs (the node's unused trailing
   outputs may be left out) or raises ``Refuse(reason)``.  The module
   :mod:`.attention` (LinearAttention, FlexAttention: only OpenVINO needs
   them) still adds pattern rules (``lowering.add_rules``).  Through
   :func:`~opconv.converters.rewrite.convert_graph`, every node left
   unconverted is listed in one :class:`~opconv.errors.ConversionError` with
   the reason.
6. **Port types**: IR v10 stores an element type and dims on every port.  They
   are computed by running opconv's own opset1 executor once on inputs of ones
   with the static input shapes and recording every value's array type.  This
   is exact for whatever the converted graph computes (including values the
   rules created, which ONNX shape inference never saw), at the price of one
   reference run; ones, not zeros, keep Log/Div/Pow away from -inf and NaN.
   Large constants are replaced by zeros for that run (``np.zeros`` pages that
   are read but never written cost no memory): their values never decide a
   shape, and reading them would pull every weight into memory.

With the IR writer streaming each constant from its file into the ``.bin``,
converting a model with 1 GiB of external weights peaks far below 1 GiB
(``benchmarks/bench_onnx_to_ir.py`` measures it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ... import budget
from ...dialects.openvino.io import ELEMENT_TYPES
from ...dialects.openvino.ops import elementwise as ov_elementwise
from ...errors import ConversionError
from ...ir import Model, Tensor, Value
from ...types import TensorType, element_type, from_numpy
from .. import lowering, register
from ..decompose import decompose_contrib
from ..rewrite import Builder, convert_graph
from ..static_inputs import WEIGHTLESS_BYTES, static_copy
from ._common import OPSET, ov

# Element types IR v10 can store (canonical names), from the IR reader/writer's table.
IR_ELEMENT_TYPES = frozenset(ELEMENT_TYPES.values())

DIALECT = "openvino"


# Every module of the package registers its translators; the rule set dispatches each node by op and version.
lowering.discover(__name__)
RULES = lowering.rule_set("onnx", "openvino")


@register("onnx", "openvino")
def onnx_to_openvino(
    model: Model, input_shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None
) -> Model:
    """Convert an ONNX model to an OpenVINO opset1 model (a new :class:`Model`; ``model`` is untouched).

    ``input_shapes`` gives static shapes for graph inputs whose declared shape
    has symbolic or unknown dims (``{"input_ids": (2, 12)}``); the symbols of
    such an input's declared dims (``batch``, ``seq``) then hold for every
    input.  ``dims`` gives symbols' values directly (``{"batch": 1}``).
    Raises :class:`ConversionError` naming every input whose shape stays
    unresolved, or naming every unsupported node.
    """
    model = decompose_contrib(model)  # contrib operators -> standard ones (the rules map standard ops only)
    where = model.path
    copy = static_copy(model, input_shapes, dims, where, "OpenVINO opset1 IR")
    graph = copy.graph
    convert_graph(graph, RULES, OPSET, 1, identity=_identity, where=where)
    _name_layers_after_values(graph)
    _give_outputs_layers_of_their_names(graph)
    _check_element_types(graph, where)
    out = Model(graph, DIALECT, {OPSET: 1}, producer="opconv", doc=model.doc, metadata=dict(model.metadata), path=None)
    infer_port_types(out)
    return out


def _name_layers_after_values(graph) -> None:
    """Name each single-output layer after its output value when that name is free.

    IR v10 has no tensor names: OpenVINO names a layer's output tensor after
    the layer.  Naming layers after the ONNX values keeps the ONNX output
    names (and intermediate names) visible to OpenVINO users.
    """
    taken = {v.name for v in graph.inputs} | set(graph.initializers) | {n.name for n in graph.nodes}
    for node in graph.nodes:
        if len(node.outputs) != 1 or node.outputs[0] is None or node.name == node.outputs[0].name:
            continue
        wanted = node.outputs[0].name
        if wanted not in taken:
            taken.discard(node.name)
            node.name = wanted
            taken.add(wanted)


def _give_outputs_layers_of_their_names(graph) -> None:
    """Give each graph output that a differently named layer produces (one port of TopK, Split, LSTM ...) a
    Convert to its own type named after it.

    OpenVINO's IR v10 reader names every tensor after its layer (``layer.N`` on a multi-output layer) besides
    the names its port lists, and ``get_any_name()`` answers the first name in sort order: only a
    single-output layer of the output's own name makes OpenVINO users see the ONNX name.
    """
    layers = {node.name: node for node in graph.nodes}
    for i, value in enumerate(graph.outputs):
        producer = value.producer
        if producer is None or (len(producer.outputs) == 1 and producer.name == value.name):
            continue
        name = value.name
        if name in layers:  # a layer of another value took the name: it makes way
            other = layers.pop(name)
            other.name = graph.unique_name(f"{name}/layer")
            layers[other.name] = other
        value.name = graph.unique_name(f"{name}/port")
        b = Builder(graph, None, domain=OPSET, version=1)
        copy = ov(b, "Convert", value, destination_type=value.dtype, _name=name)
        copy.name = copy.producer.name = name
        graph.outputs[i] = copy
        layers[name] = copy.producer


def _check_element_types(graph, where: str | None) -> None:
    """Refuse values and conversions to element types IR v10 cannot hold (int4, float8 ...), naming them."""
    problems = []
    for v in list(graph.inputs) + list(graph.initializers.values()):
        if v.dtype is not None and v.dtype not in IR_ELEMENT_TYPES:
            problems.append(f"{'input' if v.const is None else 'constant'} {v.name!r} is {v.dtype}")
    for node in graph.nodes:
        target = node.attr("destination_type")
        if target is not None and target not in IR_ELEMENT_TYPES:
            problems.append(f"{node.label} converts to {target}")
    if problems:
        raise ConversionError("IR v10 has no element type for: " + "; ".join(problems), problems, where=where)


def _identity(b, value: Value) -> Value:
    """A copy of ``value`` that can take a graph output's name (a Convert to its own type)."""
    if value.dtype is None:
        raise ConversionError(f"value {value.name!r} has no known element type")
    return ov(b, "Convert", value, destination_type=value.dtype)


# ---------------------------------------------------------------------------
# Port types
# ---------------------------------------------------------------------------


def infer_port_types(model: Model) -> None:
    """Set every node output's type from one run of opconv's opset1 executor on inputs of ones.

    Convolutions, pooling, MatMul, and on float data element-wise ops, Concat,
    Transpose and Interpolate, which dominate a run's time, only compute their
    output's shape in this run (zeros of the right type and shape, which take
    no memory): no shape is ever computed from float values.
    """

    graph = model.graph
    produced = [v for n in graph.nodes for v in n.outputs if v is not None]
    for v in graph.inputs:
        budget.check(v.shape, element_type(v.dtype).numpy.itemsize, f"the trial input {v.name!r}")
    # Broadcast views of a single one: a declared input of gigabytes takes no memory in this run.
    feeds = {v.name: np.broadcast_to(np.ones((), element_type(v.dtype).numpy), tuple(v.shape)) for v in graph.inputs}
    saved = list(graph.outputs)
    graph.outputs = saved + [v for v in produced if all(v is not o for o in saved)]
    weights = {
        id(v): v.const
        for v in graph.initializers.values()
        if v.const.nbytes >= WEIGHTLESS_BYTES and element_type(v.const.dtype).numpy is not None
    }
    for v in graph.initializers.values():
        if id(v) in weights:
            t = v.const
            v.const = Tensor(t.dtype, t.shape, name=t.name, array=np.zeros(t.shape, element_type(t.dtype).numpy))
    try:
        with np.errstate(all="ignore"):
            results = TypeRun(model).run(feeds)
    finally:
        graph.outputs = saved
        for v in graph.initializers.values():
            v.const = weights.get(id(v), v.const)
    for v in produced:
        array = np.asarray(results[v.name])
        v.type = TensorType(from_numpy(array.dtype).name, tuple(array.shape))


__all__ = ["onnx_to_openvino", "infer_port_types", "RULES"]


# ---------------------------------------------------------------------------
# The type run: the opset1 executor with shape-only heavy kernels
# ---------------------------------------------------------------------------


def _zeros(shape, dtype) -> np.ndarray:
    """Zeros of ``shape`` that take no memory (a read-only broadcast view of one zero)."""
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def _conv_shape(ctx, x, w, output_shape=None, *, strides, pads_begin, pads_end, dilations, auto_pad="explicit", **_):
    from ...dialects.openvino.ops._common import explicit_pads
    from ...kernels.conv import conv_output_size

    grouped = ctx.node.op == "GroupConvolution"
    kernel = w.shape[3:] if grouped else w.shape[2:]
    channels = w.shape[0] * w.shape[1] if grouped else w.shape[0]
    begin, end = explicit_pads(auto_pad, x.shape[2:], kernel, strides, dilations, pads_begin, pads_end)
    dims = [conv_output_size(*args) for args in zip(x.shape[2:], kernel, strides, dilations, begin, end)]
    return _zeros((x.shape[0], channels, *dims), x.dtype)


def _pool_shape(ctx, x, *, strides, pads_begin, pads_end, kernel, rounding_type="floor", auto_pad="explicit", **_):
    from ...dialects.openvino.ops._common import explicit_pads
    from ...kernels.pool import pool_output_size

    begin, end = explicit_pads(auto_pad, x.shape[2:], kernel, strides, None, pads_begin, pads_end)
    ceil = (rounding_type or "floor").lower() == "ceil"
    dims = [
        pool_output_size(i, k, s, 1, b, e, ceil, keep_pad_windows=True)
        for i, k, s, b, e in zip(x.shape[2:], kernel, strides, begin, end)
    ]
    return _zeros(x.shape[:2] + tuple(dims), x.dtype)


def _matmul_shape(ctx, a, b, *, transpose_a=False, transpose_b=False):
    a_shape, b_shape = list(np.shape(a)), list(np.shape(b))
    if transpose_a and len(a_shape) >= 2:
        a_shape[-2:] = a_shape[-1:-3:-1]
    if transpose_b and len(b_shape) >= 2:
        b_shape[-2:] = b_shape[-1:-3:-1]
    # numpy's matmul over stand-ins with one row (a) and one column (b) gives the batch shape and rank rules.
    small_a, small_b = list(a_shape), list(b_shape)
    if len(a_shape) >= 2:
        small_a[-2] = 1
    if len(b_shape) >= 2:
        small_b[-1] = 1
    shape = list(np.matmul(np.zeros(small_a, np.float32), np.zeros(small_b, np.float32)).shape)
    if len(b_shape) >= 2:
        shape[-1] = b_shape[-1]
    if len(a_shape) >= 2:
        shape[-2 if len(b_shape) >= 2 else -1] = a_shape[-2]
    return _zeros(shape, np.asarray(a).dtype)


def _concat_shape(ctx, *inputs, axis):
    first = np.shape(inputs[0])
    axis = axis + len(first) if axis < 0 else axis
    return first[:axis] + (sum(np.shape(x)[axis] for x in inputs),) + first[axis + 1 :]


def _transpose_shape(ctx, x, order):
    return np.transpose(x, [int(i) for i in np.asarray(order).reshape(-1)] or None).shape  # a view: nothing copied


def _interpolate_shape(ctx, x, target_spatial_shape, *, axes, pads_begin=None, pads_end=None, **_):
    x = np.asarray(x)
    shape = [d + int(b) + int(e) for d, b, e in zip(x.shape, pads_begin or [0] * x.ndim, pads_end or [0] * x.ndim)]
    for axis, size in zip(axes or [], np.asarray(target_spatial_shape).reshape(-1)):
        shape[int(axis) % x.ndim] = int(size)
    return shape


def _same_shape(ctx, x, *rest, **_):
    return np.shape(x)


def _broadcast_shape(ctx, a, b, **_):
    return np.broadcast_shapes(np.shape(a), np.shape(b))


def _float_shape_only(kernel, shape_of, data_index: int):
    """``kernel`` on integer data (which may be shapes the graph computes with); on float data, zeros of
    ``shape_of(ctx, *inputs, **attrs)``: no shape is ever computed from float values."""

    def run(ctx, *inputs, **attrs):
        data = np.asarray(inputs[data_index])
        if data.dtype.kind != "f":
            return kernel(ctx, *inputs, **attrs)
        return _zeros(shape_of(ctx, *inputs, **attrs), data.dtype)

    return run


#: kernels replaced whatever the data: their output shape never depends on values
_SHAPE_ONLY = {
    "Convolution": _conv_shape,
    "GroupConvolution": _conv_shape,
    "MaxPool": _pool_shape,
    "AvgPool": _pool_shape,
    "MatMul": _matmul_shape,
}
#: kernels replaced on float data: op -> (output shape function, index of the input whose type decides)
_FLOAT_SHAPE_ONLY = {
    **{
        op: (_broadcast_shape, 0)
        for op in ("Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Power", "SquaredDifference")
    },
    **{
        op: (_same_shape, 0)
        for op in (
            "ReLU",
            "Sigmoid",
            "Tanh",
            "Exp",
            "Log",
            "Sqrt",
            "Abs",
            "Negative",
            "Erf",
            "Elu",
            "Clamp",
            "Floor",
            "Ceiling",
            "PReLU",
            "SoftMax",
            "HardSigmoid",
            "Selu",
            "LRN",
            "MVN",
            "NormalizeL2",
        )
    },
    "BatchNormInference": (lambda ctx, gamma, beta, x, *rest, **_: np.shape(x), 2),  # opset1 puts the data third
    "Concat": (_concat_shape, 0),
    "Transpose": (_transpose_shape, 0),
    "Interpolate": (_interpolate_shape, 0),
}


def _uniform(array) -> bool:
    """True for an array that is one element broadcast (every stride 0): all its elements are equal."""
    return array.size > 1 and not any(array.strides)


def _on_uniform_stand_ins(kernel):
    """``kernel`` (element-wise) run on one element of each uniform input, its result broadcast to the full
    shape: on a run of ones, an integer or boolean op over a declared input of 2**31 elements computes one
    element instead of billions, with the same values."""

    def run(ctx, *inputs, **attrs):
        arrays = [np.asarray(x) for x in inputs]
        shapes = [a.shape for a in arrays]
        if not any(_uniform(a) for a in arrays):
            return kernel(ctx, *inputs, **attrs)
        if attrs.get("auto_broadcast") == "none":
            if len(set(shapes)) > 1:
                return kernel(ctx, *inputs, **attrs)
            attrs = {**attrs, "auto_broadcast": "numpy"}
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            return kernel(ctx, *inputs, **attrs)  # the kernel refuses the mismatch, as without stand-ins
        stand_ins = [a[(slice(0, 1),) * a.ndim] if _uniform(a) else a for a in arrays]
        return np.broadcast_to(np.asarray(kernel(ctx, *stand_ins, **attrs)), shape)

    return run


#: element-wise opset1 ops whose output at each position depends only on the inputs at that position
_ELEMENTWISE = {*ov_elementwise._BINARY, *ov_elementwise._UNARY, "Divide", "Elu", "Clamp", "Select", "Convert"}


class TypeRun:
    """Runs an opset1 model once with :data:`_SHAPE_ONLY` / :data:`_FLOAT_SHAPE_ONLY` kernels in place of the real
    ones."""

    def __init__(self, model: Model):
        from ...dialects.openvino import executor as ov_executor
        from ...executor import Session

        def bind(node, interp):
            bound = ov_executor.EXECUTOR.bind(node, interp)
            if node.op in _SHAPE_ONLY:
                bound.fn = _SHAPE_ONLY[node.op]
            elif node.op in _FLOAT_SHAPE_ONLY:
                bound.fn = _float_shape_only(bound.fn, *_FLOAT_SHAPE_ONLY[node.op])
            if node.op in _ELEMENTWISE:
                bound.fn = _on_uniform_stand_ins(bound.fn)
            return bound

        ov_executor.EXECUTOR.load_kernels()
        self.session = Session(model, bind)

    def run(self, feeds):
        return self.session.run(feeds)
