"""Where version adapters are registered: one function per (operator, version step, direction).

A **step** is named by the operator and the version that introduced a change
(``("Reshape", 5)`` is the step between Reshape-1 and Reshape-5).  The
``upgrade`` adapter rewrites a node valid at the older schema into the newer
one; the ``downgrade`` adapter goes back.  A downgrade registered at an op's
*first* version (``@downgrade("Gelu", 20)``) decomposes the op into older ones.

Adapters live beside the operators they adapt (``elementwise.py``,
``shape.py``, ``reduce.py``, ``nn.py``; the package imports all its modules with
:func:`~opconv.converters.lowering.discover`), registered with the decorators
below::

    @upgrade("Reshape", 5)
    def reshape_shape_to_input(ctx, node):
        shape = ctx.pop_attr(node, "shape")
        ctx.set_inputs(node, [node.inputs[0], ctx.const(np.array(shape, np.int64))])

An adapter mutates ``node`` in place (the driver then sets its version), or
builds a replacement with ``ctx.op`` and calls ``ctx.replace``; it raises
:class:`~opconv.converters.rewrite.Refuse` with a reason when the node cannot be
adapted (the driver reports it with the opset range that would be needed).
The decorators put adapters in the one lowering registry, on the routes
``("onnx", "onnx:up")`` and ``("onnx", "onnx:down")`` with ``since`` = the
step's version; the driver finds a step's adapter with :func:`find_adapter`.
Steps without a registered adapter fall to the generic adapter of
``driver.py``, which the schemas drive (unchanged signature: only the version
and, on downgrade, the type sets change).  A step listed with ``semantic_change``
is one whose meaning changed although its signature did not: the generic
adapter refuses it unless a hand-written adapter exists.
"""

from __future__ import annotations

from collections.abc import Callable

from ...attributes import text_value
from .. import lowering

Adapter = Callable[..., object]

#: the lowering routes of the two directions
UP, DOWN = ("onnx", "onnx:up"), ("onnx", "onnx:down")
#: steps whose meaning changed without a visible schema change; each needs its own adapter
SEMANTIC_CHANGES: dict[tuple[str, int], str] = {}
#: ops whose upgrade adapters read element types or ranks (the driver runs type inference first)
UPGRADE_NEEDS_TYPES: set[str] = set()


def upgrade(ops: str | tuple[str, ...], version: int) -> Callable[[Adapter], Adapter]:
    """Register the adapter taking ``ops`` from the schema before ``version`` to ``version``."""
    return lowering.lower(*UP, ops, since=version)


def downgrade(ops: str | tuple[str, ...], version: int) -> Callable[[Adapter], Adapter]:
    """Register the adapter taking ``ops`` from ``version`` back to the schema before it (or decomposing)."""
    return lowering.lower(*DOWN, ops, since=version)


def find_adapter(op: str, version: int, *, up: bool) -> Adapter | None:
    """The adapter registered for the step ``op``-``version`` in one direction, or None."""
    found = lowering.find_exact(*(UP if up else DOWN), op, version)
    return None if found is None else found.fn


def upgrade_versions(op: str) -> list[int]:
    """The versions of ``op`` that have an upgrade adapter."""
    return lowering.versions(*UP, op)


def semantic_change(ops: str | tuple[str, ...], version: int, what: str) -> None:
    """Declare that ``ops`` changed meaning at ``version`` although the signature did not."""
    for op in (ops,) if isinstance(ops, str) else ops:
        SEMANTIC_CHANGES[(op, version)] = what


def needs_types(ops: str | tuple[str, ...]) -> None:
    """Declare that upgrading ``ops`` reads value types or ranks."""
    UPGRADE_NEEDS_TYPES.update((ops,) if isinstance(ops, str) else ops)


def text(value) -> str:
    """A string attribute's value as ``str`` (:func:`~opconv.attributes.text_value`)."""
    return text_value(value)
