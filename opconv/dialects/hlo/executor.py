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
passes every attribute the op's schema declares as a keyword argument
(Python-safe names), taking the schema's default, or ``None``, when the node
does not set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import executor
from ...errors import ExecutionError
from ...executor import BoundNode, Interpreter, OpRegistry
from ...ir import Model, Node
from ...plan_fusion import fuse_relu_named
from ...schemas import dialect_schemas
from ..openvino.executor import decode_attributes

DOMAIN = ""

REGISTRY = OpRegistry("hlo")


def hlo_op(op: str, *, deterministic: bool = True):
    """Decorator registering an HLO kernel: ``@hlo_op("Add")``."""
    return REGISTRY.register(op, 1, DOMAIN, deterministic=deterministic)


class Session(executor.Session):
    """An HLO model prepared to run many times (see :class:`opconv.executor.Session`)."""

    def __init__(self, model: Model, *, seed: int = 0):
        _load_kernels()
        super().__init__(model, _bind, seed=seed)
        from .fusion import pack_conv_bias

        plan = self._interpreter.plan(model.graph)
        pack_conv_bias(model.graph, plan)
        fuse_relu_named(model.graph, plan, ("ConvBias", "Convolution", "Add"), "Relu")


def run_model(model: Model, feeds: Mapping[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """Run an HLO model once on ``feeds``."""
    return Session(model, seed=seed).run(feeds)


def _bind(node: Node, interp: Interpreter) -> BoundNode:
    """The kernel and decoded attributes of one operation."""
    label = f"op {node.name!r} ({node.op})" if node.name else f"{node.op} op"
    if node.domain not in (DOMAIN, "hlo"):
        raise ExecutionError(f"domain {node.domain!r} is not part of the HLO dialect", where=label)
    reg = REGISTRY.resolve(node.op, 1, DOMAIN)
    if reg is None:
        raise ExecutionError(f"opconv's HLO executor has no kernel for {node.op}", where=label)
    schema = dialect_schemas("hlo").find(node.op, 1, DOMAIN)
    return BoundNode(node, reg.fn, decode_attributes(schema, node.attrs, label), label, reg.deterministic)


_loaded = False


def _load_kernels() -> None:
    # The ops package registers its kernels on import.
    global _loaded
    if not _loaded:
        from . import ops  # noqa: F401

        _loaded = True
