"""Where version adapters are registered: one function per (operator, version step, direction).

A **step** is named by the operator and the version that introduced a change
(``("Reshape", 5)`` is the step between Reshape-1 and Reshape-5).  The
``upgrade`` adapter rewrites a node valid at the older schema into the newer
one; the ``downgrade`` adapter goes back.  A downgrade registered at an op's
*first* version (``@downgrade("Gelu", 20)``) decomposes the op into older ones.

Adapters live beside the operators they adapt (``elementwise.py``,
``shape.py``, ``reduce.py``, ``nn.py``), registered with the decorators below::

    @upgrade("Reshape", 5)
    def reshape_shape_to_input(ctx, node):
        shape = ctx.pop_attr(node, "shape")
        ctx.set_inputs(node, [node.inputs[0], ctx.const(np.array(shape, np.int64))])

An adapter mutates ``node`` in place (the driver then sets its version), or
builds a replacement with ``ctx.op`` and calls ``ctx.replace``; it raises
:class:`~opconv.converters.rewrite.Refuse` with a reason when the node cannot be
adapted (the driver reports it with the opset range that would be needed).
Steps without a registered adapter fall to the generic adapter of
``driver.py``, which the schemas drive (unchanged signature: only the version
and, on downgrade, the type sets change).  A step listed with ``semantic_change``
is one whose meaning changed although its signature did not: the generic
adapter refuses it unless a hand-written adapter exists.
"""

from __future__ import annotations

from typing import Callable

Adapter = Callable[..., object]

#: (op, version) -> adapter, per direction
UPGRADES: dict[tuple[str, int], Adapter] = {}
DOWNGRADES: dict[tuple[str, int], Adapter] = {}
#: steps whose meaning changed without a visible schema change; each needs its own adapter
SEMANTIC_CHANGES: dict[tuple[str, int], str] = {}
#: ops whose upgrade adapters read element types or ranks (the driver runs type inference first)
UPGRADE_NEEDS_TYPES: set[str] = set()


def _register(table: dict, ops: str | tuple[str, ...], version: int) -> Callable[[Adapter], Adapter]:
    names = (ops,) if isinstance(ops, str) else tuple(ops)

    def decorate(fn: Adapter) -> Adapter:
        for op in names:
            key = (op, version)
            if key in table:
                raise ValueError(f"two adapters for {op}-{version}: {table[key].__name__} and {fn.__name__}")
            table[key] = fn
        return fn
    return decorate


def upgrade(ops: str | tuple[str, ...], version: int) -> Callable[[Adapter], Adapter]:
    """Register the adapter taking ``ops`` from the schema before ``version`` to ``version``."""
    return _register(UPGRADES, ops, version)


def downgrade(ops: str | tuple[str, ...], version: int) -> Callable[[Adapter], Adapter]:
    """Register the adapter taking ``ops`` from ``version`` back to the schema before it (or decomposing)."""
    return _register(DOWNGRADES, ops, version)


def semantic_change(ops: str | tuple[str, ...], version: int, what: str) -> None:
    """Declare that ``ops`` changed meaning at ``version`` although the signature did not."""
    for op in (ops,) if isinstance(ops, str) else ops:
        SEMANTIC_CHANGES[(op, version)] = what


def needs_types(ops: str | tuple[str, ...]) -> None:
    """Declare that upgrading ``ops`` reads value types or ranks."""
    UPGRADE_NEEDS_TYPES.update((ops,) if isinstance(ops, str) else ops)
