"""Building HLO nodes with schema-typed attributes.

Converters, tests and the text parser create HLO operations through
:func:`hlo_node` so that every attribute carries its schema type (``ints``,
``region`` ...) and every node is domain ``""``, version 1.  A region
attribute holds a :class:`~opconv.ir.Graph` whose inputs are the region's
parameters and whose outputs are its results.
"""

from __future__ import annotations

import functools
from typing import Any

from ...errors import GraphError
from ...executor import python_name
from ...ir import Attr, Graph, Value
from ...schemas import dialect_schemas

DIALECT = "hlo"
OPSETS = {"": 1}  # Model.opsets of every HLO model


@functools.cache
def schema_attrs(op: str) -> dict[str, tuple[str, str]]:
    """Python-safe attribute name -> (schema name, schema type) for HLO ``op``."""
    schema = dialect_schemas(DIALECT).find(op, 1, "")
    if schema is None:
        raise GraphError(f"the HLO dialect has no operation {op}")
    return {python_name(p.name): (p.name, p.type) for p in schema.attributes}


def typed_attrs(op: str, **values: Any) -> dict[str, Attr]:
    """``values`` as :class:`Attr` objects typed by the schema of ``op`` (``None`` values are left out)."""
    known = schema_attrs(op)
    out = {}
    for key, value in values.items():
        if value is None:
            continue
        if key not in known:
            raise GraphError(f"HLO {op} has no attribute {key!r}; it has: {', '.join(sorted(known)) or 'none'}")
        name, kind = known[key]
        out[name] = Attr(name, kind, value)
    return out


def hlo_node(builder, op: str, *inputs: Value | None, _outputs: int = 1, **attrs: Any):
    """Add HLO ``op`` to ``builder`` (a :class:`~opconv.ir.Graph` or a rewrite Builder); returns its output(s)."""
    typed = typed_attrs(op, **attrs)
    if isinstance(builder, Graph):
        return builder.op(op, *inputs, domain="", version=1, outputs=_outputs, attrs=typed)
    return builder.op(op, *inputs, _domain="", _version=1, _outputs=_outputs, **typed)
