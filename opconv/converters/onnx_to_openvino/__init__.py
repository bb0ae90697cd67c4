"""ONNX -> OpenVINO IR opset1: the converter registered for ``("onnx", "openvino")``.

Steps of :func:`onnx_to_openvino`:

1. **Copy** the source through its ONNX protobuf (``to_proto`` then ``load``),
   so the caller's model is never mutated.
2. **Static input shapes**: opset1 IR needs them.  Symbolic or unknown dims of
   graph inputs come from ``input_shapes`` (``{"x": (1, 3, 224, 224)}``); a dim
   left unresolved is an error naming the input.
3. **Source shape inference**: ``onnx.shape_inference`` runs on the copy with
   the static input shapes, so rules that need a static shape (Flatten, Squeeze
   without axes) or a rank (Softmax, Concat with a negative axis) see them.
4. **Constant folding** (:mod:`.fold`): shape computations over static shapes
   become constants, so Reshape targets and axes computed at run time convert.
5. **Rewrite** with the rule modules (:mod:`.elementwise`, :mod:`.nn`,
   :mod:`.shape`) through :func:`~opconv.converters.rewrite.convert_graph`:
   every node that no rule converts is listed in one
   :class:`~opconv.errors.ConversionError`.
6. **Port types**: IR v10 stores an element type and dims on every port.  They
   are computed by running opconv's own opset1 executor once on inputs of ones
   with the static input shapes and recording every value's array type.  This
   is exact for whatever the converted graph computes (including values the
   rules created, which ONNX shape inference never saw), at the price of one
   reference run; ones, not zeros, keep Log/Div/Pow away from -inf and NaN.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...errors import ConversionError
from ...ir import Model, Value
from ...types import TensorType, element_type, from_numpy
from .. import register
from ..rewrite import RuleSet, convert_graph
from ...dialects.openvino.io import ELEMENT_TYPES
from . import elementwise, nn, shape
from .fold import fold_constants
from ._common import OPSET, ov

# Element types IR v10 can store (canonical names), from the IR reader/writer's table.
IR_ELEMENT_TYPES = frozenset(ELEMENT_TYPES.values())

DIALECT = "openvino"

# Every rule of the direction; within one anchor op, list order is the priority.
RULES = RuleSet(elementwise.RULES + nn.RULES + shape.RULES)


@register("onnx", "openvino")
def onnx_to_openvino(model: Model, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """Convert an ONNX model to an OpenVINO opset1 model (a new :class:`Model`; ``model`` is untouched).

    ``input_shapes`` gives static shapes for graph inputs whose declared shape
    has symbolic or unknown dims.  Raises :class:`ConversionError` naming the
    input when a shape stays unresolved, or naming every unsupported node.
    """
    where = model.path
    shapes = {name: tuple(int(d) for d in dims) for name, dims in (input_shapes or {}).items()}
    copy = _copy_with_static_inputs(model, shapes, where)
    graph = copy.graph
    _drop_input_defaults(graph)
    if fold_constants(copy):
        copy = _with_inferred_types(copy)  # folded shapes make more of the graph's types static
        graph = copy.graph
    convert_graph(graph, RULES, OPSET, 1, identity=_identity, where=where)
    _name_layers_after_values(graph)
    _check_element_types(graph, where)
    out = Model(graph, DIALECT, {OPSET: 1}, producer="opconv", doc=model.doc,
                metadata=dict(model.metadata), path=None)
    infer_port_types(out)
    return out


# ---------------------------------------------------------------------------
# Copy and static input shapes
# ---------------------------------------------------------------------------

def _copy_with_static_inputs(model: Model, shapes: dict[str, tuple[int, ...]], where: str | None) -> Model:
    """A fresh model with static graph-input shapes and ONNX-inferred intermediate types."""
    from ...dialects.onnx.io import to_proto

    unknown = sorted(set(shapes) - {v.name for v in model.graph.inputs})
    if unknown:
        raise ConversionError(f"--input-shape names {', '.join(unknown)}, which the model has no input called; "
                              f"inputs: {', '.join(v.name for v in model.graph.inputs)}", where=where)
    proto = to_proto(model)
    for vi in proto.graph.input:
        static = _static_shape(vi.name, _declared(model, vi.name), shapes.get(vi.name), where)
        if static is None:
            continue  # an overridable initializer default: it stays a constant below
        dims = vi.type.tensor_type.shape
        dims.ClearField("dim")
        for d in static:
            dims.dim.add().dim_value = d
    copy = _load_inferred(proto)
    copy.path = model.path
    return copy


def _with_inferred_types(model: Model) -> Model:
    """``model`` reloaded with ONNX shape inference rerun from its (static) inputs."""
    from ...dialects.onnx.io import to_proto

    proto = to_proto(model)
    del proto.graph.value_info[:]  # stale symbolic types would only be merged with the new ones
    copy = _load_inferred(proto)
    copy.path = model.path
    return copy


def _load_inferred(proto) -> Model:
    import onnx

    from ...dialects.onnx.io import load as load_onnx

    try:
        proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except Exception:  # inference is a help for the rules, not a requirement: they refuse when a shape is missing
        pass
    return load_onnx(proto)


def _declared(model: Model, name: str) -> Value:
    return next(v for v in model.graph.inputs if v.name == name)


def _static_shape(name: str, value: Value, given: tuple | None, where: str | None) -> tuple[int, ...] | None:
    """The static shape of graph input ``name``: declared, or given (and consistent with the declaration)."""
    if value.const is not None:
        return None
    declared = value.shape
    if given is not None:
        if declared is not None and (len(declared) != len(given) or any(
                isinstance(d, int) and d != g for d, g in zip(declared, given))):
            raise ConversionError(f"input {name!r} is declared {_fmt(declared)}; the given shape "
                                  f"{_fmt(given)} does not fit it", where=where)
        return given
    if declared is None or not all(isinstance(d, int) and d >= 0 for d in declared):
        raise ConversionError(f"input {name!r} has shape {_fmt(declared)} with unresolved dims; OpenVINO opset1 IR "
                              f"needs static shapes: pass --input-shape {name}=D0,D1,... "
                              f"(input_shapes={{{name!r}: (...)}} in Python)", where=where)
    return tuple(declared)


def _fmt(shape) -> str:
    return "[?]" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _drop_input_defaults(graph) -> None:
    """Initializers also listed as inputs (old ONNX defaults) become plain constants: IR has no such thing."""
    graph.inputs = [v for v in graph.inputs if v.const is None]


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
    """Set every node output's type from one run of opconv's opset1 executor on inputs of ones."""
    from ...dialects.openvino.executor import run_model

    graph = model.graph
    produced = [v for n in graph.nodes for v in n.outputs if v is not None]
    feeds = {v.name: np.ones(v.shape, element_type(v.dtype).numpy) for v in graph.inputs}
    saved = list(graph.outputs)
    graph.outputs = saved + [v for v in produced if all(v is not o for o in saved)]
    try:
        with np.errstate(all="ignore"):
            results = run_model(model, feeds)
    finally:
        graph.outputs = saved
    for v in produced:
        array = np.asarray(results[v.name])
        v.type = TensorType(from_numpy(array.dtype).name, tuple(array.shape))


__all__ = ["onnx_to_openvino", "infer_port_types", "RULES"]
