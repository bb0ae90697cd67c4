"""HLO -> ONNX: the converter registered for ``("hlo", "onnx")``.

Steps of :func:`hlo_to_onnx`:

1. **Copy** the graph and its regions (nodes and values; constants are
   shared, not read), so the caller's model is untouched.
2. **Rewrite** every HLO operation into ai.onnx nodes of the target opset
   with the rule modules (:mod:`.elementwise`, :mod:`.nn`, :mod:`.shape`; one
   translator per operation, registered beside its definition) through
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

import onnx

from ...errors import ConversionError
from ...ir import Model
from .. import register
from ..openvino_to_onnx import _keep_io_types_only, newest_opset
from ..rewrite import RuleSet, convert_graph
from . import elementwise, nn, shape
from ._common import MIN_OPSET

DIALECT = "onnx"

RULES = RuleSet(list(elementwise.RULES) + list(nn.RULES) + list(shape.RULES))


@register("hlo", "onnx")
def hlo_to_onnx(model: Model, opset: int | None = None) -> Model:
    """Convert an HLO model to ONNX at ai.onnx ``opset`` (default: the newest); ``model`` is untouched."""
    where = model.path
    target = _target_opset(opset, where)
    graph = model.graph.copy()
    source = list(graph.walk())  # kept alive, so that no new node can reuse a source node's id
    source_ids = {id(n) for n in source}
    convert_graph(graph, RULES, "", target, is_target=lambda n: id(n) not in source_ids, identity=_identity,
                  where=where)
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
        raise ConversionError(f"target opset {opset} is out of range: opconv converts HLO to ai.onnx opsets "
                              f"{MIN_OPSET}..{newest} (the newest the installed onnx defines)", where=where)
    return opset


def _identity(b, value):
    return b.op("Identity", value)


__all__ = ["hlo_to_onnx", "RULES"]
