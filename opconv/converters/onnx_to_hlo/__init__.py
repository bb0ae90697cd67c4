"""ONNX -> HLO: the converter registered for ``("onnx", "hlo")``.

Steps of :func:`onnx_to_hlo` (the first four are the ONNX -> OpenVINO
pipeline's, reused from :mod:`..onnx_to_openvino`):

1. **Copy** the source through its protobuf, so the caller's model is untouched.
2. **Static input shapes**: HLO values have static types; symbolic dims of
   graph inputs come from ``input_shapes``, an unresolved one is an error
   naming the input.
3. **ONNX shape inference** on the copy, then **constant folding**
   (:func:`opconv.converters.fold.fold_constants`): shape computations
   become constants, so Reshape targets, Slice bounds and Pad amounts are
   static; then the ai.onnx composites (Attention, RNN/GRU/LSTM,
   RotaryEmbedding, the losses) become standard ops, as for OpenVINO
   (:func:`opconv.converters.decompose.decompose_composites`).
4. **Type completion**: a value whose type inference left open gets the type
   of the array opconv's ONNX executor computes for it on inputs of ones.
5. **Rewrite** with the route's rules from the lowering registry
   (:mod:`opconv.converters.lowering`, route ``("onnx", "hlo")``): every module
   of this package is imported by :func:`~opconv.converters.lowering.discover`
   (no list to keep), each registering its translators beside their code with
   ``@lower("onnx", "hlo", op, since=version)`` -- a node is translated by the
   registration with the highest ``since`` not above its version -- and the
   multi-node fusions of :mod:`.fusion` with ``add_rules``, which the registry
   tries before the single-node translators of their root op.  Translators are
   called as ``fn(builder, match)``: ``match.root`` is the ONNX node (and
   ``match["name"]`` its input of a name given with ``names=``); they return the
   values of the node's outputs and raise :class:`~opconv.converters.rewrite.Refuse`
   with the reason for what they cannot take.  Each translator types every
   value it creates.  Every node left unconverted is listed in one
   :class:`~opconv.errors.ConversionError`.

The result's ``meta["conversion"]`` holds the rewrite statistics:
``fused_ops`` (the dialect's fused ops in the result: ConvBias from a Conv
with a bias input or a Conv + Add pattern, BatchNormInference ...),
``patterns`` (fused op -> how many multi-node ONNX patterns became it) and
``rules`` (every rule that fired, with counts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from ... import budget
from ...dialects.hlo.build import DIALECT, OPSETS
from ...errors import ConversionError, OpconvError
from ...ir import Model, Value
from ...types import TensorType, element_type, from_numpy
from .. import lowering, register
from ..decompose import decompose_contrib
from ..rewrite import convert_graph
from ..static_inputs import static_copy
from . import fusion
from ._common import hlo

lowering.discover(__name__)
# Every rule of the direction: the fusions, then one rule per op dispatching on the node's version.
RULES = lowering.rule_set("onnx", "hlo")

# The dialect's fused (vendor) ops, counted in the result's statistics.
FUSED_OPS = (
    "ConvBias",
    "DotGeneralBias",
    "LayerNorm",
    "Gelu",
    "BatchNormInference",
    "GroupNorm",
    "InstanceNorm",
    "Softmax",
    "Silu",
    "Swish",
    "Mish",
    "HardSwish",
    "HardSigmoid",
    "GeGlu",
    "Glu",
    "Gtu",
)


@register("onnx", "hlo")
def onnx_to_hlo(
    model: Model, input_shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None
) -> Model:
    """Convert an ONNX model to the HLO dialect (a new :class:`Model`; ``model`` is untouched).

    ``input_shapes`` gives static shapes for graph inputs with symbolic or
    unknown dims (``{"input_ids": (2, 12)}``); the symbols of such an input's
    declared dims then hold for every input.  ``dims`` gives symbols' values
    directly (``{"batch": 1}``).  Raises :class:`ConversionError` naming every
    input whose shape stays unresolved, or naming every node no rule converts.
    """
    model = decompose_contrib(model)  # contrib operators -> standard ones (the rules map standard ops only)
    where = model.path
    copy = static_copy(model, input_shapes, dims, where, "HLO")
    _complete_types(copy)
    graph = copy.graph
    source = list(graph.walk())  # kept alive, so that no new node can reuse a source node's id
    source_nodes = {id(n) for n in source}
    try:
        _, report = convert_graph(
            graph, RULES, "", 1, is_target=lambda n: id(n) not in source_nodes, identity=_identity, where=where
        )
    except ConversionError as e:  # the engine names the target by its domain; say HLO
        problems = e.problems
        if not problems:
            raise
        raise ConversionError(
            f"{len(problems)} node(s) cannot be converted to HLO: " + " | ".join(str(p) for p in problems),
            problems,
            where=where,
        ) from None
    _check_types(graph, where)
    out = Model(graph, DIALECT, dict(OPSETS), producer="opconv", doc=model.doc, metadata=dict(model.metadata))
    counts = Counter(n.op for n in graph.walk())
    out.meta["conversion"] = {
        "patterns": fusion.fusion_counts(report.fired),
        "fused_ops": {op: counts[op] for op in FUSED_OPS if counts[op]},
        "rules": dict(sorted(report.fired.items())),
    }
    return out


def conversion_stats(model: Model) -> dict:
    """The statistics :func:`onnx_to_hlo` recorded on its result (empty for other models)."""
    return dict(model.meta.get("conversion", {}))


def _static(v: Value | None) -> bool:
    t = v.type if v is not None else None
    return isinstance(t, TensorType) and t.dtype is not None and t.is_static


def _complete_types(model: Model) -> None:
    """Give values that ONNX shape inference left open the type of their array in one run on ones.

    The ones are broadcast views of a single one (as in onnx-to-ir's type run): a declared input of gigabytes
    takes no memory of its own. They are read-only, which the executor's kernels respect (none writes into its
    inputs: every ONNX node case gives the same result on read-only feeds).
    """
    graph = model.graph
    missing = [v for n in graph.nodes for v in n.outputs if v is not None and not _static(v)]
    if not missing:
        return
    from ...dialects.onnx.executor import Session

    feeds = {}
    for v in graph.inputs:
        if v.const is None and _static(v):
            dt = element_type(v.dtype).numpy
            if dt is not None:
                budget.check(v.shape, dt.itemsize, f"the trial input {v.name!r}")
            feeds[v.name] = np.broadcast_to(np.ones((), dt), tuple(v.shape)) if dt is not None else None
    if any(f is None for f in feeds.values()):
        return
    saved = list(graph.outputs)
    graph.outputs = saved + [v for v in missing if all(v is not o for o in saved)]
    try:
        with np.errstate(all="ignore"):
            results = Session(model).run(feeds)
    except OpconvError:
        return  # the rules refuse, naming the value whose type is unknown
    finally:
        graph.outputs = saved
    for v in missing:
        array = results.get(v.name)
        if isinstance(array, np.ndarray) and array.dtype.kind not in "OUSV":
            v.type = TensorType(from_numpy(array.dtype).name, tuple(array.shape))


def _check_types(graph, where: str | None) -> None:
    """Every value of the result must carry a static tensor type (the dialect's convention)."""
    untyped = [v.name for n in graph.walk() for v in n.outputs if v is not None and not _static(v)]
    if untyped:
        raise ConversionError(
            f"{len(untyped)} value(s) of the converted graph have no static type: " + ", ".join(untyped[:10]),
            where=where,
        )


def _identity(b, value: Value) -> Value:
    """A copy of ``value`` that can take a graph output's name."""
    if not _static(value):
        raise ConversionError(f"value {value.name!r} has no static type")
    return hlo(b, "Copy", value, type=value.type)


__all__ = ["onnx_to_hlo", "conversion_stats", "RULES", "FUSED_OPS"]
