"""Building HLO nodes with schema-typed attributes.

Converters, tests and the text parser create HLO operations through
:func:`hlo_node` so that every attribute carries its schema type (``ints``,
``region`` ...) and every node is domain ``""``, version 1.  A region
attribute holds a :class:`~opconv.ir.Graph` whose inputs are the region's
parameters and whose outputs are its results.
"""

from __future__ import annotations

from typing import Any

from ...attributes import typed_attributes
from ...ir import Graph, Value

DIALECT = "hlo"
OPSETS = {"": 1}  # Model.opsets of every HLO model


def hlo_node(builder, op: str, *inputs: Value | None, _outputs: int = 1, **attrs: Any):
    """Add HLO ``op`` to ``builder`` (a :class:`~opconv.ir.Graph` or a rewrite Builder); returns its output(s)."""
    typed = typed_attributes(DIALECT, op, attrs)
    if isinstance(builder, Graph):
        return builder.op(op, *inputs, domain="", version=1, outputs=_outputs, attrs=typed)
    return builder.op(op, *inputs, _domain="", _version=1, _outputs=_outputs, **typed)
