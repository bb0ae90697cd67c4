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

import dataclasses

from ...ir import Attr, Graph, Model, Node, Value
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
    graph = copy_graph(model.graph)
    convert_to_onnx(graph, RULES, target, model.path)
    return onnx_model(graph, target, model)


def copy_graph(source: Graph, parent: Graph | None = None, outer: dict[int, Value] | None = None) -> Graph:
    """A copy of a graph: new nodes and values, the same (unread) constant tensors.

    Subgraphs (a TensorIterator's body) are copied too, since the rewrite engine converts them in place;
    ``outer`` maps the enclosing scopes' values to their copies.
    """
    g = Graph(source.name, parent=parent)
    g.doc = source.doc
    mapped: dict[int, Value] = dict(outer or {})
    for v in source.inputs:
        new = g.add_input(v.name, v.type)
        new.meta = dict(v.meta)
        mapped[id(v)] = new
    for name, v in source.initializers.items():
        if id(v) in mapped:
            continue
        new = g.add_initializer(name, v.const)
        new.meta = dict(v.meta)
        mapped[id(v)] = new
    for node in source.nodes:
        outputs = []
        for v in node.outputs:
            new = None
            if v is not None:
                new = Value(v.name, v.type)
                new.meta = dict(v.meta)
                mapped[id(v)] = new
            outputs.append(new)
        inputs = [None if v is None else mapped[id(v)] for v in node.inputs]
        attrs = {k: _copy_subgraphs(a, g, mapped) for k, a in node.attrs.items()}
        copy = Node(node.op, inputs, outputs, domain=node.domain, version=node.version, name=node.name,
                    attrs=attrs, doc=node.doc)
        copy.meta = dict(node.meta)
        g.add_node(copy)
    g.outputs = [mapped[id(v)] for v in source.outputs]
    g.meta = dict(source.meta)
    return g


def _copy_subgraphs(attr: Attr, parent: Graph, outer: dict[int, Value]) -> Attr:
    if isinstance(attr.value, Graph):
        return dataclasses.replace(attr, value=copy_graph(attr.value, parent, outer))
    if isinstance(attr.value, list) and any(isinstance(x, Graph) for x in attr.value):
        return dataclasses.replace(attr, value=[copy_graph(x, parent, outer) if isinstance(x, Graph) else x
                                                for x in attr.value])
    return attr


__all__ = ["openvino_to_onnx", "newest_opset", "copy_graph", "RULES"]
