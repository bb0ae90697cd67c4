"""OpenVINO IR opset1 -> ONNX: the converter registered for ``("openvino", "onnx")``.

Steps of :func:`openvino_to_onnx`:

1. **Copy** the graph (nodes and values, TensorIterator bodies included;
   constant data is shared, never read), so the caller's model is never
   mutated.
2. **Rewrite** every opset1 layer into ai.onnx nodes of the target opset with
   the rule modules (:mod:`.elementwise`, :mod:`.nn`, :mod:`.shape`,
   :mod:`.reduction`, :mod:`.tensor_iterator`; one translator per layer type,
   registered beside its definition) through :func:`~opconv.converters.rewrite.convert_graph`:
   every layer no rule converts is listed in one
   :class:`~opconv.errors.ConversionError`, and nothing is returned.
3. **Types**: graph inputs and outputs keep the IR's port types and names;
   intermediate values carry no type, so ONNX shape inference (and
   ``onnx.checker``'s full check) derives them rather than trusting ports
   that OpenVINO may have written with runtime-specific types.

The target opset is any ai.onnx version from 13 (axes as inputs of
Squeeze/Unsqueeze/ReduceSum and Split's sizes input, which the rules rely on)
to the newest the installed onnx defines (the default).

Covered: 96 of the 110 opset1 operations (Parameter, Const and Result are
the graph's inputs, initializers and outputs), TensorIterator included: it
becomes a ``Loop`` whose body is the layer's body, converted by these same
rules (the engine rewrites subgraphs first; the copy of step 1 copies them
too).  No rule (no ONNX operator computes them, and decompositions were not
worth their size): the detection layers (DetectionOutput, PriorBox,
PriorBoxClustered, Proposal, RegionYolo, ReorgYolo, ROIPooling, PSROIPooling,
DeformablePSROIPooling), BinaryConvolution, DeformableConvolution,
CTCGreedyDecoder, GatherTree, LSTMSequence (read, run and written by the IR
dialect).  Rules refuse, with the reason, what ONNX cannot express: ``pdpd``
broadcasting, Interpolate ``area``, Pad ``symmetric``, LRN over other axes
than 1 or of even size, a TensorIterator without static shapes, ...
"""

from __future__ import annotations

import onnx

from ...errors import ConversionError
from ...ir import Graph, Model, Value
from .. import register
from ..rewrite import RuleSet, convert_graph
from . import elementwise, nn, reduction, shape, tensor_iterator
from ._common import MIN_OPSET

DIALECT = "onnx"

# Every rule of the direction; within one anchor op, list order is the priority.
RULES = RuleSet(list(elementwise.RULES) + list(nn.RULES) + list(shape.RULES) + list(reduction.RULES)
                + list(tensor_iterator.RULES))


def newest_opset() -> int:
    """The newest ai.onnx opset the installed onnx package defines (the default target)."""
    return onnx.defs.onnx_opset_version()


@register("openvino", "onnx")
def openvino_to_onnx(model: Model, opset: int | None = None) -> Model:
    """Convert an OpenVINO opset1 model to ONNX at ai.onnx ``opset`` (default: the newest).

    Returns a new :class:`Model`; ``model`` is untouched.  Raises
    :class:`ConversionError` for an opset out of range, or naming every layer
    that has no ONNX form with the reason.
    """
    where = model.path
    target = _target_opset(opset, where)
    graph = model.graph.copy()
    convert_graph(graph, RULES, "", target, identity=_identity, where=where)
    _keep_io_types_only(graph)
    meta = {"ir_version": onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", target)])}
    return Model(graph, DIALECT, {"": target}, producer="opconv", doc=model.doc, metadata=dict(model.metadata),
                 meta=meta, path=None)


def _target_opset(opset: int | None, where: str | None) -> int:
    newest = newest_opset()
    if opset is None:
        return newest
    opset = int(opset)
    if not MIN_OPSET <= opset <= newest:
        raise ConversionError(f"target opset {opset} is out of range: opconv converts OpenVINO IR to ai.onnx "
                              f"opsets {MIN_OPSET}..{newest} (the newest the installed onnx defines)", where=where)
    return opset


def _keep_io_types_only(graph: Graph) -> None:
    io = {id(v) for v in graph.inputs} | {id(v) for v in graph.outputs}
    for node in graph.nodes:
        for v in node.outputs:
            if v is not None and id(v) not in io:
                v.type = None


def _identity(b, value: Value) -> Value:
    """A copy of ``value`` that can take a graph output's name."""
    return b.op("Identity", value)


__all__ = ["openvino_to_onnx", "newest_opset", "RULES"]
