"""HLO -> ONNX: the converter registered for ``("hlo", "onnx")``.

Steps of :func:`hlo_to_onnx`:

1. **Copy** the graph and its regions (nodes and values; constants are
   shared, not read), so the caller's model is untouched.
2. **Rewrite** every HLO operation into ai.onnx nodes of the target opset
   with the translators of the route ``("hlo", "onnx")``: one per operation,
   registered with ``@lower(op, inputs=counts, outputs=counts)`` beside its
   definition in this package's modules (all imported by
   :func:`~opconv.converters.lowering.discover`; no list, no order) and called
   as ``fn(c, *node.inputs)`` with a :class:`~._common.Ctx` (see
   :mod:`opconv.converters.to_onnx`), after the one fusion (a padded
   ReduceWindow sum -> CumSum), through
   :func:`~opconv.converters.rewrite.convert_graph`: every operation without
   an ONNX form is listed in one :class:`~opconv.errors.ConversionError`.
3. **Types**: graph inputs and outputs keep the HLO types and names;
   intermediate values are left to ONNX shape inference, as the OpenVINO ->
   ONNX direction does.

The target opset is any ai.onnx version from 13 to the newest the installed
onnx defines (the default).  If's regions become the ONNX If's branches
(converted in turn); While, Map, several-input Sort and tuples have no
mapping yet.
"""

from __future__ import annotations

from ...ir import Model
from .. import lowering, register
from ..to_onnx import convert_to_onnx, onnx_model, rule_set, target_opset
from ._common import Ctx

lowering.discover(__name__)

RULES = rule_set("hlo", Ctx)


@register("hlo", "onnx")
def hlo_to_onnx(model: Model, opset: int | None = None) -> Model:
    """Convert an HLO model to ONNX at ai.onnx ``opset`` (default: the newest); ``model`` is untouched."""
    target = target_opset(opset, "HLO", model.path)
    graph = model.graph.copy()
    source = list(graph.walk())  # kept alive, so that no new node can reuse a source node's id
    source_ids = {id(n) for n in source}
    convert_to_onnx(graph, RULES, target, model.path, is_target=lambda n: id(n) not in source_ids)
    return onnx_model(graph, target, model)


__all__ = ["hlo_to_onnx", "RULES"]
