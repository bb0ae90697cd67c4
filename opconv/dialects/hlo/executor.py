"""The HLO reference executor: binds HLO operations to numpy kernels and runs modules.

Kernels live in ``ops/<family>.py`` and register with :data:`hlo_op`::

    @hlo_op("Softmax")
    def softmax(ctx, x, *, axis):
        return norm.softmax(x, axis)

Every node of an HLO model is an operation of the dialect (domain ``""``,
version 1; the schemas are ``opconv/schemas/hlo.json``).  Region attributes
(``While`` cond/body, ``If`` branches, ``Map``/``Sort`` computations) are
:class:`~opconv.ir.Graph` values of attribute type ``graph``; a kernel runs one
with ``ctx.run_graph(region, [arrays])``.  A tuple value (``Tuple``,
``GetTupleElement``) is a Python ``list`` of arrays at run time.  The binder
(:class:`opconv.executor.DialectExecutor`) passes every attribute the op's
schema declares as a keyword argument (Python-safe names), taking the schema's
default, or ``None``, when the node does not set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...executor import DialectExecutor, DialectSession
from ...ir import Graph, Model
from ...plan_fusion import broadcast_uniform_exponents, fuse_relu_named, materialize_broadcast_constants

DOMAIN = ""


#: ops that hand their operands to BLAS, which cannot read a broadcast view (a stored uniform fill)
_PRODUCTS = ("Dot", "DotGeneral", "DotGeneralBias", "Gemm", "Conv", "ConvBias")


def _fuse(graph: Graph, plan) -> None:
    from .fusion import pack_conv_bias

    materialize_broadcast_constants(graph, plan, _PRODUCTS)
    broadcast_uniform_exponents(graph, plan, "Pow")
    pack_conv_bias(graph, plan)
    fuse_relu_named(graph, plan, ("ConvBias", "Conv", "Add"), "Relu")


EXECUTOR = DialectExecutor(
    "hlo", "HLO", domains=(DOMAIN, "hlo"), kernels=f"{__package__}.ops", noun="op", strict_attributes=False, fuse=_fuse
)
REGISTRY = EXECUTOR.registry


def hlo_op(op: str, *, deterministic: bool = True):
    """Decorator registering an HLO kernel: ``@hlo_op("Add")``."""
    return REGISTRY.register(op, 1, DOMAIN, deterministic=deterministic)


class Session(DialectSession):
    """An HLO model prepared to run many times (see :class:`opconv.executor.Session`)."""

    executor = EXECUTOR


def run_model(model: Model, feeds: Mapping[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """Run an HLO model once on ``feeds``."""
    return Session(model, seed=seed).run(feeds)
