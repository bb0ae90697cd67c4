"""OpenVINO IR opset1 -> ONNX: the converter registered for ``("openvino", "onnx")``.

Steps of :func:`openvino_to_onnx`:

1. **Copy** the graph (nodes and values, TensorIterator bodies included;
   constant data is shared, never read), so the caller's model is never
   mutated.
2. **Rewrite** every opset1 layer into ai.onnx nodes of the target opset with
   the translators of the route ``("openvino", "onnx")``: one per layer type,
   registered with ``@lower(op, inputs=counts, outputs=counts)`` beside its
   definition in this package's modules (all of them imported by
   :func:`~opconv.converters.lowering.discover`; no list, no order), and called
   as ``fn(c, *layer.inputs)`` with a :class:`~._common.Ctx` (see
   :mod:`opconv.converters.to_onnx`), through
   :func:`~opconv.converters.rewrite.convert_graph`: every layer no translator
   converts is listed in one :class:`~opconv.errors.ConversionError`, and
   nothing is returned.
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

from ...ir import Model
from .. import lowering, register
from ..to_onnx import convert_to_onnx, newest_opset, onnx_model, rule_set, target_opset
from ._common import Ctx

lowering.discover(__name__)

#: the direction's rewrite rules (also run by onnx_to_openvino's FlexAttention, to bring a body back to ONNX)
RULES = rule_set("openvino", Ctx)


@register("openvino", "onnx")
def openvino_to_onnx(model: Model, opset: int | None = None) -> Model:
    """Convert an OpenVINO opset1 model to ONNX at ai.onnx ``opset`` (default: the newest).

    Returns a new :class:`Model`; ``model`` is untouched.  Raises
    :class:`ConversionError` for an opset out of range, or naming every layer
    that has no ONNX form with the reason.
    """
    target = target_opset(opset, "OpenVINO IR", model.path)
    graph = model.graph.copy()
    convert_to_onnx(graph, RULES, target, model.path)
    return onnx_model(graph, target, model)


__all__ = ["openvino_to_onnx", "newest_opset", "RULES"]
