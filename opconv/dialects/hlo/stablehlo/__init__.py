"""StableHLO export of HLO models: ``export(model) -> str`` (MLIR text, generic op syntax).

Each HLO op with a static StableHLO form has an emitter registered by name
(:func:`emitter`, which registers on the lowering route ``("hlo", "stablehlo")``
of :mod:`opconv.lowering`; :func:`exportable_ops` lists them) in one of the
family modules: ``elementwise`` (arithmetic,
activations), ``shape`` (data movement, gather/scatter), ``nn`` (dot,
convolution, normalisation, pooling, RoI ops), ``ctc`` (CTCLoss's forward
recursion) and ``regions`` (reductions, sort, top-k, map, while, if).  The ops
that cannot have one (data-dependent result shapes) are in ``NO_STATIC_FORM``
with the reason.  Vendor-fused ops are decomposed into StableHLO ops, implicit
broadcasting becomes ``stablehlo.broadcast_in_dim``, the ``computation`` enums
become reduction regions, and an op, attribute value or dynamic type without a
static StableHLO form raises :class:`StableHloExportError` naming the node.
The text format's ``io.save(..., format="stablehlo")`` calls :func:`export`.

Large weights as arguments: ``export(model, weights="arguments")`` writes the
main graph's constants of at least ``min_weight_bytes`` bytes (default 1024) as
function arguments after the model's inputs instead of ``dense<...>`` literals
(which are slow to write and compile), and ``weight_arguments(model)`` gives
the (name, array) pairs to pass after the inputs, in order.
"""

from . import ctc, elementwise, nn, regions, shape  # noqa: F401,E402  (registers the emitters)
from ._writer import (  # noqa: F401
    NO_STATIC_FORM,
    FunctionWriter,
    Operand,
    StableHloExportError,
    emitter,
    export,
    export_function,
    exportable_ops,
    module_text,
    weight_arguments,
)

__all__ = [
    "NO_STATIC_FORM",
    "FunctionWriter",
    "Operand",
    "StableHloExportError",
    "emitter",
    "export",
    "export_function",
    "exportable_ops",
    "module_text",
    "weight_arguments",
    "ctc",
    "elementwise",
    "nn",
    "regions",
    "shape",
]
