"""The start of every conversion out of ONNX: a private copy with static input shapes and inferred types.

OpenVINO opset1 IR and HLO both need static shapes; both converters start with
:func:`static_copy`.  :func:`copy_with_static_inputs` copies the source through a
*weight-less* ONNX protobuf (initializers of :data:`WEIGHTLESS_BYTES` or more
travel as typed graph inputs, which is all shape inference needs of them, and
the copy gets the caller's lazy, memory-mapped tensors back, so no weight is
read or copied), fixes the graph inputs' shapes (declared, or bound from the caller's shapes and symbol values by
:class:`opconv.input_shapes.InputShapes`) and runs ONNX shape inference.  Constant
folding (:mod:`.fold`) and :func:`with_inferred_types` then alternate until
nothing changes, so that folded shapes make more of the graph static; then the
ai.onnx composites (Attention, RNN/GRU/LSTM, RotaryEmbedding, the losses) are
decomposed into standard ops once, for both targets (:func:`.decompose.decompose_composites`),
and the fold/infer rounds run again over what they became.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..dialects.onnx.proto import infer_shapes, inference_failures
from ..dialects.onnx.proto import messages as pb
from ..errors import ConversionError, OpconvError
from ..input_shapes import InputShapes
from ..ir import Model, Tensor
from .fold import fold_constants
from .inline_ifs import inline_constant_ifs
from .loop_shapes import LoopTyping, typed_loop_outputs

#: initializers at least this large stay out of the protobuf copies given to ONNX shape inference (and out of
#: a converter's type-inference runs); shape-carrying constants (Reshape targets, axes, pads) are far smaller
WEIGHTLESS_BYTES = 1 << 20


# ---------------------------------------------------------------------------


def static_copy(
    model: Model,
    input_shapes: Mapping[str, Sequence[int]] | None,
    dims: Mapping[str, int] | None,
    where: str | None,
    target: str,
) -> Model:
    """A fresh copy of ``model`` with static input shapes, its constant shape computations folded and its
    types inferred again until neither changes anything (``target`` names the conversion in messages).

    Exported models compute shapes at run time in chains that only resolve step by step: a Range whose limit
    is a Shape folds to a constant, which makes its consumers' shapes static, whose Shape nodes then fold,
    and so on.  Each round inlines the Ifs whose condition became a constant and folds what the last inference
    made static; the rounds stop when neither changes anything or every value is static (bounded by
    :data:`MAX_ROUNDS`).
    """
    copy = copy_with_static_inputs(model, input_shapes, where, target, dims)
    drop_input_defaults(copy.graph)
    loops = LoopTyping()
    copy = _settle(copy, loops)
    # The composites (Attention, LSTM, the losses ...) become standard ops once their shapes are static (an RNN
    # is unrolled over its sequence length), and the nodes they became are folded and typed in turn.
    from .decompose import decompose_composites

    if decompose_composites(copy):
        copy = _settle(with_inferred_types(copy), loops)
    return copy


def _settle(copy: Model, loops: LoopTyping) -> Model:
    """Fold and infer types again until neither changes anything (at most :data:`MAX_ROUNDS` rounds)."""
    for _ in range(MAX_ROUNDS):
        # An If on a now-constant condition gives way to its taken branch, whose nodes may fold in turn.
        inlined = inline_constant_ifs(copy.graph)
        folded = may_fold(copy.graph) and fold_constants(copy)
        typed = loops.apply(copy.graph)  # what ONNX's Loop inference leaves open (.loop_shapes)
        if not inlined and not typed and not (folded and has_unresolved_types(copy.graph)):
            break
        copy = with_inferred_types(copy)
    return copy


#: folding/inference rounds at most (each resolves one more link of a shape chain; real exports need 1-3)
MAX_ROUNDS = 16


def copy_with_static_inputs(
    model: Model,
    input_shapes: Mapping[str, Sequence[int]] | None,
    where: str | None,
    target: str = "OpenVINO opset1 IR",
    dims: Mapping[str, int] | None = None,
) -> Model:
    """A fresh model with static graph-input shapes and ONNX-inferred intermediate types (``target`` for messages).

    ``input_shapes`` gives whole shapes by input name, binding the symbols of those inputs' declared dims for
    every other input; ``dims`` gives symbols' values.  Every input left open is named in one error.
    """
    declared = {v.name: v for v in model.graph.inputs if v.const is None}
    try:
        bound = InputShapes({name: v.shape for name, v in declared.items()}, input_shapes, dims)
    except OpconvError as e:
        raise ConversionError(e.message, where=where) from None
    bound.require_static(target, where, ConversionError)
    proto, weights = _weightless_proto(model)
    for vi in proto.graph.input:
        if vi.name not in declared:
            continue  # an overridable initializer default: it stays a constant below
        _set_dims(vi, bound.static(vi.name))
    # Declared intermediate and output types keep their ranks and static dims; their symbols (an exporter's
    # names for run-time sizes) become unknown dims, which inference fills from the static inputs.
    for vi in list(proto.graph.value_info) + list(proto.graph.output):
        _forget_symbols(vi)
    copy = _load_inferred(proto, weights)
    copy.path = model.path
    return copy


def _set_dims(vi: pb.ValueInfoProto, static: tuple[int, ...]) -> None:
    dims = vi.type.tensor_type.shape
    dims.ClearField("dim")
    for d in static:
        dims.dim.add().dim_value = d


def _forget_symbols(vi: pb.ValueInfoProto) -> None:
    t = vi.type
    if t.WhichOneof("value") == "tensor_type" and t.tensor_type.HasField("shape"):
        for d in t.tensor_type.shape.dim:
            if d.HasField("dim_param"):
                d.ClearField("dim_param")


def with_inferred_types(model: Model) -> Model:
    """``model`` reloaded with ONNX shape inference rerun from its (static) inputs."""
    proto, weights = _weightless_proto(model)
    # stale symbolic types would only be merged with the new ones; Loop outputs keep theirs (ONNX infers none)
    loop_typed = typed_loop_outputs(model.graph)
    kept = [vi for vi in proto.graph.value_info if vi.name in loop_typed]
    del proto.graph.value_info[:]
    proto.graph.value_info.extend(kept)
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
    from ..dialects.onnx.io import load as load_onnx
    from ..dialects.onnx.io import type_proto

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
    except inference_failures():  # a help for the rules, not a requirement: they refuse when a shape is missing
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
    return any(
        node.op in ("Shape", "Size") or all(v is None or v.const is not None for v in node.inputs)
        for node in graph.nodes
    )


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


def drop_input_defaults(graph) -> None:
    """Initializers also listed as inputs (old ONNX defaults) become plain constants: the targets have no such thing."""
    graph.inputs = [v for v in graph.inputs if v.const is None]
