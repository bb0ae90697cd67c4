"""The start of every conversion out of ONNX: a private copy with static input shapes and inferred types.

OpenVINO opset1 IR and HLO both need static shapes.  :func:`copy_with_static_inputs`
copies the source through a *weight-less* ONNX protobuf (initializers of
:data:`WEIGHTLESS_BYTES` or more travel as typed graph inputs, which is all
shape inference needs of them, and the copy gets the caller's lazy,
memory-mapped tensors back, so no weight is read or copied), fixes the graph
inputs' shapes (declared, or given by the user) and runs ONNX shape inference.
After constant folding (:mod:`.fold`), :func:`with_inferred_types` reruns the
inference so that folded shapes make more of the graph static.
"""

from __future__ import annotations

from ..dialects.onnx.proto import infer_shapes, messages as pb
from ..errors import ConversionError
from ..ir import Model, Tensor, Value

#: initializers at least this large stay out of the protobuf copies given to ONNX shape inference (and out of
#: a converter's type-inference runs); shape-carrying constants (Reshape targets, axes, pads) are far smaller
WEIGHTLESS_BYTES = 1 << 20


# ---------------------------------------------------------------------------

def copy_with_static_inputs(model: Model, shapes: dict[str, tuple[int, ...]], where: str | None,
                            target: str = "OpenVINO opset1 IR") -> Model:
    """A fresh model with static graph-input shapes and ONNX-inferred intermediate types (``target`` for messages)."""
    unknown = sorted(set(shapes) - {v.name for v in model.graph.inputs})
    if unknown:
        raise ConversionError(f"--input-shape names {', '.join(unknown)}, which the model has no input called; "
                              f"inputs: {', '.join(v.name for v in model.graph.inputs)}", where=where)
    proto, weights = _weightless_proto(model)
    declared = {v.name: v for v in model.graph.inputs}
    for vi in proto.graph.input:
        static = _static_shape(vi.name, declared[vi.name], shapes.get(vi.name), where, target)
        if static is None:
            continue  # an overridable initializer default: it stays a constant below
        dims = vi.type.tensor_type.shape
        dims.ClearField("dim")
        for d in static:
            dims.dim.add().dim_value = d
    copy = _load_inferred(proto, weights)
    copy.path = model.path
    return copy


def with_inferred_types(model: Model) -> Model:
    """``model`` reloaded with ONNX shape inference rerun from its (static) inputs."""
    proto, weights = _weightless_proto(model)
    del proto.graph.value_info[:]  # stale symbolic types would only be merged with the new ones
    copy = _load_inferred(proto, weights)
    copy.path = model.path
    return copy


class _TypeOnlySink:
    """A stand-in for the external-data writer that takes large tensors without reading or writing a byte."""

    location = "<weights kept by opconv>"

    def accepts(self, tensor: Tensor) -> bool:
        return tensor.dtype != "string" and tensor.nbytes >= WEIGHTLESS_BYTES

    def write(self, tensor: Tensor) -> tuple[int, int]:
        return 0, tensor.nbytes


def _weightless_proto(model: Model) -> tuple[pb.ModelProto, dict[str, Tensor]]:
    """``model``'s protobuf without the bytes of its large top-level initializers, and those tensors by name."""
    from ..dialects.onnx.io import to_proto

    sink = _TypeOnlySink()
    weights = {name: v.const for name, v in model.graph.initializers.items() if sink.accepts(v.const)}
    return to_proto(model, data_sink=sink), weights


def _load_inferred(proto: pb.ModelProto, weights: dict[str, Tensor]) -> Model:
    """Run ONNX shape inference on ``proto`` (large weights as typed inputs), load it, put the weights back."""
    from ..dialects.onnx.io import load as load_onnx, type_proto

    listed = {vi.name for vi in proto.graph.input}
    kept = [t for t in proto.graph.initializer if t.name not in weights]
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    for name, tensor in weights.items():
        if name not in listed:
            proto.graph.input.append(pb.ValueInfoProto(name=name, type=type_proto(tensor.type)))
    # IR < 4 lets inference see only the initializers listed as inputs; every copy here lists what it needs.
    proto.ir_version = max(proto.ir_version, 4)
    try:
        proto = infer_shapes(proto, data_prop=True)
    except Exception:  # inference is a help for the rules, not a requirement: they refuse when a shape is missing
        pass
    copy = load_onnx(proto)
    inputs = {v.name: v for v in copy.graph.inputs}
    for name, tensor in weights.items():
        value = inputs[name]
        value.const = tensor  # the caller's lazy tensor: nothing was read
        value.type = tensor.type
        copy.graph.initializers[name] = value
    copy.graph.inputs = [v for v in copy.graph.inputs if v.name not in weights]
    return copy


def may_fold(graph) -> bool:
    """Whether constant folding has anything to do (it costs an ONNX executor session, so check first)."""
    return any(node.op in ("Shape", "Size") or all(v is None or v.const is not None for v in node.inputs)
               for node in graph.nodes)


def has_unresolved_types(graph) -> bool:
    """Whether a used node output lacks a static type (only then can rerunning shape inference help)."""
    outputs = {id(v) for v in graph.outputs}
    for node in graph.nodes:
        for v in node.outputs:
            if v is None or not (v.uses or id(v) in outputs):
                continue  # e.g. Dropout's mask: nobody reads it
            shape = v.shape
            if v.dtype is None or shape is None or not all(isinstance(d, int) for d in shape):
                return True
    return False


def _static_shape(name: str, value: Value, given: tuple | None, where: str | None,
                  target: str) -> tuple[int, ...] | None:
    """The static shape of graph input ``name``: declared, or given (and consistent with the declaration)."""
    if value.const is not None:
        return None
    declared = value.shape
    if given is not None:
        if declared is not None and (len(declared) != len(given) or any(
                isinstance(d, int) and d != g for d, g in zip(declared, given))):
            raise ConversionError(f"input {name!r} is declared {format_shape(declared)}; the given shape "
                                  f"{format_shape(given)} does not fit it", where=where)
        return given
    if declared is None or not all(isinstance(d, int) and d >= 0 for d in declared):
        raise ConversionError(f"input {name!r} has shape {format_shape(declared)} with unresolved dims; {target} needs "
                              f"static shapes: pass --input-shape {name}=D0,D1,... "
                              f"(input_shapes={{{name!r}: (...)}} in Python)", where=where)
    return tuple(declared)


def format_shape(shape) -> str:
    """``[1,?,224]``: a shape for messages."""
    return "[?]" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def drop_input_defaults(graph) -> None:
    """Initializers also listed as inputs (old ONNX defaults) become plain constants: the targets have no such thing."""
    graph.inputs = [v for v in graph.inputs if v.const is None]
