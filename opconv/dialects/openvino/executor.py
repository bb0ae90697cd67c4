"""The OpenVINO opset1 reference executor: binds IR layers to numpy kernels and runs models.

Kernels live in ``ops/<family>.py`` and register with :data:`ov_op`::

    @ov_op("SoftMax")
    def softmax(ctx, data, *, axis):
        return norm.softmax(data, axis)

Every node of an OpenVINO model is an opset1 operation (domain ``opset1``,
version 1; see ``docs/openvino-dialect.md``).  Parameters are graph inputs and
Consts initializers, so a kernel only ever sees numpy arrays.  Attributes are
already typed :class:`~opconv.ir.Attr` values in the graph core; the binder
passes every attribute the op's schema declares as a keyword argument (names
made Python-safe: ``exclude-pad`` -> ``exclude_pad``), taking the schema's
default, or ``None``, when the node does not set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import executor
from ...errors import ExecutionError
from ...executor import BoundNode, Interpreter, OpRegistry, python_name
from ...ir import Attr, Model, Node, Tensor
from ...plan_fusion import fuse_relu_named
from ...schemas import OpSchema, dialect_schemas
from ...types import element_type

DOMAIN = "opset1"

REGISTRY = OpRegistry("openvino")


def ov_op(op: str, *, deterministic: bool = True):
    """Decorator registering an opset1 kernel: ``@ov_op("ReLU")``."""
    return REGISTRY.register(op, 1, DOMAIN, deterministic=deterministic)


class Session(executor.Session):
    """An OpenVINO model prepared to run many times (see :class:`opconv.executor.Session`)."""

    def __init__(self, model: Model, *, seed: int = 0):
        _load_kernels()
        super().__init__(model, _bind, seed=seed)
        from .fusion import pack_conv_scale_shift

        plan = self._interpreter.plan(model.graph)
        pack_conv_scale_shift(model.graph, plan)
        fuse_relu_named(model.graph, plan, ("Convolution", "GroupConvolution", "Add"), "ReLU")


def run_model(model: Model, feeds: Mapping[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """Run an OpenVINO model once on ``feeds``."""
    return Session(model, seed=seed).run(feeds)


def _bind(node: Node, interp: Interpreter) -> BoundNode:
    """The kernel and decoded attributes of one layer."""
    label = f"layer {node.name!r} ({node.op})" if node.name else f"{node.op} layer"
    if node.domain not in (DOMAIN, ""):
        raise ExecutionError(f"operation set {node.domain!r} is not supported (opset1 only)", where=label)
    reg = REGISTRY.resolve(node.op, 1, DOMAIN)
    if reg is None:
        raise ExecutionError(f"opconv's OpenVINO executor has no kernel for {node.op}", where=label)
    schema = dialect_schemas("openvino").find(node.op, 1, DOMAIN)
    return BoundNode(node, reg.fn, decode_attributes(schema, node.attrs, label), label, reg.deterministic)


def decode_attributes(schema: OpSchema | None, attrs: dict[str, Attr], label: str) -> dict[str, Any]:
    """Keyword arguments for a kernel: every schema attribute, from the node or the schema default."""
    if schema is None:
        return {python_name(k): _value(a) for k, a in attrs.items()}
    unknown = set(attrs) - {p.name for p in schema.attributes}
    if unknown:
        raise ExecutionError(f"unknown attribute(s) {', '.join(sorted(unknown))} for {schema.name}", where=label)
    out: dict[str, Any] = {}
    for p in schema.attributes:
        a = attrs.get(p.name)
        if a is not None and a.value is not None:
            out[python_name(p.name)] = _value(a)
        else:
            # Required attributes missing from a hand-built graph are left to the kernel, which knows
            # whether it can do without (OpenVINO itself infers some, e.g. pads under auto_pad).
            out[python_name(p.name)] = p.default
    return out


def _value(a: Attr) -> Any:
    return a.value.numpy() if isinstance(a.value, Tensor) else a.value


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a canonical element-type name (``destination_type``, ``index_element_type``)."""
    et = element_type(str(name))
    if et.numpy is None:
        raise ExecutionError(f"element type {name} has no numpy dtype")
    return np.dtype(et.numpy)


_loaded = False


def _load_kernels() -> None:
    # The ops package registers its kernels on import.
    global _loaded
    if not _loaded:
        from . import ops  # noqa: F401

        _loaded = True
